"""Training loops step by step: wall time, page faults and system time of each step, donated or not.

Runs the native training loops of `bench MODEL --step train` (jax.jit undonated, jax.jit with the
parameters and AdamW state donated, PyTorch eager), each in a fresh process so that no loop inherits
another's allocator state, and prints every step: wall ms, minor page faults (memory the process
touched for the first time, which the kernel maps and zeroes) and the CPU seconds the kernel spent.
It is the evidence behind the findings' reading of a slow step that compiled nothing.

`--preload LIB` runs every loop again with that allocator preloaded (LD_PRELOAD), e.g. jemalloc:
the allocator, not the framework, decides how many steps touch fresh memory.

Usage: .venv/bin/python benchmarks/page_faults.py [--model bert] [--size base] [--steps 12]
       [--loops jax,jax_donate,eager] [--preload /path/to/libjemalloc.so.2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import ROOT, machine_line


def one_loop(model: str, size: str, name: str, steps: int) -> list[dict]:
    """In this process: the baseline's own training loop, `steps` steps, each measured."""
    import resource
    import time

    from stackwars_ir.bench import native
    from stackwars_ir.workload import Request, prepare
    from stackwars_ir.workload.train import train_state

    req = Request(model, size, step="train").validated()
    w = prepare(req)
    adapter, m, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    state = train_state(req, m, inputs, reference)
    _, _, run, _, done = native.setup_of(name, train=True)(adapter, req, m, weights, state, "cpu")
    out = []
    for _ in range(steps):
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        loss = run()
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        out.append({"ms": wall * 1e3, "faults": after.ru_minflt - before.ru_minflt,
                    "sys_s": after.ru_stime - before.ru_stime, "loss": float(loss)})
    done()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert")
    ap.add_argument("--size", default="base")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--loops", default="jax,jax_donate,eager")
    ap.add_argument("--preload", type=Path, help="an allocator to run every loop with again (LD_PRELOAD)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(one_loop(a.model, a.size, a.child, a.steps)))
        return
    print(f"machine: {machine_line()}\n")
    print(f"{a.model} {a.size}, batch 2, one AdamW training step per run, {a.steps} steps, each loop in a fresh "
          "process; steady = median of steps 5 and later\n")
    allocators = [("glibc malloc", None)] + ([(a.preload.name, a.preload)] if a.preload else [])
    for alloc, lib in allocators:
        env = {**os.environ, **({"LD_PRELOAD": str(lib)} if lib else {})}
        for name in a.loops.split(","):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--model", a.model, "--size", a.size,
                   "--steps", str(a.steps), "--child", name]
            res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            if res.returncode:
                print(f"{alloc}, {name}: failed: {res.stderr.strip().splitlines()[-1:]}")
                continue
            steps = json.loads(res.stdout.strip().splitlines()[-1])
            steady = steps[4:] or steps
            med_ms = statistics.median(s["ms"] for s in steady)
            med_faults = statistics.median(s["faults"] for s in steady)
            print(f"{alloc}, {name}: steady {med_ms:,.0f} ms and {med_faults / 1e3:,.0f}k page faults a step")
            print("  step:      " + " ".join(f"{i + 1:>7}" for i in range(len(steps))))
            print("  ms:        " + " ".join(f"{s['ms']:>7,.0f}" for s in steps))
            print("  faults k:  " + " ".join(f"{s['faults'] / 1e3:>7,.0f}" for s in steps))
            print("  system s:  " + " ".join(f"{s['sys_s']:>7.2f}" for s in steps))
            print("  x steady:  " + " ".join(f"{s['ms'] / med_ms:>7.2f}" for s in steps))
            print(f"  loss: step 1 {steps[0]['loss']:.6f}, step {len(steps)} {steps[-1]['loss']:.6f}")


if __name__ == "__main__":
    main()
