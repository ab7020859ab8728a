"""Predict a step on a device that is not here (a TPU v6e) from host phases and a device estimate.

The host phases are measured here, the device's part is its compile-only estimate, and the
assumptions are stated.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .host import HostPhases, Phase

# How long a TPU host takes for the host work this machine's CPU does: an assumption, not a measurement
# (the study names no host CPU; a v6e VM's cores are of a recent server generation, this host's an AMD
# EPYC under a hypervisor): between half and the same time.
HOST_FACTOR = (0.5, 1.0)


@dataclass(frozen=True)
class Cell:
    """One predicted cell of a table of first, second and steady runs: its range (seconds) under the
    stated model, and the parts it is built from (name, seconds at a factor of 1), so a reader sees
    where it comes from."""

    workload: str
    framework: str  # "jax" | "pytorch"
    run: str  # "first" | "second" | "steady"
    low_s: float
    high_s: float
    parts: tuple  # (name, seconds): host parts as measured here, device parts as estimated for the target

    def as_json(self) -> dict:
        return {"workload": self.workload, "framework": self.framework, "run": self.run, "low_s": self.low_s,
                "high_s": self.high_s, "parts": [list(p) for p in self.parts]}

    @classmethod
    def from_json(cls, d: dict) -> "Cell":
        return cls(d["workload"], d["framework"], d["run"], d["low_s"], d["high_s"], tuple(tuple(p) for p in d["parts"]))


def host_seconds(phases: Sequence[Phase], exclude: tuple[str, ...] = ("wait",)) -> tuple:
    """(host seconds, parts) of a run's phases (bench.host.Phase): every timer phase but the waits,
    less the device's execution and XLA's compile where the runtime's own clocks put them inside
    (they are the device's and the compiler's, predicted apart)."""
    parts, total = [], 0.0
    for p in phases:
        if p.parent or p.name in exclude:
            continue
        inside = sum(q.seconds for q in phases if q.parent == p.name and
                     ("ExecuteTime" in q.source or "Compile" in q.source or "backend_compile" in q.source))
        parts.append((p.name, p.seconds - inside))
        total += p.seconds - inside
    return total, tuple(parts)


def predict(workload: str, framework: str, host: HostPhases, device_s: float, compile_s: float, compiles: dict,
            factor: tuple = HOST_FACTOR) -> tuple:
    """The three predicted cells of one framework's row: host phases measured here (bench.host.
    HostPhases, its first and second runs too), the target's run estimate `device_s` and its compile
    wall time here `compile_s` (a compile-only client: the TPU compiler runs on the host), `compiles`
    the graphs compiled in the first and second runs ({"first": n, "second": n}).

    Steady: the host's part (scaled by `factor`) and the device's, from overlapped (the host traces
    or dispatches the next step while the device runs this one: max) to serial (each step waits for
    its result: sum). First and second runs: serial, their own host phases scaled, plus the target's
    compile for each graph compiled (its compile here taken as the target host's, scaled alike), plus
    the device's run."""
    lo, hi = factor
    host_s, parts = host_seconds(host.phases)
    steady = Cell(workload, framework, "steady", max(host_s * lo, device_s), host_s * hi + device_s,
                  parts + (("device (estimate)", device_s),))
    cells = [steady]
    for run, phases in (("first", host.first), ("second", host.second)):
        h, p = host_seconds(phases)
        n = compiles.get(run, 0)
        c = compile_s * n
        cells.append(Cell(workload, framework, run, (h + c) * lo + device_s, (h + c) * hi + device_s,
                          p + ((f"compile for the target x{n}", c),) * bool(n) + (("device (estimate)", device_s),)))
    first, second, steady = cells[1], cells[2], cells[0]
    return first, second, steady


UNSYNCED = "pytorch, not synced"  # the framework of predict_unsynced's cells


def predict_unsynced(workload: str, host: HostPhases, factor: tuple = HOST_FACTOR) -> tuple:
    """The PyTorch row had the study timed torch_xla's Python step without its sync (no
    `torch_xla.sync()`, no wait: the lazy graph is traced, never compiled nor run): each run's
    tracing phase alone, scaled by `factor`. A protocol to test against the study's cells, not a
    claim that the study used it."""
    lo, hi = factor
    out = []
    for run, phases in (("first", host.first), ("second", host.second), ("steady", host.phases)):
        traced = [p for p in phases if not p.parent and p.name not in ("sync", "wait")]
        inside = sum(q.seconds for p in traced for q in phases if q.parent == p.name and
                     ("ExecuteTime" in q.source or "Compile" in q.source))
        h = sum(p.seconds for p in traced) - inside
        out.append(Cell(workload, UNSYNCED, run, h * lo, h * hi, tuple((p.name, p.seconds) for p in traced)))
    return tuple(out)
