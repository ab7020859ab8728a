"""Diff speed: `diff` of two GPT-2 base captures and of two generated ~100k-op modules (parse included),
in one process and as a whole `stackwars-ir diff` process (what a user waits for).

Usage: .venv/bin/python benchmarks/diff_speed.py [--captures DIR]
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import best_of, captures_dir, gpt2_layers_module


def timed_diff(a: Path, b: Path) -> tuple[float, object]:
    """In one process: the diff and its result (the op comparison of every block, the whole program's)."""
    from stackwars_ir.diff import diff_files

    holder = {}
    t = best_of(lambda: holder.setdefault("r", diff_files(a, b).result()), repeat=2)
    return t, holder["r"]


def whole_process(a: Path, b: Path, *extra: str, runs: int = 3) -> float:
    """The median of `runs` whole `stackwars-ir diff` processes, measured after each finished its output."""
    cli = Path(sys.executable).with_name("stackwars-ir")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run([str(cli), "diff", str(a), str(b), *extra], capture_output=True)
        times.append(time.perf_counter() - t0)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr.decode()[-500:])
    return statistics.median(times)


def main() -> None:
    captures = captures_dir()
    base = captures / "gpt2-base"
    for other in ("torch-torch_xla", "torch-torchax"):
        if (base / f"{other}.mlir").exists():
            t, r = timed_diff(base / "jax.mlir", base / f"{other}.mlir")
            whole = whole_process(base / "jax.mlir", base / f"{other}.mlir")
            print(f"gpt2 base, jax vs {other}: {t:.2f} s in one process, {whole:.2f} s a whole process, "
                  f"{len(r.blocks)} block pairs")
    previous = None
    with tempfile.TemporaryDirectory() as d:
        for layers in (375, 750):
            a, b = Path(d) / f"a{layers}.mlir", Path(d) / f"b{layers}.mlir"
            t0 = time.perf_counter()
            a.write_text(gpt2_layers_module(layers, debug_info=True))
            b.write_text(gpt2_layers_module(layers, debug_info=False))  # no locations: structural mode
            made = time.perf_counter() - t0
            t, r = timed_diff(a, b)
            whole, ops_whole = whole_process(a, b), whole_process(a, b, "--ops")
            ops = sum(r.a.histogram.values()) + sum(r.b.histogram.values())
            growth = f", growth vs half size {t / previous:.2f}x" if previous else ""
            print(f"generated GPT-2 pair, {layers} layers, {ops} ops in all (provenance vs structure): "
                  f"{t:.2f} s in one process{growth}; a whole process {whole:.2f} s (goal < 8 s at ~110k ops "
                  f"each), with --ops {ops_whole:.2f} s (goal < 15 s); {len(r.blocks)} pairs by {r.method}, "
                  f"same program: {r.same_program}; lowering took {made:.0f} s")
            previous = t


if __name__ == "__main__":
    main()
