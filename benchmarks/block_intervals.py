"""How often diff --bench's per-block intervals exclude zero when no block differs: runstats.part_gaps on simulated profiles.

Each simulated profile: `--blocks` blocks, `--runs` profiled runs a side, every block's time in a run
drawn around the same mean on both sides (a per-run noise of `--noise`, independent per block and
run), so every block's true gap is zero. Printed: the share of blocks whose 95% interval excludes
zero, over `--profiles` profiles; then the same with B's runs all slower by `--drift` (the machine
drifting between A's profiled runs and B's, which are taken one after the other), where every block's
"gap" is that drift's share of it; then with a single block truly slower by `--slow`.
Usage: .venv/bin/python benchmarks/block_intervals.py [--blocks 64] [--runs 10] [--profiles 50]
       [--noise 0.05] [--drift 0.03] [--slow 0.2]
"""
from __future__ import annotations

import argparse
import random

from _common import machine_line


def profile(rng, blocks: int, runs: int, noise: float, scale: float = 1.0, slow: float = 0.0):
    """(totals, {block: per-run times}): block 0 slower by `slow`, every block scaled by `scale`."""
    parts = {k: [rng.gauss(1.0, noise) * scale * (1.0 + slow * (k == 0)) for _ in range(runs)] for k in range(blocks)}
    return [sum(p[i] for p in parts.values()) for i in range(runs)], parts


def flagged(args, scale: float, slow: float) -> tuple[float, float]:
    """(share of the null blocks flagged, share of profiles that flag block 0)."""
    from stackwars_ir.runstats import part_gaps

    null, first = 0, 0
    for seed in range(args.profiles):
        rng = random.Random(seed)
        ta, pa = profile(rng, args.blocks, args.runs, args.noise)
        tb, pb = profile(rng, args.blocks, args.runs, args.noise, scale, slow)
        gaps = part_gaps(ta, pa, tb, pb, seed=seed)
        out = [not low <= 0.0 <= high for k, (_, low, high) in gaps.items() if k is not None]
        null += sum(out[1:])
        first += out[0]
    return null / (args.profiles * (args.blocks - 1)), first / args.profiles


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--profiles", type=int, default=50)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--drift", type=float, default=0.03)
    ap.add_argument("--slow", type=float, default=0.2)
    a = ap.parse_args()
    print(machine_line())
    print(f"{a.profiles} simulated profiles of {a.blocks} blocks, {a.runs} runs a side, per-run noise {a.noise:.0%}")
    for what, scale, slow in (("no block differs", 1.0, 0.0),
                              (f"B's runs all {a.drift:.0%} slower (a drift between the sides)", 1.0 + a.drift, 0.0),
                              (f"block 0 truly {a.slow:.0%} slower", 1.0, a.slow)):
        null, first = flagged(a, scale, slow)
        print(f"- {what}: other blocks' intervals exclude zero in {null:.1%} of blocks "
              f"({null * (a.blocks - 1):.2f} a profile); block 0's in {first:.0%} of profiles")


if __name__ == "__main__":
    main()
