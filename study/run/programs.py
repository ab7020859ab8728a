"""docs/findings-programs.md: what scanning and rematerializing layers cost or save, per framework.

A sweep of study/grids/findings-programs.toml into --results (default out/sweeps/findings-programs),
then the page from its records (study.programs; --render: from the folder alone, computing nothing). Two parts:
- LLaMA-3.1-8B's training step (JAX, abstract bfloat16 captures) compiled for one TPU v6e chip by libtpu,
  no TPU: lowering and compile time, program size, the compiler's memory plan, per program (unrolled,
  --remat, --scan-layers, both). Needs `make setup-tpu`.
- LLaMA tiny on XLA CPU (jaxlib's), JAX and torch_xla captures with weights, parity-checked: compile
  time, first and steady run, per program, forward and training step.
- LLaMA-3.2-1B's forward on XLA CPU, the same two routes unrolled and scanned: a published size whose
  float32 weights fit this machine.
The finished records are kept in benchmarks/records/findings-programs (restored before a run, the finished
ones added after), and the captures they name (the page counts their ops) in
benchmarks/records/findings-programs-captures, so --render needs nothing but the repository.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import with_kept


ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "study" / "grids" / "findings-programs.toml"
KEPT = ROOT / "benchmarks" / "records" / "findings-programs"  # restored before a run, the finished ones added after


def run(args):
    """The sweep of args.grid into args.results (with args.render, what the folder holds), as the page's Records."""
    from study import Records
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    def progress(message):
        print(f"findings_programs: {message}", file=sys.stderr, flush=True)

    grid = read_grid(args.grid)
    if args.render:
        return Records(run_sweep(grid, args.results, render_only=True))
    return Records(run_sweep(grid, args.results, jobs=args.jobs, progress=progress))


def main() -> None:
    from study import programs_page

    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=Path, default=GRID)
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "sweeps" / "findings-programs")
    ap.add_argument("--jobs", type=int, default=1, help="local workers for the untimed jobs: 1, since the page "
                    "reports lowering and compile times, which jobs beside them would slow")
    ap.add_argument("--render", action="store_true", help="compute nothing: the page from --results")
    ap.add_argument("--kept", default=str(KEPT),
                    help="the records kept in the repository (benchmarks/records/README.md; '' for none)")
    args = ap.parse_args()
    records = with_kept(args.kept, args.results, "findings_programs", lambda: run(args), lambda got: got.report,
                        captures=True)  # the page counts each capture's ops and reads its sidecar's seconds
    print(programs_page(records), end="")


if __name__ == "__main__":
    main()
