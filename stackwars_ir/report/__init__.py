"""Report: one report model (the DiffReport, plus bench results) rendered as text, JSON, Markdown, HTML."""
from __future__ import annotations

import json
from pathlib import Path


def write_outputs(report, *, json_path: Path | None = None, md_path: Path | None = None,
                  html_path: Path | None = None, bench: dict | None = None, command: str | None = None,
                  memory: dict | None = None) -> list[Path]:
    """Write each requested rendering atomically; return the paths written."""
    from ..capture.artifact import write_atomic

    written = []
    if json_path:
        data = report.as_json()
        if bench:
            data["bench"] = bench
        if memory:
            data["memory"] = memory
        write_atomic(Path(json_path), json.dumps(data, indent=2, sort_keys=False) + "\n")
        written.append(Path(json_path))
    if md_path:
        from .markdown import diff_markdown

        write_atomic(Path(md_path), diff_markdown(report))
        written.append(Path(md_path))
    if html_path:
        from .html import diff_html

        write_atomic(Path(html_path), diff_html(report, bench, command, memory))
        written.append(Path(html_path))
    return written
