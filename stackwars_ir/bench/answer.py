"""One answer to "why is B slower than A": the native step gap split into parts, with intervals.

The parts: the compiled program's, the host's and the rest, each with its interval.
"""
from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from ..common.errors import StackwarsError
from ..common.files import read_sidecar
from ..common.routes import ROUTES
from ..common.runstats import RESAMPLES, rounds_mean, rounds_ratio, spans_zero
from .compare import ratio_interval
from .result import BenchReport

WAIT = "wait"  # the top-level host phase in which the host waits for the device (bench.host)
# bench's baseline names -> the kind of the native row each times (bench.native)
NATIVE_KINDS = {"jax": "jax.jit", "jax_donate": "jax.jit", "eager": "torch eager", "torch_xla": "torch_xla lazy",
                "torchax": "torchax jit", "inductor": "torch.compile", "torch_xla_dynamo": "torch_xla dynamo"}


def baseline_name(kind: str) -> str:
    """A native row's kind as the baseline name bench takes (`jax.jit` -> `jax`, not jax_donate); any other as given."""
    return next((name for name, k in NATIVE_KINDS.items() if k == kind), kind)


def native_kind(name: str) -> str:
    """A baseline's row kind (`jax` -> `jax.jit`); any other name as given (a row's kind or name)."""
    return NATIVE_KINDS.get(name, name)


@dataclass(frozen=True)
class Part:
    """One part of B's step minus A's, in seconds: the point figure and its 95% interval."""

    name: str  # "step" | "program" | "host" | "rest"
    a_s: float | None  # A's figure (None for the rest, which is computed)
    b_s: float | None
    gap_s: float  # B - A
    low_s: float
    high_s: float
    how: str  # what measured it, in words

    @property
    def within_noise(self) -> bool:
        return spans_zero(self.low_s, self.high_s)

    def as_json(self) -> dict:
        return {"name": self.name, "a_s": self.a_s, "b_s": self.b_s, "gap_s": self.gap_s,
                "interval_95_s": [self.low_s, self.high_s], "within_noise": self.within_noise, "how": self.how}


@dataclass(frozen=True)
class Answer:
    """B's native steady step against A's (`ratio`, B/A, with its 95% interval), and the gap between
    them split into parts that add up to it: the compiled programs' own gap on one XLA runtime
    (`program`), the host's work per step (`host`: every phase of the step but the wait for the
    device), and the `rest` (gap - program - host: mostly how long each native runtime waits on the
    device beyond running the same program; each part's interval is the rest's too). A part that
    could not be measured is None, with why and the command that would measure it in `missing`.

    Intervals: across rounds (each round one bench, in fresh workers) where `rounds` >= 2, the 95%
    t-interval of the per-round figures (a ratio: of their logarithms); with one round, a bootstrap
    over that round's runs (`rounds` 1: weaker, said so)."""

    a: str  # A's native row, as bench names it ("jax.jit (native)")
    b: str
    batch: int | None
    rounds: int
    ratio: float
    low: float
    high: float
    step: Part
    program: Part | None
    host: Part | None
    rest: Part | None
    programs: tuple[str, str] | None  # the two StableHLO rows compared on one runtime (A's, B's)
    host_phases: tuple[tuple[str, float], ...] = ()  # B's, then A's, host phases: (row: phase, median seconds)
    per_round: tuple = ()  # each round's figures (dicts, seconds): steps, programs, hosts
    missing: tuple[str, ...] = ()
    source: str = ""  # the command or files the figures come from
    machine: str = ""

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b, "batch": self.batch, "rounds": self.rounds, "ratio": self.ratio,
                "interval_95": [self.low, self.high],
                "parts": [p.as_json() for p in (self.step, self.program, self.host, self.rest) if p is not None],
                "programs": list(self.programs) if self.programs else None,
                "host_phases": [list(p) for p in self.host_phases], "per_round": list(self.per_round),
                "missing": list(self.missing),
                "source": self.source, "machine": self.machine}


def _row(report, kind: str, batch):
    """The native row of `kind` (its kind, `jax.jit`, or its name) at `batch`, or None."""
    for b, e in report.rows:
        if b == batch and e.kind != "stablehlo" and e.ok and e.timing and kind in (e.kind, e.name):
            return e
    return None


def _program(report, native, batch):
    """The StableHLO row of the capture whose route runs as `native` (jax.jit: jax.mlir), or None."""
    stems = [r.stem() for r in ROUTES.values() if r.native and r.native == native.kind]
    for b, e in report.rows:
        if b == batch and e.kind == "stablehlo" and e.ok and e.timing and \
                any(e.name == s or e.name.startswith(f"{s}-") for s in stems):
            return e
    return None


def _host(e) -> tuple[float, tuple[float, ...], tuple[tuple[str, float], ...]] | None:
    """A native row's host work per step: its median phased run's top-level phases but the wait,
    summed; each phased run's sum; and the phases, named."""
    h = e.host
    if h is None or not h.phases:
        return None
    top = [p for p in h.phases if not p.parent and p.name != WAIT]
    if not top:
        return None
    runs = min((len(p.per_run) for p in top), default=0)
    per_run = tuple(sum(p.per_run[i] for p in top) for i in range(runs)) if runs else ()
    total = statistics.median(per_run) if per_run else sum(p.seconds for p in top)
    return total, per_run, tuple((f"{e.name}: {p.name}", statistics.median(p.per_run) if p.per_run else p.seconds)
                                 for p in top)


def _why_fix(report, a: str, b: str) -> str:
    """The command that benches what an answer needs and answers: `why MODEL` with the model, size and
    batch of the bench's own captures (their sidecars), A and B by baseline name; the bench command in
    words where no capture names its model."""
    from pathlib import Path

    a, b = baseline_name(a), baseline_name(b)
    for _, e in report.rows:
        if e.kind != "stablehlo":
            continue
        try:
            car = read_sidecar(Path(e.label))
        except (StackwarsError, OSError, ValueError):
            continue
        if car is not None and car.model:
            shape, out = car.model_run(e.label)
            return " ".join(["stackwars-ir why", car.model, "--size", car.size, *shape, "--a", a, "--b", b, "--out",
                             str(out), "(it benches both runtimes with --host, 3 rounds, reusing these captures, "
                             "and answers)"])
    return (f"bench the model with both runtimes and their host phases: stackwars-ir why MODEL --a {a} --b {b}, or "
            f"stackwars-ir bench MODEL --baselines {a},{b} --host --json FILE")


def answer(reports: Iterable[BenchReport], a: str = "jax.jit", b: str = "torch_xla lazy", batch: int | None = None,
           source: str = "") -> Answer:
    """`reports` (bench.BenchReport, one per round: bench MODEL --baselines A,B --host) read as one answer.
    `a`, `b`: native rows by kind or name. Raises StackwarsError naming what a report lacks."""
    reports = list(reports)
    if not reports:
        raise StackwarsError("no bench report to read", fix="give a bench --json file or a model")
    first = reports[0]
    batches = [bb for bb, e in first.rows if e.kind != "stablehlo"]
    batch = batch if batch is not None else (batches[0] if batches else None)
    rows = []
    for r in reports:
        ra, rb = _row(r, a, batch), _row(r, b, batch)
        if ra is None or rb is None:
            have = sorted({e.kind for _, e in r.rows if e.kind != "stablehlo" and e.ok})
            raise StackwarsError(f"the bench has no measured native row {a if ra is None else b!r}"
                                 f"{f' at batch {batch}' if batch is not None else ''} (it has: "
                                 f"{', '.join(have) or 'none'})",
                                 fix=_why_fix(r, a, b))
        rows.append((r, ra, rb, _program(r, ra, batch), _program(r, rb, batch)))
    missing = []
    has_programs = all(pa is not None and pb is not None for _, _, _, pa, pb in rows)
    if not has_programs:
        missing.append("the compiled programs on one XLA runtime (bench MODEL captures and times them beside the "
                       "native rows)")
    hosts = [(_host(ra), _host(rb)) for _, ra, rb, _, _ in rows]
    has_host = all(ha is not None and hb is not None for ha, hb in hosts)
    if not has_host:
        missing.append("the host's work per step (add --host to bench)")
    _, ra0, rb0, pa0, pb0 = rows[0]
    if len(reports) >= 2:
        ratio, low, high = rounds_ratio([_steady(rb) / _steady(ra) for _, ra, rb, _, _ in rows])
        parts = _across_rounds(rows, hosts, has_programs, has_host)
    else:
        ratio, low, high = ratio_interval(ra0.timing.samples, rb0.timing.samples)
        parts = _within_round(rows[0], hosts[0], has_programs, has_host)
    def mean(values):
        return sum(values) / len(values)

    step = Part("step", mean([_steady(ra) for _, ra, _, _, _ in rows]),
                mean([_steady(rb) for _, _, rb, _, _ in rows]), *parts["step"],
                f"steady step of {rb0.name} against {ra0.name}")
    program = Part("program", mean([_steady(pa) for _, _, _, pa, _ in rows]),
                   mean([_steady(pb) for _, _, _, _, pb in rows]), *parts["program"],
                   f"{pb0.name}.mlir against {pa0.name}.mlir, both on one XLA runtime") if has_programs else None
    host = Part("host", mean([ha[0] for ha, _ in hosts]), mean([hb[0] for _, hb in hosts]), *parts["host"],
                "each runtime's host phases per step (all but the wait for the device)") if has_host else None
    rest = Part("rest", None, None, *parts["rest"],
                "the gap less the program's and the host's parts: chiefly each runtime's wait on the device beyond "
                "running the same program") if has_host and has_programs else None
    phases = (hosts[0][1][2] + hosts[0][0][2]) if has_host else ()
    machine = first.machine.get("processor") or ""
    if first.machine.get("cpus"):
        machine += f" ({first.machine['cpus']} cpus)"
    per_round = tuple({"step_a_s": _steady(ra), "step_b_s": _steady(rb),
                       "program_a_s": _steady(pa) if pa else None, "program_b_s": _steady(pb) if pb else None,
                       "host_a_s": ha[0] if ha else None, "host_b_s": hb[0] if hb else None}
                      for (_, ra, rb, pa, pb), (ha, hb) in zip(rows, hosts))
    return Answer(ra0.name, rb0.name, batch, len(reports), ratio, low, high, step, program, host, rest,
                  (pa0.name, pb0.name) if has_programs else None, phases, per_round, tuple(missing), source,
                  machine.strip())


def _steady(e) -> float:
    """A row's steady step: the median of its steady samples (the figure every part's gap is taken from)."""
    return statistics.median(e.timing.samples) if e.timing.samples else e.timing.steady


def _across_rounds(rows, hosts, has_programs: bool, has_host: bool) -> dict:
    """Each part's per-round gap, then the t-interval of its mean across rounds: {part: (gap, low, high)}."""
    step = [_steady(rb) - _steady(ra) for _, ra, rb, _, _ in rows]
    program = [_steady(pb) - _steady(pa) for _, _, _, pa, pb in rows] if has_programs else None
    host = [hb[0] - ha[0] for ha, hb in hosts] if has_host else None
    out = {"step": rounds_mean(step)}
    out["program"] = rounds_mean(program) if program else (math.nan,) * 3
    out["host"] = rounds_mean(host) if host else (math.nan,) * 3
    out["rest"] = rounds_mean([s - p - h for s, p, h in zip(step, program, host)]) if program and host \
        else (math.nan,) * 3
    return out


def _within_round(row, host, has_programs: bool, has_host: bool, seed: int = 0) -> dict:
    """One round: each part's gap of medians and its bootstrap interval over the round's runs (steady
    samples, phased runs), every sample set resampled on its own in each draw."""
    _, ra, rb, pa, pb = row
    sets = {"sa": ra.timing.samples, "sb": rb.timing.samples}
    if has_programs:
        sets |= {"pa": pa.timing.samples, "pb": pb.timing.samples}
    if has_host:
        sets |= {"ha": host[0][1] or (host[0][0],), "hb": host[1][1] or (host[1][0],)}
    med = statistics.median

    def parts(m: dict) -> dict:
        step = m["sb"] - m["sa"]
        program = m["pb"] - m["pa"] if has_programs else math.nan
        h = m["hb"] - m["ha"] if has_host else math.nan
        return {"step": step, "program": program, "host": h, "rest": step - program - h}

    point = parts({k: med(v) for k, v in sets.items()})
    rng = random.Random(seed)
    draws = [parts({k: med(rng.choices(v, k=len(v))) for k, v in sets.items()}) for _ in range(RESAMPLES)]
    out = {}
    for name, value in point.items():
        if math.isnan(value):
            out[name] = (math.nan,) * 3
            continue
        xs = sorted(d[name] for d in draws)
        out[name] = (value, xs[int(0.025 * RESAMPLES)], xs[int(0.975 * RESAMPLES) - 1])
    return out
