"""Fuzzing: mutate the StableHLO corpus and the golden captures, feed every input through parse, stats
and segmentation, and print what happened (docs/fuzz.md records the last run).

Usage: .venv/bin/python benchmarks/fuzz.py [--count 100000] [--seed 0] [--keep out/fuzz-failures]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import ROOT, machine_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=ROOT / "out" / "fuzz-failures",
                    help="where the inputs that failed are written, to replay them")
    a = ap.parse_args()
    from stackwars_ir.diff import fuzz
    from stackwars_ir.ir import Limits

    corpus = ROOT.parent / "shared" / "corpus" / "stablehlo-testdata"
    sources = sorted((ROOT / "captures").glob("*/*.mlir")) + sorted(corpus.glob("*.mlir"))
    limits = Limits.from_env()
    print(f"machine: {machine_line()}")
    print(f"sources: {len(sources)} files (golden captures and the shared StableHLO corpus), seed {a.seed}; "
          f"limits per parse worker: {limits.memory / 2**30:g} GiB, {limits.seconds:g} s\n")
    report = fuzz.run(sources, a.count, a.seed, a.keep,
                      progress=lambda r: print(f"  {r.inputs} inputs, {len(r.failures)} failures", file=sys.stderr))
    print("\n".join(report.lines()))
    for item, problem in report.failures[:20]:
        print(f"FAILED #{item.index} {item.source} {'+'.join(item.mutations)}: {problem}")
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
