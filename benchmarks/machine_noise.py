"""Whether the sweep's machine-noise probe tells a quiet machine from a loaded one: the probe run here
idle and beside known loads, taking turns, each reading as the sweep takes it.

    .venv/bin/python benchmarks/machine_noise.py [--rounds 6] [--seconds 2]

For each condition it prints what the probe reads (bench.timing.machine_noise: the spread of a fixed
matmul chain, (p90 - p10) / median) and the chain's median time against the idle runs' fastest median
(the slowdown a job beside that load would see). Run it alone: its point is the loads it starts.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time


def _spin(stop) -> None:  # one core busy in the interpreter
    while not stop.is_set():
        for _ in range(100_000):
            pass


def _matmul(stop) -> None:  # one core of BLAS work, as another benchmark would run
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import numpy as np

    a = np.random.default_rng(1).standard_normal((768, 768), dtype=np.float32)
    while not stop.is_set():
        a @ a


def _stream(stop) -> None:  # memory bandwidth: copying 256 MiB again and again
    import numpy as np

    a = np.ones(64 * 2**20, dtype=np.float32)
    b = np.empty_like(a)
    while not stop.is_set():
        np.copyto(b, a)


LOADS = {"idle": [], "1 spinning process": [_spin], "2 spinning processes": [_spin, _spin],
         "1 BLAS process (1 thread)": [_matmul], "1 memory-streaming process": [_stream]}
if (os.cpu_count() or 1) > 2:
    LOADS[f"a spinning process on each of the {os.cpu_count()} cpus"] = [_spin] * os.cpu_count()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    from stackwars_ir.bench.timing import machine_probe

    ctx = mp.get_context("spawn")
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in LOADS}
    for _ in range(a.rounds):
        for name, fns in LOADS.items():
            stop = ctx.Event()
            procs = [ctx.Process(target=f, args=(stop,), daemon=True) for f in fns]
            for p in procs:
                p.start()
            time.sleep(1.0 if procs else 0.0)  # the load running before the probe starts
            got[name].append(machine_probe(a.seconds))  # as a timed job takes it
            stop.set()
            for p in procs:
                p.join(10)
    idle = min(m for _, m in got["idle"])
    print(f"# machine-noise probe, {a.rounds} rounds of {a.seconds:g} s per condition, taking turns; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, Python {sys.version.split()[0]}")
    print(f"# idle chain median (fastest round): {idle * 1e3:.1f} ms")
    print("| condition | probe spread: min | median | max | chain median / idle's: min | median | max |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, rs in got.items():
        s = sorted(x for x, _ in rs)
        r = sorted(m / idle for _, m in rs)
        print(f"| {name} | {s[0]:.0%} | {statistics.median(s):.0%} | {s[-1]:.0%} | "
              f"{r[0]:.2f} | {statistics.median(r):.2f} | {r[-1]:.2f} |")


if __name__ == "__main__":
    main()
