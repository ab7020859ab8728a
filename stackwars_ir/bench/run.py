"""Bench runs: StableHLO files timed in a worker, and a request's native runtimes beside them."""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..common.errors import BenchError, StackwarsError
from ..common.files import sidecar_of
from ..common.progress import planned, start
from ..common.runtime import runtime
from ..ir import compile_input, load
from ..isolate.stacks import Stack
from ..isolate.task import Isolated, Task, row
from ..workload import Request, keep_prepared
from .estimate import check_chip, estimate_file
from .executable import Executable, machine
from .native import PROFILED, profile_baseline, run_baseline
from .planning import most_partitions
from .result import BenchReport
from .staging import staged_values
from .timed import peaks, time_module, time_modules
from .timing import Asked
from .xla_profile import merged


def bench_one(path: Path, backend: str | None, timeout: float | None, asked: Asked | None = None,
              staged: dict[str, str] | None = None) -> Executable:
    """Compile and time one StableHLO file in this process (the bench worker calls this); `asked`: the
    user's sampling (timing.Asked); `staged`: values a parent built for a stack's worker."""

    (result,) = load([path])
    if not result.ok:
        return Executable(str(path), "stablehlo", None, None, error=result.error)
    import dataclasses
    import hashlib

    data, text = compile_input(path)
    row = time_module(Path(path), text, result.modules[0], runtime(backend), sidecar_of(Path(path))[0], timeout,
                      asked=asked, staged=staged)
    return dataclasses.replace(row, sha256=hashlib.sha256(data).hexdigest())


def bench_group(paths: Sequence[Path], backend: str | None, timeout: float | None, asked: Asked | None = None,
                staged: dict[str, str] | None = None) -> list[Executable]:
    """Compile and time StableHLO files in this process, their steady-state runs taking turns
    (bench.time_modules; the bench worker calls this)."""
    import dataclasses
    import hashlib

    items, digests = [], []
    for result, path in zip(load(paths), paths):
        if not result.ok:
            items.append(Executable(str(path), "stablehlo", None, None, error=result.error))
            continue
        data, text = compile_input(path)
        items.append((Path(path), text, result.modules[0], sidecar_of(Path(path))[0]))
        digests.append(hashlib.sha256(data).hexdigest())
    timed = iter(time_modules([i for i in items if not isinstance(i, Executable)], runtime(backend), timeout,
                              asked=asked, staged=staged))
    digest = iter(digests)
    return [i if isinstance(i, Executable) else dataclasses.replace(next(timed), sha256=next(digest)) for i in items]


def bench_files(paths: Sequence[str | Path], backend: str | None = None, timeout: float | None = None,
                with_peaks: bool = True, max_memory: int | None = None, progress: Callable[[str], object] | None = None,
                asked: Asked | None = None, stack: Stack | None = None) -> BenchReport:
    """Every file compiled and timed in a bench worker that is killed past the file's time or
    memory limit (2 x timeout + a grace; max_memory bytes resident); the others still run. `asked`:
    the user's sampling (timing.Asked: --warmup, --runs, --profile), given to the workers; `stack`:
    the version stack whose XLA compiles and runs them (None: this environment's)."""

    with planned(progress, file_steps(asked)):
        return _bench_files(paths, backend, timeout, with_peaks, max_memory, progress, asked, stack)


def file_steps(asked: Asked | None) -> list[str]:
    """The steps (progress.Steps kinds) of timing a set of files: one, and one per --rounds round after the first."""
    return ["files"] + ["files round"] * ((asked.rounds - 1) if asked is not None and asked.profile else 0)


def baseline_steps(names: Sequence[str], step: str, asked: Asked | None) -> list[str]:
    """The steps (progress.Steps kinds) of timing native runtimes `names`, then (--profile) profiling each."""

    profiled = asked is not None and asked.profile
    return [f"baseline {n}" for n in names] + [f"profile {n}" for n in names if profiled and (n, step) in PROFILED]


def _bench_files(paths, backend, timeout, with_peaks, max_memory, progress, asked, stack) -> BenchReport:
    rt = runtime(backend)
    rows, batches, todo = [], {}, []
    for result, path in zip(load(paths), paths):
        if not result.ok:
            rows.append((None, Executable(str(path), "stablehlo", None, None, error=result.error)))
            continue
        side, _ = sidecar_of(Path(path))  # one that does not describe its file: warned of by the CLI
        batches[str(path)] = _batch(side)
        rows.append(str(path))
        todo.append(str(path))
    timed = {}

    with Isolated(max_memory, most_partitions(todo) if rt.platform == "cpu" else 1, stack=stack,
                  stager=staged_values) as worker:
        if len(todo) > 1:  # one worker, their steady-state runs taking turns
            group = _timed(worker, group_task(todo, rt.platform, timeout, asked), timeout * len(todo) if timeout
                           else None, progress)
            if isinstance(group, list) and not (all(not e.ok for e in group) and len({e.error for e in group}) == 1):
                timed = {e.label: e for e in group}
            # else the worker was stopped (time, memory) or died: each file alone, to name the one at fault
        for path in todo:
            if path not in timed:
                timed[path] = _timed(worker, file_task(path, rt.platform, timeout, asked), timeout, progress)
    if asked is not None and asked.rounds > 1:
        timed = _more_rounds(timed, todo, rt.platform, timeout, asked, max_memory, stack, progress)
    rows = [r if isinstance(r, tuple) else (batches[r], timed[r]) for r in rows]
    measured = with_peaks and any(e.ok for _, e in rows)  # no roofline to draw when nothing ran
    if measured and progress:
        progress("measuring this device's peaks (a large GEMM and a large add)")
    return BenchReport(rt.platform, tuple(rows), peaks(rt) if measured else {}, machine(stack), asked=asked)


def _more_rounds(timed: dict, todo: list, platform: str, timeout, asked, max_memory, stack, progress) -> dict:
    """Each profiled row (by path) with asked.rounds - 1 more rounds of its profile, each round in a
    fresh worker where the files are timed and profiled as in the first (in turns on XLA:CPU), merged
    into one Profile (bench.profile.merged): diff --bench's intervals are then across rounds, which a
    fresh worker's shift moves, where one worker's runs are not. The rows keep the first round's
    timing. A round that fails a row: that row's error, naming the round."""
    import dataclasses

    profiled = [p for p in todo if timed[p].ok and timed[p].profile is not None]
    got, failed = {p: [timed[p].profile] for p in profiled}, {}
    for r in range(2, asked.rounds + 1):
        if not profiled:
            break
        if progress:
            progress(f"round {r} of {asked.rounds}: the profile again, in a fresh worker")
        kind = "files round"
        with Isolated(max_memory, most_partitions(profiled) if platform == "cpu" else 1, stack=stack,
                      stager=staged_values) as worker:
            if len(profiled) > 1:
                group = _timed(worker, group_task(profiled, platform, timeout, asked),
                               timeout * len(profiled) if timeout else None, progress, kind)
                rows = {e.label: e for e in group}
            else:
                rows = {profiled[0]: _timed(worker, file_task(profiled[0], platform, timeout, asked), timeout, progress,
                                            kind)}
        for p in profiled:
            e = rows.get(p)
            if e is None or not e.ok or e.profile is None:
                failed.setdefault(p, f"{p}: --rounds: round {r} of {asked.rounds}: "
                                     f"{e.error if e is not None and e.error else 'no profile came back'}")
            else:
                got[p].append(e.profile)
    out = dict(timed)
    for p in profiled:
        try:
            out[p] = dataclasses.replace(timed[p], error=failed[p]) if p in failed else \
                dataclasses.replace(timed[p], profile=merged(got[p]))
        except StackwarsError as e:
            out[p] = dataclasses.replace(timed[p], error=f"{p}: --rounds: {e.one_line()}")
    return out


def estimate_files(paths: Iterable[str | Path], target: str, timeout: float | None = None,
                   max_memory: int | None = None, progress: Callable[[str], object] | None = None) -> BenchReport:
    """Every file compiled for a TPU generation that is not here (libtpu, compile-only) in a bench
    worker, each kernel's time estimated from the compiler's cost model (bench.estimate): a report
    of estimates, not measurements, that `diff --bench` splits by block as it does a profile."""

    check_chip(target)
    with Isolated(max_memory) as worker:
        rows = []
        for path in paths:
            if progress:
                progress(f"{path}: compiling for {target} (libtpu, compile-only) to read its cost model ...")
            task = Task(estimate_file, (Path(path), target), str(path), row(Executable, str(path), "stablehlo", None, None))
            rows.append((None, worker.run(task, timeout)))
    return BenchReport(target, tuple(rows), {}, machine())


def file_task(path: str | Path, platform: str, timeout: float | None, asked: Asked | None = None) -> Task:
    """The worker's task that times one file (bench_one)."""

    return Task(bench_one, (Path(path), platform, timeout, asked), str(path), row(Executable, str(path), "stablehlo", None, None),
                keep_prepared, stage=(str(path),))


def group_task(paths: Iterable[str | Path], platform: str, timeout: float | None, asked: Asked | None = None) -> Task:
    """The worker's task that times files side by side, their steady-state runs taking turns (bench_group)."""

    paths = tuple(str(p) for p in paths)
    return Task(bench_group, ([Path(p) for p in paths], platform, timeout, asked), f"{len(paths)} files, interleaved",
                functools.partial(_failed_group, paths), keep_prepared, stage=paths)


def _failed_group(paths, message: str) -> list[Executable]:
    """Each file's row, with the one error that stopped them all."""
    return [Executable(path, "stablehlo", None, None, error=message) for path in paths]


def _timed(worker, task, timeout, progress, kind: str = "files") -> Executable:
    import time

    label = task.label
    start(progress, kind, f"{label}: compiling and timing ...")
    t0 = time.perf_counter()
    row = worker.run(task, timeout)
    if progress:
        ok = all(r.ok for r in row) if isinstance(row, list) else row.ok
        progress(f"{label}: {'done' if ok else 'failed'} in {time.perf_counter() - t0:.1f} s")
    return row


def _batch(side) -> int | None:
    return side.batch if side else None


def bench_baselines(req: Request, baselines: Sequence[str], backend: str | None = None, timeout: float | None = None,
                    max_memory: int | None = None, progress: Callable[[str], object] | None = None,
                    asked: Asked | None = None) -> list[Executable]:
    """The request's native runtimes (jax, eager, ...: bench.native), timed in one worker, so the
    weights are built once; `asked`: the user's sampling (timing.Asked)."""

    platform = runtime(backend).platform
    with Isolated(max_memory) as worker:
        rows = [_timed(worker, Task(run_baseline, (req, name, timeout, platform, asked), name,
                                    row(Executable, name, name, None, None), keep_prepared), timeout, progress,
                       f"baseline {name}")
                for name in baselines]
    return [_with_profile(row, req, name, platform, timeout, max_memory, progress, asked)
            for row, name in zip(rows, baselines)]


def _with_profile(row, req, name, platform, timeout, max_memory, progress, asked=None):
    """The baseline's row with its profile (bench --profile, where bench.native profiles that
    runtime), from a worker of its own; a profile that fails is the row's error."""
    import dataclasses

    runs = asked.profile if asked is not None else 0
    if not row.ok or not runs or (name, req.step) not in PROFILED:
        return row

    start(progress, f"profile {name}", f"{row.name}: profiling {runs} steady runs under its runtime's profiler ...")
    with Isolated(max_memory) as worker:
        got = worker.run(Task(profile_baseline, (req, name, runs, platform), name, BenchError,
                              keep_prepared), timeout)
    if isinstance(got, BenchError):
        return dataclasses.replace(row, error=f"{row.name}: --profile: {got}")
    return dataclasses.replace(row, profile=dataclasses.replace(got, steady_s=row.timing.steady))


def crossover(rows: Iterable[tuple[int | None, Executable]], exporters: Sequence[str]) -> str | None:
    """The first batch size at which the faster of the JAX and PyTorch executables changes."""
    torch_label = f"torch-{exporters[0]}"
    by_batch: dict = {}
    for batch, e in rows:
        if e.ok and e.kind == "stablehlo" and e.name in ("jax", torch_label):
            by_batch.setdefault(batch, {})[e.name] = e.timing
    # -1: JAX faster, +1: torch faster, 0: their p10-p90 ranges overlap (a tie at this noise)
    series = [(b, _winner(v["jax"], v[torch_label])) for b, v in sorted(by_batch.items()) if len(v) == 2]
    if len(series) < 2:
        return None
    decided = [(b, w) for b, w in series if w]
    for (b0, w0), (b1, w1) in zip(decided, decided[1:]):
        if w0 != w1:
            first, second = ("jax", torch_label) if w1 < 0 else (torch_label, "jax")
            return f"{first} overtakes {second} between batch {b0} and {b1}"
    if not decided:
        return "no crossover: JAX and PyTorch executables are indistinguishable (p10-p90 overlap) at every batch"
    lead = "jax" if decided[0][1] < 0 else torch_label
    return f"no crossover: {lead} is faster wherever the two differ beyond noise ({len(decided)} of {len(series)} batch sizes)"


def _winner(a, b) -> int:
    if a.p90 < b.p10:
        return -1
    if b.p90 < a.p10:
        return 1
    return 0
