"""A StableHLO module compiled and timed on one XLA runtime in this process; the device's peaks.

A module's row holds its first, second and steady runs, its cost, memory, kernels and profile.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import StackwarsError
from ..common.files import Sidecar
from ..common.runtime import INTEGER_MATH, QUANTIZED, Partitioned, Runtime
from ..ir.model import Module
from ..isolate.task import started
from .arguments import signature_arguments
from .executable import Executable
from .kernels import entry_instructions, kernels_of
from .planning import ResidentWindow
from .proof import Checker
from .timing import Asked, Sampling, Timeout, measure, steady_state, timing_of, warm_up
from .xla_profile import profile_runs, profile_turns

if TYPE_CHECKING:
    from jaxlib.xla_client import LoadedExecutable

_WARMED_RUNTIMES: set = set()


def hlo_stats(executable: LoadedExecutable | Partitioned) -> dict:
    """Kernels of XLA's optimized HLO: the entry computation's op histogram and its fusions."""

    hist = Counter()
    for module in executable.hlo_modules():
        text = module.to_string()
        entry = next((line.split()[1].lstrip("%") for line in text.splitlines() if line.startswith("ENTRY ")), None)
        if not hasattr(module, "computations") or not all(hasattr(c, "instructions") for c in module.computations()):
            hist.update(op for _, op in entry_instructions(text))  # an older jaxlib (a stack's) binds none: the text
            continue
        for comp in module.computations():
            name = comp.name() if callable(comp.name) else comp.name
            if name != entry:
                continue
            for inst in comp.instructions():
                op = str(inst.opcode).rsplit(".", 1)[-1]
                op = op[1:] if op.startswith("k") and op[1:2].isupper() else op
                hist[op.lower()] += 1
    hist.pop("parameter", None)
    return {"fusions": hist.get("fusion", 0), "histogram": dict(hist.most_common())}


def time_module(path: Path, text: str, module: Module, rt: Runtime, sidecar: Sidecar | None, timeout: float | None,
                seed: int = 0, asked: Asked | None = None, staged: dict | None = None) -> Executable:
    """Compile and time one StableHLO module; failures come back as an Executable with `error`."""
    return time_modules([(path, text, module, sidecar)], rt, timeout, seed, asked, staged)[0]


def time_modules(items: list, rt: Runtime, timeout: float | None, seed: int = 0, asked: Asked | None = None,
                 staged: dict | None = None) -> list[Executable]:
    """Compile and time StableHLO modules ((path, text, module, sidecar) each) side by side: each is
    compiled, placed and run 3 times in turn (its resident window), then their steady-state runs take
    turns, so noise from the rest of the machine lands on all of them alike. Each has --timeout for
    its compile and first runs, and its share of the steady phase; failures come back as rows with
    `error`, the others still measured. `asked`: the user's sampling (timing.Asked); `staged`: argument
    values the parent built for a capture (path -> .npz; bench.staging), read before the capture's own."""

    how = Sampling.of(asked)
    _warm_runtime(rt, items[0][1] if items else None)
    warmed = [_warm_one(path, text, module, rt, sidecar, timeout, how, seed, (staged or {}).get(str(path)))
              for path, text, module, sidecar in items]
    live = [w for w in warmed if not isinstance(w, Executable)]
    failed: dict = {}
    if live:
        deadline = time.monotonic() + timeout * len(live) if timeout else None
        try:
            steady = steady_state([w.run for w in live], how, deadline=deadline,
                                  on_error=lambda i, e: failed.__setitem__(i, e))
        except Timeout:
            return [w if isinstance(w, Executable) else _failed_row(w.label, Timeout(), timeout) for w in warmed]
        rows = {id(w): _failed_row(w.label, failed[i], timeout) if i in failed else
                w.row(timing_of(w.warm, steady[i], how.warmup, interleaved=len(live)))
                for i, w in enumerate(live)}
        if how.profile:
            rows = _profiled_turns(rows, live, how.profile, rt)
    return [w if isinstance(w, Executable) else rows[id(w)] for w in warmed]


@dataclass
class _Warmed:
    """One module compiled, placed on the device and run 3 times: ready for its steady-state runs."""

    label: str
    run: object
    warm: object
    row: object  # Timing -> Executable
    exe: object = None  # the loaded executable (its optimized HLO names the kernels a profile reads)


def _warm_one(path, text, module, rt, sidecar, timeout, how, seed, staged=None) -> _Warmed | Executable:
    label = str(path)
    try:
        arrays, origin, reference = signature_arguments(module, sidecar, np.random.default_rng(seed), staged)

        started()  # in a bench worker: the time limit of the compile and runs starts now
        deadline = time.monotonic() + timeout if timeout else None  # the budget covers the compile too

        with ResidentWindow() if rt.platform == "cpu" and ResidentWindow.available() else _no_window() as window:
            t0 = time.perf_counter()
            exe = rt.compile(text, label)
            compile_s = time.perf_counter() - t0
            buffers = rt.put(arrays, exe)  # on the device(s) before timing: no host copies inside the loop
            checker = Checker(label, reference, rt.platform, "PyTorch eager on the CPU, same inputs")
            fed, how_fed = donated_feedback(module)
            if how_fed:
                origin += f"; {how_fed}"
            if QUANTIZED in (text if isinstance(text, str) else ""):
                origin += f"; quantized ops compiled as integer math (StableHLO's {INTEGER_MATH})"

            def run():
                outs = rt.run(exe, buffers)
                for arg, out in fed:  # a donated argument's buffer is consumed: the next run reads its output
                    buffers[arg] = outs[out]
                return outs

            warm = warm_up(run, how.warmup, deadline=deadline, inspect=checker)
        cost, memory, hlo = _cost(exe), _memory(exe), hlo_stats(exe)

        def row(timing) -> Executable:
            return Executable(label, "stablehlo", compile_s, timing, cost.get("flops"), cost.get("bytes accessed"),
                              memory, hlo, origin, proof=checker.proof, resident_bytes=window.bytes)

        return _Warmed(label, run, warm, row, exe)
    except Exception as e:
        return _failed_row(label, e, timeout)


def donated_feedback(module: Module) -> tuple[list, str]:
    """([(argument, output)], in words) for the arguments the entry function donates: each run consumes
    such an argument's buffer (XLA writes the output into it), so the next run reads that output, as a
    decode step's KV cache or a training step's state is carried from step to step. A `jax.buffer_donor`
    argument is paired with the first output of its type no other argument takes."""
    entry = module.entry
    if not entry.donated:
        return [], ""
    result_types = list(entry.results)
    taken = {out for _, out in entry.donated if out >= 0}
    pairs = []
    for arg, out in entry.donated:
        if out < 0:
            t = module.values[entry.args[arg]].type
            out = next((k for k, r in enumerate(result_types) if r == t and k not in taken), -1)
            if out < 0:
                continue
            taken.add(out)
        pairs.append((arg, out))
    words = ", ".join(f"argument {a} from output {o}" for a, o in pairs)
    return pairs, (f"donated, each run reading the previous run's output: {words}" if pairs else "")


def _profiled(row: Executable, w: "_Warmed", runs: int, rt) -> Executable:
    """The row with its profile: `runs` more runs under the runtime's profiler, after the unprofiled
    steady state, each kernel's time read back (bench.profile)."""
    import dataclasses

    if not row.ok:
        return row
    try:
        return dataclasses.replace(row, profile=profile_runs(w.run, _kernels(w), runs, row.timing.steady, rt.platform))
    except StackwarsError as e:
        return dataclasses.replace(row, error=e.one_line())


def _profiled_turns(rows: dict, live: list, runs: int, rt) -> dict:
    """Each row (by id of its _Warmed) with its profile. Two or more rows that ran on XLA:CPU are
    profiled in turns in one trace (bench.profile.profile_turns): profiled one after the other, a
    machine that drifted 3% between them flagged about 2 blocks a profile that differ by nothing
    (benchmarks/block_intervals.py). A GPU's, or a set whose calls do not show as one execution each,
    are profiled one at a time."""
    import dataclasses

    ok = [w for w in live if rows[id(w)].ok]
    if len(ok) > 1 and rt.platform == "cpu":
        try:
            profiles = profile_turns([w.run for w in ok], [_kernels(w) for w in ok], runs, [rows[id(w)].timing.steady for w in ok],
                                     [w.label for w in ok])
            return {**rows, **{id(w): dataclasses.replace(rows[id(w)], profile=p) for w, p in zip(ok, profiles)}}
        except StackwarsError:
            pass  # one at a time, below
    return {id(w): _profiled(rows[id(w)], w, runs, rt) for w in live}


def _kernels(w: "_Warmed") -> list:
    """The kernels of a warmed module's optimized HLO (bench.kernels.Kernel), whose names its profile's events carry."""

    return [k for m in w.exe.hlo_modules() for k in kernels_of(m.to_string())]


def _failed_row(label: str, e: Exception, timeout) -> Executable:
    if isinstance(e, Timeout):
        return Executable(label, "stablehlo", None, None, error=f"{label}: ran past --timeout {timeout} s")
    if isinstance(e, StackwarsError):
        return Executable(label, "stablehlo", None, None, error=e.one_line())
    # an XLA runtime failure: one line, the others still run
    return Executable(label, "stablehlo", None, None, error=f"{label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")


def _warm_runtime(rt, text=None) -> None:
    """Compile and run a trivial module once per runtime and process, and compile `text` once, outside
    every row's resident window: what the runtime allocates on its first executable (thread pools,
    arenas) and the compiler's heap, which later compiles reuse, would otherwise count in the first
    row's resident memory only (measured: whichever row ran first 62 MiB, the next ones 50 and 39)."""
    if rt.platform not in _WARMED_RUNTIMES:
        exe = rt.compile(add_in_place(4), "warm-up")
        rt.run(exe, rt.put([np.ones(4, np.float32), np.ones(4, np.float32)]))
        _WARMED_RUNTIMES.add(rt.platform)
    if text is not None and rt.platform == "cpu":
        try:
            rt.compile(text, "warm-up")
        except Exception:
            pass  # its own row says why it does not compile


class _no_window:
    """Where resident memory is not the device's (a GPU) or cannot be reset (not Linux): nothing measured."""

    bytes = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _cost(exe) -> dict:
    try:
        c = exe.cost_analysis()
    except Exception:
        return {}
    if isinstance(c, list):  # older jaxlib
        c = c[0] if c else {}
    return {k: float(v) for k, v in c.items() if k in ("flops", "bytes accessed", "transcendentals")}


def _memory(exe) -> dict:
    try:
        m = exe.get_compiled_memory_stats()
    except Exception:
        return {}
    return {"argument_bytes": m.argument_size_in_bytes, "output_bytes": m.output_size_in_bytes,
            "temp_bytes": m.temp_size_in_bytes, "generated_code_bytes": m.generated_code_size_in_bytes}


def peaks(rt: Runtime) -> dict:
    """Attainable peaks on this device, measured: a large f32 GEMM and a large elementwise add
    (sized so that a GPU is busy for milliseconds, not microseconds of launch overhead). The add
    writes its sum into its first argument's buffer (donated, as STREAM writes arrays it touched
    before): a fresh 64 MiB output at each run would time the kernel mapping and zeroing it, not
    memory bandwidth (on the CPU, 6.5 GB/s that way against 29-32 GB/s in place)."""
    n, m = (1024, 1 << 24) if rt.platform == "cpu" else (8192, 1 << 27)
    gemm = _hlo_fn(rt, f"""func.func @main(%a: tensor<{n}x{n}xf32>, %b: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  return %0 : tensor<{n}x{n}xf32>
}}""", [(n, n), (n, n)])
    add = _hlo_fn(rt, add_in_place(m), [(m,), (m,)], in_place=True)
    return {"flops_per_s": 2 * n ** 3 / gemm, "bytes_per_s": 3 * 4 * m / add,
            "method": f"XLA {n}^3 f32 dot_general and {m}-element f32 add into its first argument, median time"}


def add_in_place(m: int) -> str:
    """The bandwidth probe: a + b of m f32 elements, written into a's buffer (output 0 aliases argument 0)."""
    return f"""func.func @main(%a: tensor<{m}xf32> {{tf.aliasing_output = 0 : i32}}, %b: tensor<{m}xf32>) -> tensor<{m}xf32> {{
  %0 = stablehlo.add %a, %b : tensor<{m}xf32>
  return %0 : tensor<{m}xf32>
}}"""


def _hlo_fn(rt, text: str, shapes, in_place: bool = False) -> float:
    """Median seconds of a run; `in_place`: the module aliases its output to its first argument,
    and each run's output is the next run's first argument."""
    exe = rt.compile(text, "peak probe")
    bufs = rt.put([np.ones(s, np.float32) for s in shapes])

    def run():
        outs = rt.run(exe, bufs)
        if in_place:
            bufs[0] = outs[0]
        return outs

    return measure(run, min_time=0.3, max_time=2.0).steady
