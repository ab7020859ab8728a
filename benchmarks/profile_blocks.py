"""Time by block: bench --profile's overhead and coverage, and the time to attribute a profile to blocks.

For one pair of captures (default: GPT-2 base, JAX against torch_xla, captured first if missing), in
one run: each file's unprofiled steady state and its profiled runs (overhead = profiled wall /
steady), the share of a profiled run that kernels cover (busy) and that lies outside every kernel,
the time to diff the pair and attribute both profiles to its blocks (diff.with_times), and the gap by
role as `diff --bench` prints it.
Usage: .venv/bin/python benchmarks/profile_blocks.py [--captures DIR] [--model gpt2] [--step forward] [--profile 10]
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
    a = ap.parse_args()

    import os

    from stackwars_ir.bench.run import bench_files
    from stackwars_ir.bench.timing import SAMPLING_ENV
    from stackwars_ir.diff import diff_files, with_times
    from stackwars_ir.report.text import _time_text
    from stackwars_ir.sweep import captured
    from stackwars_ir.workload import Request

    folder = Path(a.captures) if a.captures else ROOT / "out" / "bench-captures"
    req = Request(a.model, size="base", step=a.step, exporters=("torch_xla",)).validated()
    paths = captured(req, folder, sweep=False)  # captured once, reused after
    os.environ[SAMPLING_ENV] = f"profile={a.profile}"
    report = bench_files(paths, "cpu", timeout=600, with_peaks=False)
    print(f"machine: {machine_line()}; {a.model} base {a.step}, {a.profile} profiled runs")
    for _, e in report.rows:
        if not e.ok:
            print(f"{e.label}: {e.error}")
            continue
        p = e.profile
        print(f"{e.name:16} steady {p.steady_s * 1e3:8.2f} ms  profiled run {p.wall_s * 1e3:8.2f} ms "
              f"(overhead {p.overhead:.3f}x)  kernels busy {p.busy_s / p.wall_s:.1%} of it, outside kernels "
              f"{p.outside_s * 1e3:.2f} ms; kernel sum {p.kernel_s * 1e3:.2f} ms; {len(p.kernels)} kernels, "
              f"{len(p.untraced)} untraced")
    (_, ea), (_, eb) = report.rows
    t0 = time.perf_counter()
    diff = diff_files(*paths)
    t1 = time.perf_counter()
    result = with_times(diff, diff.result(), ea.profile, eb.profile)
    t2 = time.perf_counter()
    print(f"diff {t1 - t0:.2f} s; result and attribution of both profiles {t2 - t1:.2f} s")
    print("\n".join(_time_text(result)))


if __name__ == "__main__":
    main()
