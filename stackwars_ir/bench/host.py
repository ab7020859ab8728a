"""Host phases of a native runtime's steady step: where its wall time goes, from its own clocks."""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..common.runstats import median_ratio, summed_runs

if TYPE_CHECKING:
    import torch

HOST_RUNS = 10  # phased runs after the steady state (bench --host N to change)


class Clock:
    """The marks a phased run leaves at the runtime's API boundaries (`mark("sync")` when the
    step's sync returns): the time, and the runtime's own clocks read there (`read`)."""

    def __init__(self, read: Callable[[], dict] | None = None) -> None:
        self.read = read
        self.marks: list = []
        self.start()

    def start(self) -> None:
        self.marks = [("", time.perf_counter(), self.read() if self.read else {})]

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter(), self.read() if self.read else {}))


class _Unmarked:
    """The clock of an ordinary timed run: its marks cost one method call and record nothing."""

    def mark(self, name: str) -> None:
        pass


UNMARKED = _Unmarked()


@dataclass(frozen=True)
class Phase:
    """One phase of the step: its seconds in the median phased run, where that figure comes from (a
    timer between two API boundaries, or the runtime's own metric), and the timer phase it splits."""

    name: str
    seconds: float
    source: str  # "timer" | the runtime's metric, e.g. "torch_xla LazyTracing"
    parent: str = ""  # the timer phase this one splits ("": a phase of the step itself)
    per_run: tuple[float, ...] = ()  # its seconds in each phased run, in run order

    def as_json(self) -> dict:
        return {"name": self.name, "seconds": self.seconds, "source": self.source, "parent": self.parent,
                "per_run": list(self.per_run)}

    @classmethod
    def from_json(cls, d: dict) -> "Phase":
        return cls(d["name"], d["seconds"], d["source"], d.get("parent", ""), tuple(d.get("per_run", ())))


@dataclass(frozen=True)
class HostPhases:
    """A native runtime's steady step split into phases: the timer phases (the runtime's API calls
    in the step, back to back) split further by the runtime's own clocks where it keeps them; every
    figure the median run's (the run whose total is the median of the runs' totals), each phase's
    figure in every run kept."""

    runs: int
    wall_s: float
    phases: tuple[Phase, ...]
    device_s: float | None = None  # the runtime's own clock of the device executing the step's graphs
    counters: dict = field(default_factory=dict)  # per step: graphs executed, syncs forced, ...
    notes: tuple[str, ...] = ()
    modules: tuple = ()  # ModuleHost: the forward's host self time by module path, from runs of their own
    hooked_wall_s: float | None = None  # the median step under the module hooks (their cost: against wall_s)
    walls: tuple[float, ...] = ()  # each phased run's total
    profiled: tuple[Phase, ...] = ()  # the step split by the runtime's profiler, in runs of their own
    profiled_wall_s: float | None = None  # the median step under that profiler (its cost: against wall_s)
    first: tuple[Phase, ...] = ()  # the timed first run (compiles included), marked as the steady ones
    second: tuple[Phase, ...] = ()  # the timed second run
    hooked_walls: tuple[float, ...] = ()  # each run's total under the module hooks

    def hooks_cost(self) -> tuple[float, float, float] | None:
        """(cost, low, high): the module hooks' cost, the hooked runs' median total over the phased
        runs' less 1 (0.05: 5% longer), with the 95% bootstrap interval of that ratio of medians
        (runstats.median_ratio); None without both runs' totals (a bench from before they were kept)."""
        if len(self.walls) < 2 or len(self.hooked_walls) < 2:
            return None

        ratio, low, high = median_ratio(self.walls, self.hooked_walls)
        return ratio - 1, low - 1, high - 1

    @property
    def timed_s(self) -> float:
        """The timer phases together."""
        return sum(p.seconds for p in self.phases if not p.parent)

    @property
    def unattributed_s(self) -> float:
        """The median step's time no timer phase holds (none: the marks are back to back), never below zero."""
        return max(0.0, self.wall_s - self.timed_s)

    @property
    def coverage(self) -> float:
        """The share of the median step the named phases hold."""
        return min(1.0, self.timed_s / self.wall_s) if self.wall_s else 0.0

    @property
    def by_runtime(self) -> float:
        """The share of the median step the runtime's own clocks account for (sub-phases with a
        metric for a source; or, for a runtime that keeps none outside its profiler, the profiled
        step's share held by the profiler's events), the rest held by timers alone."""
        if self.profiled and self.profiled_wall_s:
            own = sum(p.seconds for p in self.profiled if p.source != "timer")
            return min(1.0, own / self.profiled_wall_s)
        own = sum(p.seconds for p in self.phases if p.parent and p.source != "timer")
        return min(1.0, own / self.wall_s) if self.wall_s else 0.0

    def as_json(self) -> dict:
        return {"runs": self.runs, "wall_s": self.wall_s, "phases": [p.as_json() for p in self.phases],
                "device_s": self.device_s, "counters": self.counters, "notes": list(self.notes),
                "coverage": self.coverage, "by_runtime": self.by_runtime, "unattributed_s": self.unattributed_s,
                "modules": [m.as_json() for m in self.modules], "hooked_wall_s": self.hooked_wall_s,
                "walls": list(self.walls), "profiled": [p.as_json() for p in self.profiled],
                "profiled_wall_s": self.profiled_wall_s, "first": [p.as_json() for p in self.first],
                "second": [p.as_json() for p in self.second], "hooked_walls": list(self.hooked_walls)}

    @classmethod
    def from_json(cls, d: dict) -> "HostPhases":
        return cls(d["runs"], d["wall_s"], tuple(Phase.from_json(p) for p in d["phases"]), d.get("device_s"),
                   d.get("counters") or {}, tuple(d.get("notes") or ()),
                   tuple(ModuleHost.from_json(m) for m in d.get("modules") or ()), d.get("hooked_wall_s"),
                   tuple(d.get("walls") or ()), tuple(Phase.from_json(p) for p in d.get("profiled") or ()),
                   d.get("profiled_wall_s"), tuple(Phase.from_json(p) for p in d.get("first") or ()),
                   tuple(Phase.from_json(p) for p in d.get("second") or ()), tuple(d.get("hooked_walls") or ()))


@dataclass(frozen=True)
class Meter:
    """How one runtime's step is phased: `read` its own clocks (seconds and counts, cumulative),
    `split` one timer phase into its parts from the clocks' change across it, `device` the
    device's own execution time in one step (None where the runtime keeps no such clock), `notes`
    what the counts per step say."""

    read: Callable[[], dict] | None = None
    split: Callable[[str, float, dict], list] | None = None
    device: Callable[[dict], float | None] | None = None
    notes: Callable[[dict], tuple] | None = None
    profiled: Callable[[Callable, int], tuple] | None = None  # (phases, wall) of runs under the runtime's profiler


def phases_of(run: Callable, runs: int, meter: Meter, model: torch.nn.Module | None = None,
              phase: str = "") -> HostPhases:
    """`runs` phased runs of `run(clock)` (a steady step that marks its API boundaries), each
    split by `meter`. The figures are the median run's (the run whose wall time is the median), so
    the parts add up to their phase and the phases to the step exactly; each phase keeps every
    run's figure. With the PyTorch `model` the step runs, `runs` more runs clock the host's time in
    each of its modules' forward (ModuleClock), which a training step runs in its `phase` "forward"."""
    per_run, walls, devices, counts = [], [], [], []
    for _ in range(runs):
        clock = Clock(meter.read)
        run(clock)
        wall, step, device, count = split_run(clock, meter)
        walls.append(wall)
        per_run.append(step)
        devices.append(device)
        counts.append(count)
    middle = median_index(walls)
    phases = tuple(Phase(name, per_run[middle].get((name, parent, source), 0.0), source, parent,
                         tuple(step.get((name, parent, source), 0.0) for step in per_run))
                   for name, parent, source in _ordered(per_run))
    notes = meter.notes(counts[middle]) if meter.notes else ()
    modules, hooked, hooked_walls = modules_of(run, model, runs, phase) if model is not None else ((), None, ())
    profiled, profiled_wall = meter.profiled(run, runs) if meter.profiled else ((), None)
    return HostPhases(runs, walls[middle], phases, devices[middle], counts[middle], tuple(notes), modules, hooked,
                      tuple(walls), profiled, profiled_wall, hooked_walls=hooked_walls)


def split_run(clock: Clock, meter: Meter) -> tuple:
    """One marked run: (wall seconds, {(phase or part, its timer phase or "", source): seconds},
    the device's seconds by the runtime's clock or None, {count: per run})."""
    step, whole = {}, _change(clock.marks[0][2], clock.marks[-1][2])
    for (_, t0, r0), (name, t1, r1) in zip(clock.marks, clock.marks[1:]):
        seconds = t1 - t0
        step[(name, "", "timer")] = step.get((name, "", "timer"), 0.0) + seconds
        if meter.split:
            for part, part_s, source in _within(seconds, meter.split(name, seconds, _change(r0, r1))):
                step[(part, name, source)] = step.get((part, name, source), 0.0) + part_s
    return (clock.marks[-1][1] - clock.marks[0][1], step, meter.device(whole) if meter.device else None,
            {k[1:]: v for k, v in whole.items() if k.startswith("#")})


def _ordered(per_run: list) -> list:
    """The keys of split_run's steps, each timer phase followed by its parts (its rest last)."""
    seen = list(dict.fromkeys(k for step in per_run for k in step))
    return [k for top in seen if not top[1]
            for k in [top] + sorted((k for k in seen if k[1] == top[0]), key=lambda k: k[2] == "timer")]


def one_run(clock: Clock, meter: Meter) -> tuple:
    """(wall seconds, its phases) of one marked run (a first or second run)."""
    wall, step, _, _ = split_run(clock, meter)
    return wall, tuple(Phase(name, step[(name, parent, source)], source, parent)
                       for name, parent, source in _ordered([step]))


def median_index(values: list) -> int:
    """The index of the median value (the lower of the middle two for an even count)."""
    return sorted(range(len(values)), key=values.__getitem__)[(len(values) - 1) // 2]


def _change(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after}


def _within(seconds: float, parts: list) -> list:
    """A timer phase's parts from the runtime's clocks, each clipped so together they never exceed
    the phase (a clock that ran on another thread can hold more), the rest named by the last part."""
    if not parts:
        return []
    out, left = [], seconds
    *measured, (rest_name, _, rest_source) = parts
    for name, part_s, source in measured:
        part_s = min(max(part_s, 0.0), left)
        if part_s > 0:
            out.append((name, part_s, source))
            left -= part_s
    out.append((rest_name, left, rest_source))
    return out


# torch_xla lazy: its metrics (torch_xla.debug.metrics) are its own clocks, in nanoseconds, recorded
# when each timed scope ends; its counters count graphs and forced syncs.
_XLA_SECONDS = {"LazyTracing": "lazy tracing in torch_xla's ops", "CompileTime": "XLA compile",
                "ExecuteTime": "graphs executed", "TransferFromDeviceTime": "transfers to the host",
                "TransferToDeviceTime": "transfers to the device"}
_XLA_COUNTS = {"ExecuteComputation": "graphs executed", "aten::_local_scalar_dense": "values read by the host",
               "UncachedCompile": "compiles", "MarkStep": "syncs"}


def xla_meter(rest: str | dict = "Python and PyTorch's dispatcher") -> Meter:
    """torch_xla lazy's step: the Python step traces (forward, backward, optimizer: each op records
    its LazyTracing time; a value the host reads, as `.item()`, cuts the graph there and runs it:
    ExecuteTime and a transfer inside the trace), `sync` collects, hashes and looks up the graph
    (compiling it on a miss: CompileTime) and launches it, `wait` waits for its execution
    (ExecuteTime, recorded when it ends). `rest`: what a traced phase holds besides those clocks (by
    phase name where phases differ, "" for the others)."""
    import torch_xla.debug.metrics as met

    def read() -> dict:
        out = {}
        for metric in _XLA_SECONDS:
            data = met.metric_data(metric)
            out[metric] = data[1] / 1e9 if data else 0.0
        for counter in _XLA_COUNTS:
            out["#" + _XLA_COUNTS[counter]] = met.counter_value(counter) or 0
        return out

    def split(phase: str, seconds: float, change: dict) -> list:
        if phase == "wait":
            return [("device executing (ExecuteTime)", change.get("ExecuteTime", 0.0), "torch_xla ExecuteTime"),
                    ("waiting beyond the execution", 0.0, "timer")]
        if phase == "sync":
            # An execution recorded inside the sync began there too (a graph is launched by the sync):
            # on this CPU client a training step's sync returns only once its graph has run.
            return [("XLA compile", change.get("CompileTime", 0.0), "torch_xla CompileTime"),
                    ("device executing, ended inside the sync (ExecuteTime)", change.get("ExecuteTime", 0.0),
                     "torch_xla ExecuteTime"),
                    ("collecting, hashing, cache lookup, launch", 0.0, "timer")]
        return [("lazy tracing in torch_xla's ops", change.get("LazyTracing", 0.0), "torch_xla LazyTracing"),
                ("graphs cut and run mid-trace", change.get("ExecuteTime", 0.0) + change.get("CompileTime", 0.0),
                 "torch_xla ExecuteTime+CompileTime"),
                ("transfers", change.get("TransferFromDeviceTime", 0.0) + change.get("TransferToDeviceTime", 0.0),
                 "torch_xla Transfer*Time"),
                (rest.get(phase, rest[""]) if isinstance(rest, dict) else rest, 0.0, "timer")]

    def notes(counters: dict) -> tuple:
        read_back = counters.get("values read by the host", 0)
        graphs = counters.get("graphs executed", 0)
        if read_back and graphs > 1:
            return (f"{graphs:g} graphs per step: the step reads {read_back:g} value(s) back to the host while "
                    "tracing (aten::_local_scalar_dense, e.g. `.item()` or a Python `if` on a tensor), which cuts "
                    "the lazy graph there and runs it before tracing goes on",)
        return ()

    return Meter(read, split, lambda change: change.get("ExecuteTime", 0.0), notes)


def timer_meter() -> Meter:
    """A runtime whose steady step keeps no clock of its own outside its profiler: its phases are the
    timers between its API calls."""
    return Meter()


@dataclass(frozen=True)
class ModuleHost:
    """The host's time inside one module's forward and not inside a child's (its self time), keyed by
    the module path the captures' ops carry, so diff.kernel_blocks traces it to a block like a kernel:
    the median over the runs and each run's."""

    path: str
    seconds: float
    per_run: tuple[float, ...] = ()
    phase: str = ""  # the forward of a forward pass: no phase, as its captured ops have none

    def as_json(self) -> dict:
        return {"path": self.path, "seconds": self.seconds, "per_run": list(self.per_run),
                **({"phase": self.phase} if self.phase else {})}

    @classmethod
    def from_json(cls, d: dict) -> "ModuleHost":
        return cls(d["path"], d["seconds"], tuple(d.get("per_run", ())), d.get("phase", ""))


class ModuleHooks:
    """A forward pre-hook and hook (`_pre`, `_post`, defined by a subclass) on every module of
    `model` while entered; `paths` maps each module to its path."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.paths = {mod: name for name, mod in model.named_modules()}
        self.hooks: list = []

    def __enter__(self):
        for mod in self.paths:
            self.hooks.append(mod.register_forward_pre_hook(self._pre))
            self.hooks.append(mod.register_forward_hook(self._post))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks.clear()


class _SelfTimes:
    """Self times of nested regions opened and closed by path: each region's time less its children's
    (a region never opened is ignored: a module entered before the clock started)."""

    def __init__(self):
        self.stack: list = []  # [path, start, children's time]
        self.seconds: dict = {}

    def open(self, path: str) -> None:
        self.stack.append([path, time.perf_counter(), 0.0])

    def close(self, path: str) -> None:
        now = time.perf_counter()
        if not self.stack or self.stack[-1][0] != path:
            return
        _, start, children = self.stack.pop()
        spent = now - start
        self.seconds[path] = self.seconds.get(path, 0.0) + spent - children
        if self.stack:
            self.stack[-1][2] += spent

    def take(self) -> dict:
        out, self.seconds, self.stack = self.seconds, {}, []
        return out


_NO_SEQUENCE = 2 ** 64 - 1  # autograd's sequence number of a leaf's AccumulateGrad


def _tensors(value) -> list:
    """The tensors in a module's output: itself, or those in a tuple, list or dict (a ModelOutput)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


class ModuleClock(ModuleHooks):
    """Forward hooks on every module of `model` that clock the host's self time in each (the time
    between its forward's start and end, less its children's): the forward's Python, dispatch and,
    under torch_xla, its lazy tracing, module by module. The top module's self time is the glue
    between its children (the model's own forward code).

    With `backward` (a training step), each module's backward too: every autograd node its forward
    created (found from its outputs back to the nodes made before it began, by autograd's sequence
    numbers) and no child's is clocked from its pre-hook to its hook as the backward runs, so a
    module's backward self time is its nodes' time (under torch_xla, their ops' lazy tracing); the
    engine's own time between nodes, a loss computed outside the model and the gradients' accumulation
    into leaves are in no module. Node hooks rather than autograd's module backward hooks: those wrap
    a module's output, which an in-place op after it (torchvision's ReLU(inplace=True)) refuses."""

    def __init__(self, model: torch.nn.Module, backward: bool = False) -> None:
        super().__init__(model)
        self.backward = backward
        self.forward, self.back = _SelfTimes(), {}
        self.starts: list = []  # the sequence number each open forward began at
        self.owner: dict = {}  # autograd node -> the module path that claimed it, this step
        self.probe = None

    def _sequence(self) -> int:
        """The next autograd sequence number of this thread (read from a node made for it)."""
        import torch

        if self.probe is None:
            self.probe = torch.zeros((), requires_grad=True)
        with torch.enable_grad():
            return (self.probe * 1).grad_fn._sequence_nr() + 1

    def _pre(self, mod, args):
        self.forward.open(self.paths[mod])
        if self.backward:
            self.starts.append(self._sequence())

    def _post(self, mod, args, out):
        path = self.paths[mod]
        self.forward.close(path)
        if self.backward and self.starts:
            self._claim(path, out, self.starts.pop())

    def _claim(self, path: str, out, start: int) -> None:
        """Clock every node the module's forward made (sequence number `start` or later) that no child
        claimed: walked back from its outputs, through its children's nodes, to older ones."""
        todo = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
        seen: set = set()
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            seq = node._sequence_nr()
            if seq < start or seq == _NO_SEQUENCE:
                continue
            if node not in self.owner:
                self.owner[node] = path
                began = [0.0]
                node.register_prehook(lambda grads, began=began: began.__setitem__(0, time.perf_counter()))
                node.register_hook(lambda grads_in, grads_out, began=began, path=path:
                                   self._spent(path, time.perf_counter() - began[0]))
            todo.extend(f for f, _ in node.next_functions)

    def _spent(self, path: str, seconds: float) -> None:
        self.back[path] = self.back.get(path, 0.0) + seconds

    def take(self) -> tuple[dict, dict]:
        """The forward's and the backward's self times since the last take, and a fresh start."""
        back, self.back, self.owner, self.starts = self.back, {}, {}, []
        return self.forward.take(), back


def modules_of(run: Callable, model: torch.nn.Module, runs: int,
               phase: str = "") -> tuple[tuple[ModuleHost, ...], float, tuple]:
    """`runs` steady runs of `run` with `model`'s modules clocked (ModuleClock): each module path's
    host self time in the median run (by wall time under the hooks) and in every run, that wall
    time, and every run's. A training step (`phase` "forward") clocks each module's backward too, as
    phase "backward"."""
    per_run, walls = [], []
    with ModuleClock(model, backward=phase == "forward") as clock:
        for _ in range(runs):
            clock.take()
            start = time.perf_counter()
            run()
            walls.append(time.perf_counter() - start)
            forward, back = clock.take()
            per_run.append({(p, phase): s for p, s in forward.items()}
                           | {(p, "backward"): s for p, s in back.items()})
    middle = median_index(walls)
    out = tuple(ModuleHost(p, per_run[middle].get((p, ph), 0.0), tuple(r.get((p, ph), 0.0) for r in per_run), ph)
                for p, ph in dict.fromkeys(k for r in per_run for k in r))
    return tuple(sorted(out, key=lambda m: -m.seconds)), walls[middle], tuple(walls)


def layered(modules: Iterable[ModuleHost]) -> list:
    """(path with each layer's index as `*`, summed seconds, modules summed, the group's seconds in
    every run) per group, longest first: GPT-2's h.0.attn ... h.11.attn as one `h.*.attn`; a
    training step's backward groups apart, their paths followed by ` (backward)`."""
    import re

    groups: dict = {}
    for m in modules:
        key = re.sub(r"(^|\.)\d+(?=\.|$)", r"\1*", m.path) + (" (backward)" if m.phase == "backward" else "")
        seconds, count, runs = groups.get(key, (0.0, 0, ()))
        groups[key] = (seconds + m.seconds, count + 1, summed_runs(runs, m.per_run))
    return sorted(((k, s, n, r) for k, (s, n, r) in groups.items()), key=lambda g: -g[1])


# torch eager and torch.compile keep no clock of their own outside torch.profiler: its events on the
# stepping thread, by the outermost event's kind, split runs profiled apart from the phased ones.
_TORCH_KINDS = (("TorchDynamo Cache Lookup", "dynamo's guards and cache lookup"),
                ("Torch-Compiled Region", "the compiled graph's call (AOTAutograd's wrapper, inductor's kernels)"),
                ("CompiledFunction", "the compiled graph's call (AOTAutograd's wrapper, inductor's kernels)"),
                ("autograd::engine::evaluate_function", "autograd's backward, node by node"),
                ("Optimizer.step", "the optimizer's step"),
                ("Optimizer.zero_grad", "the optimizer's zero_grad"),
                ("aten::", "ATen ops outside those (dispatcher and kernels)"))
_TORCH_REST = "Python and the rest outside torch.profiler's events"


def torch_meter() -> Meter:
    """torch eager's or torch.compile's step: timers between the loop's calls, and torch.profiler's
    CPU events in runs of their own (its outermost events on the stepping thread, by kind: dynamo's
    guards, the compiled graph's call, ATen ops, autograd's backward, the optimizer; the rest is the
    Python between them). On the CPU an op's kernels run inside its event: host and device alike."""
    return Meter(profiled=_torch_profiled)


def _torch_profiled(run: Callable, runs: int) -> tuple:
    from torch.profiler import ProfilerActivity, profile

    per_run, walls = [], []
    for _ in range(runs):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            run()
            walls.append(time.perf_counter() - start)
        per_run.append(_torch_kinds(prof.events()))
    middle = median_index(walls)
    names = [name for _, name in _TORCH_KINDS]
    out = []
    for name in dict.fromkeys(names):
        if any(r.get(name) for r in per_run):
            out.append(Phase(name, per_run[middle].get(name, 0.0), "torch.profiler", "",
                             tuple(r.get(name, 0.0) for r in per_run)))
    held = sum(p.seconds for p in out)
    rests = [w - sum(r.values()) for w, r in zip(walls, per_run)]
    out.append(Phase(_TORCH_REST, max(0.0, walls[middle] - held), "timer", "", tuple(max(0.0, x) for x in rests)))
    return tuple(out), walls[middle]


def _torch_kinds(events) -> dict:
    """Seconds per kind of the outermost events on the thread that holds the most of them."""
    by_thread: dict = {}
    for e in events:
        if e.cpu_parent is None:
            kind = next((name for prefix, name in _TORCH_KINDS if e.name.startswith(prefix)), None)
            if kind is not None:
                spent = by_thread.setdefault(e.thread, {})
                spent[kind] = spent.get(kind, 0.0) + e.cpu_time_total / 1e6
    return max(by_thread.values(), key=lambda d: sum(d.values()), default={})


def dynamo_xla_meter() -> Meter:
    """torch_xla through dynamo: the call checks dynamo's guards and launches the compiled graph
    (torch_xla's clocks as for its lazy tensors; nothing of the model is traced in a steady call). In
    its training loop the backward launches AOTAutograd's compiled backward through autograd's engine,
    and the optimizer's step is PyTorch's AdamW on lazy tensors, traced at every step."""
    return xla_meter(rest={"": "dynamo's guards and the compiled graph's launch",
                           "forward and loss": "dynamo's guards, the compiled forward's launch, the loss's Python",
                           "backward": "autograd's engine and the compiled backward's launch",
                           "optimizer step": "Python and PyTorch's dispatcher (AdamW's lazy ops)"})


# jax.jit: jax.monitoring's compile clocks (trace, lowering, XLA compile), kept by one listener per
# process (jax.monitoring cannot remove one); a steady call runs none of them.
_JAX_SECONDS = {"/jax/core/compile/jaxpr_trace_duration": "tracing to a jaxpr",
                "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering to StableHLO",
                "/jax/core/compile/backend_compile_duration": "XLA compile"}
_JAX_CLOCK = dict.fromkeys(_JAX_SECONDS, 0.0)


def _jax_read() -> dict:
    if not getattr(_jax_read, "registered", False):
        import jax

        def on_duration(name, seconds, **_kw):
            if name in _JAX_CLOCK:
                _JAX_CLOCK[name] += seconds

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        _jax_read.registered = True
    return dict(_JAX_CLOCK)


def jax_meter() -> Meter:
    """jax.jit's step: `dispatch` (the call: in a first run jax's tracing, lowering and XLA compile by
    its own clocks, jax.monitoring's; then checking the arguments, the cache lookup and the launch)
    and `wait` (block_until_ready)."""
    _jax_read()

    def split(phase: str, seconds: float, change: dict) -> list:
        if phase != "dispatch":
            return []
        return [(name, change.get(key, 0.0), f"jax.monitoring {key.rsplit('/', 1)[-1]}")
                for key, name in _JAX_SECONDS.items()] + \
            [("the call: argument checks, cache lookup, launch", 0.0, "timer")]

    return Meter(_jax_read, split)
