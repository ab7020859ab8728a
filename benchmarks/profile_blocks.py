"""Time by block: bench --profile's overhead and coverage, and the time to attribute a profile to blocks.

For one pair of captures (default: GPT-2 base, JAX against torch_xla, captured first if missing), in
one run: each file's unprofiled steady state and its profiled runs (overhead = profiled wall /
steady), the share of a profiled run that kernels cover (busy) and that lies outside every kernel,
the time to diff the pair and attribute both profiles to its blocks (diff.with_times), and the gap by
role as `diff --bench` prints it. With --repeat N, the bench and its profiles are taken N times, each
in a fresh worker (with --rounds R, each profile in R fresh workers: bench --rounds), and the runs are
compared block by block: does every block whose gap's 95% interval
excludes zero in one run have the same sign, and an overlapping interval, in every other run (issue 53)?
And role by role (each role's blocks summed run by run, diff --bench's role table).
Usage: .venv/bin/python benchmarks/profile_blocks.py [--captures DIR] [--model gpt2] [--step forward] [--profile 10]
       [--repeat 1] [--rounds 1]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import ROOT, machine_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--captures", default=None)
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--step", default="forward")
    ap.add_argument("--profile", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1, help="bench --rounds: each profile in this many fresh workers")
    a = ap.parse_args()

    from stackwars_ir.bench.run import bench_files
    from stackwars_ir.bench.timing import Asked
    from stackwars_ir.diff import diff_files, with_times
    from stackwars_ir.report.text import time_text
    from stackwars_ir.sweep import captured
    from stackwars_ir.workload import Request

    folder = Path(a.captures) if a.captures else ROOT / "out" / "bench-captures"
    req = Request(a.model, size="base", step=a.step, exporters=("torch_xla",)).validated()
    paths = captured(req, folder, sweep=False)  # captured once, reused after
    print(f"machine: {machine_line()}; {a.model} base {a.step}, {a.profile} profiled runs"
          + (f" in each of {a.rounds} rounds (fresh workers)" if a.rounds > 1 else "") + f", {a.repeat} time(s)")
    results = []
    for i in range(a.repeat):
        report = bench_files(paths, "cpu", timeout=600, with_peaks=False, asked=Asked(profile=a.profile, rounds=a.rounds))
        print(f"\n== run {i + 1}")
        for _, e in report.rows:
            if not e.ok:
                print(f"{e.label}: {e.error}")
                continue
            p = e.profile
            print(f"{e.name:16} steady {p.steady_s * 1e3:8.2f} ms  profiled run {p.wall_s * 1e3:8.2f} ms "
                  f"(overhead {p.overhead:.3f}x)  kernels busy {p.busy_s / p.wall_s:.1%} of it, outside kernels "
                  f"{p.outside_s * 1e3:.2f} ms; kernel total {p.kernel_s * 1e3:.2f} ms (kernels in the median run "
                  f"{sum(k.seconds for k in p.kernels) * 1e3:.2f}); {len(p.kernels)} kernels, {len(p.untraced)} untraced")
        (_, ea), (_, eb) = report.rows
        t0 = time.perf_counter()
        diff = diff_files(*paths)
        t1 = time.perf_counter()
        result = with_times(diff, diff.result(), ea.profile, eb.profile)
        t2 = time.perf_counter()
        print(f"diff {t1 - t0:.2f} s; result and attribution of both profiles {t2 - t1:.2f} s")
        print("\n".join(time_text(result)))
        results.append(result)
    if len(results) > 1:
        print()
        print(agreement(results))


def agreement(results) -> str:
    """Across repeated runs: each block whose gap's interval excludes zero in some run, and whether every
    other run gives it the same sign and an overlapping interval."""
    labels = [d.label for d in results[0].blocks]
    found, same_sign, overlap, contradicted = 0, 0, 0, 0
    lines = []
    for j, label in enumerate(labels):
        gaps = [r.blocks[j].metrics["time"].get("gap_95") for r in results]
        if any(g is None for g in gaps):
            continue
        sure = [g for g in gaps if not g[0] <= 0.0 <= g[1]]
        if not sure:
            continue
        found += 1
        signs = {g[0] > 0 for g in sure}
        held = len(signs) == 1 and len(sure) == len(gaps)
        meets = max(g[0] for g in gaps) <= min(g[1] for g in gaps)
        same_sign += held
        overlap += meets
        contradicted += len(signs) > 1
        lines.append(f"  {label:24} " + "  ".join(f"[{g[0] * 1e3:+.3f}, {g[1] * 1e3:+.3f}]" for g in gaps)
                     + ("" if held else "  (not outside zero in every run)") + ("" if meets else "  (do not overlap)"))
    roles = sorted(set().union(*(r.metrics["time"].get("roles_95", {}) for r in results)))
    role_lines, role_found, role_held = [], 0, 0
    for role in roles:
        gaps = [r.metrics["time"].get("roles_95", {}).get(role) for r in results]
        if any(g is None for g in gaps) or all(g[0] <= 0.0 <= g[1] for g in gaps):
            continue
        role_found += 1
        sure = [g for g in gaps if not g[0] <= 0.0 <= g[1]]
        held = len(sure) == len(gaps) and len({g[0] > 0 for g in sure}) == 1
        role_held += held
        role_lines.append(f"  role {role:19} " + "  ".join(f"[{g[0] * 1e3:+.3f}, {g[1] * 1e3:+.3f}]" for g in gaps)
                          + ("" if held else "  (not outside zero in every run)"))
    totals = [r.metrics["time"].get("gap_95") for r in results]
    head = (f"agreement over {len(results)} runs: {found} blocks' gaps exclude zero in at least one run; "
            f"{same_sign} of them exclude it in every run with the same sign; {contradicted} change sign between "
            f"runs (each excluding zero); {overlap} have intervals that overlap across all runs. The kernel gap: " + ", ".join(f"[{g[0] * 1e3:+.3f}, {g[1] * 1e3:+.3f}] ms"
                                                                   for g in totals if g))
    head_roles = (f"by role (each role's blocks summed run by run): {role_found} roles' gaps exclude zero in at least "
                  f"one run; {role_held} of them in every run with the same sign")
    return "\n".join([head, *lines, head_roles, *role_lines])

if __name__ == "__main__":
    main()
