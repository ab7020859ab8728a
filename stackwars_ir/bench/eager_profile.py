"""PyTorch eager's steady runs under torch.profiler, each op's time traced to its module and phase.

The module and phase are those the op ran in; the result is a Profile the diff splits by block.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .host import ModuleHooks
from .xla_profile import KernelTime, Profile, runs_profile, union_seconds

if TYPE_CHECKING:
    import torch
    from torch.autograd.profiler_util import FunctionEvent

_RANGE = "stackwars::"  # the record_function range each module's forward runs in
_BACKWARD = "autograd::engine::evaluate_function: "
_UPDATE = "Optimizer.step"


class ModuleRanges(ModuleHooks):
    """Wraps each module's forward of `model` in a profiler range named after its module path
    (forward hooks), so every op torch.profiler records sits inside the ranges of the modules that
    ran it; a context manager."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__(model)
        self.open = []

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        while self.open:
            self.open.pop().__exit__(None, None, None)

    def _pre(self, mod, args):
        from torch.autograd.profiler import record_function

        r = record_function(_RANGE + self.paths[mod])
        r.__enter__()
        self.open.append(r)

    def _post(self, mod, args, out):
        if self.open:
            self.open.pop().__exit__(None, None, None)


def profile_eager_runs(run: Callable[[], object], model: torch.nn.Module, runs: int, train: bool,
                       note: str = "") -> Profile:
    """`runs` calls of `run` (eager PyTorch on the CPU) under torch.profiler, inside ModuleRanges of
    `model`: a bench.profile.Profile whose kernels are the ops that ran, per (op, module path, phase),
    with their self time summed per run (median over runs). A forward op's module is the innermost
    range around it; a backward op's is the module of the forward op whose autograd node runs it
    (matched by sequence number); the optimizer's ops are the update (no module and no phase, as
    the captures' update ops). In a forward pass (`train` False) the phase is "", as a forward
    capture's blocks have it."""
    from torch.profiler import ProfilerActivity, profile

    per_run, walls, busy = [], [], []
    with ModuleRanges(model):
        for _ in range(runs):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                t0 = time.perf_counter()
                run()
                walls.append(time.perf_counter() - t0)
            ops, spans = run_ops(prof.events(), train)
            per_run.append(ops)
            busy.append(union_seconds(spans))
    return ops_profile(per_run, walls, busy, note or (
        "torch eager, profiled by torch.profiler: each op's self time (its own, not its callees'), "
        "traced to the module whose forward ran it"))


def ops_profile(per_run: list, walls: list, busy: list, note: str) -> Profile:
    """The Profile of profiled runs, each {(op, module path, phase): [seconds, calls]} with its wall
    and busy time: each op's time in the median run(s) by total (bench.profile.runs_profile), so the
    ops add up to the median run's total; zero in a run it did not run in."""

    keys = sorted({k for r in per_run for k in r}, key=lambda k: (k[2], k[1], k[0]))

    ops = [KernelTime(f"{op} @ {path or '(no module)'}", op, path, phase, 0.0, 0) for op, path, phase in keys]
    return runs_profile(per_run, walls, busy, 0.0, ops, note, keys)


def run_ops(events: Iterable[FunctionEvent], train: bool) -> tuple[dict, list]:
    """{(op, module path, phase): [seconds, calls]} of one profiled run, and the top-level ops' spans
    (nanoseconds) for the time some op ran."""
    forward_phase = "forward" if train else ""
    seq_path: dict = {}
    out: dict = {}
    spans = []
    for e in events:  # in start order: a forward op comes before the backward its node runs
        if e.name.startswith((_RANGE, _BACKWARD, _UPDATE)):
            continue
        path, phase, node = None, forward_phase, None
        p = e.cpu_parent
        while p is not None:
            if p.name.startswith(_RANGE) and path is None and node is None:
                path = p.name[len(_RANGE):]
            elif p.name.startswith(_BACKWARD):
                node = p
            elif p.name.startswith(_UPDATE):
                phase = "update"
            p = p.cpu_parent
        if node is not None:
            phase, path = "backward", seq_path.get(node.sequence_nr, "")
        elif phase == "update":  # as the captures' update ops: no module, no phase
            path, phase = "", ""
        else:
            path = path or ""
            if e.sequence_nr >= 0:
                seq_path.setdefault(e.sequence_nr, path)
        t = out.setdefault((e.name, path, phase), [0.0, 0])
        t[0] += e.self_cpu_time_total / 1e6
        t[1] += 1
        parent = e.cpu_parent
        if parent is None or parent.name.startswith((_RANGE, _BACKWARD, _UPDATE)) or \
                parent.name.split(": ")[-1] == e.name:
            r = e.time_range
            spans.append((int(r.start * 1e3), int(r.end * 1e3)))
    return out, spans
