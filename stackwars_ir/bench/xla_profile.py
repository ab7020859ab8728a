"""Profile: an executable's steady runs under the runtime's own profiler, each kernel's time per run."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..common.errors import BenchError
from ..common.runstats import at, median_runs

if TYPE_CHECKING:
    from jax.profiler import ProfileData

    from .kernels import Kernel

PROFILE_RUNS = 10  # profiled runs after the unprofiled steady state (bench --profile N to change)
# XLA:CPU's profiler events of its runtime rather than of one kernel (thread-pool bookkeeping, the
# executor itself); they carry "::" in their names, and each kernel's end is a marker event "end: NAME".
# An execution begins with the first event here: jaxlib's XLA names it as the first, torch_xla's
# build (XLA 5fab705) as the second.
_RUN_EVENTS = ("CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice", "PjRtCpuExecutable::ExecuteHelper")
_KERNEL_THREADS = ("tf_XLAPjRtCpuClient", "tf_XLAEigen", "tf_XLAExecute")  # the last: jaxlib >= 0.11
LOOP_OPCODES = ("while",)  # a kernel whose runtime event holds other kernels' events (bench.kernels)
# The runtime's copies between host and device, traced on the kernel threads: not a graph's kernel.
_TRANSFERS = ("D2H ", "H2D ")
GPU_PLATFORMS = ("gpu", "cuda", "rocm")


@dataclass(frozen=True)
class KernelTime:
    """One kernel (bench.kernels.Kernel: name, opcode, module path, phase) and its profiled time: its
    summed duration in the profile's median run (median_runs: the run whose kernel total is the median
    of the runs', so every kernel's `seconds` adds up to Profile.kernel_s exactly), its duration in each
    run (`per_run`, in run order; empty for an estimate), and how often it ran in one."""

    name: str
    opcode: str
    path: str
    phase: str
    seconds: float
    calls: int
    how: str = ""  # "": measured; an estimate's (bench.estimate): estimate, bound, async, free
    inner: str = ""  # the fusion a parallel call runs (bench.kernels.Kernel.inner)
    spans: tuple[str, ...] = ()  # other module paths whose ops it computes (bench.kernels.Kernel.spans)
    per_run: tuple[float, ...] = ()  # seconds in each profiled run

    @property
    def label(self) -> str:
        """What the kernel is, for people: a parallel call by the fusion it runs."""
        return f"{self.inner} (parallel)" if self.inner else self.name

    def as_json(self) -> dict:
        return {"name": self.name, "opcode": self.opcode, "path": self.path, "phase": self.phase,
                "seconds": self.seconds, "calls": self.calls, **({"how": self.how} if self.how else {}),
                **({"inner": self.inner} if self.inner else {}), **({"spans": list(self.spans)} if self.spans else {}),
                **({"per_run": list(self.per_run)} if self.per_run else {})}

    @classmethod
    def from_json(cls, d: dict) -> "KernelTime":
        return cls(d["name"], d["opcode"], d["path"], d["phase"], d["seconds"], d["calls"], d.get("how", ""),
                   d.get("inner", ""), tuple(d.get("spans", ())), tuple(d.get("per_run", ())))


@dataclass(frozen=True)
class Profile:
    """The profiled runs of one executable. Kernels may run at once on several threads, so their summed
    time (`kernel_s`) can exceed the run's wall time; `busy_s` is the time at least one kernel ran, and
    `wall_s - busy_s` is outside every kernel (dispatch, argument and output handling, gaps)."""

    runs: int
    wall_s: float  # median wall time of a profiled run (this process's clock)
    kernel_s: float  # median over runs of the kernels' summed durations (each run's total, then the median)
    busy_s: float  # median over runs of the time covered by at least one kernel
    steady_s: float  # the unprofiled steady-state median of the same executable, this row's
    # KernelTime of every kernel of the optimized HLO's entry, in its order (0 s when never seen), each
    # timed in the median run(s), so that they and `untraced` add up to kernel_s
    kernels: tuple
    untraced: tuple = ()  # (event name, seconds in the median run): kernel events the entry does not list
    note: str = ""  # how this runtime was profiled, where it differs from the unprofiled runs
    # An estimate for a device that is not here (bench.estimate), not a measurement: its totals and
    # assumptions (target, clock, kernels estimated and bounded); empty for a profile.
    estimate: dict = field(default_factory=dict)
    untraced_runs: tuple = ()  # the untraced events' summed seconds in each run (run order)
    # The executables (labels, this one's included) profiled in turns with this one in one trace (run
    # A, run B, run B, run A, ...: profile_turns), so that its i-th run and theirs were taken side by
    # side; empty when profiled on its own.
    turns: tuple = ()
    # Profiled in several rounds, each in a fresh worker (bench --rounds): each round's count of runs, in
    # the order the runs are kept; empty for one round. diff --bench's intervals are then across rounds.
    rounds: tuple = ()

    def in_turns_with(self, other: "Profile") -> bool:
        """Whether this profile's runs and `other`'s were taken in turns in one trace, run for run."""
        return bool(self.turns) and self.turns == other.turns and self.runs == other.runs

    @property
    def run_totals(self) -> tuple:
        """Each profiled run's kernel total (the kernels' per_run plus untraced_runs); empty for an
        estimate or a profile recorded before per-run times were kept."""
        if not self.runs or not self.kernels or any(len(k.per_run) != self.runs for k in self.kernels):
            return ()
        extra = self.untraced_runs or (0.0,) * self.runs
        return tuple(sum(k.per_run[i] for k in self.kernels) + extra[i] for i in range(self.runs))

    @property
    def kernels_sum_s(self) -> float:
        """The kernels' times summed, the untraced events' included: what `diff --bench` splits by block."""
        return sum(k.seconds for k in self.kernels) + sum(s for _, s in self.untraced)

    @property
    def overhead(self) -> float:
        """Profiled wall time over unprofiled steady time: what the profiler itself costs."""
        return self.wall_s / self.steady_s if self.steady_s else float("nan")

    @property
    def outside_s(self) -> float:
        return max(self.wall_s - self.busy_s, 0.0)

    def as_json(self) -> dict:
        return {"runs": self.runs, "wall_s": self.wall_s, "kernel_s": self.kernel_s, "busy_s": self.busy_s,
                "steady_s": self.steady_s, "overhead": self.overhead, "outside_kernels_s": self.outside_s,
                "kernels": [k.as_json() for k in self.kernels],
                "untraced": [{"name": n, "seconds": s} for n, s in self.untraced],
                **({"note": self.note} if self.note else {}), **({"estimate": self.estimate} if self.estimate else {}),
                **({"untraced_runs": list(self.untraced_runs)} if self.untraced_runs else {}),
                **({"profiled_in_turns": list(self.turns)} if self.turns else {}),
                **({"rounds": list(self.rounds)} if self.rounds else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Profile":
        return cls(d["runs"], d["wall_s"], d["kernel_s"], d["busy_s"], d["steady_s"],
                   tuple(KernelTime.from_json(k) for k in d["kernels"]),
                   tuple((u["name"], u["seconds"]) for u in d.get("untraced", ())), d.get("note", ""),
                   d.get("estimate") or {}, tuple(d.get("untraced_runs", ())), tuple(d.get("profiled_in_turns", ())),
                   tuple(d.get("rounds", ())))


def merged(rounds: list) -> Profile:
    """One executable's profiles of several rounds, each taken in a fresh worker (bench --rounds), as one
    Profile: every run kept, in round order (`rounds`: each round's count); each kernel's and untraced
    event's seconds the mean over rounds of its time in that round's median run(s), so that they still
    add up to kernel_s, the mean of the rounds' kernel totals, exactly; wall, busy and steady times the
    median of the rounds'. A round whose executable has other kernels than the first's: BenchError."""
    from dataclasses import replace

    if len(rounds) == 1:
        return rounds[0]
    first, n = rounds[0], len(rounds)
    names = [k.name for k in first.kernels]
    for i, p in enumerate(rounds[1:], 2):
        if [k.name for k in p.kernels] != names or p.run_totals == () or p.estimate:
            raise BenchError(f"the profile of round {i} does not read as round 1's (other kernels, or no time per run)",
                             fix="profile in one round (drop --rounds) and report this")
    kernels = tuple(replace(k, seconds=sum(p.kernels[j].seconds for p in rounds) / n,
                            per_run=tuple(x for p in rounds for x in p.kernels[j].per_run))
                    for j, k in enumerate(first.kernels))
    untraced = {}
    for p in rounds:
        for name, sec in p.untraced:
            untraced[name] = untraced.get(name, 0.0) + sec / n
    return Profile(sum(p.runs for p in rounds), statistics.median(p.wall_s for p in rounds),
                   sum(p.kernel_s for p in rounds) / n, statistics.median(p.busy_s for p in rounds),
                   statistics.median(p.steady_s for p in rounds), kernels, tuple(sorted(untraced.items())),
                   f"{first.note}; {n} rounds, each in a fresh worker" if first.note else f"{n} rounds, each in a fresh worker",
                   untraced_runs=tuple(x for p in rounds for x in (p.untraced_runs or (0.0,) * p.runs)),
                   turns=first.turns, rounds=tuple(p.runs for p in rounds))


def profile_runs(run: Callable[[], object], kernels: list[Kernel], runs: int, steady_s: float,
                 platform: str = "cpu") -> Profile:
    """`runs` calls of `run` under jax's profiler, read back per kernel (`kernels`: bench.kernels.Kernel
    of the executable's optimized HLO, whose names the runtime's events carry)."""
    import jax

    gpu = platform in GPU_PLATFORMS
    if not gpu:
        cpu_only(platform)
    data, walls = _traced(run, runs, _jax_start, jax.profiler.stop_trace)
    return _read_gpu(data, walls, steady_s, kernels) if gpu else _read(data, walls, steady_s, [kernels])


def profile_turns(runs: list, kernels: list, n: int, steadies: list, labels: list) -> list[Profile]:
    """`n` calls of each of `runs` (XLA:CPU executables of one jax runtime; `kernels`, `steadies`,
    `labels`: each one's) taking turns in one trace under jax's profiler: round r calls them in order
    starting from the (r mod len)-th, so that no executable always runs first, and a machine that
    drifts or is disturbed during the profile moves every side's runs alike. Each call must show as one
    execution in the trace (a partitioned executable's several: BenchError), and the i-th execution is
    the i-th call's. Each Profile names the others it took turns with (Profile.turns), which diff
    --bench says. Its intervals still resample each side's runs on its own (runstats.part_gaps):
    resampled in pairs, they flagged more blocks that differ by nothing, not fewer, because the
    statistic is each side's median run, not a pair's (benchmarks/block_intervals.py)."""
    import jax

    order = [(r + j) % len(runs) for r in range(n) for j in range(len(runs))]
    data, walls = _traced_calls([runs[i] for i in order], _jax_start, jax.profiler.stop_trace)
    loops = {k.name for ks in kernels for k in ks if k.opcode in LOOP_OPCODES}
    starts, events = kernel_events(data, loops)
    if len(starts) != len(order):
        raise BenchError(f"the profile holds {len(starts)} executions for {len(order)} calls taken in turns",
                         fix="profile these files one at a time (bench FILE --profile)")
    inner = [{k.inner for k in ks if k.inner} for ks in kernels]
    executions, spans = executions_of(starts, events, [inner[o] for o in order])
    out = []
    for j, ks in enumerate(kernels):
        mine = [i for i, o in enumerate(order) if o == j]
        out.append(runs_profile([executions[i] for i in mine], [walls[i] for i in mine],
                                [union_seconds(spans[i]) for i in mine], steadies[j], ks,
                                f"profiled in turns with {len(runs) - 1} other executable(s), one trace",
                                turns=tuple(labels)))
    return out


def _jax_start(folder: str) -> None:
    """jax's profiler started into `folder`, without Python's own calls (not wanted; they cost per call)."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    jax.profiler.start_trace(folder, profiler_options=options)


def profile_lazy_runs(step: Callable[[], object], graphs: list, runs: int, steady_s: float, note: str = "") -> Profile:
    """`runs` steps of a torch_xla lazy loop under torch_xla's own profiler (its XLA build's events),
    read back per kernel. `graphs` lists the kernels (bench.kernels.Kernel) of each graph torch_xla
    compiled (its post-optimization HLO); a step may run several graphs (a host read runs one): each
    step's longest-running execution is the step's graph, the kernels of the others are named as
    another graph's, the runtime's host copies as transfers, never dropped."""
    import torch_xla.debug.profiler as xp

    data, walls = _traced(step, runs, xp.start_trace, xp.stop_trace)
    return _read(data, walls, steady_s, graphs, note)


def cpu_only(platform: str) -> None:
    if platform != "cpu":
        raise BenchError(f"--profile reads XLA:CPU's kernel events here; the {platform} backend's are not read yet",
                         fix="bench --backend cpu --profile, or drop --profile")


def _read_gpu(data, walls: list, steady_s: float, kernels: list) -> Profile:
    """A GPU profile (CUPTI's kernel events on the device plane's streams) per kernel of the entry.
    XLA:GPU names a kernel after its fusion (`.` and `-` spelled `_`) but compiles identical fusions
    once: every layer's attention matmul runs the first layer's kernel, by its name (GPT-2 base: 157
    kernels per run, 16 names). So each run's events are matched to the entry's kernels in schedule
    order: an event by the current kernel's name is that kernel; one by an earlier kernel's name is
    the current kernel running reused code; one by a later kernel's name skips the kernels between
    (they launched nothing); one named after no kernel (a library's: cuBLAS, cuDNN, a memset) belongs
    to the current kernel where that is not a fusion (a custom call), else to the last such kernel."""
    import re

    names = [re.sub(r"[^A-Za-z0-9_]", "_", k.name) for k in kernels]
    first = {}
    for j, n in enumerate(names):
        first.setdefault(n, j)
    starts = sorted(ev.start_ns for plane in data.planes if not plane.name.startswith("/device:")
                    for line in plane.lines for ev in line.events if ev.name in _RUN_EVENTS)
    device = sorted(((ev.start_ns, ev.end_ns, ev.name) for plane in data.planes if plane.name.startswith("/device:GPU")
                     for line in plane.lines if line.name.startswith("Stream") for ev in line.events))
    if len(starts) != len(walls):
        raise BenchError(f"the profile holds {len(starts)} executions for {len(walls)} profiled runs",
                         fix="drop --profile; this runtime's events are not read right yet")
    import bisect

    per_run = [[] for _ in starts]
    for ev in device:
        i = bisect.bisect_right(starts, ev[0]) - 1
        if i >= 0:
            per_run[i].append(ev)
    times, counts, foreign, covered = [], [], [], []
    for events in per_run:
        t, c, other = [0.0] * len(kernels), [0] * len(kernels), {}
        j, library = 0, None
        for begin, end, name in events:
            k = None
            if j < len(names) and name == names[j]:
                k = j
            elif name in first and first[name] < j and j < len(names) and kernels[j].opcode == "fusion":
                k = j  # this fusion runs the compiled code of an identical earlier one
            elif name in first:
                later = names.index(name, j) if name in names[j:] else None
                k = later if later is not None else first[name]
            elif j < len(names) and kernels[j].opcode != "fusion":
                k = library = j
            elif library is not None:
                t[library] += (end - begin) / 1e9
                c[library] += 1
                continue
            if k is None:
                other[name] = other.get(name, 0.0) + (end - begin) / 1e9
                continue
            t[k] += (end - begin) / 1e9
            c[k] += 1
            j = max(j, k + 1)
        times.append(t)
        counts.append(c)
        foreign.append(other)
        covered.append(union_seconds([(b, e) for b, e, _ in events]))
    totals = [sum(t) + sum(o.values()) for t, o in zip(times, foreign)]
    picks = median_runs(totals)
    timed = tuple(KernelTime(k.name, k.opcode, k.path, k.phase, at([t[j] for t in times], picks),
                             int(statistics.median(c[j] for c in counts)), inner=k.inner, spans=k.spans,
                             per_run=tuple(t[j] for t in times))
                  for j, k in enumerate(kernels))
    seen = sorted({n for o in foreign for n in o})
    untraced = tuple((n, at([o.get(n, 0.0) for o in foreign], picks)) for n in seen)
    return Profile(len(walls), statistics.median(walls), statistics.median(totals),
                   statistics.median(covered), steady_s, timed, untraced,
                   "GPU kernels from CUPTI's device events, matched to the entry's kernels in schedule order",
                   untraced_runs=tuple(sum(o.values()) for o in foreign))


def _traced(run, runs: int, start, stop):
    """(the profile of `runs` calls of `run`, read with jax's xplane reader; each call's wall time)."""
    return _traced_calls([run] * runs, start, stop)


def _traced_calls(calls: list, start, stop):
    """(the profile of the calls, made in order, read with jax's xplane reader; each call's wall time)."""
    import glob
    import tempfile

    import jax

    walls = []
    with tempfile.TemporaryDirectory(prefix="stackwars-profile-") as folder:
        start(folder)
        try:
            for call in calls:
                t0 = time.perf_counter()
                call()
                walls.append(time.perf_counter() - t0)
        finally:
            stop()
        (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        return jax.profiler.ProfileData.from_file(path), walls


def kernel_events(data: ProfileData, loops: set) -> tuple:
    """(the executions' start times, sorted; the kernel events on XLA:CPU's kernel threads, each
    [start, end, name, nanoseconds of kernels kept inside it]) of a trace. A loop's event (a while
    named in `loops`) holds its body's kernels' events: they are kernels of their own, and the loop's
    own time is what its event holds beyond them (the condition's bookkeeping, copies)."""
    starts, events = [], []
    for plane in data.planes:
        for line in plane.lines:
            on_pool = line.name.startswith(_KERNEL_THREADS)
            open_ = []  # the kept events that hold the current one on this thread (indices into events)
            for ev in sorted(line.events, key=lambda e: (e.start_ns, -e.end_ns)):
                if ev.name in _RUN_EVENTS:
                    starts.append(ev.start_ns)
                elif on_pool and "::" not in ev.name and not ev.name.startswith("end: "):
                    while open_ and events[open_[-1]][1] <= ev.start_ns:
                        open_.pop()
                    if open_ and ev.end_ns <= events[open_[-1]][1]:
                        holder = events[open_[-1]]
                        if holder[2] not in loops:
                            # An event inside a kernel's on the same thread is part of that kernel
                            # (torch_xla's build traces a dot's `Transpose` so): counted once, in the kernel.
                            continue
                        holder[3] += ev.end_ns - ev.start_ns
                    events.append([ev.start_ns, ev.end_ns, ev.name, 0])
                    open_.append(len(events) - 1)
    starts.sort()
    return starts, events


def executions_of(starts: list, events: list, inner: list) -> tuple:
    """(per execution {name: [seconds, calls]}, per execution its events' (begin, end) spans): each
    event in the execution that started last before it; `inner`: per execution, the fusions its
    executable's parallel calls run (their events fall inside the call's own: not counted again)."""
    import bisect

    executions = [dict() for _ in starts]
    spans = [[] for _ in starts]
    for begin, end, name, held in events:
        i = bisect.bisect_right(starts, begin) - 1
        if i < 0 or name in inner[i]:
            continue
        if name.startswith(_TRANSFERS):
            # Where a copy's event lands (inside the step's graph or after it) is a race between
            # threads: it is named as a transfer wherever it falls.
            name = f"transfer: {name}"
        t = executions[i].setdefault(name, [0.0, 0])
        t[0] += (end - begin - held) / 1e9
        t[1] += 1
        spans[i].append((begin, end))
    return executions, spans


def _read(data, walls: list, steady_s: float, graphs: list, note: str = "") -> Profile:
    loops = {k.name for ks in graphs for k in ks if k.opcode in LOOP_OPCODES}
    starts, events = kernel_events(data, loops)
    if not starts or len(starts) % len(walls) or (len(graphs) == 1 and len(starts) != len(walls)):
        raise BenchError(f"the profile holds {len(starts)} executions for {len(walls)} profiled runs",
                         fix="drop --profile; this runtime's events are not read right yet")
    # A parallel fusion's events on each thread fall inside its kernel's own event (bench.kernels).
    inner = {k.inner for ks in graphs for k in ks if k.inner}
    executions, spans = executions_of(starts, events, [inner] * len(starts))
    each = len(starts) // len(walls)
    per_run, covered = [], []
    # A run's graph: its execution with the most kernel time. A host copy's event is not a kernel's:
    # on a loaded machine one lasted longer than the whole step's kernels, and made the host read's
    # graph the step's (every kernel of the step then read as another graph's; a CI failure).
    def kernel_time(i: int) -> float:
        return sum(s for name, (s, _) in executions[i].items() if not name.startswith("transfer: "))

    for r in range(len(walls)):
        chunk = range(r * each, (r + 1) * each)
        main = max(chunk, key=kernel_time)
        run = dict(executions[main])
        for i in chunk:
            if i != main:
                for name, (sec, n) in executions[i].items():
                    label = name if name.startswith("transfer: ") else f"another graph: {name}"
                    t = run.setdefault(label, [0.0, 0])
                    t[0] += sec
                    t[1] += n
        per_run.append(run)
        covered.append(union_seconds([s for i in chunk for s in spans[i]]))
    seen = {n for r in per_run for n in r}
    kernels = max(graphs, key=lambda ks: len(seen & {k.name for k in ks}))

    return runs_profile(per_run, walls, covered, steady_s, kernels, note)


def runs_profile(per_run: list, walls: list, covered: list, steady_s: float,
                 kernels: Sequence[Kernel | KernelTime], note: str,
                 keys: Iterable[str | tuple[str, str, str]] | None = None, turns: tuple = ()) -> Profile:
    """The Profile of profiled runs, each {key: [seconds, calls]}: `kernels` (bench.kernels.Kernel or
    KernelTime; keyed by `keys`, in their order, or by name) timed in the median run(s) by kernel
    total, with every run's time kept; the keys that are no kernel's as untraced."""
    keys = list(keys) if keys is not None else [k.name for k in kernels]
    totals = [sum(s for s, _ in r.values()) for r in per_run]
    picks = median_runs(totals)

    def series(key) -> list:
        return [r.get(key, (0.0, 0))[0] for r in per_run]

    timed = tuple(KernelTime(k.name, k.opcode, k.path, k.phase, at(series(key), picks),
                             int(statistics.median(r.get(key, (0.0, 0))[1] for r in per_run)),
                             inner=getattr(k, "inner", ""), spans=getattr(k, "spans", ()),
                             per_run=tuple(series(key))) for k, key in zip(kernels, keys))
    others = sorted(set().union(*per_run) - set(keys), key=str)
    untraced = tuple((str(n), at(series(n), picks)) for n in others)
    return Profile(len(walls), statistics.median(walls), statistics.median(totals), statistics.median(covered),
                   steady_s, timed, untraced, note,
                   untraced_runs=tuple(sum(r[n][0] for n in others if n in r) for r in per_run), turns=turns)


def union_seconds(spans: list) -> float:
    """Seconds covered by at least one of the (begin, end) spans (nanoseconds)."""
    total, reach = 0, None
    for begin, end in sorted(spans):
        if reach is None or begin > reach:
            total += end - begin
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1e9


