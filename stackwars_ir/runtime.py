"""The XLA runtime through jax's PJRT client: compile StableHLO text, place arguments, execute."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BenchError, MissingExtra


def quiet_third_parties() -> None:
    """Keep messages that say nothing to a user of this tool out of its output: absl's note that
    TensorFlow is absent (from orbax, through flax) and torchax's duplicate op registrations."""
    import logging

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            text = record.getMessage()
            return not (text.startswith("Tensorflow library not found") or text.startswith("Duplicate op registration"))

    for name in ("", "absl"):
        logging.getLogger(name).addFilter(Drop())
    for handler in logging.getLogger().handlers:
        handler.addFilter(Drop())


def quiet_libtpu() -> None:
    """With libtpu installed (`make setup-tpu`) on a machine without a TPU, every jax backend start
    tries the TPU and prints libtpu's start-up errors (metadata server, worker hostnames) before it
    falls back. Tell libtpu it is alone, so it says nothing; a TPU VM is left as it is."""
    import glob
    import importlib.util
    import os

    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*") or importlib.util.find_spec("libtpu") is None:
        return
    # ALLOW_MULTIPLE_LIBTPU_LOAD: each process that loads libtpu takes /tmp/libtpu_lockfile, and the
    # next compiling worker was refused ("Internal error when accessing libtpu multi-process
    # lockfile", measured); compile-only devices touch no chip, so several loads are harmless.
    for k, v in (("TPU_SKIP_MDS_QUERY", "1"), ("TPU_ACCELERATOR_TYPE", "v6e-4"),
                 ("TPU_WORKER_HOSTNAMES", "localhost"), ("TPU_WORKER_ID", "0"), ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")):
        os.environ.setdefault(k, v)
    # Nor may jax start a TPU client here: it takes libtpu's machine-wide lock file, and a second
    # process (the worker compiling for a TPU target) then waited on it, measured. Compile-only TPU
    # devices (memory --target tpu-*) need no client.
    gpu = glob.glob("/dev/nvidia[0-9]*") and importlib.util.find_spec("jax_plugins.xla_cuda12") is not None
    os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu" if gpu else "cpu")


def _jax():
    quiet_libtpu()
    try:
        import jax
        import jax.extend  # noqa: F401  (not imported by `import jax`)
        from jax._src.lib import xla_client
    except Exception as e:
        raise MissingExtra("jax", e) from e
    return jax, xla_client


# LLVM's optimization off: a module's results move by rounding only (LLVM contracts and orders some
# float operations differently; measured on GPT-2 tiny's training step: 3.7e-9 at most, where two
# default compiles agree bit for bit). GPT-2 base's training step compiles in 5.8 s instead of
# 9.7 s and runs in 2.3 s instead of 1.8 s (docs/benchmarks.md).
QUICK = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@dataclass(frozen=True)
class Runtime:
    """One PJRT client and the device executables run on."""

    client: object
    device: object

    @property
    def platform(self) -> str:
        return self.client.platform

    def compile(self, text: str, label: str = "module", *, quick: bool = False):
        """An executable of `text`; `quick`: XLA's full HLO pipeline (fusion, layout, buffers) but no
        LLVM optimization, for a module run once (a parity check), not timed."""
        _, xc = _jax()
        options = xc.CompileOptions()
        if quick:
            options.env_option_overrides = list(QUICK.items())
        try:
            return self.client.compile_and_load(text, xc.DeviceList((self.device,)), options)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise BenchError(f"{label}: XLA failed to compile it: {first}") from e

    def put(self, arrays: list[np.ndarray]) -> list:
        """Device buffers holding exactly these dtypes (int64 stays int64)."""
        jax, _ = _jax()
        wide = any(a.dtype.itemsize == 8 for a in arrays)
        with jax.enable_x64(wide):
            return [jax.device_put(a, self.device) for a in arrays]

    @staticmethod
    def run(executable, buffers: list) -> list:
        outs = executable.execute(buffers)
        for o in outs:
            o.block_until_ready()
        return outs


BACKENDS = ("cpu", "gpu", "tpu")
_INSTALL = {
    "gpu": "on a machine with an NVIDIA GPU and driver, `make setup-gpu` adds jax's CUDA plugin "
           "(jax-cuda12-plugin 0.10.2) to .venv; elsewhere use --backend cpu",
    "tpu": "on a TPU VM, install libtpu 0.0.42.1 (the release jax 0.10.2 pins); elsewhere use --backend cpu",
}


def runtime(backend: str | None = None) -> Runtime:
    """The runtime of `backend` ("cpu", "gpu", "tpu"), default whatever jax picks."""
    if backend == "cuda":
        backend = "gpu"
    if backend is not None and backend not in BACKENDS:
        raise BenchError(f"unknown backend {backend!r}", fix=f"choose one of: {', '.join(BACKENDS)}")
    jax, _ = _jax()
    try:
        client = jax.extend.backend.get_backend(backend)
    except Exception as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BenchError(f"no {backend} backend is available to jax here ({detail})",
                         fix=_INSTALL.get(backend, "use --backend cpu")) from e
    return Runtime(client, client.local_devices()[0])
