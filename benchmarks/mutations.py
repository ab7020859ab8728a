"""The mutation test over every program: the shared corpus and the golden captures, each changed in
meaning (must be reported, in its block) and in spelling only (must be identical); prints the table
docs/benchmarks.md records, and every miss.

    .venv/bin/python benchmarks/mutations.py [--rounds 1] [--seed 0]
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stackwars_ir.diff import mutate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="mutants of each kind per program")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    corpus = ROOT.parent / "shared" / "corpus" / "stablehlo-testdata"
    sources = sorted((ROOT / "captures").glob("*/*.mlir")) + sorted(corpus.rglob("*.mlir"))
    start = time.perf_counter()
    report = mutate.run(sources, rounds=args.rounds, seed=args.seed,
                        progress=lambda n: print(f"\r{n} programs", end="", file=sys.stderr) if n % 100 == 0 else None)
    took = time.perf_counter() - start
    print(file=sys.stderr)
    print(f"{report.sources} programs ({len(sources)} found, those under 200 kB), seed {args.seed}, "
          f"rounds {args.rounds}, {took:.0f} s on {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}")
    print("\n".join(report.lines()))
    made_m, right_m = report.total(meaning=True)
    made_s, right_s = report.total(meaning=False)
    return 0 if (made_m == right_m and made_s == right_s and not report.errors) else 1


if __name__ == "__main__":
    sys.exit(main())
