"""A sweep's wall time on 1 and 2 local workers and on a local Ray cluster, and the cost per job around the job itself.

Each run starts from an empty results folder, so every job runs. Overhead per job: (wall time x
workers - the jobs' own seconds, as their records measured them inside the worker) / jobs: the worker
process's start and imports, the scheduler, the record's write. Run alone on the machine.

    .venv/bin/python benchmarks/sweep_scaling.py [--grid benchmarks/grids/scaling.toml] [--no-ray]
        [--models llama --no-mesh]   # a part of a grid: its jobs of these models, without the meshes
        [--workers 2,1]              # which local runs, in this order (default 1,2)
        [--log FILE]                 # each finished job, with the run's elapsed time, as it finishes

A run cut short leaves its log: how far each executor got, and when.
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from stackwars_ir.common.files import host
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=Path, default=Path(__file__).parent / "grids" / "scaling.toml")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--models", default="", help="comma-separated: only these models' jobs")
    ap.add_argument("--no-mesh", action="store_true", help="only the jobs on one device")
    ap.add_argument("--workers", default="1,2", help="the local runs' worker counts, in this order")
    ap.add_argument("--log", type=Path, help="append each run's progress lines here, with elapsed seconds")
    args = ap.parse_args()
    grid = read_grid(args.grid)
    models = set(filter(None, args.models.split(",")))
    grid = dataclasses.replace(grid, jobs=tuple(j for j in grid.jobs if (not models or j.request.model in models)
                                                and not (args.no_mesh and j.request.mesh)))
    counts = [int(n) for n in args.workers.split(",") if n]
    runs = [(f"local, {n} worker{'s' * (n > 1)}", dict(jobs=n), n) for n in counts]
    if not args.no_ray:
        runs.append(("ray local, 2 CPUs", dict(ray="local", jobs=2), 2))
    h = host()
    part = (f" ({', '.join(sorted(models))}" if models else " (") + (", one device)" if args.no_mesh else ")")
    print(f"# {args.grid.name}{part if models or args.no_mesh else ''}: {len(grid.jobs)} jobs on "
          f"{h['processor']} ({h['cpus']} cpus)")
    walls = {}
    for name, how, width in runs:
        root = Path(tempfile.mkdtemp(prefix="stackwars-sweep-bench-"))
        try:
            t0 = time.perf_counter()
            log = None
            if args.log:
                def log(line, name=name, t0=t0):
                    with args.log.open("a") as f:
                        f.write(f"{name} +{time.perf_counter() - t0:7.1f} s {line}\n")
            report = run_sweep(grid, root, progress=log, **how)
            wall = time.perf_counter() - t0
        finally:
            shutil.rmtree(root, ignore_errors=True)
        inside = sum(r.seconds for r in report.records)
        walls[name] = wall
        print(f"{name:20s} wall {wall:7.1f} s   jobs' own {inside:7.1f} s   failed {len(report.failed)}   "
              f"overhead per job {(wall * width - inside) / len(report.records):5.2f} s")
    base = walls.get("local, 1 worker")
    for name, wall in walls.items() if base else ():
        print(f"{name:20s} speed-up over 1 worker {base / wall:.2f}x")


if __name__ == "__main__":
    main()
