"""Markdown renderings of the diff and memory reports."""
from __future__ import annotations


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def diff_markdown(report) -> str:
    from ..diff import excerpt

    a, b, al = report.a, report.b, report.alignment
    lines = [
        f"# StableHLO diff: `{_cell(a.name)}` vs `{_cell(b.name)}`", "",
        f"- A: `{_cell(a.module.source)}` ({a.segmentation.mode}, {sum(a.histogram.values())} ops)",
        f"- B: `{_cell(b.module.source)}` ({b.segmentation.mode}, {sum(b.histogram.values())} ops)",
        f"- aligned {len(al.pairs)} block pairs by {al.method}; unmatched: {len(al.only_a)} in A, {len(al.only_b)} in B",
        "",
    ]
    if report.summary:
        lines += ["## Findings", "", "| topic | finding |", "| --- | --- |"]
        lines += [f"| {t} | {_cell(s)} |" for t, s in report.summary]
        lines.append("")
    lines += ["## Blocks", "", "| block | A name | B name | A ops | B ops | findings |", "| --- | --- | --- | ---: | ---: | --- |"]
    for d in report.blocks:
        lines.append(f"| {d.label} | `{_cell(d.a.name)}` | `{_cell(d.b.name)}` | {sum(d.facts_a.histogram.values())} "
                     f"| {sum(d.facts_b.histogram.values())} | {_cell('; '.join(d.findings)) or '-'} |")
    for side, blocks in (("A", al.only_a), ("B", al.only_b)):
        if blocks:
            lines += ["", f"Only in {side}: " + ", ".join(f"`{blk.label}`" for blk in blocks)]
    lines += ["", "## Op histogram", "", "| op | A | B |", "| --- | ---: | ---: |"]
    for op in sorted(set(a.histogram) | set(b.histogram), key=lambda k: -(a.histogram[k] + b.histogram[k])):
        lines.append(f"| `{op}` | {a.histogram[op]} | {b.histogram[op]} |")
    shown = {}
    for d in report.blocks:  # one excerpt per role: the first layer shows the pattern
        if d.a.role not in shown and d.a.role != "other":
            shown[d.a.role] = d
    for role, d in shown.items():
        lines += ["", f"## Excerpt: {d.label}", "", f"A (`{_cell(d.a.name)}`):", "", "```mlir",
                  *excerpt(a.module, d.a, 25), "```", "", f"B (`{_cell(d.b.name)}`):", "", "```mlir",
                  *excerpt(b.module, d.b, 25), "```"]
    return "\n".join(lines) + "\n"


def memory_markdown(report) -> str:
    """The memory plans as a Markdown table (the same rows as the text table)."""
    from ..bench.memory import MEASURED_NOTE, NOTES, table_rows

    headers, rows = table_rows(report)
    lines = [f"# Memory plan: {_cell(report.target)}", "", f"Plan of {_cell(report.whose_plan)}.", "",
             "| " + " | ".join(_cell(h) for h in headers) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(headers))) + " |"]
    lines += ["| " + " | ".join(_cell("-" if c is None else c) for c in r) + " |" for r in rows]
    lines += ["", NOTES]
    if any(p.measured for p in report.plans):
        lines.append(MEASURED_NOTE)
    if report.max_batch:
        from ..bench.memory import MAX_BATCH_NOTE, max_batch_rows

        headers, rows = max_batch_rows(report)
        lines += ["", "## Largest batch that fits", "", "| " + " | ".join(_cell(h) for h in headers) + " |",
                  "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(headers))) + " |"]
        lines += ["| " + " | ".join(_cell(str(c)) for c in r) + " |" for r in rows]
        lines += ["", MAX_BATCH_NOTE]
    return "\n".join(lines) + "\n"
