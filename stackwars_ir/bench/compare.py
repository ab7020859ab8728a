"""Comparison: which executable is faster, by how much, and how sure, from the timed samples.

How sure: a bootstrap interval over resamples of both sides' samples.
"""
from __future__ import annotations

import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from ..common.runstats import RESAMPLES
from .executable import Executable

SPREAD_TARGET = 0.1  # (p90 - p10) / median above this: the measurement is noisy


@dataclass(frozen=True)
class Verdict:
    """`faster` against `slower`: the ratio of their steady-state medians with a 95% bootstrap interval;
    `tie` when the interval spans 1 (the two cannot be told apart at this noise)."""

    batch: int | None
    faster: str
    slower: str
    ratio: float  # slower median / faster median, >= 1
    low: float
    high: float
    paired: bool = False  # timed round-robin in one process, resampled round by round
    withheld: str = ""  # why no verdict is given: too noisy to call

    @property
    def tie(self) -> bool:
        return self.low <= 1.0

    def sentence(self) -> str:
        at = f" (batch {self.batch})" if self.batch is not None else ""
        if self.withheld:
            return f"{self.faster} and {self.slower}{at}: {self.withheld}"
        if self.tie:
            return (f"{self.faster} and {self.slower}{at}: indistinguishable (ratio {self.ratio:.2f}, 95% interval "
                    f"{self.low:.2f}-{self.high:.2f} spans 1)")
        d = decimals(self.low, self.high)
        return (f"{self.faster} ran {self.ratio:.{d}f}x as fast as {self.slower}{at} "
                f"(95% interval {self.low:.{d}f}-{self.high:.{d}f})")

    def as_json(self) -> dict:
        return {"batch": self.batch, "faster": self.faster, "slower": self.slower, "ratio": self.ratio,
                "interval_95": [self.low, self.high], "indistinguishable": self.tie and not self.withheld,
                "paired": self.paired, "withheld": self.withheld or None}

    @classmethod
    def from_json(cls, d: dict) -> "Verdict":
        return cls(d.get("batch"), d["faster"], d["slower"], float(d["ratio"]), *map(float, d["interval_95"]),
                   bool(d.get("paired")), d.get("withheld") or "")


def decimals(low: float, high: float) -> int:
    """The decimals an interval of ratios is printed with: two, or as many more (up to four) as keep
    an interval that excludes 1 from printing as if it reached it (1.004-1.02 as 1.004-1.020, not 1.00-1.02)."""
    for d in (2, 3, 4):
        if not ((low > 1 and round(low, d) <= 1) or (high < 1 and round(high, d) >= 1)):
            return d
    return 4


def ratio_interval(fast: tuple, slow: tuple, seed: int = 0, paired: bool = False) -> tuple[float, float, float]:
    """median(slow) / median(fast) and its 2.5-97.5 percentile over bootstrap resamples of both;
    `paired` (samples taken round-robin, the i-th of each in one round): rounds are resampled whole,
    so a stretch of the run when the machine was slow weighs on both sides alike."""
    rng = random.Random(seed)
    point = statistics.median(slow) / statistics.median(fast)
    if paired and len(fast) == len(slow):
        n = len(fast)
        picks = ([rng.randrange(n) for _ in range(n)] for _ in range(RESAMPLES))
        ratios = sorted(statistics.median([slow[i] for i in p]) / statistics.median([fast[i] for i in p])
                        for p in picks)
    else:
        ratios = sorted(statistics.median(rng.choices(slow, k=len(slow))) /
                        statistics.median(rng.choices(fast, k=len(fast))) for _ in range(RESAMPLES))
    return point, ratios[int(0.025 * RESAMPLES)], ratios[int(0.975 * RESAMPLES) - 1]


def verdicts(rows: Iterable[tuple[int | None, Executable]]) -> list[Verdict]:
    """Every pair of measured rows that a user compares: rows of one batch size, each against each
    other (not only against the fastest: a jax-vs-torchax diff --bench needs its own pair). A row of
    unknown batch (a file without a sidecar, batch None) is compared with the rows of every batch, as
    the rows it was timed beside."""
    by_batch: dict = {}
    loose = []
    for batch, e in rows:
        if e.ok and e.timing and len(e.timing.samples) >= 2:
            (loose if batch is None else by_batch.setdefault(batch, [])).append(e)
    unknown = {id(e) for e in loose}
    groups = [(b, execs + loose) for b, execs in by_batch.items()] if by_batch else [(None, loose)]
    out, done = [], set()
    for batch, execs in groups:
        execs = sorted(execs, key=lambda e: e.timing.steady)
        for i, fast in enumerate(execs):
            for slow in execs[i + 1:]:
                if (id(fast), id(slow)) in done:
                    continue  # two rows of unknown batch: compared once, not once per batch
                done.add((id(fast), id(slow)))
                paired = fast.timing.interleaved > 1 and slow.timing.interleaved > 1 and \
                    len(fast.timing.samples) == len(slow.timing.samples)
                ratio, low, high = ratio_interval(fast.timing.samples, slow.timing.samples, paired=paired)
                known = id(fast) not in unknown and id(slow) not in unknown
                out.append(Verdict(batch if known else None, fast.name, slow.name, ratio, low, high, paired,
                                   _too_noisy(fast, slow, paired, low, high)))
    return out


def _too_noisy(a, b, paired: bool, low: float = 1.0, high: float = 1.0) -> str:
    """Why two rows timed one after the other are too noisy to compare, or '': their spread past
    SPREAD_TARGET means the machine's load moved while they ran, and it moved between them too.
    Rows timed round-robin share that load run by run, and the paired interval carries what is left.
    A gap larger than the load could make is called all the same: the load may have moved each row's
    level by about its spread, so the verdict stands when the interval [low, high] (slow over fast),
    widened by that factor both ways, still excludes 1 (a 13x gap under a 40% spread, issue 75)."""
    worst = max(a.timing.spread, b.timing.spread)
    if paired or worst <= SPREAD_TARGET:
        return ""
    slack = 1.0 + worst
    if low / slack > 1.0 or high * slack < 1.0:
        return ""
    return (f"too noisy to call: spread {worst:.0%} (over {SPREAD_TARGET:.0%}) and timed one after the other; rerun "
            "on an idle machine or pin a core (taskset -c 1 stackwars-ir bench ...)")


MICRO_S = 100e-6  # a steady run shorter than this: the clock's and the scheduler's jitter alone move it by tens of %


def noisy(rows: Iterable[tuple[int | None, Executable]]) -> list[str]:
    """A warning for each row whose spread exceeds the target, with what to do about it. The cause is
    not measured, so it is said as what may be: other programs on the machine, or, for a run under
    MICRO_S, the jitter of the clock and the scheduler (bugs/03's 12 us program: spreads of 69-806%)."""
    out = []
    for b, e in rows:
        if not (e.ok and e.timing and e.timing.spread > SPREAD_TARGET):
            continue
        head = f"{e.name}{f' (batch {b})' if b is not None else ''}: spread {e.timing.spread:.0%} exceeds {SPREAD_TARGET:.0%}"
        if e.timing.steady < MICRO_S:
            out.append(f"{head}: at {e.timing.steady * 1e6:.0f} us a run, the clock's and the scheduler's jitter "
                       "alone can move it this much; time more work per run (a larger --batch), or compare ratios "
                       "measured in one run")
        else:
            out.append(f"{head}: other programs may be competing for this machine; close them, pin the run "
                       "(taskset -c 1 stackwars-ir bench ...), or compare ratios measured in one run")
    return out


WARMING = 1.5  # run 2 over this many times the steady state: not yet steady


def warming(rows: Iterable[tuple[int | None, Executable]]) -> list[str]:
    """A note for each row whose second run was slow with nothing compiled in it but much fresh memory
    touched (page faults): the allocator warming up, which a reader could take for the executable's."""
    out = []
    for b, e in rows:
        t = e.timing if e.ok else None
        if not t or not t.steady or t.second <= WARMING * t.steady:
            continue
        faults, second = t.page_faults(), t.counters.get("second", {})
        if not faults or second.get("compiles") or second.get("graphs compiled"):
            continue
        _, again, _, steady = faults
        if again <= WARMING * max(steady, 1):
            continue
        touched = (f"{again / steady:.1f}x a steady run's fresh memory ({again:,} page faults against {steady:,.0f})"
                   if steady else f"fresh memory ({again:,} page faults) where a steady run touched none")
        out.append(f"{e.name}{f' (batch {b})' if b is not None else ''}: run 2 took {t.second / t.steady:.1f}x "
                   f"the steady state and compiled nothing, but touched {touched}: "
                   "the allocator warming up, not the executable; compare steady states (a training loop "
                   "that donates its state, --baselines jax_donate, has no such warm-up)")
    return out
