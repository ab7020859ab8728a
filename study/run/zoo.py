"""docs/findings-zoo.md: transformers architectures through torch_xla and torchax, forward and train.

A sweep of study/grids/zoo.toml into --results (default out/sweeps/zoo): captures and diffs on
--jobs local workers, then every bench alone (the sweep runs timed jobs last, one at a time: no timed
run shares the machine's cores with another job), then the page from the records
(study.zoo renders it). Finished jobs are never recomputed (failed ones are tried
again): run again after a kill, or with --render to rebuild the page from the results alone. Prints
docs/findings-zoo.md; `make findings-zoo` writes it (about 35 minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import with_kept


ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "study" / "grids" / "zoo.toml"


def run(results: Path, jobs: int, render: bool):
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    grid = read_grid(GRID)

    def progress(message: str) -> None:
        print(f"findings_zoo: {message}", file=sys.stderr, flush=True)

    if render:
        return run_sweep(grid, results, render_only=True)
    return run_sweep(grid, results, jobs=jobs, retry_failed=True, progress=progress)  # benches run alone, last


def main() -> None:
    from study import zoo_page

    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "sweeps" / "zoo")
    ap.add_argument("--jobs", type=int, default=2, help="workers for the captures and diffs (benches: one)")
    ap.add_argument("--render", action="store_true", help="compute nothing: the page from --results")
    ap.add_argument("--kept", default=str(ROOT / "benchmarks" / "records" / "zoo"),
                    help="the records kept in the repository (benchmarks/records/README.md; '' for none)")
    args = ap.parse_args()
    report = with_kept(args.kept, args.results, "findings_zoo", lambda: run(args.results, args.jobs, args.render))
    print(zoo_page(report))


if __name__ == "__main__":
    main()
