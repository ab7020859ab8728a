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


def with_kept(kept: str, results: Path, name: str, run: Callable[[], object], report=lambda got: got):
    """run() (a sweep into RESULTS) between a restore of the records kept in KEPT ('' for none) and a keep
    of the finished ones of its own jobs back there (sweep.kept.carried); `report(got)`: its SweepReport."""
    from stackwars_ir.sweep.kept import carried

    with carried(Path(kept) if kept else None, Path(results) / "jobs",
                 lambda m: print(f"{name}: {m}", file=sys.stderr, flush=True)) as only:
        got = run()
        only.update(r.key for r in report(got).records)
    return got
