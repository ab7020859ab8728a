"""Statistics of repeated runs split into parts: the median run, and a part's gap with its interval.

Within one set of runs the interval is a bootstrap's; across rounds, a 95% t-interval.
"""
from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence

RESAMPLES = 1000


def median_runs(totals: Sequence[float]) -> tuple[int, ...]:
    """The run(s) whose total is the median of `totals`: the middle one of an odd count, the two middle
    ones of an even count (whose mean is the median). Parts (kernels, blocks) timed in them add up to
    the median total exactly, where summing each part's own median does not (under load the two
    differed by 4-9% on GPT-2 base: issue 53)."""
    order = sorted(range(len(totals)), key=lambda i: (totals[i], i))
    n = len(order)
    if not n:
        return ()
    return (order[n // 2],) if n % 2 else (order[n // 2 - 1], order[n // 2])


def at(series: Sequence[float], picks: Sequence[int]) -> float:
    """A per-run series' value in the median run(s) `picks` (median_runs): their mean."""
    return sum(series[i] for i in picks) / len(picks) if picks else 0.0


def part_gaps(totals_a: Sequence[float], parts_a: dict, totals_b: Sequence[float], parts_b: dict, seed: int = 0,
              paired: bool = False, rounds: tuple = ()) -> dict:
    """{part: (B - A in the median runs, low, high)}: each part's difference between two sets of runs
    (each part a per-run series, in the order of that side's totals; a part missing on one side is 0
    there), with the 2.5-97.5 percentiles of the same statistic over bootstrap resamples of each
    side's runs, each side's on its own, whether the two were profiled one after the other or in turns
    (bench.profile.profile_turns says why not in pairs). The total's own difference is under the key None.
    `paired` (equal counts): the same run indices drawn for both sides; diff --bench does not use it
    (it flagged more blocks that differ by nothing: benchmarks/block_intervals.py shows it for why).
    `rounds` (each round's count of runs, the same on both sides: bench --rounds, each round a fresh
    worker in which both sides took turns): round_gaps instead, an interval across the rounds."""
    if len(rounds) > 1 and sum(rounds) == len(totals_a) == len(totals_b):
        return round_gaps(totals_a, parts_a, totals_b, parts_b, rounds)
    na, nb = len(totals_a), len(totals_b)
    paired = paired and na == nb
    series_a, series_b = _series(totals_a, parts_a, parts_b), _series(totals_b, parts_b, parts_a)
    if not na or not nb:
        return {}
    pa, pb = median_runs(totals_a), median_runs(totals_b)
    points = {k: at(series_b[k], pb) - at(series_a[k], pa) for k in series_a}
    rng = random.Random(seed)
    draws: dict = {k: [] for k in series_a}
    for _ in range(RESAMPLES):
        ia = [rng.randrange(na) for _ in range(na)]
        ib = ia if paired else [rng.randrange(nb) for _ in range(nb)]
        qa = [ia[i] for i in median_runs([totals_a[i] for i in ia])]
        qb = [ib[i] for i in median_runs([totals_b[i] for i in ib])]
        for k in series_a:
            draws[k].append(at(series_b[k], qb) - at(series_a[k], qa))
    lo, hi = int(0.025 * RESAMPLES), int(0.975 * RESAMPLES) - 1
    out = {}
    for k, d in draws.items():
        d.sort()
        out[k] = (points[k], d[lo], d[hi])
    return out


def _series(totals, parts: dict, others: dict) -> dict:
    """One side's per-run series of every part of either side (0 where it has none), its totals under None."""
    zero = (0.0,) * len(totals)
    return {**{k: parts.get(k, zero) for k in dict.fromkeys([*parts, *others])}, None: tuple(totals)}


def round_gaps(totals_a: Sequence[float], parts_a: dict, totals_b: Sequence[float], parts_b: dict,
               rounds: tuple) -> dict:
    """{part: (gap, low, high)} as part_gaps, from runs taken in rounds (`rounds`: each round's count, the
    runs kept in round order, both sides alike): in each round, B - A in that round's median runs (each
    side's own); the gap is their mean over rounds, with the 95% t-interval of that mean. A worker's
    placement (its process, threads and memory layout) moves all of its runs alike: GPT-2 base's
    LayerNorm blocks read 0.03 ms in one worker and 0.15 ms in the next, and intervals over one
    worker's runs did not overlap across three workers (issue 53); the rounds, not the runs, are the
    independent measurements (as runstats.rounds_ratio's)."""
    import math

    series_a, series_b = _series(totals_a, parts_a, parts_b), _series(totals_b, parts_b, parts_a)
    per: dict = {k: [] for k in series_a}
    start = 0
    for count in rounds:
        span = range(start, start + count)
        pa = [span[i] for i in median_runs([totals_a[i] for i in span])]
        pb = [span[i] for i in median_runs([totals_b[i] for i in span])]
        for k in series_a:
            per[k].append(at(series_b[k], pb) - at(series_a[k], pa))
        start += count
    n, out = len(rounds), {}
    for k, gaps in per.items():
        mean = sum(gaps) / n
        half = t975(n - 1) * math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1)) / math.sqrt(n)
        out[k] = (mean, mean - half, mean + half)
    return out


def median_ratio(a: Iterable[float], b: Iterable[float], seed: int = 0) -> tuple[float, float, float]:
    """(median(b) / median(a), low, high): the ratio of two sets of runs' medians, with the 2.5-97.5
    percentiles of that ratio over bootstrap resamples of each set on its own (runs of one worker,
    taken one set after the other: an interval over these runs, not across workers)."""
    a, b = list(a), list(b)
    point = statistics.median(b) / statistics.median(a)
    rng = random.Random(seed)
    draws = sorted(statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a)))
                   for _ in range(RESAMPLES))
    return point, draws[int(0.025 * RESAMPLES)], draws[int(0.975 * RESAMPLES) - 1]


def spans_zero(low: float, high: float) -> bool:
    """Whether an interval of a difference holds zero (and so no sign can be told)."""
    return low <= 0.0 <= high


# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom; past 30, the normal's.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.960


def rounds_ratio(ratios: Iterable[float]) -> tuple[float, float, float]:
    """(geometric mean, low, high) of ratios measured once per round, each round in a fresh process:
    the 95% t-interval of their logarithms. A round's placement (its process, core and memory layout)
    moves every sample of that round alike, so the rounds, not the samples, are the independent
    measurements; pooling the samples and resampling them one by one gave intervals that three reruns
    of one regress did not reproduce (1.046-1.081, 0.975-1.008, 1.017-1.044: issue 53)."""
    import math

    mean, low, high = rounds_mean([math.log(r) for r in ratios])
    return math.exp(mean), math.exp(low), math.exp(high)


def rounds_mean(values: Iterable[float]) -> tuple[float, float, float]:
    """(mean, low, high) of figures measured once per round: the 95% t-interval of their mean; with
    one round, no interval (-inf, inf)."""
    import math

    values = list(values)
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, -math.inf, math.inf
    half = t975(n - 1) * math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1)) / math.sqrt(n)
    return mean, mean - half, mean + half


def summed_runs(a: tuple, b: tuple) -> tuple:
    """Two per-run series added run by run (an empty one adds nothing)."""
    if not a or not b:
        return tuple(a or b)
    return tuple(x + y for x, y in zip(a, b))


def deciles(values: Sequence[float]) -> tuple[float, float]:
    """(p10, p90) of one or more values, interpolated between the values themselves (statistics.
    quantiles' "inclusive" method, numpy.percentile's default): never outside the smallest and largest.
    The "exclusive" default extrapolates under 9 values: of a block's host seconds over 2 runs it gave
    a p10 below the smallest run, even below zero (issue 76's CI, test_host). Raises ValueError if empty."""
    if not values:
        raise ValueError("deciles of no values")
    if len(values) == 1:
        return values[0], values[0]
    q = statistics.quantiles(values, n=10, method="inclusive")
    return q[0], q[-1]


def spread(per_run: Iterable[float]) -> tuple[float, float] | None:
    """(p10, p90) of a figure's per-run values (seconds), as bench's spreads are (deciles); None under 2 runs."""
    values = list(per_run)
    return deciles(values) if len(values) >= 2 else None


def unsteady(seconds: float, per_run: Iterable[float]) -> bool:
    """Whether a figure's p10-p90 spread across its runs exceeds the figure itself: a module's host
    time that moved this much from run to run (4.27 ms in one bench, 0.24 ms in the next: issue 75)
    does not hold, whatever its median run says."""
    got = spread(per_run)
    return got is not None and got[1] - got[0] > seconds
