"""What every findings page shares: its text written line by line, the machine line, the sweep line and paths named without this machine's."""
from __future__ import annotations

import platform
from pathlib import Path


class Page:
    """A page being written, `print`'s way (values joined by `sep`, then `end`); `text()` is the page so far."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def __call__(self, *values, sep: str = " ", end: str = "\n") -> None:
        self._parts.append(sep.join(str(v) for v in values) + end)

    def text(self) -> str:
        return "".join(self._parts)


def machine_line() -> str:
    """The machine a page was made on: processor, cpus, Python, system."""
    from ...files import host

    h = host()
    return f"{h['processor']}, {h['cpus']} cpus, Python {platform.python_version()}, {platform.system()}"


def sweep_line(report) -> str:
    """A findings page's `Sweep: ...` sentence: the sweep's summary line (job counts, executor, noise) and
    the jobs' own time summed, finished before or now."""
    from ..sweep import summary_line

    return (f"Sweep: {summary_line(report)}; the jobs' own time, summed: "
            f"{sum(r.seconds for r in report.records) / 60:.0f} min")


def shown(path: Path, root: Path) -> str:
    """PATH as a page names it: relative to the project ROOT, or its name alone (no machine's path)."""
    path, root = Path(path).resolve(), Path(root).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name
