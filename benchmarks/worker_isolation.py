"""Worker isolation: parsing through the parser's pool (ir.load) against the same parses through bench's worker.

Issue 27 asked whether one isolation mechanism could serve both parse and bench without a loss. This
times the same files three ways, alternating, in one run:
  pool      ir.load(files): the parser's workers (one per core, a file per request, RLIMIT_AS, marshal)
  pool x1   ir.load(files, jobs=1): the same mechanism with one worker (parallelism taken out)
  bench     isolate.Isolated (bench's worker): one worker, a pickled task per file, its resident memory
            polled every 0.2 s (the task is the parse worker's own handler, so only the mechanism differs)
Each timing starts its workers afresh, as a command does.
Usage: .venv/bin/python benchmarks/worker_isolation.py [--files N] [--rounds R]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _common import ROOT

CORPUS = ROOT.parent / "shared" / "corpus" / "stablehlo-testdata"

def files(n: int) -> list[Path]:
    goldens = sorted((ROOT / "captures").rglob("*.mlir"))
    corpus = sorted(CORPUS.glob("*.mlir"))[:max(0, n - len(goldens))] if CORPUS.is_dir() else []
    return (goldens + corpus)[:n]


def pool(paths, jobs=None) -> float:
    from stackwars_ir.ir import load

    t0 = time.perf_counter()
    load(paths, jobs=jobs)  # a corpus file that does not parse is an error row here and a reply there alike
    return time.perf_counter() - t0


def bench_worker(paths) -> float:
    from stackwars_ir.ir.worker import handle
    from stackwars_ir.isolate.task import Isolated, Task

    t0 = time.perf_counter()
    with Isolated(3 << 30, stack=None) as w:
        replies = [w.run(Task(handle, ((str(p), 0, 1, None),), str(p)), 60) for p in paths]
    elapsed = time.perf_counter() - t0
    assert all(isinstance(r, tuple) and r[0] in ("ok", "error") for r in replies), replies[:3]
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    paths = files(a.files)
    size = sum(p.stat().st_size for p in paths)
    from stackwars_ir.common.files import host

    h = host()
    print(f"machine: {h.get('processor')} ({h.get('cpus')} cpus); {len(paths)} files ({size / 2**20:.1f} MiB: "
          f"the golden captures, then the StableHLO corpus in name order); {a.rounds} rounds, alternating")
    times = {"pool": [], "pool x1": [], "bench": []}
    for _ in range(a.rounds):
        times["pool"].append(pool(paths))
        times["pool x1"].append(pool(paths, jobs=1))
        times["bench"].append(bench_worker(paths))
    base = statistics.median(times["pool"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:8} median {med:6.2f} s  ({', '.join(f'{t:.2f}' for t in ts)})  {med / base:.2f}x the pool")


if __name__ == "__main__":
    main()
