"""Timing discipline: first run, second run, steady state (median and spread) with adaptive iterations."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..common.errors import StackwarsError
from ..common.runstats import deciles


@dataclass(frozen=True)
class Timing:
    """Seconds. `steady` is the median of `iterations` runs after `warmup` discarded ones."""

    first: float
    second: float
    steady: float
    p10: float
    p90: float
    iterations: int
    warmup: int
    # Counters per phase: "first", "second", "third" (the first warm-up run) and "steady" (summed over
    # the later runs, with "runs" saying how many). The runtime's own (compiles, executions, cache
    # hits) where it has any, and the process's "page faults" (minor: memory it touched for the first
    # time, which the kernel had to map and zero) wherever the OS counts them.
    counters: dict = field(default_factory=dict, compare=False)
    samples: tuple = field(default=(), compare=False, repr=False)  # the steady-state runs, seconds
    third: float | None = field(default=None, compare=False)  # the first warm-up run (a training loop's step 3)
    interleaved: int = field(default=1, compare=False)  # executables whose steady runs took turns with this one's

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: below 0.1 reads as a quiet measurement."""
        return (self.p90 - self.p10) / self.steady if self.steady else 0.0

    def page_faults(self) -> tuple | None:
        """Page faults of runs 1, 2 and 3 (None where there was no warm-up run) and of a steady run
        (the later runs' mean), or None where they were not counted."""
        c = self.counters
        if "page faults" not in c.get("first", {}):
            return None
        rest = c.get("steady", {})
        return (c["first"]["page faults"], c["second"]["page faults"], c.get("third", {}).get("page faults"),
                rest.get("page faults", 0) / max(rest.get("runs", 1), 1))

    def as_json(self) -> dict:
        return {"first_s": self.first, "second_s": self.second, "third_s": self.third,
                "steady_median_s": self.steady,
                "steady_p10_s": self.p10, "steady_p90_s": self.p90, "spread": round(self.spread, 4),
                "iterations": self.iterations, "warmup": self.warmup, "counters": self.counters,
                "samples_s": list(self.samples), "interleaved_with": self.interleaved - 1}

    @classmethod
    def from_json(cls, d: dict) -> "Timing":
        return cls(d["first_s"], d["second_s"], d["steady_median_s"], d["steady_p10_s"], d["steady_p90_s"],
                   d["iterations"], d["warmup"], d.get("counters") or {}, tuple(d.get("samples_s") or ()),
                   d.get("third_s"), d.get("interleaved_with", 0) + 1)


WARMUP = 2


@dataclass(frozen=True)
class Asked:
    """What the user asked of bench's sampling (--warmup, --runs, --profile profiled runs, --host phased
    runs); None or 0 where not asked. Passed to every worker that times (isolate.Task arguments)."""

    warmup: int | None = None
    runs: int | None = None
    profile: int = 0
    host: int = 0
    rounds: int = 1  # the StableHLO files' profiles taken in this many rounds, each in a fresh worker

    @classmethod
    def of(cls, warmup: int | None = None, runs: int | None = None, profile: int | None = None,
           host: int | None = None, rounds: int | None = None) -> "Asked":
        """bench's options, checked (StackwarsError, one line, on a value that cannot be sampled)."""

        if warmup is not None and warmup < 0:
            raise StackwarsError(f"--warmup {warmup} must be 0 or more runs", fix="e.g. --warmup 2")
        if runs is not None and runs < 1:
            raise StackwarsError(f"--runs {runs} must be at least 1 run", fix="e.g. --runs 50, or drop it for adaptive")
        if profile is not None and profile < 2:
            raise StackwarsError(f"--profile {profile} must be at least 2 profiled runs", fix="e.g. --profile 10")
        if host is not None and host < 2:
            raise StackwarsError(f"--host {host} must be at least 2 phased runs", fix="e.g. --host 10")
        if rounds is not None and rounds < 1:
            raise StackwarsError(f"--rounds {rounds} must be at least 1 round", fix="e.g. --rounds 3")
        if rounds is not None and rounds > 1 and not profile:
            raise StackwarsError(f"--rounds {rounds} repeats the profile in fresh workers, and no --profile was asked",
                                 fix=f"add --profile, e.g. --profile 10 --rounds {rounds}")
        return cls(warmup, runs, profile or 0, host or 0, rounds or 1)

    def as_json(self) -> dict:
        return {"warmup": self.warmup, "runs": self.runs, "profile": self.profile, "host": self.host,
                "rounds": self.rounds}

    @classmethod
    def from_json(cls, d: dict) -> "Asked":
        return cls(d.get("warmup"), d.get("runs"), d.get("profile") or 0, d.get("host") or 0, d.get("rounds") or 1)

    def options(self) -> list[str]:
        """bench's options that ask for this sampling again (--profile and --rounds left out: a command
        that profiles adds its own), e.g. ['--warmup', '1', '--runs', '5']; [] where nothing was asked."""
        words = []
        if self.warmup is not None:
            words += ["--warmup", str(self.warmup)]
        if self.runs is not None:
            words += ["--runs", str(self.runs)]
        return words


NOTHING_ASKED = Asked()


@dataclass(frozen=True)
class Sampling:
    """When the steady state stops: at least `min_iters` runs and `min_time` seconds each, and a
    p10-p90 spread under `target_spread`; at most `max_iters` runs or `max_time` seconds each."""

    min_time: float = 0.5
    max_time: float = 10.0
    min_iters: int = 10
    max_iters: int = 1000
    target_spread: float = 0.1
    warmup: int = WARMUP
    profile: int = 0  # runs under the runtime's profiler after the steady state (bench --profile)
    host: int = 0  # a native runtime's runs split into host phases after the steady state (bench --host)

    @classmethod
    def of(cls, asked: Asked | None = None, *, runs: int | None = None, warmup: int | None = None,
           **given: float) -> "Sampling":
        """With what the user `asked` (bench's --warmup, --runs, --profile, --host) standing in for those
        not given; `runs`: exactly that many steady-state runs (hyperfine's --runs)."""
        asked = asked or NOTHING_ASKED
        warmup = warmup if warmup is not None else asked.warmup if asked.warmup is not None else WARMUP
        runs = runs if runs is not None else asked.runs
        given.setdefault("profile", asked.profile)
        given.setdefault("host", asked.host)
        if runs:
            given.update(min_iters=runs, max_iters=runs, min_time=0.0, max_time=float("inf"),
                         target_spread=float("inf"))
        return cls(warmup=warmup, **given)


@dataclass(frozen=True)
class Warm:
    """Runs 1, 2 and 3 of one executable, and the counters read around them."""

    first: float
    second: float
    third: float | None
    phases: dict  # counter deltas: "first", "second", "third"
    after: dict  # counters after run 3, where the steady phase's counting starts
    later: dict  # counter deltas of the warm-up runs after run 3 (they count with the steady phase)


def measure(run: Callable[[], Any], *, min_time: float = 0.5, max_time: float = 10.0, min_iters: int = 10,
            max_iters: int = 1000, target_spread: float = 0.1, warmup: int | None = None,
            deadline: float | None = None, inspect: Callable[[Any], None] | None = None,
            counters: Callable[[], dict] | None = None, runs: int | None = None,
            asked: Asked | None = None) -> Timing:
    """Time `run` (which must block until its results are ready).

    Runs 1, 2 and 3 (the first warm-up run) are reported as they are; the other warm-up runs are
    discarded; then runs continue
    until at least `min_iters` and `min_time`, and the p10-p90 spread is under `target_spread`
    of the median, or `max_iters`/`max_time`/`deadline` (time.monotonic()) is reached. `runs`:
    exactly that many steady-state runs instead. What the user `asked` (bench's --warmup and --runs)
    stands in for `warmup` and `runs` not given.

    Proof of work, outside the clock: `inspect` gets what the first run returned (it raises if
    that is not the expected output), and `counters()` is read around runs 1 and 2 and around
    the rest, so a first run that compiled nothing, or runs that executed nothing, show. The
    process's page faults are read with them: a run slower than the steady state that compiled
    nothing often touched fresh memory (an allocator's warm-up), and they show that.
    """
    how = Sampling.of(asked, runs=runs, warmup=warmup, min_time=min_time, max_time=max_time,
                      min_iters=min_iters, max_iters=max_iters, target_spread=target_spread)
    warm = warm_up(run, how.warmup, deadline=deadline, inspect=inspect, counters=counters)
    (samples,) = steady_state([run], how, deadline=deadline)
    return timing_of(warm, samples, how.warmup, counters)


def warm_up(run: Callable[[], Any], warmup: int, *, deadline: float | None = None,
            inspect: Callable[[Any], None] | None = None, counters: Callable[[], dict] | None = None) -> Warm:
    """Runs 1 and 2, then `warmup` runs of which the first is reported (run 3); the proof of work
    (`inspect` of run 1's output) and the counters outside the clock."""
    clock = time.perf_counter

    def read() -> dict:
        return {**(counters() if counters is not None else {}), **_faults()}

    before = read()
    t0 = clock()
    result = run()
    first = clock() - t0
    after_first = read()
    if inspect is not None:
        inspect(result)
    del result
    before_second = read() if inspect is not None else after_first  # the proof is no run's work
    t0 = clock()
    run()
    second = clock() - t0
    after_second = read()
    third, after_third = None, after_second
    for i in range(warmup):
        _check(deadline)
        t0 = clock()
        run()
        if i == 0:
            third, after_third = clock() - t0, read()
    phases = {"first": _delta(after_first, before), "second": _delta(after_second, before_second)}
    if warmup:
        phases["third"] = _delta(after_third, after_second)
    return Warm(first, second, third, phases, after_third, _delta(read(), after_third))


def steady_state(runs: list, how: Sampling, *, deadline: float | None = None,
                 on_error: Callable[[int, Exception], None] | None = None) -> list:
    """Steady-state runs of each of `runs`, round-robin (A B C, B C A, ...: as hyperfine times several
    commands, so a machine slowing down or speeding up lands on all of them alike, not on their
    ratio), until each has `how`'s runs, time and spread, or one of its limits is reached. Each
    run's time, and the page faults it took, per executable: [([seconds], faults)]. A run that
    raises: `on_error(i, error)`, and that executable leaves the rotation (without it: raised)."""
    clock = time.perf_counter
    n = len(runs)
    samples: list[list[float]] = [[] for _ in runs]
    faults = [0] * n
    live, start, turn = list(range(n)), clock(), 0
    while live:
        if deadline is not None and time.monotonic() > deadline:
            if all(samples[i] for i in live):
                break  # keep what was measured; the JSON says how many iterations
            raise Timeout
        for i in live[turn % len(live):] + live[:turn % len(live)]:
            f0 = _faults().get("page faults", 0)
            t0 = clock()
            try:
                runs[i]()
            except Exception as e:
                if on_error is None:
                    raise
                on_error(i, e)
                live.remove(i)
                continue
            samples[i].append(clock() - t0)
            faults[i] += _faults().get("page faults", 0) - f0
        turn += 1
        elapsed = (clock() - start) / max(n, 1)  # each executable's share of the wall time
        counts = [len(samples[i]) for i in live]
        if not live or max(counts) >= how.max_iters or elapsed >= how.max_time:
            break
        if min(counts) >= how.min_iters and elapsed >= how.min_time and \
                all(_spread(samples[i]) <= how.target_spread for i in live):
            break
    return [(s, f) for s, f in zip(samples, faults)]


def timing_of(warm: Warm, steady: tuple, warmup: int, counters: Callable[[], dict] | None = None,
              interleaved: int = 1) -> Timing:
    """The Timing of one executable from its warm-up and its steady-state runs (and their faults)."""
    samples, faults = steady
    p10, p90 = deciles(samples)
    phases = {}
    if counters is not None or "page faults" in warm.phases["first"]:
        rest = _delta({**(counters() if counters is not None else {})}, warm.after)
        if "page faults" in warm.phases["first"]:  # this executable's own runs, interleaved or not
            rest["page faults"] = warm.later.get("page faults", 0) + faults
        rest["runs"] = max(warmup - 1, 0) + len(samples)
        phases = {**warm.phases, "steady": rest}
    return Timing(warm.first, warm.second, statistics.median(samples), p10, p90, len(samples), warmup, phases,
                  tuple(samples), warm.third, interleaved)


def _faults() -> dict:
    """The process's minor page faults so far, where the OS counts them (not on Windows)."""
    try:
        import resource
    except ImportError:
        return {}
    return {"page faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt}


def _delta(now: dict, then: dict) -> dict:
    return {k: now[k] - then.get(k, 0) for k in now}


def _spread(samples: list[float]) -> float:
    p10, p90 = deciles(samples)
    med = statistics.median(samples)
    return (p90 - p10) / med if med else 0.0


class Timeout(Exception):
    """The --timeout budget ran out before a steady-state sample was taken."""


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise Timeout


# The probe's spread under which the machine reads as quiet. Calibrated by benchmarks/machine_noise.py
# (docs/sweep.md): idle, the probe read 6-30% on a 2-core EPYC and 17-44% on a 16-core host; beside one
# busy process (spinning, BLAS or streaming memory) never under 66% on either.
QUIET = 0.50
# The probe's chain median against the fastest one of the same processor in the sweep at which the
# machine reads as slowed: idle it stayed within 1.37x, beside any load 1.75x or more (docs/sweep.md),
# and a load on every core at once slows the chain evenly without widening its spread.
SLOWED = 1.5


def machine_noise(seconds: float = 2.0) -> float:
    """How steady the machine is now, before a timed job: the spread ((p90 - p10) / median) of a
    fixed float32 matmul chain (numpy, 512^3 x 16, about 30 ms here) run again and again for `seconds`, on
    as many threads as numpy's BLAS takes (the timed jobs' cores). A quiet machine measures under
    QUIET; another process or a busy host on the same cores shows here first, so a sweep can say
    that its timings were taken on a noisy machine before anyone reads them."""
    return machine_probe(seconds)[0]


def machine_probe(seconds: float = 2.0) -> tuple[float, float]:
    """The probe's spread (machine_noise) and its chain's median in seconds, from one set of runs: the
    median, against the same machine's fastest, shows a load that slows every core evenly."""
    samples = _probe_samples(seconds)
    return _spread(samples), statistics.median(samples)


def _probe_samples(seconds: float) -> list[float]:
    """The probe's chain times in seconds (the first, warming, run left out)."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((512, 512), dtype=np.float32) / 32
    samples: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < 10:
        t0 = time.perf_counter()
        x = a
        for _ in range(16):
            x = x @ a
        samples.append(time.perf_counter() - t0)
    return samples[1:]
