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


def in_process(text: str) -> dict:
    """Seconds for one module, all in this process: the bare parse (warm context, best of 3),
    stackwars-ir's parse + op graph on the first call (a worker to start) and warm (best of 3),
    and, to show where the time goes, the walk's floor: touching each op's name, operands,
    results, location and attributes through the bindings while recording nothing."""
    import networkx  # noqa: F401  (imported before the first call, which should time the worker start)
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    import stackwars_ir.ir as sir
    from stackwars_ir.ir.graph import op_graph

    ctx = jmlir.make_ir_context()
    with ctx:
        ir.Module.parse(text)  # warm
        bare = best_of(lambda: ir.Module.parse(text))
        module = ir.Module.parse(text)
        touch = best_of(lambda: _touch(ir, module))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.mlir"
        p.write_text(text)
        def ours():  # the module and its graph, both returned: freeing them is not timed
            m = sir.load_one(p)
            return m, op_graph(m)

        sir._POOL.close()  # no idle worker: the first call starts them
        cold = best_of(ours, repeat=1)
        warm = best_of(ours, repeat=5)
        m = sir.load_one(p)
        graph = best_of(lambda: op_graph(m))
    return {"bare": bare, "cold": cold, "warm": warm, "touch": touch, "graph": graph, "ops": len(m.ops)}


def _touch(ir, module) -> None:
    seen = {}

    def visit(op):
        op.name
        for v in op.operands:
            seen.get(v)
        for r in op.results:
            seen[r] = r.type
        op.location
        for _ in op.attributes:
            pass
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def line(label: str, t: dict, extra: str = "") -> str:
    unit, scale = ("ms", 1e3) if t["bare"] < 0.1 else ("s", 1)
    f = (lambda x: f"{x * scale:.0f} {unit}") if unit == "ms" else (lambda x: f"{x:.2f} s")
    return (f"{label}, {t['ops']} ops: bare {f(t['bare'])}; parse+graph warm {f(t['warm'])} = "
            f"{t['warm'] / t['bare']:.2f}x (goal <= 3x), first call {f(t['cold'])} = {t['cold'] / t['bare']:.1f}x; "
            f"of which op graph {f(t['graph'])}; bindings touched, nothing recorded: "
            f"{t['touch'] / t['bare']:.2f}x{extra}")


def main() -> None:
    captures = captures_dir()
    if CORPUS.is_dir():
        files = sorted(CORPUS.rglob("*.mlir"))
        bare = min(bare_process(files) for _ in range(2))
        ours = min(ours_process(files) for _ in range(2))
        print(f"corpus, {len(files)} files, whole process: bare parse {bare:.2f} s, `stackwars-ir stats` "
              f"{ours:.2f} s, ratio {ours / bare:.2f}x (goal <= 4x)")
    for path in sorted(captures.glob("gpt2-base/*.mlir")):
        print(line(f"{path.parent.name}/{path.name}", in_process(path.read_text())))
    previous = None
    for layers in (375, 750, 1500):
        t = in_process(gpt2_layers_module(layers))
        growth = f"; growth vs half size {t['warm'] / previous:.2f}x (goal <= 2.2x)" if previous else ""
        print(line(f"generated GPT-2, {layers} layers", t, growth))
        previous = t["warm"]


if __name__ == "__main__":
    main()
