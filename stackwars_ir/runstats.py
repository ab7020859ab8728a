"""Statistics of repeated runs split into parts: the median run, and a part's difference with its bootstrap interval."""
from __future__ import annotations

import random

RESAMPLES = 1000


def median_runs(totals) -> tuple[int, ...]:
    """The run(s) whose total is the median of `totals`: the middle one of an odd count, the two middle
    ones of an even count (whose mean is the median). Parts (kernels, blocks) timed in them add up to
    the median total exactly, where summing each part's own median does not (under load the two
    differed by 4-9% on GPT-2 base: issue 53)."""
    order = sorted(range(len(totals)), key=lambda i: (totals[i], i))
    n = len(order)
    if not n:
        return ()
    return (order[n // 2],) if n % 2 else (order[n // 2 - 1], order[n // 2])


def at(series, picks) -> float:
    """A per-run series' value in the median run(s) `picks` (median_runs): their mean."""
    return sum(series[i] for i in picks) / len(picks) if picks else 0.0


def part_gaps(totals_a, parts_a: dict, totals_b, parts_b: dict, seed: int = 0) -> dict:
    """{part: (B - A in the median runs, low, high)}: each part's difference between two sets of runs
    (each part a per-run series, in the order of that side's totals; a part missing on one side is 0
    there), with the 2.5-97.5 percentiles of the same statistic over bootstrap resamples of each
    side's runs (the two sides profiled one after the other: resampled independently). The total's
    own difference is under the key None."""
    na, nb = len(totals_a), len(totals_b)
    keys = list(dict.fromkeys([*parts_a, *parts_b]))
    zero_a, zero_b = (0.0,) * na, (0.0,) * nb
    series_a = {k: parts_a.get(k, zero_a) for k in keys}
    series_b = {k: parts_b.get(k, zero_b) for k in keys}
    series_a[None], series_b[None] = tuple(totals_a), tuple(totals_b)
    if not na or not nb:
        return {}
    pa, pb = median_runs(totals_a), median_runs(totals_b)
    points = {k: at(series_b[k], pb) - at(series_a[k], pa) for k in series_a}
    rng = random.Random(seed)
    draws: dict = {k: [] for k in series_a}
    for _ in range(RESAMPLES):
        ia = [rng.randrange(na) for _ in range(na)]
        ib = [rng.randrange(nb) for _ in range(nb)]
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


def spans_zero(low: float, high: float) -> bool:
    """Whether an interval of a difference holds zero (and so no sign can be told)."""
    return low <= 0.0 <= high
