"""docs/findings-memory.md: the study's OOM table recomputed by the TPU v6e compiler.

A sweep of study/grids/findings-memory.toml into --results (default out/sweeps/findings-memory):
each cell one executable compiled for TPU v6e chips without a TPU (libtpu's compile-only client), from
an abstract capture (shapes only, bfloat16) or, where the weights fit, a parity-checked one, against
v6e-1's 32 GiB; then the page from the records
(study.memory renders it). Finished jobs are never recomputed (failed ones are
tried again): run again after a kill, or with --render to rebuild the page from the results alone.
The finished records are kept in benchmarks/records/findings-memory (restored before a run, the
finished ones added after), so the page renders again on a fresh machine. Needs `make setup-tpu`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import with_kept


ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "study" / "grids" / "findings-memory.toml"
KEPT = ROOT / "benchmarks" / "records" / "findings-memory"  # restored before a run, the finished ones added after


def run(grid_path: Path, results: Path, jobs: int, render: bool):
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    def progress(message: str) -> None:
        print(f"findings_memory: {message}", file=sys.stderr, flush=True)

    grid = read_grid(grid_path)
    if render:
        return run_sweep(grid, results, render_only=True)
    return run_sweep(grid, results, jobs=jobs, retry_failed=True, progress=progress)


def main() -> None:
    from study import memory_page

    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=Path, default=GRID)
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "sweeps" / "findings-memory")
    ap.add_argument("--jobs", type=int, default=2, help="local workers (each job asks for its memory: two "
                                                         "compiles of 8B training steps wait for each other)")
    ap.add_argument("--render", action="store_true", help="compute nothing: the page from --results")
    ap.add_argument("--kept", default=str(KEPT),
                    help="the records kept in the repository (benchmarks/records/README.md; '' for none)")
    args = ap.parse_args()
    # failed records kept too: every run retries them (run_sweep's retry_failed), and the page names them
    report = with_kept(args.kept, args.results, "findings_memory",
                       lambda: run(args.grid, args.results, args.jobs, args.render), failed=True)
    print(memory_page(report), end="")


if __name__ == "__main__":
    main()
