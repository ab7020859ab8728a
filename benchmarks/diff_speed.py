"""Diff speed: `diff` of two GPT-2 base captures and of two generated ~100k-op modules (parse included).

Usage: .venv/bin/python benchmarks/diff_speed.py [--captures DIR]
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _common import best_of, captures_dir, gpt2_layers_module


def timed_diff(a: Path, b: Path) -> tuple[float, object]:
    from stackwars_ir.diff import diff_files

    holder = {}
    t = best_of(lambda: holder.setdefault("r", diff_files(a, b)), repeat=2)
    return t, holder["r"]


def main() -> None:
    captures = captures_dir()
    base = captures / "gpt2-base"
    for other in ("torch-torch_xla", "torch-torchax"):
        if (base / f"{other}.mlir").exists():
            t, r = timed_diff(base / "jax.mlir", base / f"{other}.mlir")
            print(f"gpt2 base, jax vs {other}: {t:.2f} s, {len(r.alignment.pairs)} block pairs")
    previous = None
    with tempfile.TemporaryDirectory() as d:
        for layers in (375, 750):
            a, b = Path(d) / f"a{layers}.mlir", Path(d) / f"b{layers}.mlir"
            t0 = time.perf_counter()
            a.write_text(gpt2_layers_module(layers, debug_info=True))
            b.write_text(gpt2_layers_module(layers, debug_info=False))  # no locations: structural mode
            made = time.perf_counter() - t0
            t, r = timed_diff(a, b)
            ops = sum(r.a.histogram.values()) + sum(r.b.histogram.values())
            growth = f", growth vs half size {t / previous:.2f}x" if previous else ""
            print(f"generated GPT-2 pair, {layers} layers, {ops} ops in all (provenance vs structure): "
                  f"{t:.2f} s (goal < 8 s at ~100k ops each){growth}; "
                  f"{len(r.alignment.pairs)} pairs by {r.alignment.method}; lowering took {made:.0f} s")
            previous = t


if __name__ == "__main__":
    main()
