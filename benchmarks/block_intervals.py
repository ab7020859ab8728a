"""How often diff --bench's per-block intervals exclude zero when no block differs: runstats.part_gaps on simulated profiles.

Each simulated profile: `--blocks` blocks, `--runs` profiled runs a side, every block's time in a run
drawn around the same mean on both sides (a per-run noise of `--noise`, independent per block and
run), so every block's true gap is zero. Printed: the share of blocks whose 95% interval excludes
zero, over `--profiles` profiles; then the same with B's runs all slower by `--drift` (the machine
drifting between A's profiled runs and B's, which are taken one after the other), where every block's
"gap" is that drift's share of it; then with a single block truly slower by `--slow`. Last, the
machine's speed ramping by `--drift` and by 10% across the whole profile (every run of both sides),
profiled as bench did before (A's runs, then B's) and as it does now on XLA:CPU (in turns, A B B A
...: bench.profile.profile_turns), each resampled side by side (runstats.part_gaps) and, in turns,
also in pairs (part_gaps' `paired`: the same run indices on both sides; not what diff --bench uses,
shown for why). Last, each worker moving each block of each side by a factor of its own (`--shift`: a
fresh worker's placement; measured on GPT-2 base, a LayerNorm read 0.03 ms in one worker and 0.15 ms in
the next), profiled in one worker and in `--rounds` fresh workers (bench --rounds).
Usage: .venv/bin/python benchmarks/block_intervals.py [--blocks 64] [--runs 10] [--profiles 50]
       [--noise 0.05] [--drift 0.03] [--slow 0.2] [--shift 0.1] [--rounds 3,10]
"""
from __future__ import annotations

import argparse
import random

from _common import machine_line


def profile(rng, blocks: int, runs: int, noise: float, scale=1.0, slow: float = 0.0):
    """(totals, {block: per-run times}): block 0 slower by `slow`, every block scaled by `scale` (a
    number, or one per run: the machine's speed at that run's moment)."""
    scales = scale if isinstance(scale, list) else [scale] * runs
    parts = {k: [rng.gauss(1.0, noise) * scales[i] * (1.0 + slow * (k == 0)) for i in range(runs)]
             for k in range(blocks)}
    return [sum(p[i] for p in parts.values()) for i in range(runs)], parts


def ramp(runs: int, drift: float, turns: bool) -> tuple[list, list]:
    """Each side's per-run speed factors when the machine slows by `drift` across the whole profile:
    A's runs then B's, or in turns (A B B A ...: bench.profile.profile_turns' order for two)."""
    moments = range(2 * runs)
    if turns:
        order = [(r + j) % 2 for r in range(runs) for j in range(2)]
        a = [t for t in moments if order[t] == 0]
        b = [t for t in moments if order[t] == 1]
    else:
        a, b = list(moments[:runs]), list(moments[runs:])
    f = [1.0 + drift * t / (2 * runs - 1) for t in moments]
    return [f[t] for t in a], [f[t] for t in b]


def flagged(args, scale, slow: float, scale_a=1.0, paired: bool = False) -> tuple[float, float]:
    """(share of the null blocks flagged, share of profiles that flag block 0)."""
    from stackwars_ir.common.runstats import part_gaps

    null, first = 0, 0
    for seed in range(args.profiles):
        rng = random.Random(seed)
        ta, pa = profile(rng, args.blocks, args.runs, args.noise, scale_a)
        tb, pb = profile(rng, args.blocks, args.runs, args.noise, scale, slow)
        gaps = part_gaps(ta, pa, tb, pb, seed=seed, paired=paired)
        out = [not low <= 0.0 <= high for k, (_, low, high) in gaps.items() if k is not None]
        null += sum(out[1:])
        first += out[0]
    return null / (args.profiles * (args.blocks - 1)), first / args.profiles


def worker_shifts(args, rounds: int, shift: float, slow: float = 0.0) -> tuple[float, float]:
    """(share of the null blocks flagged, share of profiles that flag block 0) when each worker moves
    each block of each side by a factor of its own (normal, sd `shift`) for all of that worker's runs:
    profiled in one worker (rounds=1: part_gaps resamples its runs) or in `rounds` fresh workers (part_gaps'
    rounds: the t-interval across them; bench --rounds)."""
    from stackwars_ir.common.runstats import part_gaps

    null, first = 0, 0
    for seed in range(args.profiles):
        rng = random.Random(seed)
        sides = []
        for _ in range(2):
            totals, parts = [], {k: [] for k in range(args.blocks)}
            for _ in range(rounds):
                moved = [rng.gauss(1.0, shift) for _ in range(args.blocks)]
                t, p = profile(rng, args.blocks, args.runs, args.noise, slow=slow if sides else 0.0)
                for k in parts:
                    parts[k] += [x * moved[k] for x in p[k]]
                totals += [sum(p[k][i] * moved[k] for k in p) for i in range(args.runs)]
            sides.append((totals, parts))
        (ta, pa), (tb, pb) = sides
        gaps = part_gaps(ta, pa, tb, pb, seed=seed, rounds=(args.runs,) * rounds if rounds > 1 else ())
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
    ap.add_argument("--shift", type=float, default=0.1, help="sd of the factor a worker moves each block by")
    ap.add_argument("--rounds", default="3,10", help="round counts to simulate, comma-separated")
    a = ap.parse_args()
    print(machine_line())
    print(f"{a.profiles} simulated profiles of {a.blocks} blocks, {a.runs} runs a side, per-run noise {a.noise:.0%}")
    for what, scale, slow in (("no block differs", 1.0, 0.0),
                              (f"B's runs all {a.drift:.0%} slower (a drift between the sides)", 1.0 + a.drift, 0.0),
                              (f"block 0 truly {a.slow:.0%} slower", 1.0, a.slow)):
        null, first = flagged(a, scale, slow)
        print(f"- {what}: other blocks' intervals exclude zero in {null:.1%} of blocks "
              f"({null * (a.blocks - 1):.2f} a profile); block 0's in {first:.0%} of profiles")
    for drift in (a.drift, 0.10):
        for what, turns, paired in (("one side after the other", False, False),
                                    ("in turns", True, False), ("in turns, resampled in pairs", True, True)):
            sa, sb = ramp(a.runs, drift, turns)
            null, _ = flagged(a, sb, 0.0, sa, paired=paired)
            print(f"- the machine slowing {drift:.0%} across the profile, {what}: blocks' intervals exclude "
                  f"zero in {null:.1%} of blocks ({null * (a.blocks - 1):.2f} a profile)")
    for rounds in (1, *(int(r) for r in a.rounds.split(","))):
        how = "one worker's runs resampled" if rounds == 1 else f"{rounds} rounds in fresh workers, t-interval across them"
        null, _ = worker_shifts(a, rounds, a.shift)
        _, first = worker_shifts(a, rounds, a.shift, slow=a.slow)
        print(f"- each worker moving each block by its own factor (sd {a.shift:.0%}), {how}: blocks' intervals "
              f"exclude zero in {null:.1%} of blocks ({null * (a.blocks - 1):.2f} a profile); a block truly "
              f"{a.slow:.0%} slower in {first:.0%} of profiles")


if __name__ == "__main__":
    main()
