"""Memory plans made: XLA (or libtpu) compiles each file for its target, and a run measures its peak."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from ..common.errors import BenchError, StackwarsError
from ..common.files import Sidecar, sidecar_of, versions
from ..common.hostmem import trim
from ..common.runtime import (
    Partitioned, Runtime, compilable, partitioned_options, partitions, quiet_libtpu, runtime, shardy,
)
from ..ir import compile_input, load
from ..ir.model import Module
from ..isolate.stacks import Stack
from ..isolate.task import Isolated, Task, row, started
from ..workload import keep_prepared
from .arguments import signature_arguments
from .executable import RESIDENT_METHOD, machine
from .memory import LIBTPU, SLICES, TARGETS, TOPOLOGIES, Budget, Measured, MemoryPlan, MemoryReport
from .staging import staged_values

if TYPE_CHECKING:
    from jaxlib._jax import CompiledMemoryStats
    from jaxlib.xla_client import LoadedExecutable


def check_target(target: str, measure: bool = False) -> str:
    """The target, validated (with `measure`: one this machine can run); a TPU target without libtpu
    says how to install it."""
    if measure and target != "cpu":
        raise StackwarsError(f"--measure runs each executable here, so it needs --target cpu (got {target})",
                             fix="drop --measure, or use --target cpu")
    if target not in TARGETS:
        raise StackwarsError(f"unknown --target {target!r}", fix=f"choose one of: {', '.join(TARGETS)}")
    if target in TOPOLOGIES:
        import importlib.util

        if importlib.util.find_spec("libtpu") is None:
            raise StackwarsError(f"--target {target} compiles through libtpu, which is not installed",
                                 fix=f"`make setup-tpu` adds {LIBTPU} (of the line jax 0.12.0.1 pins) to .venv; "
                                     "or use --target cpu")
    return target


class Compiler:
    """Compiles StableHLO for one target without running it (a loaded executable on cpu/gpu)."""

    def __init__(self, target: str) -> None:
        self.target = check_target(target)
        self._slices: dict = {}  # devices wanted -> the slice's devices
        self._runtime = None

    def compile(self, text: str | bytes, label: str):
        if self.target in ("cpu", "gpu"):
            if self._runtime is None:
                self._runtime = runtime(self.target)
            return self._runtime.compile(text, label)
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib import xla_client as xc
        from jaxlib.mlir import ir

        text = compilable(text, label)  # as on CPU: XLA reads neither blobs nor quantized types
        n = partitions(text)
        devices = self.devices(n, label)
        options = partitioned_options(n, devices, shardy(text)) if n > 1 else xc.CompileOptions()
        try:
            with jmlir.make_ir_context():
                module = ir.Module.parse(text)
                return devices[0].client.compile(module, xc.DeviceList(devices), options)
        except Exception as e:
            raise BenchError(f"{label}: XLA failed to compile it for {self.target}: {_first_line(e)}") from e

    def devices(self, n: int, label: str = "module") -> tuple:
        """The first `n` devices of the smallest slice of the target that has them."""
        if n not in self._slices:
            quiet_libtpu()
            from jax.experimental import topologies

            for shape in SLICES[self.target]:
                try:
                    topo = topologies.get_topology_desc(platform="tpu", topology_name=f"{self.target[4:]}:{shape}")
                except Exception as e:
                    raise BenchError(f"libtpu could not describe a {self.target} topology: {_first_line(e)}",
                                     fix=f"reinstall with `make setup-tpu` ({LIBTPU})") from e
                if len(topo.devices) >= n:
                    self._slices[n] = tuple(topo.devices[:n])
                    break
            else:
                raise BenchError(f"{label} is sharded over {n} devices, more than the largest {self.target} slice "
                                 f"this tool describes ({SLICES[self.target][-1]})", fix="use a smaller --mesh")
        return self._slices[n]

    @property
    def runtime(self) -> Runtime | None:
        return self._runtime


def _first_line(e: Exception) -> str:
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else type(e).__name__


def plan_text(path: Path, text: str | bytes, compiler: Compiler, measure: bool = False, sidecar: Sidecar | None = None,
              module: Module | None = None, staged: str | None = None) -> MemoryPlan:
    """XLA's plan for one module; with `measure` (cpu only) also one run's measured peak (`staged`: the
    .npz of argument values a parent built for a stack's worker)."""
    import time

    label = str(path)
    n = partitions(text)
    t0 = time.perf_counter()
    try:
        started()
        t0 = time.perf_counter()
        exe = compiler.compile(text, label)
        compile_s = time.perf_counter() - t0
        m = exe.get_compiled_memory_stats()
        plan = MemoryPlan(label, compiler.target, m.argument_size_in_bytes, m.output_size_in_bytes,
                          m.alias_size_in_bytes, m.temp_size_in_bytes, m.generated_code_size_in_bytes, compile_s,
                          devices=n, **host_fields(m))
        if measure:
            import dataclasses

            plan = dataclasses.replace(plan, measured=measure_run(exe, compiler, module, sidecar, staged))
        return plan
    except StackwarsError as e:
        refused = refusal(str(e.__cause__ or ""))
        if refused:
            return MemoryPlan(label, compiler.target, compile_s=time.perf_counter() - t0, refused=refused, devices=n)
        return MemoryPlan(label, compiler.target, error=e.one_line())
    except Exception as e:
        return MemoryPlan(label, compiler.target, error=f"{label}: {type(e).__name__}: {_first_line(e)}")


def host_fields(stats: CompiledMemoryStats) -> dict:
    """MemoryPlan's host_* fields from XLA's CompiledMemoryStats (0 where this jaxlib has none)."""
    return {f"host_{k}_bytes": int(getattr(stats, f"host_{k}_size_in_bytes", 0) or 0)
            for k in ("argument", "output", "alias", "temp")}


_SIZE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def refusal(message: str) -> dict | None:
    """The TPU compiler's out-of-memory refusal, read: "Ran out of memory on HBM, the total memory
    required for HLO temporaries (84.01G) exceeds available HBM (31.25G)" (XLA counts in 2^30)."""
    import re

    m = re.search(r"RESOURCE_EXHAUSTED: Ran out of memory in memory space (\w+)|"
                  r"required for ([\w ]+?) \(([\d.]+)([KMGT]?)\) exceeds available (\w+) \(([\d.]+)([KMGT]?)\)", message)
    if not m or m.group(3) is None:
        return None
    return {"required_bytes": int(float(m.group(3)) * _SIZE[m.group(4)]), "what": m.group(2),
            "available_bytes": int(float(m.group(6)) * _SIZE[m.group(7)]), "memory": m.group(5),
            "message": " ".join(message.split())[:300]}


def measure_run(exe: LoadedExecutable | Partitioned, compiler: Compiler, module: Module, sidecar: Sidecar | None,
                staged: str | None = None) -> Measured:
    """One run's peak resident memory above what was resident before it. Linux resets a process's
    peak (VmHWM) when 5 is written to /proc/self/clear_refs: the peak read after the run is the
    run's own (its temporaries and outputs), the arguments being placed before the reset."""
    import numpy as np

    check_target(compiler.target, measure=True)
    arrays, _, _ = signature_arguments(module, sidecar, np.random.default_rng(0), staged)
    rt = compiler.runtime
    buffers = rt.put(arrays)
    del arrays
    with ResidentWindow(fresh_blocks=True) as window:  # arguments placed before: the run's own peak
        rt.run(exe, buffers)
    return Measured(window.bytes, "peak resident set (VmHWM, reset before the run) minus the resident "
                                  "set before it; arguments placed, freed memory trimmed and every block of "
                                  "128 KiB or more mapped fresh")


class ResidentWindow:
    """The growth of this process's peak resident set over a stretch of work: freed memory trimmed and
    the peak (VmHWM) reset at the start, read at the end. Bench rows use it alike, a StableHLO
    executable (compile, arguments placed, every run) and a native baseline (its own copy of the weights
    and state built, compile, every run), so the two say how much the runtime adds to the IR's plan."""

    METHOD = RESIDENT_METHOD

    def __init__(self, fresh_blocks: bool = False) -> None:
        # fresh_blocks: glibc maps every block of 128 KiB or more anew for the rest of this process, so
        # one run's peak is its live bytes, not what the allocator keeps for reuse. Never where runs
        # are timed: with it, each run maps and zeroes all its buffers again (BERT base's training
        # step: 385k page faults a run instead of 70k, 1.5x the time; docs/benchmarks.md).
        self.fresh_blocks = fresh_blocks

    def __enter__(self) -> "ResidentWindow":
        import gc

        gc.collect()
        trim(self.fresh_blocks)
        self.before = _status("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.bytes = None
        return self

    def __exit__(self, *exc) -> None:
        self.bytes = max(0, _status("VmHWM") - self.before)

    @staticmethod
    def available() -> bool:
        import os

        return os.path.exists("/proc/self/clear_refs")


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"/proc/self/status has no {key}", fix="--measure needs Linux")


def plan_file(path: Path, target: str, measure: bool = False, staged: dict | None = None) -> MemoryPlan:
    """Plan one StableHLO file in this process (the bench worker calls this; `staged`: argument values
    the parent built for a stack's worker, by path, which isolate passes to every task that has them)."""
    import dataclasses
    import hashlib

    (result,) = load([path])
    if not result.ok:
        return MemoryPlan(str(path), target, error=result.error)
    data, text = compile_input(path)
    try:
        side, _ = sidecar_of(Path(path))  # one that does not describe its file: warned of by the CLI
        compiler = compiler_for(target)
    except StackwarsError as e:
        return MemoryPlan(str(path), target, error=e.one_line())
    plan = plan_text(Path(path), text, compiler, measure, side, result.modules[0], (staged or {}).get(str(path)))
    return dataclasses.replace(plan, sha256=hashlib.sha256(data).hexdigest(), batch=side.batch if side else None)


_COMPILERS: dict = {}


def compiler_for(target: str) -> Compiler:
    """One compiler per target per process (a TPU topology is described once)."""
    if target not in _COMPILERS:
        _COMPILERS[target] = Compiler(target)
    return _COMPILERS[target]


def plan_files(paths: Sequence[str | Path], target: str = "cpu", budgets_: Iterable[Budget] = (), measure: bool = False,
               max_memory: int | None = None, timeout: float | None = None,
               progress: Callable[[str], object] | None = None, stack: Stack | None = None) -> MemoryReport:
    """Every file compiled for `target` in a worker killed past its time or memory limit (of `stack`'s
    environment: its XLA; None, this one's); the others are still planned."""

    check_target(target, measure)
    plans = []
    with Isolated(max_memory, most_partitions(paths) if target == "cpu" else 1, stack=stack,
                  stager=staged_values) as worker:
        for path in paths:
            if progress:
                progress(f"{path}: compiling for {target} ...")
            task = Task(plan_file, (Path(path), target, measure), str(path), row(MemoryPlan, str(path), target),
                        keep_prepared, stage=(str(path),))
            plans.append(worker.run(task, timeout))
    return MemoryReport(target, tuple(plans), tuple(budgets_), machine(stack), target_versions(target, stack))


def most_partitions(paths: Iterable[str | Path]) -> int:
    """The most devices any of the files is sharded over (a CPU compile needs as many host devices)."""

    most = 1
    for path in paths:
        try:
            if not str(path).endswith(".mlirbc"):
                most = max(most, partitions(Path(path).read_text(errors="replace")))
        except OSError:
            pass  # the worker names the missing file
    return most


def target_versions(target: str, stack: Stack | None = None) -> dict:
    """The versions that made the plan (`stack`'s, or this environment's), and libtpu's when it did."""

    here = versions()
    found = {k: v for k, v in stack.versions.items() if k in here} if stack is not None and not stack.is_lock else here
    if target in TOPOLOGIES:
        from importlib import metadata

        found["libtpu"] = metadata.version("libtpu")
    return found
