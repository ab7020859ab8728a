"""Do bench's verdicts hold from run to run? The same pair benched N times while one core is kept busy
(a spinning process started here), each verdict's 95% interval printed, and whether they all overlap.

Each run is a fresh `stackwars-ir bench A B --json` process. `--code DIR` runs another checkout's
stackwars_ir (an older commit, say, in a git worktree) with this .venv, to compare two versions on
the same machine in one sitting, runs alternating.

Usage: .venv/bin/python benchmarks/verdicts.py [--runs 5] [--code DIR ...] [A.mlir B.mlir]
       (default: the golden GPT-2 tiny captures, JAX against torch_xla)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, machine_line

DEFAULT = [ROOT / "captures" / "gpt2-tiny" / "jax.mlir", ROOT / "captures" / "gpt2-tiny" / "torch-torch_xla.mlir"]


def bench_once(files, code: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "b.json"
        env = dict(os.environ, PYTHONPATH=str(code)) if code else dict(os.environ)
        boot = "from stackwars_ir.cli.commands import main; main()"
        # Run from the checkout's root: `python -c` puts the working folder first on the path.
        done = subprocess.run([sys.executable, "-c", boot, "bench", *(str(f.resolve()) for f in files), "--json",
                               str(out)], env=env, cwd=code or ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"bench failed ({code or 'this checkout'}): {done.stderr.strip()[-2000:]}")
        data = json.loads(out.read_text())
    (v,) = data["verdicts"] or [None]
    spread = max(r["timing"]["spread"] for r in data["results"] if r.get("timing"))
    return {"verdict": v, "spread": spread}


def overlap(intervals) -> bool:
    return max(lo for lo, _ in intervals) <= min(hi for _, hi in intervals)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--code", type=Path, action="append", default=[],
                    help="another checkout's root to run as well (its stackwars_ir first on the path)")
    a = ap.parse_args()
    files = a.files or DEFAULT
    versions = [None, *a.code]
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one core kept busy throughout
    try:
        results = {v: [] for v in versions}
        for _ in range(a.runs):
            for v in versions:  # alternating: the machine's drift lands on every version alike
                results[v].append(bench_once(files, v))
    finally:
        spinner.kill()
    print(machine_line())
    print(f"{' vs '.join(f.parent.name + '/' + f.name for f in files)}, {a.runs} runs each, one core busy\n")
    for v in versions:
        print(f"## {'this checkout' if v is None else v}")
        intervals = []
        for r in results[v]:
            verdict = r["verdict"]
            if verdict is None:
                print(f"  no verdict; max spread {r['spread']:.0%}")
                continue
            if verdict.get("withheld"):
                print(f"  withheld: {verdict['withheld']}")
                continue
            signed = verdict["interval_95"] if verdict["faster"].startswith("jax") else \
                [1 / verdict["interval_95"][1], 1 / verdict["interval_95"][0]]
            intervals.append(signed)
            print(f"  {verdict['faster']} {verdict['ratio']:.2f}x (95% {verdict['interval_95'][0]:.2f}-"
                  f"{verdict['interval_95'][1]:.2f}); as jax's speed-up {signed[0]:.2f}-{signed[1]:.2f}; "
                  f"max spread {r['spread']:.0%}")
        called = len(intervals)
        print(f"  verdicts given: {called} of {len(results[v])}; their intervals "
              f"{'overlap' if called < 2 or overlap(intervals) else 'do NOT overlap'}\n")


if __name__ == "__main__":
    main()
