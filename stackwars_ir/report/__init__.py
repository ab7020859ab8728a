"""Report: one report model (diff.result.DiffResult) rendered as text, JSON, Markdown, HTML.

It is rendered with the bench and memory results that belong to it.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..ablate import Ablation
from ..bench.memory import MemoryReport
from ..bench.run import BenchReport
from ..common.files import write_atomic
from ..diff.result import DiffResult
from .html_report import diff_html
from .markdown import diff_markdown
from .sentences import finding, summary


def diff_json(result: DiffResult) -> dict:
    """A DiffResult as the diff JSON file holds it: its data, each summary and finding with its words."""

    data, names = result.as_json(), result.names
    for s, out in zip(result.summary, data["summary"]):
        out["text"] = summary(s, names)
    for blk, out in zip(result.blocks, data["blocks"]):
        for f, fj in zip(blk.findings, out["findings"]):
            fj["text"] = finding(f, names)
    return data


def write_outputs(result: DiffResult, *, json_path: Path | None = None, md_path: Path | None = None,
                  html_path: Path | None = None, bench: BenchReport | None = None, command: str | None = None,
                  memory: MemoryReport | None = None, ablation: Ablation | None = None) -> list[Path]:
    """Write each requested rendering of a diff.result.DiffResult (DiffReport.result(), or one loaded)
    atomically; return the paths written. The bench.run.BenchReport and
    bench.memory.MemoryReport that measured its files ride in its metrics (as their JSON), and the
    HTML charts them, or those a saved result carries; an ablate.Ablation of its files adds the HTML's
    "what each difference costs" table."""

    metrics = dict(result.metrics, **({"bench": bench.as_json()} if bench else {}),
                   **({"memory": memory.as_json()} if memory else {}))
    result = replace(result, metrics=metrics)
    bench = bench or (BenchReport.from_json(metrics["bench"]) if metrics.get("bench") else None)
    memory = memory or (MemoryReport.from_json(metrics["memory"]) if metrics.get("memory") else None)
    written = []
    if json_path:
        write_atomic(Path(json_path), json.dumps(diff_json(result), indent=2, sort_keys=False) + "\n")
        written.append(Path(json_path))
    if md_path:
        write_atomic(Path(md_path), diff_markdown(result))
        written.append(Path(md_path))
    if html_path:
        write_atomic(Path(html_path), diff_html(result, bench, command, memory, ablation))
        written.append(Path(html_path))
    return written
