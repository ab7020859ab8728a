"""Capture overhead: stackwars-ir's per-stage wall times against the bare framework calls.

GPT-2 base, batch 2, seq 64 by default. The bare calls: torch.export.export, then torch_xla's
exported_program_to_stablehlo + get_stablehlo_text, and torchax's exported_program_to_jax + a
jax.jit lowering. The tool's stages come from the sidecars of a fresh `capture` run.
Usage: .venv/bin/python benchmarks/capture_overhead.py [--model gpt2] [--size base]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import machine_line


def bare(model: str, size: str, batch: int, seq: int) -> dict:
    import jax
    import torch
    from torch_xla.stablehlo import (
        StableHLOExportOptions,
        exported_program_to_stablehlo,
    )
    from torchax import export as tx

    from stackwars_ir.workload import Request, prepare

    w = prepare(Request(model, size, "torch", batch=batch, seq=seq).validated())
    m, inputs = w.model, w.inputs
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    # Warm both exporters on a trivial program, as the tool does (first-export effects are not overhead).
    tiny = torch.export.export(torch.nn.Linear(2, 2), (torch.zeros(1, 2),))
    exported_program_to_stablehlo(tiny, StableHLOExportOptions(export_node_metadata=True)).get_stablehlo_text("forward")
    out = {}
    t0 = time.perf_counter()
    ep = torch.export.export(m, args)
    out["torch.export"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    exported_program_to_stablehlo(ep, StableHLOExportOptions(export_node_metadata=True)).get_stablehlo_text("forward")
    out["torch_xla to StableHLO"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    states, fn = tx.exported_program_to_jax(ep)
    with jax.enable_x64(True):
        jax.jit(fn).lower(states, [jax.numpy.asarray(v) for v in inputs.values()]).as_text(debug_info=True)
    out["torchax to StableHLO"] = time.perf_counter() - t0
    return out


def tool(model: str, size: str, batch: int, seq: int) -> dict:
    from stackwars_ir.capture import EXPORTERS, Request, run

    with tempfile.TemporaryDirectory() as d:
        run(Request(model, size, "torch", EXPORTERS, batch, seq), Path(d), show=False)
        out = {}
        for stem in ("torch-torch_xla", "torch-torchax"):
            side = json.loads((Path(d) / f"{model}-{size}" / f"{stem}.json").read_text())
            out.update(side["run"]["seconds"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="base")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args()
    print(f"machine: {machine_line()}")
    print(f"{a.model} {a.size}, batch {a.batch}, seq {a.seq}\n")
    b = bare(a.model, a.size, a.batch, a.seq)
    t = tool(a.model, a.size, a.batch, a.seq)
    print(f"{'stage':28} {'bare s':>8} {'tool s':>8} {'ratio':>6}")
    for stage in ("torch.export", "torch_xla to StableHLO", "torchax to StableHLO"):
        print(f"{stage:28} {b[stage]:8.2f} {t[stage]:8.2f} {t[stage] / b[stage]:6.2f}")
    total_b = sum(b.values())
    total_t = sum(t[s] for s in b)
    print(f"{'export stages together':28} {total_b:8.2f} {total_t:8.2f} {total_t / total_b:6.2f}  (goal <= 1.10)")
    print("\nother tool stages (no bare counterpart): "
          + ", ".join(f"{k} {v:.2f} s" for k, v in t.items() if k not in b))


if __name__ == "__main__":
    main()
