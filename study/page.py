"""What every findings page shares: its text, the machine and sweep lines, record dates, paths.

The text is written line by line; the machine line is the records'; each row has its record's date;
paths are named without this machine's.
"""
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
    from stackwars_ir.common.files import host

    return machine_text(host() | {"python": platform.python_version(), "system": platform.system()})


def machine_text(h: dict) -> str:
    """One machine as every page names it, from a record's host or machine fields."""
    return f"{h.get('processor')}, {h.get('cpus')} cpus, Python {h.get('python')}, {h.get('system')}"


def records_machine(records) -> str:
    """The machine a page's records were made on (its timed records', else any finished one's), not
    the one rendering it: records restored from the repository (sweep.kept) may come from another
    machine, or from several; then each kind is named with its count, and a ratio across rounds taken on
    different kinds is flagged as such. This machine's where no record says (records from before they did)."""
    from collections import Counter

    ok = [r for r in records if r.ok and r.seconds and r.host.get("processor")]
    kinds = Counter(machine_text(r.host) for r in ([r for r in ok if r.job.timed] or ok))
    if not kinds:
        return machine_line()
    text = list(kinds)
    if len(kinds) == 1:
        return text[0]
    return ("**timed on more than one kind of machine, so a ratio across rounds may mix them**: "
            + "; ".join(f"{t} ({n} records)" for t, n in zip(text, kinds.values())))


def sweep_line(report) -> str:
    """A findings page's `Sweep: ...` sentence, from the records alone, so the page a run prints and the
    one its kept records render on any machine later are the same text: the job counts (failed, not run
    yet), when and by which code the records were made (report.sweep.dated_line), the machine's noise
    before the timed jobs (noise_line) and the jobs' own time summed. What one run computed (finished
    before, run now, its workers, its seconds) is the sweep's own output, not the page's."""
    from stackwars_ir.report.sweep import dated_line, noise_line

    pending = f", {len(report.pending)} not run yet" if report.pending else ""
    parts = [f"{len(report.records)} jobs, {len(report.failed)} failed{pending}", dated_line(report.records),
             noise_line(report.records)]
    return (f"Sweep: {'; '.join(p for p in parts if p)}; the jobs' own time, summed: "
            f"{sum(r.seconds for r in report.records) / 60:.0f} min")


def records_day(records) -> str:
    """The day the newest of a page's records was made (`2026-11-30`; "undated" where none says): a
    page's date, the same whenever and wherever it is rendered."""
    days = [r.host["finished"][:10] for r in records if r.host.get("finished")]
    return max(days) if days else "undated"


def made(rec) -> tuple[str, str]:
    """(day, commit) a sweep record was made on and by (records from before they kept either: "undated",
    "unknown")."""
    return (rec.host.get("finished") or "")[:10] or "undated", rec.host.get("commit") or "unknown"


class Dates:
    """Which records each row of a page comes from, by the day and commit that made them (issue 53:
    each row names its record's date and commit). A page whose records were all made on one day by one
    commit says so once in its header (report.sweep.dated_line) and `column` is False; otherwise each
    (day, commit) gets a letter, each row a `mark` of its records' letters, and the page a `legend`."""

    def __init__(self, records):
        kinds = sorted({made(r) for r in records if r.seconds})
        self.letters = {k: chr(ord("a") + i) for i, k in enumerate(kinds)} if len(kinds) > 1 else {}

    @property
    def column(self) -> bool:
        return bool(self.letters)

    def mark(self, records) -> str:
        """The letters of `records`' (day, commit), each once ("a", "a, b"); "-" for none."""
        got = sorted({self.letters[made(r)] for r in records if r is not None and made(r) in self.letters})
        return ", ".join(got) or "-"

    def legend(self) -> str:
        """`Records by the day and commit that made them: a 2026-11-27 at commit 3c192c5; b ...`."""
        return ("Records by the day and commit that made them (a row's `record` column): " +
                "; ".join(f"{letter} {day} at commit {commit}" for (day, commit), letter in self.letters.items()) + ".")


def shown(path: Path, root: Path) -> str:
    """PATH as a page names it: relative to the project ROOT, or its name alone (no machine's path)."""
    path, root = Path(path).resolve(), Path(root).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name


def rounds_ratio_cell(reports: list, b: str, a: str, key=lambda e: e.name) -> str | None:
    """B's steady time over A's taken in each round's report (each its own worker: the grid's `rounds`),
    worded with its interval across the rounds (report.sweep.across_rounds); None with fewer than two rounds
    (the caller words the one job's own interval)."""
    from stackwars_ir.report.sweep import across_rounds

    if len(reports) < 2:
        return None
    return across_rounds(round_ratios(reports, b, a, lambda e: e.timing.steady, key))


def round_ratios(reports: list, b: str, a: str, value, key=lambda e: e.name) -> list:
    """Row B's value over row A's (rows found by `key`) in each round's report where both ran and have one."""
    ratios = []
    for rep in reports:
        got = {key(e): value(e) for _, e in rep.rows if e.ok}
        if got.get(a) and got.get(b):
            ratios.append(got[b] / got[a])
    return ratios
