"""Does regress's B/A interval hold across reruns? The same regress run N times, and an A/A run, compared.

Runs `stackwars-ir regress MODEL --from STACK --to lock --json -` N times (each a fresh process: its own
captures, kernels, rounds and plans), then `regress FILE FILE` of the lock's capture against itself (A/A),
and prints each run's B/A with its 95% interval, whether the N intervals overlap (issue 53: three runs read
1.065 (1.046-1.081), 0.992 (0.975-1.008) and 1.032 (1.017-1.044) when the interval came from pooled
samples), and whether the A/A run passed the default thresholds (exit 0).
Usage: .venv/bin/python benchmarks/regress_repeat.py [--model gpt2] [--from jax-0.9.2] [--runs 3]
Needs the stack: stackwars-ir stack add jax-0.9.2 jax==0.9.2 jaxlib==0.9.2
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine_line

CLI = [sys.executable, "-c", "from stackwars_ir.cli.commands import main; main()"]


def regress(args: list[str]) -> tuple[int, dict, float]:
    t0 = time.perf_counter()
    done = subprocess.run(CLI + ["regress", *args, "--json", "-"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):
        raise SystemExit(f"regress {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.returncode, json.loads(done.stdout), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--from", dest="stack", default="jax-0.9.2")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"machine: {machine_line()}; regress {a.model} --from {a.stack} --to lock, {a.runs} runs, then A/A")
    spans = []
    with tempfile.TemporaryDirectory(prefix="stackwars-regress-") as tmp:
        for i in range(a.runs):
            code, got, took = regress([a.model, "--from", a.stack, "--to", "lock", "--out", f"{tmp}/r{i}"])
            t = got["time"]
            spans.append((t["low"], t["high"]))
            rounds = ", ".join(f"{b / x:.3f}" for x, b in t.get("rounds", ()))
            print(f"run {i + 1}: B/A {t['ratio']:.3f} (95% interval {t['low']:.3f}-{t['high']:.3f}); rounds {rounds}; "
                  f"exit {code}; {took:.0f} s")
        low, high = max(s[0] for s in spans), min(s[1] for s in spans)
        print(f"the {a.runs} intervals " + (f"overlap ({low:.3f}-{high:.3f})" if low <= high else "do NOT overlap"))
        same = Path(got["b"]["file"])  # the last run's capture by the lock (out/STACK/...)
        code, got, took = regress([str(same), str(same)])
        t = got["time"]
        print(f"A/A ({same.name} against itself): B/A {t['ratio']:.3f} (95% interval {t['low']:.3f}-{t['high']:.3f}); "
              f"exit {code} ({'no threshold passed' if code == 0 else 'REGRESSION: ' + '; '.join(got['breaches'])}); "
              f"{took:.0f} s")


if __name__ == "__main__":
    main()
