"""docs/findings-zoo.md: transformers architectures through both PyTorch routes, from sweep records.

The sweep is of study/grids/zoo.toml.
"""
from __future__ import annotations

import math
import statistics

from stackwars_ir.report.sweep import MIN_ROUNDS
from .page import Dates, records_day, records_machine, sweep_line

ROUTES = ("torch_xla", "torchax")
SAME = 0.10  # a steady-state ratio within 10% of 1 is "the same": timing noise on a shared machine
ANCHOR = ("vLLM's TPU backend reports about 20% more throughput lowering unchanged PyTorch models through "
          "torchax/JAX than through PyTorch/XLA")


def index_records(report) -> tuple[list, dict]:
    """The grid's (model, step) pairs in order, and each key's records by (model, step, command, route),
    its rounds in order (the grid's `rounds`: one record each): a bench of both routes in one job (the
    grid's `together`) under "torch_xla+torchax"."""
    order, by = [], {}
    for rec in report.records:
        r = rec.job.request
        if (r.model, r.step) not in order:
            order.append((r.model, r.step))
        by.setdefault((r.model, r.step, rec.job.command, rec.job.route), []).append(rec)
    for recs in by.values():
        recs.sort(key=lambda rec: rec.job.round)
    return order, by


def _bench(rec, route: str) -> dict | None:
    """`route`'s executable in a bench record (one route's job, or both routes' timed together)."""
    from stackwars_ir.sweep.job_types import route_of, split_routes

    if rec is None or not rec.bench_rows():
        return None
    stems = {route_of(r): r.stems()[0] for r in split_routes(rec.job.request)}
    e = next((e for e in rec.bench_rows() if len(stems) == 1 or e.name == stems.get(route)), None)
    if e is None or not e.ok:
        return None
    t = e.timing
    return {"compile": e.compile_s, "steady": t.steady if t else None, "fusions": e.hlo.get("fusions"),
            "together": t is not None and t.interleaved > 1}


def row_of(by, model, step) -> dict | None:
    """One program's numbers on both routes, or None where a job of it failed (named below the tables):
    each route's compile and steady times the median over the rounds, and torchax's steady time over
    torch_xla's taken in each round both routes ran (`ratios`); `records`, the records it read."""
    diffs = by.get((model, step, "diff", "torch_xla")) or []
    both = by.get((model, step, "bench", "+".join(ROUTES)))
    if both:
        rounds = [tuple(_bench(rec, r) for r in ROUTES) for rec in both]
    else:
        per_route = [by.get((model, step, "bench", r)) or [] for r in ROUTES]
        rounds = [tuple(_bench(rec, r) for rec, r in zip(recs, ROUTES)) for recs in zip(*per_route)]
    rounds = [rd for rd in rounds if None not in rd]
    if not diffs or not diffs[0].ok or not rounds:
        return None
    benches = [{"compile": statistics.median(rd[i]["compile"] for rd in rounds),
                "steady": statistics.median(rd[i]["steady"] for rd in rounds),
                "fusions": rounds[0][i]["fusions"], "together": all(rd[i]["together"] for rd in rounds)}
               for i in range(len(ROUTES))]
    res = diffs[0].result  # a DiffResult
    records = diffs + list(both or [rec for r in ROUTES for rec in by.get((model, step, "bench", r)) or []])
    return {"ops": (res.a.ops, res.b.ops), "bench": benches,
            "ratios": [_ratio(a["steady"], b["steady"]) for a, b in rounds],
            "aligned": f"{len(res.blocks)} ({round(res.coverage, 4):.0%})", "diff": res, "records": records}


def how_timed(rows: dict, step: str) -> str:
    """How the step's two routes were timed against each other, from the records (the grid's `together`
    or not), and what that means for one row's ratio."""
    got = [b["together"] for (m, s), r in rows.items() if s == step and r for b in r["bench"]]
    if got and all(got):
        return ("The two routes' executables were timed in one process, their steady runs taking turns, so a "
                "row's ratio does not carry the machine's drift between two processes; it still carries the noise "
                "of sub-millisecond runs on a shared machine (benchmarks/zoo_repeat.py compares two runs of this "
                "page; docs/benchmarks.md).")
    mixed = "Some of the two routes' benches" if any(got) else "The two routes' benches"
    return (f"{mixed} ran in separate processes one after the other, so one row's ratio of sub-millisecond times "
            "carries the machine's noise between two processes: two runs of this page can disagree on a row's "
            "verdict, and even on the counts above (benchmarks/zoo_repeat.py measures how often; "
            "docs/benchmarks.md). Read the geometric means over every architecture, not one row.")


def _pair(x, y, fmt) -> str:
    return f"{fmt(x)} / {fmt(y)}"


def _ratio(a, b) -> float:
    return b / a if a and b else float("nan")


def _geomean(xs) -> float:
    xs = [x for x in xs if x and x == x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _roles(res) -> str:
    """Where the two captures' op counts differ most, by block role: `attention +212, mlp +40`
    (torchax's count minus torch_xla's, summed over the role's aligned blocks; `res` a DiffResult)."""
    delta: dict = {}
    for b in res.blocks:
        d = sum(b.histogram_b.values()) - sum(b.histogram_a.values())
        delta[b.role] = delta.get(b.role, 0) + d
    top = sorted(((r, d) for r, d in delta.items() if d), key=lambda x: -abs(x[1]))[:3]
    return ", ".join(f"{r} {d:+d}" for r, d in top) or "none"


def _embedding(res) -> str:
    from stackwars_ir.report.sentences import summary

    for s in res.summary:
        if s.topic == "embedding":
            return summary(s, ROUTES)
    return "-"


def _percent(x: float) -> str:
    return "the same" if round(x * 100) == 0 else f"{x:+.0%}"


def interval(r: dict) -> tuple[float, float, float, int]:
    """A row's steady ratio torchax/torch_xla across its rounds: (geometric mean, low, high, rounds), the
    95% interval runstats.rounds_ratio's (infinite below two rounds)."""
    from stackwars_ir.common.runstats import rounds_ratio

    ratios = [x for x in r.get("ratios") or [_ratio(r["bench"][0]["steady"], r["bench"][1]["steady"])] if x == x]
    if not ratios:
        return float("nan"), 0.0, math.inf, 0
    return (*rounds_ratio(ratios), len(ratios))


def verdicts(rows: dict) -> list[str]:
    """The page's generated claims, from the rows of both steps: with at least MIN_ROUNDS rounds per row,
    a row is faster or slower only where its interval across the rounds excludes 1; from fewer, the
    counts by a 10% band are figures of one run each, and say so."""
    out = []
    for step, title in (("forward", "forward"), ("train", "training step")):
        got = [r for (m, s), r in rows.items() if s == step and r]
        if not got:
            continue
        n = len(got)
        fewer = sum(r["ops"][1] < r["ops"][0] for r in got)
        same_fusions = sum(r["bench"][0]["fusions"] == r["bench"][1]["fusions"] for r in got)
        ops_ratio = statistics.median(_ratio(*r["ops"]) for r in got)
        compile_ratio = _geomean(_ratio(r["bench"][0]["compile"], r["bench"][1]["compile"]) for r in got)
        steady = [_ratio(r["bench"][0]["steady"], r["bench"][1]["steady"]) for r in got]
        spans = [interval(r) for r in got]
        if all(k >= MIN_ROUNDS for *_, k in spans):
            faster = sum(hi < 1 for _, _, hi, _ in spans)
            slower = sum(lo > 1 for _, lo, _, _ in spans)
            timed = (f"torchax faster in {faster} (95% interval across {min(k for *_, k in spans)} or more rounds "
                     f"below 1), slower in {slower} (above 1), indistinguishable in {n - faster - slower} (the "
                     f"interval holds 1)")
        else:
            faster = sum(x < 1 - SAME for x in steady)
            slower = sum(x > 1 + SAME for x in steady)
            timed = (f"torchax faster by more than {SAME:.0%} in {faster}, slower by more than {SAME:.0%} in {slower}, "
                     f"within {SAME:.0%} in {n - faster - slower} (fewer than {MIN_ROUNDS} rounds per row: each a "
                     "figure of one run, not a finding)")
        out.append(f"**{title.capitalize()}, {n} architectures.** torchax's StableHLO has fewer ops than torch_xla's "
                   f"in {fewer} of {n} (median ops ratio torchax/torch_xla {ops_ratio:.2f}); after XLA's passes the "
                   f"two compile to the same number of fusions in {same_fusions} of {n}. Compile time ratio "
                   f"torchax/torch_xla (geometric mean) {compile_ratio:.2f}. Steady-state time: {timed}; geometric "
                   f"mean ratio torchax/torch_xla {_geomean(steady):.2f} "
                   f"({_percent(1 / _geomean(steady) - 1)} throughput for torchax).")
    return out


def zoo_page(report) -> str:
    """docs/findings-zoo.md from a sweep's records (SweepReport), as text."""
    from stackwars_ir.common.files import versions
    from stackwars_ir.sweep.execute import NOT_RUN

    v = versions()  # torchax: the copy that imports (torch_xla's own, files.distribution_version)

    order, by = index_records(report)
    rows = {(m, s): row_of(by, m, s) for m, s in order}
    models = list(dict.fromkeys(m for m, _ in order))
    from stackwars_ir.models import entry

    lm = [m for m in models if entry(m).loss == "lm"]
    lines = ["# Findings: the zoo, transformers architectures through both PyTorch routes", "",
             f"Generated by `make findings-zoo` (study/run/zoo.py, grid study/grids/zoo.toml) on "
             f"{records_day(report.records)}; machine: {records_machine(report.records)}; "
             + ", ".join(f"{k} {v[k]}" for k in ("torch", "torch_xla", "torchax", "jax", "transformers"))
             + ". Do not edit: regenerate.", "",
             f"{len(models)} architectures (the built-in adapters' transformers models and study/adapters/'s, tiny "
             "configurations, random weights, parity-checked against PyTorch eager), each captured through torch_xla "
             "and torchax (no JAX twin needed), forward and training step (AdamW; loss: next-token cross-entropy for "
             f"{', '.join(lm) or 'none'}, the mean squared error of the output against a seeded target for the "
             "others), the two captures diffed, each compiled and timed on one XLA CPU runtime, one bench at a time. "
             f"{sweep_line(report)}.", "",
             "## What it says", ""]
    lines += [f"- {v}" for v in verdicts(rows)]
    lines += [f"- The published anchor: {ANCHOR}. That is a TPU serving measurement at full size; here, on XLA CPU at "
              "tiny size, the ratio above is what the same two lowerings give.", ""]
    dates = Dates(r for r in report.records if r.job.command != "capture")
    if dates.column:
        lines += [dates.legend(), ""]
    extra = " record |" if dates.column else ""
    for step, title in (("forward", "Forward"), ("train", "Training step")):
        lines += [f"## {title}", "",
                  "Each cell: torch_xla / torchax. Ops: StableHLO ops in the capture; fusions: in XLA CPU's optimized "
                  "HLO; compile and steady: the median over the rounds (each round the bench again in a fresh worker) "
                  "of each round's figure (steady: the median of its steady runs); ratio: torchax's steady time over "
                  "torch_xla's, taken per round (geometric mean; below 1: torchax faster), with its 95% interval "
                  f"across the rounds. {how_timed(rows, step)}", "",
                  "| model | ops | fusions | compile | steady | ratio | interval | rounds | blocks aligned |" + extra,
                  "|---|---|---|---|---|---|---|---|---|" + ("---|" if extra else "")]
        for m in models:
            r = rows.get((m, step))
            if (m, step) not in rows:
                continue
            if r is None:
                pending = any(rec.error == NOT_RUN for rec in report.records
                              if (rec.job.request.model, rec.job.request.step) == (m, step))
                lines.append(f"| {m} | {'not run yet' if pending else 'failed: see below'} | | | | | | | |"
                             + (" |" if extra else ""))
                continue
            a, b = r["bench"]
            ratio, lo, hi, k = interval(r)
            span = f"{lo:.2f}-{hi:.2f}" if k >= 2 else "-"
            lines.append(f"| {m} | {r['ops'][0]} / {r['ops'][1]} | {a['fusions']} / {b['fusions']} | "
                         f"{_pair(a['compile'], b['compile'], lambda x: f'{x:.2f} s')} | "
                         f"{_pair(a['steady'], b['steady'], lambda x: f'{x * 1e3:.3g} ms')} | "
                         f"{ratio:.2f} | {span} | {k} | {r['aligned']} |"
                         + (f" {dates.mark(r['records'])} |" if extra else ""))
        lines.append("")
    lines += ["## What they differ in", "",
              "Per architecture's forward: the block roles whose op counts differ most (torchax's count minus "
              "torch_xla's, over the aligned blocks), and how each route looks up its embeddings.", "",
              "| model | op count by role | embedding (torch_xla \\| torchax) |", "|---|---|---|"]
    for m in models:
        r = rows.get((m, "forward"))
        if r:
            lines.append(f"| {m} | {_roles(r['diff'])} | {_embedding(r['diff']).replace('|', chr(92) + '|')} |")
    failed = [rec for rec in report.records if not rec.ok and rec.error != NOT_RUN]
    blocked = [rec for rec in failed if rec.error.startswith("its capture failed")]
    lines += ["", "## What failed, and why", ""]
    if not failed and not report.refused:
        lines.append("Nothing: every architecture was captured, diffed and timed on both routes.")
    for what, why in report.refused:
        lines.append(f"- {what}: not a job: {why}")
    for rec in failed:
        if rec not in blocked:
            lines.append(f"- {rec.job.label}: {rec.error}")
    if blocked:
        lines += ["", f"{len(blocked)} diffs and benches read one of those captures and did not run."]
    return "\n".join(lines) + "\n"
