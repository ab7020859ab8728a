"""Markdown renderings of the diff and memory reports."""
from __future__ import annotations

from collections.abc import Iterable

from ..bench.memory import (
    MAX_BATCH_NOTE, MEASURED_NOTE, NOTES, SLICE_NOTE, MemoryReport, max_batch_rows, slice_rows, table_rows,
)
from ..diff.ops import fold_patterns, op_totals
from ..diff.result import DiffResult, first_of_each_role, time_gap
from ..sweep.execute import SweepReport
from ..versions.regress import Regression
from .sentences import (
    HOST_UNSTEADY, cause_lines, executed_lines, finding, fused_elsewhere, host_lines, host_unsteady, interface_lines,
    op_pattern, op_totals_text, sharding_lines, summaries, time_side, time_source, time_terms,
)
from .sweep import summary_line, sweep_tables
from .text import OP_PATTERN_LINES, TIME_ROWS
from .versions import block_sentence, regress_lines


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def diff_markdown(result: DiffResult) -> str:
    """The diff (a diff.result.DiffResult) as Markdown."""
    from collections import Counter

    a, b = result.a, result.b
    ha, hb = Counter(a.histogram), Counter(b.histogram)
    lines = [
        f"# StableHLO diff: `{_cell(a.name)}` vs `{_cell(b.name)}`", "",
        f"- A: `{_cell(a.source)}` ({a.mode}, {a.ops} ops)",
        f"- B: `{_cell(b.source)}` ({b.mode}, {b.ops} ops)",
        f"- aligned {len(result.blocks)} block pairs by {result.method}"
        f"{f' ({result.pairing_note})' if result.pairing_note else ''}; unmatched: {len(result.only_a)} in A, "
        f"{len(result.only_b)} in B",
        "",
    ]

    lines += [f"> note: {_cell(line)}" for line in cause_lines(result)]
    if lines[-1] != "":
        lines.append("")
    if result.summary:
        lines += ["## Findings", "", "| topic | finding |", "| --- | --- |"]
        lines += [f"| {t} | {_cell(s)} |" for t, s in summaries(result)]
        lines.append("")
    lines += ["## Blocks", "", "| block | A name | B name | A ops | B ops | findings |", "| --- | --- | --- | ---: | ---: | --- |"]
    for d in result.blocks:
        words = "; ".join(finding(f, result.names) for f in d.findings)
        lines.append(f"| {d.label} | `{_cell(d.name_a)}` | `{_cell(d.name_b)}` | {sum(d.histogram_a.values())} "
                     f"| {sum(d.histogram_b.values())} | {_cell(words) or '-'} |")
    for side, blocks in (("A", result.only_a), ("B", result.only_b)):
        if blocks:
            lines += ["", f"Only in {side}: " + ", ".join(f"`{u.label}`" for u in blocks)]
    lines += _time_markdown(result)

    totals = op_totals(result.blocks)
    if totals:
        patterns = fold_patterns(result.blocks)
        lines += ["", "## Op level", "", op_totals_text(totals) + ".", ""]
        lines += [f"- {_cell(op_pattern(p, result.names))}" for p in patterns[:OP_PATTERN_LINES]]
        if len(patterns) > OP_PATTERN_LINES:
            lines.append(f"- ... {len(patterns) - OP_PATTERN_LINES} more (`stackwars-ir diff --ops` lists every block's)")
    lines += ["", "## Op histogram", "", "| op | A | B |", "| --- | ---: | ---: |"]
    for op in sorted(set(ha) | set(hb), key=lambda k: (-(ha[k] + hb[k]), k)):  # ties by name: deterministic
        lines.append(f"| `{op}` | {ha[op]} | {hb[op]} |")

    lines += [""] + [f"- {_cell(line)}" for line in executed_lines(a, b)] if a.loops or b.loops else []

    changed = interface_lines(result)
    lines += ["", "## Entry function", ""] + [f"- {_cell(line)}" for line in changed] if changed else []
    placed = sharding_lines(result)
    lines += ["", "## Shardings", ""] + [f"- {_cell(line)}" for line in placed] if placed else []

    # One excerpt per role: the first layer shows the pattern.
    for d in (result.blocks[i] for i in first_of_each_role(b.role for b in result.blocks)):
        lines += ["", f"## Excerpt: {d.label}", "", f"A (`{_cell(d.name_a)}`):", "", "```mlir",
                  *excerpt_lines(d.excerpt_a, len(d.ops_a), 25), "```", "", f"B (`{_cell(d.name_b)}`):", "",
                  "```mlir", *excerpt_lines(d.excerpt_b, len(d.ops_b), 25), "```"]
    return "\n".join(lines) + "\n"


def _time_markdown(result) -> list[str]:
    """diff --bench: the kernel-time gap by role and the blocks with the largest share of it."""

    split = time_gap(result)
    if split is None:
        return []
    time = result.metrics["time"]
    host = result.metrics.get("host") or {}

    def ms(s: float) -> str:
        return f"{s * 1e3:+.3f}"

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    def interval(t: dict) -> str:
        return f"{ms(t['gap_95'][0])} to {ms(t['gap_95'][1])}" if t.get("gap_95") else "-"

    lines = ["", "## Time by block", "", f"Kernel time per run ({time_source(time)}), B - A: {ms(split.gap)} ms.",
             "", *(f"- {side}: {time_side(t)} (ms)" for side, t in (("A", time["a"]), ("B", time["b"]))), "",
             ""
             + (f" Bench's verdict: {_cell(time['verdict'])}." if time.get("verdict") else "")
             + (" The shares split a gap within the noise, not a finding." if time.get("within_noise") else "")
             + (f" {time_terms(time, split)}" if time_terms(time, split) else ""),
             "", *([("By phase: " + ", ".join(f"{p} {ms(dt)} ms ({share(split.share(dt))})" for p, dt in split.phases)
                     + "."), ""] if split.phases else []),
             "| role | blocks | B - A ms | 95% interval ms | share of the gap |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r} | {n} | {ms(dt)} | {interval({'gap_95': split.role_interval(r)})} | "
              f"{share(split.role_share(r, dt))} |" for r, n, dt in split.roles]
    lines += [f"| (not traced, unmatched) | | {ms(split.rest)} | | {share(split.share(split.rest))} |", "",
              "| block | A ms | B ms | B - A ms | 95% interval ms | share |" + (" host A ms | host B ms |" if host else ""),
              "| --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if host else "")]

    def hosted(t: dict) -> str:
        return "".join(f" {t[f'host_{s}'] * 1e3:.3f}{'*' if host_unsteady(t, s) else ''} |" if f"host_{s}" in t
                       else " - |" for s in "ab") if host else ""

    lines += [f"| {d.label} | {t['a'] * 1e3:.3f} | {t['b'] * 1e3:.3f} | {ms(t['b'] - t['a'])} | {interval(t)} | "
              f"{share(split.block_share(d))} |{hosted(t)}" for d in split.blocks[:TIME_ROWS] for t in [d.metrics["time"]]]
    if host:
        lines += ["", *(f"- {_cell(line)}" for line in host_lines(host))]
        if any(host_unsteady(d.metrics["time"], side) for d in split.blocks[:TIME_ROWS] for side in "ab"):
            lines.append(f"- {_cell(HOST_UNSTEADY)}")
    folded = fused_elsewhere(split.blocks[:TIME_ROWS])
    if folded:
        lines += ["", "Computed in another block's kernel (that time is counted in the other block):", ""]
        lines += [f"- {_cell(label)}: A {_cell(a)}; B {_cell(b)}" for label, a, b in folded]
    return lines


def excerpt_lines(lines: Iterable[str], ops: int, limit: int) -> list[str]:
    """The first `limit` lines of a stored excerpt, and how many ops of the block are not shown."""
    shown = [x for x in lines if not x.startswith("... ")][:limit]
    return shown + ([f"... {ops - limit} more ops"] if ops > limit and len(shown) == limit else [])


def memory_markdown(report: MemoryReport) -> str:
    """The memory plans as a Markdown table (the same rows as the text table)."""

    headers, rows = table_rows(report)
    lines = [f"# Memory plan: {_cell(report.target)}", "", f"Plan of {_cell(report.whose_plan)}.", "",
             "| " + " | ".join(_cell(h) for h in headers) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(headers))) + " |"]
    lines += ["| " + " | ".join(_cell("-" if c is None else c) for c in r) + " |" for r in rows]
    lines += ["", NOTES]
    if any(p.measured for p in report.plans):
        lines.append(MEASURED_NOTE)
    if report.max_batch:
        headers, rows = max_batch_rows(report)
        lines += ["", "## Largest batch that fits", "", "| " + " | ".join(_cell(h) for h in headers) + " |",
                  "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(headers))) + " |"]
        lines += ["| " + " | ".join(_cell(str(c)) for c in r) + " |" for r in rows]
        lines += ["", MAX_BATCH_NOTE]
    if report.slices:
        headers, rows = slice_rows(report)
        lines += ["", "## Smallest slice that fits", "", "| " + " | ".join(_cell(h) for h in headers) + " |",
                  "| " + " | ".join("---" for _ in headers) + " |"]
        lines += ["| " + " | ".join(_cell(str(c)) for c in r) + " |" for r in rows]
        lines += ["", SLICE_NOTE]
    return "\n".join(lines) + "\n"


def sweep_markdown(report: SweepReport) -> str:
    """A sweep's page: what ran where, then a table per command and the failed jobs with their errors."""

    stack = report.records[0].stack if report.records else {}
    host = next((r.host for r in report.records if r.host), {})
    lines = [f"# Sweep: {_cell(report.grid)}", "",
             f"Generated by `stackwars-ir sweep {_cell(report.grid)}` on {_cell(host.get('processor') or 'this machine')} "
             f"({host.get('cpus', '?')} cpus); stack: " + ", ".join(f"{k} {v}" for k, v in sorted(stack.items())) + ".",
             "", summary_line(report) + ".", ""]
    for title, note, headers, rows in sweep_tables(report):
        lines += [f"## {title}", "", note, "", "| " + " | ".join(_cell(h) for h in headers) + " |",
                  "| " + " | ".join("---:" if i in (3, 4) else "---" for i in range(len(headers))) + " |"]
        lines += ["| " + " | ".join(_cell("-" if c is None else str(c)) for c in r) + " |" for r in rows]
        lines.append("")
    if report.refused:
        lines += ["## Not jobs", "", "What the grid named that cannot be captured, and why.", ""]
        lines += [f"- {_cell(what)}: {_cell(why)}" for what, why in report.refused]
        lines.append("")
    return "\n".join(lines)


def regress_markdown(r: Regression) -> str:
    """A regress result (versions.regress.Regression) as a page: the two sides, a table of the blocks that
    changed, time, memory and the thresholds passed."""

    def side(s: dict) -> str:
        v = s["versions"]
        return f"`{_cell(s['file'])}`, stack {_cell(s['stack'])} (jax {v.get('jax')}, jaxlib {v.get('jaxlib')})"

    lines = ["# Regress: B against A", "", f"- A: {side(r.a)}", f"- B: {side(r.b)}", ""]
    changed = [b for b in r.blocks if b.changed]
    lines += [f"{len(changed)} of {len(r.blocks)} aligned blocks changed"
              + (" (the IR is identical: the compile differs)" if r.a["sha256"] == r.b["sha256"] else "")
              + (f"; {len(r.unaligned)} on one side only" if r.unaligned else "") + ".", ""]
    if changed:
        lines += ["| block | ops A -> B | kernels A -> B | time A -> B, us | what changed |", "|---|---:|---:|---:|---|"]
        for b in changed:
            k = f"{b.kernels[0]} -> {b.kernels[1]}" if b.kernels else "-"
            t = f"{b.time[0] * 1e6:.1f} -> {b.time[1] * 1e6:.1f}" if b.time else "-"
            what = block_sentence(b).split(": ", 1)[1]
            lines.append(f"| {_cell(b.label)} | {b.ops[0]} -> {b.ops[1]} | {k} | {t} | {_cell(what)} |")
        lines.append("")
    lines += [f"- only in {_cell(u)}" for u in r.unaligned]
    rest = [ln for ln in regress_lines(r) if ln.startswith(("kernels:", "steady time:", "time:", "CI mode:", "memory"))]
    lines += [f"- {_cell(ln)}" for ln in rest] + [""]
    lines += [f"**REGRESSION:** {_cell(b)}" for b in r.breaches] or \
        [f"No threshold passed (time +{r.thresholds.time:.0%} beyond noise, memory +{r.thresholds.memory:.0%}, "
         f"kernels +{r.thresholds.kernels} per block)."]
    return "\n".join(lines) + "\n"
