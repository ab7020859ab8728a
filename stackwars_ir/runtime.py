"""The XLA runtime through jax's PJRT client: compile StableHLO text, place arguments, execute."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BenchError, MissingExtra


def _jax():
    try:
        import jax
        import jax.extend  # noqa: F401  (not imported by `import jax`)
        from jax._src.lib import xla_client
    except Exception as e:
        raise MissingExtra("jax", e) from e
    return jax, xla_client


@dataclass(frozen=True)
class Runtime:
    """One PJRT client and the device executables run on."""

    client: object
    device: object

    @property
    def platform(self) -> str:
        return self.client.platform

    def compile(self, text: str, label: str = "module"):
        _, xc = _jax()
        try:
            return self.client.compile_and_load(text, xc.DeviceList((self.device,)), xc.CompileOptions())
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


def runtime(backend: str | None = None) -> Runtime:
    """The runtime of `backend` ("cpu", "gpu", "tpu"), default whatever jax picks."""
    jax, _ = _jax()
    try:
        client = jax.extend.backend.get_backend(backend)
    except Exception as e:
        raise BenchError(f"no {backend} backend: {str(e).splitlines()[0]}",
                         fix="use --backend cpu, or install the jax plugin for that device") from e
    return Runtime(client, client.local_devices()[0])
