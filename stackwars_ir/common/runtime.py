"""The XLA runtime through jax's PJRT client: compile StableHLO text, place arguments, execute."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import BenchError, MissingExtra
from .resources import ELIDED_FIX, elided_words, inline

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    import numpy as np

    from jaxlib._hlo import HloModule
    from jaxlib._jax import CompiledMemoryStats
    from jaxlib.xla_client import CompileOptions, Device, LoadedExecutable


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


def enable_x64(on: bool) -> AbstractContextManager[None]:
    """jax.enable_x64(on): jax >= 0.8's name; a stack of an older jax has only the experimental one."""
    import jax

    found = getattr(jax, "enable_x64", None)
    if found is None:
        from jax.experimental import enable_x64 as found
    return found(on)


# LLVM's optimization off: a module's results move by rounding only (LLVM contracts and orders some
# float operations differently; measured on GPT-2 tiny's training step: 3.7e-9 at most, where two
# default compiles agree bit for bit). GPT-2 base's training step compiles in 5.8 s instead of
# 9.7 s and runs in 2.3 s instead of 1.8 s (docs/benchmarks.md).
QUICK = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def initialize_lapack() -> None:
    """Fill in the LAPACK functions behind jaxlib's CPU custom calls (`lapack_spotrf_ffi`, ...: every
    jnp.linalg op). jax does it only when it lowers such an op itself; a module compiled from its text
    would call a null pointer (SIGSEGV) without it."""
    try:
        from jaxlib.lapack import _lapack
    except ImportError:  # an older jaxlib layout
        from jax._src.lax.linalg import initialize_lapack as init
        init()
        return
    _lapack.initialize()


QUANTIZED = "!quant."  # a module holding quantized types: XLA compiles it once they are integer math
INTEGER_MATH = "stablehlo-legalize-quant-to-math"  # StableHLO's pass that writes them so


def integer_math(text: str, label: str = "module") -> str:
    """`text` with every quantized op and type (uniform_quantize, a dot_general on !quant.uniform
    tensors, ...) rewritten to integer and float math by StableHLO's own pass, INTEGER_MATH, which XLA
    needs (its HLO has no quantized types); a module without any returned as it is. jaxlib's MLIR
    context has no quant dialect to parse the text with, so it travels through a portable artifact
    (StableHLO's own parser, then VHLO), whose reading loads the dialect.

    Raises BenchError: the module cannot be serialized or the pass refuses it."""
    if QUANTIZED not in text:
        return text
    _jax()
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import passmanager
    from jaxlib.mlir.dialects import stablehlo

    try:
        artifact = stablehlo.serialize_portable_artifact_str(text, stablehlo.get_current_version())
        with jmlir.make_ir_context() as ctx:
            stablehlo.register_stablehlo_passes()
            module = stablehlo.deserialize_portable_artifact(ctx, artifact)
            passmanager.PassManager.parse(f"builtin.module(func.func({INTEGER_MATH}))").run(module.operation)
            _explicit_broadcasts(module)
            passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(module.operation)
            return module.operation.get_asm(enable_debug_info=True)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise BenchError(f"{label}: its quantized ops could not be written as integer math ({INTEGER_MATH}): "
                         f"{first}", fix="give the program with its quantized ops lowered (stablehlo-opt "
                                         f"--{INTEGER_MATH})") from e


def compilable(text: str | bytes, label: str = "module") -> str | bytes:
    """A module (text, or bytecode) as XLA compiles it: resource blobs inlined, quantized ops as integer
    math (with_blobs, integer_math); bytecode holding either is printed to text first."""
    if isinstance(text, (bytes, bytearray)):
        try:
            from jax._src.interpreters import mlir as jmlir
            from jaxlib.mlir import ir

            with jmlir.make_ir_context():
                printed = ir.Module.parse(bytes(text)).operation.get_asm(enable_debug_info=True)
        except Exception:  # noqa: BLE001 - XLA's own compile reports what is wrong with it
            return text
        if "dense_resource<" not in printed and QUANTIZED not in printed:
            return text
        text = printed
    return integer_math(with_blobs(text, label), label)


def with_blobs(text: str, label: str) -> str:
    """`text` with its dense_resource blobs as dense constants (XLA: "Only dense elements attr are
    supported"); a constant whose blob the file lacks: BenchError naming its line."""

    done = inline(text)
    if done.elided:
        raise BenchError(elided_words(label, done.elided), fix=ELIDED_FIX)
    return done.text


# The elementwise chlo.broadcast_* ops the quantized pass writes, by the StableHLO op each becomes.
_BROADCAST = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder", "power")


def _explicit_broadcasts(module) -> None:
    """Each static-shaped chlo.broadcast_<op> with `broadcast_dimensions` (a per-axis scale: [0]) as
    broadcast_in_dim + stablehlo.<op>: chlo-legalize-to-stablehlo refuses broadcast dimensions that
    are not numpy's trailing ones ("failed to legalize operation 'chlo.broadcast_subtract'", measured
    with jaxlib 0.12 on a per-axis quantized convolution)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    found = []

    def walk(op) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    if inner.name in {f"chlo.broadcast_{n}" for n in _BROADCAST} and \
                            "broadcast_dimensions" in inner.attributes:
                        found.append(inner)
                    walk(inner)

    walk(module.operation)
    for op in found:
        out = ir.RankedTensorType(op.results[0].type)
        if not out.has_static_shape:
            continue
        dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        with ir.InsertionPoint(op), op.location:
            operands = []
            for v in op.operands:
                t = ir.RankedTensorType(v.type)
                if t.shape != out.shape:
                    kept = dims if t.rank < out.rank else list(range(t.rank))
                    v = stablehlo.BroadcastInDimOp(ir.RankedTensorType.get(out.shape, t.element_type), v,
                                                   ir.DenseI64ArrayAttr.get(kept)).result
                operands.append(v)
            made = ir.Operation.create("stablehlo." + op.name[len("chlo.broadcast_"):], results=[out],
                                       operands=operands)
        op.results[0].replace_all_uses_with(made.results[0])
        op.erase()


@dataclass(frozen=True)
class Runtime:
    """One PJRT client and the device executables run on."""

    client: object
    device: object

    @property
    def platform(self) -> str:
        return self.client.platform

    def compile(self, text: str, label: str = "module", *, quick: bool = False) -> LoadedExecutable | Partitioned:
        """An executable of `text`; `quick`: XLA's full HLO pipeline (fusion, layout, buffers) but no
        LLVM optimization, for a module run once (a parity check), not timed. A module sharded over N
        devices (partitions(text) > 1) is partitioned by XLA's SPMD partitioner over N of this client's
        devices: a Partitioned executable. Text or bytecode; resource blobs and quantized ops as `compilable` makes them."""
        _, xc = _jax()
        n = partitions(text)
        devices = self.client.local_devices()[:n]
        if len(devices) < n:
            raise BenchError(f"{label}: the module is sharded over {n} devices and this {self.platform} runtime "
                             f"has {len(devices)}", fix=f"on CPU, start with XLA_FLAGS=--xla_force_host_platform_"
                                                     f"device_count={n} (the CLI sets it for a sharded capture)")
        text = compilable(text, label)
        if self.platform == "cpu" and (b"@lapack_" if isinstance(text, bytes) else "@lapack_") in text:
            initialize_lapack()
        options = partitioned_options(n, devices, shardy(text)) if n > 1 else xc.CompileOptions()
        if quick:
            options.env_option_overrides = list(QUICK.items())
        try:
            exe = self.client.compile_and_load(text, xc.DeviceList(tuple(devices)), options)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise BenchError(f"{label}: XLA failed to compile it: {first}") from e
        return Partitioned(exe, tuple(devices), result_shapes(text)) if n > 1 else exe

    def put(self, arrays: list[np.ndarray], executable: LoadedExecutable | Partitioned | None = None) -> list:
        """Device buffers holding exactly these dtypes (int64 stays int64); for a Partitioned
        executable, each array split over its devices as the executable's parameter shardings say."""
        jax, _ = _jax()
        wide = any(a.dtype.itemsize == 8 for a in arrays)
        with enable_x64(wide):
            if isinstance(executable, Partitioned):
                return [jax.device_put(a, s) for a, s in zip(arrays, executable.input_shardings())]
            return [jax.device_put(a, self.device) for a in arrays]

    @staticmethod
    def run(executable: LoadedExecutable | Partitioned, buffers: list) -> list:
        if isinstance(executable, Partitioned):
            return executable.execute(buffers)
        outs = executable.execute(buffers)
        for o in outs:
            o.block_until_ready()
        return outs


@dataclass(frozen=True)
class Partitioned:
    """An executable partitioned over several devices, its results assembled into global arrays."""

    executable: object
    devices: tuple
    shapes: tuple  # each result's global shape (the module's @main result types)

    def input_shardings(self) -> list:
        from jax._src.sharding_impls import GSPMDSharding

        return [GSPMDSharding(self.devices, s) for s in self.executable.get_parameter_shardings()]

    def execute(self, buffers: list) -> list:
        import jax
        from jax._src.sharding_impls import GSPMDSharding

        results = self.executable.execute_sharded(buffers).disassemble_into_single_device_arrays()
        outs = []
        for shards, sharding, shape in zip(results, self.executable.get_output_shardings(), self.shapes):
            out = jax.make_array_from_single_device_arrays(shape, GSPMDSharding(self.devices, sharding), shards)
            outs.append(out.block_until_ready())
        return outs

    def get_compiled_memory_stats(self) -> CompiledMemoryStats:
        return self.executable.get_compiled_memory_stats()

    def hlo_modules(self) -> list[HloModule]:
        return self.executable.hlo_modules()


def partitions(text: str | bytes) -> int:
    """How many devices a module is sharded over: its `mhlo.num_partitions` (JAX with Shardy), else
    the largest device count of its GSPMD `mhlo.sharding` attributes (torch_xla); 1 for bytecode."""
    import re

    if not isinstance(text, str):
        return 1
    start = text.find("func.func")
    head = text[:start] if start >= 0 else text  # the module's attributes come before its functions
    m = re.search(r"mhlo\.num_partitions = (\d+)", head)
    if m:
        return int(m.group(1))
    most = 1
    for tiles in re.findall(r'mhlo\.sharding = "\{devices=\[([\d,]+)\]', text):
        n = 1
        for t in tiles.split(","):
            n *= int(t)
        most = max(most, n)
    return most


def partitioned_options(n: int, devices: Sequence[Device], shardy: bool = True) -> CompileOptions:
    """XLA's compile options for SPMD partitioning over `devices`: Shardy for a module with Shardy's
    attributes (JAX's), GSPMD's partitioner for one with `mhlo.sharding` alone (torch_xla's: measured,
    Shardy compiled it unpartitioned, every device holding whole arguments)."""
    import numpy as np
    from jax._src import compiler

    options = compiler.get_compile_options(num_replicas=1, num_partitions=n,
                                           device_assignment=np.array([d.id for d in devices]).reshape(1, n))
    # Set either way: jax's flag may have been switched off in this process by torch_xla's mark_sharding.
    options.executable_build_options.use_shardy_partitioner = shardy
    return options


def shardy(text: str | bytes) -> bool:
    """Whether a module carries Shardy's attributes (else GSPMD's, or none)."""
    return isinstance(text, str) and "sdy.sharding" in text


def result_shapes(text: str) -> tuple:
    """The global shapes of @main's results."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    with jmlir.make_ir_context():
        module = ir.Module.parse(text)
        for op in module.body.operations:
            if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
                results = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).results
                return tuple(tuple(ir.RankedTensorType(t).shape) for t in results)
    raise BenchError("the module has no @main function", fix="name its entry function main")


def host_devices(n: int) -> None:
    """Let jax's CPU backend have `n` devices (a sharded module's parity run, on one host): set before
    the backend starts; after, checked."""
    import os

    if n <= 1:
        return
    flag = f"--xla_force_host_platform_device_count={n}"
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized() and "xla_force_host_platform_device_count" not in \
            os.environ.get("XLA_FLAGS", ""):
        import jax

        jax.config.update("jax_num_cpu_devices", max(n, jax.config.jax_num_cpu_devices))
        return
    have = len(runtime("cpu").client.local_devices())
    if have < n:
        raise BenchError(f"the mesh needs {n} CPU devices and jax started with {have} in this process",
                         fix=f"start the process with XLA_FLAGS={flag} (the CLI sets it for a --mesh)")


BACKENDS = ("cpu", "gpu", "tpu")
_INSTALL = {
    "gpu": "on a machine with an NVIDIA GPU and driver, `make setup-gpu` adds jax's CUDA plugin "
           "(jax-cuda12-plugin 0.12.0.1) to .venv; elsewhere use --backend cpu",
    "tpu": "on a TPU VM, `make setup-tpu` adds libtpu 0.0.50.1 (of the line jax 0.12.0.1 pins) to .venv; elsewhere use --backend cpu",
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
