"""What a version comparison measures of one program: a `Metric`, in one table regress and bisect read.

A `Metric` (steady time, memory plan peak, kernels, fusion kinds) measures a file under a stack,
compares two values with their noise and shows one; regress's thresholds and bisect read the same
table.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..common.errors import StackwarsError


@dataclass(frozen=True)
class Change:
    """B against A: a ratio (B/A) with its 95% interval (`low`, `high`; equal where the measure is exact),
    or for counts the difference B - A (`ratio` False)."""

    value: float
    low: float
    high: float
    ratio: bool = True


def _median(samples) -> float:
    import statistics

    return statistics.median(samples)


@dataclass(frozen=True)
class Metric:
    """One measure of a program. measure(path, stack, progress): the value under that stack's XLA;
    change(a, b): B against A; plain(value): as JSON holds it; show(plain value): in words. A change is worse past a
    threshold when its interval lies wholly beyond it (a ratio over 1 + t, a count over +t), and
    differs when it lies wholly beyond it either way."""

    name: str
    measure: Callable[[Path, object, Callable | None], object]
    change: Callable[[object, object], Change]
    show: Callable[[object], str]  # of the plain value
    plain: Callable[[object], object] = lambda v: v  # a measured value as JSON holds it (steady: the median)

    @staticmethod
    def worse(c: Change, threshold: float) -> bool:
        return c.low > 1 + threshold if c.ratio else c.low > threshold

    @staticmethod
    def differs(c: Change, threshold: float) -> bool:
        if c.ratio:
            return c.low > 1 + threshold or c.high < 1 / (1 + threshold)
        return abs(c.value) > threshold


def _kernels_of(path, stack, progress):
    from ..bench.kernels import kernels_of_files

    (k,) = kernels_of_files([path], progress=progress, stack=stack)
    if k.error:
        raise StackwarsError(k.error)
    return k


def _fusion_kinds(path, stack, progress) -> tuple:
    from ..bench.kernels import fusion_kind

    return tuple(sorted(fusion_kind(x.name) for x in _kernels_of(path, stack, progress).kernels
                        if x.opcode == "fusion"))


def _peak(path, stack, progress) -> int:
    from ..bench.planning import plan_files

    plan = plan_files([path], progress=progress, stack=stack).plans[0]
    if plan.error:
        raise StackwarsError(plan.error)
    return plan.peak_bytes


def _steady_samples(path, stack, progress) -> tuple:
    from ..bench.run import bench_files

    (_, row), = bench_files([path], with_peaks=False, progress=progress, stack=stack).rows
    if not row.ok:
        raise StackwarsError(row.error)
    return tuple(row.timing.samples)


def _samples_change(a, b) -> Change:
    from ..bench.compare import ratio_interval

    return Change(*ratio_interval(a, b))


def _exact_ratio(a, b) -> Change:
    r = b / a if a else float("inf")
    return Change(r, r, r)


def _count_change(a, b) -> Change:
    return Change(b - a, b - a, b - a, ratio=False)


def _kinds_change(a, b) -> Change:
    n = sum((Counter(a) - Counter(b)).values()) + sum((Counter(b) - Counter(a)).values())  # kinds moved, either way
    return Change(n, n, n, ratio=False)


def _kinds_shown(value) -> str:
    return f"{len(value)} fusions: " + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(Counter(value).items()))


STEADY = Metric("steady", _steady_samples, _samples_change, lambda v: f"{v * 1e6:.1f} us (median)", _median)
MEMORY = Metric("memory", _peak, _exact_ratio, lambda v: f"{v:,} bytes peak")
KERNELS = Metric("kernels", lambda p, s, progress: len(_kernels_of(p, s, progress).kernels), _count_change,
                 lambda v: f"{v} kernels")
FUSIONS = Metric("fusions", _fusion_kinds, _kinds_change, _kinds_shown, list)
METRICS = {m.name: m for m in (STEADY, MEMORY, KERNELS, FUSIONS)}


def metric(name: str) -> Metric:
    """The metric called `name`, or a one-line error naming the others."""
    if name not in METRICS:
        raise StackwarsError(f"--metric {name!r}: not one of {', '.join(METRICS)}", fix="e.g. --metric kernels")
    return METRICS[name]
