"""Report: one report model (diff.result.DiffResult, with bench and memory results) rendered as text, JSON, Markdown, HTML."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path


def diff_json(result) -> dict:
    """A DiffResult as the diff JSON file holds it: its data, each summary and finding with its words."""
    from .sentences import finding, summary

    data, names = result.as_json(), result.names
    for s, out in zip(result.summary, data["summary"]):
        out["text"] = summary(s, names)
    for blk, out in zip(result.blocks, data["blocks"]):
        for f, fj in zip(blk.findings, out["findings"]):
            fj["text"] = finding(f, names)
    return data


def write_outputs(report, *, json_path: Path | None = None, md_path: Path | None = None,
                  html_path: Path | None = None, bench: dict | None = None, command: str | None = None,
                  memory: dict | None = None) -> list[Path]:
    """Write each requested rendering of a diff (a DiffReport, or a DiffResult already made or
    loaded) atomically; return the paths written. Bench and memory results ride in its metrics."""
    from ..files import write_atomic

    # A saved result and the HTML (its graph view shows any block's IR) keep every block's excerpt; the
    # Markdown shows the first block of each role's.
    result = report.result("all" if json_path or html_path else "first_of_role") if hasattr(report, "result") else report
    metrics = dict(result.metrics, **({"bench": bench} if bench else {}), **({"memory": memory} if memory else {}))
    result = replace(result, metrics=metrics)
    written = []
    if json_path:
        write_atomic(Path(json_path), json.dumps(diff_json(result), indent=2, sort_keys=False) + "\n")
        written.append(Path(json_path))
    if md_path:
        from .markdown import diff_markdown

        write_atomic(Path(md_path), diff_markdown(result))
        written.append(Path(md_path))
    if html_path:
        from .html import diff_html

        write_atomic(Path(html_path), diff_html(result, metrics.get("bench"), command, metrics.get("memory")))
        written.append(Path(html_path))
    return written
