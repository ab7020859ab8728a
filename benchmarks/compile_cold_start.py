"""torch.compile's first call, cold (bench's torch.compile row) against warm (inductor's on-disk caches as left).

inductor keeps its compiled graphs and kernels on disk between processes, on by default. bench's
torch.compile row starts each first call from a new empty cache folder (bench/runtimes/inductor.py
cold_start); this times that first call both ways, each in a fresh process, alternating, after one
compile that fills the default caches:
  cold   the row as bench runs it
  warm   the same row with STACKWARS_IR_COMPILE_CACHE=warm (dynamo reset only: what the row did before)
Usage: .venv/bin/python benchmarks/compile_cold_start.py [--model gpt2] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from _common import ROOT, machine_line

CHILD = """
import json, sys
from stackwars_ir.bench import native
from stackwars_ir.workload import Request

(row,) = native.run_baselines(Request(sys.argv[1]).validated(), ("inductor",), None)
assert row.ok, row.error
print(json.dumps({"first_s": row.timing.first, "hits": row.timing.counters["first"]["persistent cache hits"]}))
"""


def first_call(model: str, how: str) -> dict:
    """The torch.compile row's first call (seconds) and its persistent-cache hits, in a fresh process."""
    env = dict(os.environ, STACKWARS_IR_COMPILE_CACHE=how)
    done = subprocess.run([sys.executable, "-c", CHILD, model], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from stackwars_ir.common.runstats import rounds_ratio

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"machine: {machine_line()}")
    print(f"{a.model} tiny's forward, torch.compile's first call, {a.rounds} rounds alternating cold and warm\n")
    first_call(a.model, "warm")  # fills the default caches with this graph
    cold, warm = [], []
    for r in range(a.rounds):
        c, w = first_call(a.model, "cold"), first_call(a.model, "warm")
        cold.append(c["first_s"])
        warm.append(w["first_s"])
        print(f"round {r + 1}: cold {c['first_s']:.2f} s ({c['hits']} cache hits), "
              f"warm {w['first_s']:.2f} s ({w['hits']} cache hits)", flush=True)
    ratio, low, high = rounds_ratio([c / w for c, w in zip(cold, warm)])
    print(f"\ncold median {statistics.median(cold):.2f} s, warm median {statistics.median(warm):.2f} s; "
          f"cold / warm {ratio:.2f} ({low:.2f}-{high:.2f}, 95% across rounds)")


if __name__ == "__main__":
    main()
