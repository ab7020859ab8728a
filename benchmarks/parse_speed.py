"""Parse speed: stackwars-ir's crash-isolated parser against a bare ir.Module.parse of the same text.

Prints: the corpus (one `stats` invocation vs one bare pass in one context), GPT-2 base captures,
and generated JAX modules of ~50k, ~100k and ~200k ops (linear growth check).
Usage: .venv/bin/python benchmarks/parse_speed.py [--captures DIR]
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, best_of, captures_dir, gpt2_layers_module

CORPUS = ROOT.parent / "shared" / "corpus" / "stablehlo-testdata"

BARE = """
import sys, time
from jax._src.interpreters import mlir as jmlir
from jaxlib.mlir import ir
t0 = time.perf_counter()
ctx = jmlir.make_ir_context(); ctx.allow_unregistered_dialects = True
n = 0
with ctx:
    for p in sys.argv[1:]:
        for chunk in open(p).read().split('\\n// -----\\n'):
            try:
                ir.Module.parse(chunk); n += 1
            except Exception:
                pass
print(time.perf_counter() - t0, n)
"""


def bare_process(paths) -> float:
    """A fresh process that imports jaxlib and parses every file in one context (wall time)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", BARE, *map(str, paths)], check=True, capture_output=True)
    return time.perf_counter() - t0


def ours_process(paths) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "stackwars-ir"), "stats", "--json", *map(str, paths)],
                   capture_output=True)
    return time.perf_counter() - t0


def in_process(text: str) -> tuple[float, float]:
    """(bare parse, stackwars-ir parse + op graph) of one module, best of 3, both in this process."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    from stackwars_ir.ir import load_one
    from stackwars_ir.ir.graph import op_graph

    ctx = jmlir.make_ir_context()
    with ctx:
        ir.Module.parse(text)  # warm
        bare = best_of(lambda: ir.Module.parse(text))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.mlir"
        p.write_text(text)
        ours = best_of(lambda: op_graph(load_one(p)))
    return bare, ours


def main() -> None:
    captures = captures_dir()
    if CORPUS.is_dir():
        files = sorted(CORPUS.rglob("*.mlir"))
        bare = min(bare_process(files) for _ in range(2))
        ours = min(ours_process(files) for _ in range(2))
        print(f"corpus, {len(files)} files, whole process: bare parse {bare:.2f} s, `stackwars-ir stats` "
              f"{ours:.2f} s, ratio {ours / bare:.2f}x (goal <= 4x)")
    for path in sorted(captures.glob("gpt2-base/*.mlir")):
        bare, ours = in_process(path.read_text())
        print(f"{path.parent.name}/{path.name}: bare {bare * 1e3:.0f} ms, parse+graph {ours * 1e3:.0f} ms, "
              f"ratio {ours / bare:.2f}x (goal <= 3x)")
    previous = None
    for layers in (375, 750, 1500):
        text = gpt2_layers_module(layers)
        from stackwars_ir.ir import load_one

        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.mlir"
            p.write_text(text)
            n = len(load_one(p).ops)
        bare, ours = in_process(text)
        growth = f", growth vs half size {ours / previous:.2f}x (goal <= 2.2x)" if previous else ""
        print(f"generated GPT-2, {layers} layers, {n} ops: bare {bare:.2f} s, parse+graph {ours:.2f} s, "
              f"ratio {ours / bare:.2f}x{growth}")
        previous = ours


if __name__ == "__main__":
    main()
