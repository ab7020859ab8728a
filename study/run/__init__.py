"""The study's drivers, one per page: each runs its grid or commands, then prints the page.

Run from the repository's root (as `make findings*` does): study/ sits beside the library, not
installed with it. Like the command line, they keep torch_xla on the CPU and libtpu quiet.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")
from stackwars_ir.common.runtime import quiet_libtpu  # noqa: E402  (as the CLI: libtpu says nothing on a CPU machine)

quiet_libtpu()


def with_kept(kept: str, results: Path, name: str, run: Callable[[], object], report=lambda got: got,
              captures: bool = False, failed: bool = False):
    """run() (a sweep into RESULTS) between a restore of the records kept in KEPT ('' for none) and a keep
    of the finished ones of its own jobs back there (sweep.kept.carried); `report(got)`: its SweepReport.
    `captures`: the page reads the capture files too (op counts, a sidecar's seconds), so the captures
    the records name are kept beside them, in KEPT-captures (restored before, the finished ones kept
    after, each with the bytes its record names), and the page renders from the repository alone.
    `failed`: the failed jobs' records are kept too (a run that retries failed jobs: sweep.kept.keep)."""
    from stackwars_ir.sweep.kept import carried, keep_captures, restore_captures

    def say(message: str) -> None:
        print(f"{name}: {message}", file=sys.stderr, flush=True)

    folder = Path(kept).with_name(Path(kept).name + "-captures") if kept and captures else None
    if folder is not None and (n := restore_captures(folder, Path(results))):
        say(f"{n} capture files restored from {folder}")
    with carried(Path(kept) if kept else None, Path(results) / "jobs", say, failed) as only:
        got = run()
        only.update(r.key for r in report(got).records)
    if folder is not None and (n := keep_captures(report(got).records, Path(results), folder)):
        say(f"{n} capture files kept in {folder}")
    return got
