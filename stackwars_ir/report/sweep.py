"""A sweep's records as tables, one per command (the rows every rendering of a sweep shows)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..bench.compare import SPREAD_TARGET, Verdict
from ..bench.memory import MemoryReport
from ..bench.result import BenchReport
from ..bench.timing import QUIET, SLOWED
from ..common.runstats import rounds_ratio
from ..common.targets import is_tpu
from ..common.textfmt import human_bytes
from ..diff.result import DiffResult
from ..sweep.execute import NOT_RUN, SweepReport, other_stacks
from ..sweep.job_types import BenchJob, CaptureJob, CaptureRecord, DiffJob, MemoryJob, route_of
from ..sweep.jobs import Record, slowed

TITLES = {"capture": "Captures", "memory": "Memory plans", "bench": "Timings on one XLA runtime", "diff": "IR diffs"}
NOTES = {
    "capture": "IR: the StableHLO file's size; parity: the largest absolute difference from PyTorch eager (abstract "
               "captures have none).",
    "memory": "Per device: arguments + outputs - aliased + temporaries + code in the compiler's plan, for the "
              "target's device (a sharded program: each of its devices).",
    "bench": "The compiled executable on one XLA runtime: compile, first, second call and the median of the "
             "steady runs (tpu-*: no run, the compiler's estimate of the kernels' time).",
    "diff": "Blocks aligned between the two captures and how; ops: each side's count; differing: blocks whose ops differ.",
}


def _what(rec, route: str | None = None) -> list:
    r = rec.job.request
    return [f"{r.model}-{r.size}", r.step, route or rec.job.route, r.batch, r.seq, r.mesh or "-"]


WHAT = ["model", "step", "route", "batch", "seq", "mesh"]


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g} ms"


def _capture_row(rec: Record) -> list:
    res: CaptureRecord = rec.result
    parity = (res.parity or {}).get("max_abs_error")
    took = sum(res.seconds.values())
    return [human_bytes(res.bytes), "-" if parity is None else f"{parity:.2g}", f"{took:.1f} s"]


def _memory_rows(rec: Record) -> list:
    rows = []
    report: MemoryReport = rec.result
    for p in report.plans if report is not None else ():
        if p.error:
            rows.append([rec.job.target, p.devices, "failed: " + p.error, "-"])
            continue
        fits = ", ".join(f"{b.name}: {'fits' if p.fits(b)[0] else 'OOM'}" for b in report.budgets)
        rows.append([rec.job.target, p.devices, human_bytes(p.peak_bytes + p.code_bytes), fits or "-"])
    return rows


def _bench_rows(rec: Record) -> list:
    """Each timed executable's row; a job that times several (baselines, `together`) names each (its
    captures' stems, the native runtimes)."""
    rows = []
    several = bool(rec.job.baselines) or "+" in rec.job.route
    for e in rec.bench_rows():
        t = e.timing
        what = _what(rec, e.name if several else None)
        if rec.job.round:  # the grid's `rounds`: the same job again in a fresh worker
            what[2] += f" (round {rec.job.round + 1})"
        if is_tpu(rec.job.target):
            est = e.profile.wall_s if e.profile is not None else None
            rows.append(what + [rec.job.target, f"{e.compile_s or 0:.2f} s", "-", "-", f"{_ms(est)} (estimate)"])
        elif e.error:
            rows.append(what + [rec.job.target, "failed: " + e.error, "", "", ""])
        else:
            rows.append(what + [rec.job.target, f"{e.compile_s or 0:.2f} s", _ms(t and t.first),
                                _ms(t and t.second), _ms(t and t.steady)])
    return rows


def _diff_row(rec: Record) -> list:
    res: DiffResult = rec.result
    differing = sum(1 for b in res.blocks if b.delta)
    return [f"vs {route_of(rec.job.against)}", f"{len(res.blocks)} ({res.method}, {round(res.coverage, 4):.0%})",
            f"{res.a.ops} / {res.b.ops}", differing]


HEADERS = {"capture": ["IR", "parity", "capture"], "memory": ["target", "devices", "per device", "budgets"],
           "bench": ["target", "compile", "first", "second", "steady"],
           "diff": ["against", "blocks aligned", "ops A / B", "differing blocks"]}


# Each job type's table: its command (the title, note and headers) and its rows (model ... mesh first).
TABLES = {CaptureJob: ("capture", lambda rec: [_what(rec) + _capture_row(rec)]),
          MemoryJob: ("memory", lambda rec: [_what(rec) + r for r in _memory_rows(rec)]),
          BenchJob: ("bench", _bench_rows), DiffJob: ("diff", lambda rec: [_what(rec) + _diff_row(rec)])}


def sweep_tables(report: SweepReport) -> list[tuple[str, str, list, list]]:
    """(title, note, headers, rows) for each command the sweep ran, its finished jobs' rows in the
    grid's order; a failed job's row says why."""
    out = []
    for kind, (command, rows_of) in TABLES.items():
        recs = [r for r in report.records if isinstance(r.job, kind)]
        if not recs:
            continue
        rows = []
        for rec in recs:
            if not rec.ok and not rec.bench_rows():  # a failed job: its own row (a bench's failed row: its rows)
                rows.append(_what(rec) + [("" if rec.error == NOT_RUN else "failed: ") + rec.error] + [""] * (len(HEADERS[command]) - 1))
            else:
                rows += rows_of(rec)
        out.append((TITLES[command], NOTES[command], WHAT + HEADERS[command], rows))
    verdicts = [_what(rec, "-")[:2] + [v.batch if v.batch is not None else rec.job.request.batch,
                                       (f"round {rec.job.round + 1}: " if rec.job.round else "") + _verdict_words(v),
                                       _timed_how(rec)]
                for rec in report.records if isinstance(rec.result, BenchReport) for v in rec.result.verdicts]
    across = _across_rows(report.records)
    if across:
        out.append(("Across rounds", "A bench job the grid repeats (`rounds`: each round in a fresh worker): each pair "
                    "of the rows it times together as B's steady median over A's, taken in each round, and the ratio across the rounds "
                    f"with its 95% interval (runstats.rounds_ratio); from fewer than {MIN_ROUNDS} rounds, a figure and "
                    "no finding; an interval that holds 1, indistinguishable.",
                    ["model", "step", "batch", "B / A", "each round", "across rounds"], across))
    if verdicts:
        out.append(("Verdicts", "Each pair of rows a bench job timed: the slower's steady median over the faster's "
                    "with its 95% interval (paired: resampled round by round, the rows' steady runs taking turns "
                    "in one process), or indistinguishable, or too noisy to call.",
                    ["model", "step", "batch", "verdict", "machine"], verdicts))
    return out


def _across_rows(records) -> list:
    """One row per pair of rows of a bench job timed in several rounds (the rounds of one job share
    everything but `round`), in the grid's order; a round whose row failed or has no steady time is
    left out of that pair's ratios."""
    import dataclasses
    from itertools import combinations

    rounds: dict = {}
    for rec in records:
        if isinstance(rec.job, BenchJob) and not is_tpu(rec.job.target) and rec.bench_rows():
            rounds.setdefault(dataclasses.replace(rec.job, round=0), []).append(rec)
    rows = []
    for job, recs in rounds.items():
        if len(recs) < 2:
            continue
        recs = sorted(recs, key=lambda r: r.job.round)
        steady = [{e.name: e.timing.steady if e.timing else None for e in r.bench_rows() if e.ok} for r in recs]
        names = list(dict.fromkeys(e.name for r in recs for e in r.bench_rows()))
        for a, b in combinations(names, 2):
            ratios = [s[b] / s[a] for s in steady if s.get(a) and s.get(b)]
            rows.append([f"{job.request.model}-{job.request.size}", job.request.step, job.request.batch, f"{b} / {a}",
                         ", ".join(f"{r:.2f}" for r in ratios) or "-", across_rounds(ratios)])
    return rows


def _verdict_words(v: Verdict) -> str:
    """A bench verdict (bench.compare.Verdict) in words."""
    fast, slow = v.faster, v.slower
    if v.withheld:
        return f"{fast} / {slow}: {v.withheld.split(';')[0]}"
    how = "paired" if v.paired else "unpaired"
    if v.tie:
        return f"{fast} / {slow}: indistinguishable ({v.ratio:.2f}, {v.low:.2f}-{v.high:.2f}, {how})"
    return f"{fast} {v.ratio:.2f}x as fast as {slow} ({v.low:.2f}-{v.high:.2f}, {how})"


def _timed_how(rec) -> str:
    """How quiet the machine was for a timed record: its probe's noise, and noisy where it was."""

    n = rec.host.get("noise")
    if n is None:
        return "-"
    return f"noise {n:.0%}" + (" (NOISY)" if n >= QUIET or rec.noisy else "")


def summary_line(report: SweepReport) -> str:
    """`12 jobs: 8 finished before (not recomputed), 4 run now, 1 failed; local, 2 workers; 41 s`, and
    how noisy the machine was before the timed jobs (noise_line)."""
    pending = f", {len(report.pending)} not run yet{pending_why(report)}" if report.pending else ""
    noise = noise_line(report.records)
    dated = dated_line(report.records)
    return (f"{len(report.records)} jobs: {report.reused} finished before (not recomputed), {report.ran} run now, "
            f"{len(report.failed)} failed{pending}; {report.executor}; {report.seconds:.0f} s"
            + (f"; {dated}" if dated else "") + (f"; {noise}" if noise else ""))


def pending_why(report: SweepReport) -> str:
    """` (17 of them have records made by another stack: libtpu 0.0.24 there, none here)`: why jobs not
    run yet have no record, where the results folder holds theirs under another stack; "" otherwise."""
    why = other_stacks(report)
    if not why:
        return ""
    return " (" + "; ".join(f"{n} of them have records made by another stack: {words}" for words, n in why) + ")"


def dated_line(records: Sequence[Record]) -> str:
    """`records finished 2026-11-20 to 2026-11-27 by commits 1a2b3c4d5e6f, 0f9e8d7c6b5a`: when the records a
    page renders were made and by which code (a record from before dates were kept is counted undated; a
    failed one whose worker died before saying where it ran has no date of its own, and is not counted)."""
    days = sorted({r.host["finished"][:10] for r in records if r.host.get("finished")})
    commits = list(dict.fromkeys(r.host["commit"] for r in records if r.host.get("commit")))
    undated = sum(1 for r in records if r.ok and r.seconds and not r.host.get("finished"))
    if not days and not undated:
        return ""
    out = ("records finished " + (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}")) if days else ""
    if commits:
        out += f" by commit{'s' * (len(commits) > 1)} " + ", ".join(commits[:4]) + (", ..." if len(commits) > 4 else "")
    if undated:
        out += ("; " if out else "") + f"{undated} undated (made before records kept their date)"
    return out


def noise_line(records: Sequence[Record]) -> str:
    """`machine noise before the 3 timed jobs: 21%-30% (quiet under 50%); the probe's chain 31-36 ms (the
    slowest 1.16x the fastest)`, with a warning when any is over, from the probe each timed job ran first
    (bench.timing.machine_noise); "" without timed jobs. A chain much slower than the sweep's fastest
    (beside a load: 1.75x or more where idle read up to 1.37x, docs/sweep.md) is a slowed machine too:
    those at SLOWED or more are counted (jobs.slowed)."""

    noise = sorted(r.host["noise"] for r in records if r.host.get("noise") is not None)
    if not noise:
        return ""
    span = f"{noise[0]:.0%}" if noise[0] == noise[-1] else f"{noise[0]:.0%}-{noise[-1]:.0%}"
    loud = sum(1 for n in noise if n >= QUIET)
    # The probe is 2 s before the job; a job's own rows can spread wider than it predicted.
    wide = sum(1 for r in records if r.noisy and r.host.get("noise", 1.0) < QUIET)
    line = (f"machine noise before the {len(noise)} timed job{'s' * (len(noise) != 1)}: {span} (quiet under "
            f"{QUIET:.0%})" + (f"; {loud} timed on a noisy machine: their times are not comparable with a "
                                "quiet run's" if loud else ""))
    chain = sorted(r.host["probe_ms"] for r in records if r.host.get("probe_ms"))
    if len(chain) > 1:
        line += (f"; the probe's chain {chain[0]:.0f}-{chain[-1]:.0f} ms (the slowest {chain[-1] / chain[0]:.2f}x "
                 "the fastest)")
    if wide:
        line += (f"; {wide} more with a row's steady-state spread over {SPREAD_TARGET:.0%} on a quiet probe")
    slow = sum(1 for r in slowed(records) if not r.noisy)
    if slow:
        line += f"; {slow} more on a slowed machine (the chain {SLOWED:g}x the fastest or more)"
    if loud or wide or slow:
        line += " (sweep --retry-noisy runs them again)"
        named = [r for r in records if r.host.get("noise") is not None and
                 (r.host["noise"] >= QUIET or r.noisy or r in slowed(records))]
        line += ": " + ", ".join(_name(r) for r in named[:8]) + (f" and {len(named) - 8} more" if len(named) > 8 else "")
    return line


def _name(rec) -> str:
    r = rec.job.request
    return f"{r.model}-{r.size} {r.step} {rec.job.route} b{r.batch}" + (f" round {rec.job.round + 1}" if rec.job.round else "")


MIN_ROUNDS = 3  # a timed ratio is a finding only from at least this many independent rounds (issue 53)


def across_rounds(ratios: Iterable[float], what: str = "") -> str:
    """A ratio measured once per round (each round its own fresh workers) in words: `1.23x (95% interval
    1.10-1.38 across 3 rounds)`, `indistinguishable from 1 (1.02x, 0.95-1.10 across 3 rounds)` where the
    interval holds 1, and with fewer than MIN_ROUNDS rounds the figure alone, said to be no finding.
    The interval is runstats.rounds_ratio's: a t-interval of the rounds' logarithms (regress's)."""

    ratios = [r for r in ratios if r and r > 0]
    if not ratios:
        return "not measured"
    ratio, low, high = rounds_ratio(ratios)
    n = len(ratios)
    if n < MIN_ROUNDS:
        return (f"{ratio:.2f}x{what} from {n} round{'s' * (n > 1)} (fewer than {MIN_ROUNDS}: no interval across "
                "runs, so no finding)")
    if low <= 1 <= high:
        return f"indistinguishable from 1 ({ratio:.2f}x{what}, 95% interval {low:.2f}-{high:.2f} across {n} rounds)"
    return f"{ratio:.2f}x{what} (95% interval {low:.2f}-{high:.2f} across {n} rounds)"
