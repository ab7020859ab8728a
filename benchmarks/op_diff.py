"""Op-level diff speed and what it finds: GPT-2 base (JAX vs torch_xla) and two generated ~100k-op modules, parsing included.

Usage: .venv/bin/python benchmarks/op_diff.py [--captures DIR]   (DIR/gpt2-base/{jax,torch-torch_xla}.mlir:
`stackwars-ir capture gpt2 --size base --framework both --exporter torch_xla --out DIR`)
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, best_of, captures_dir, gpt2_layers_module


def op_level(a: Path, b: Path) -> tuple[float, float, object]:
    """Seconds for the block diff alone and for the whole result (op-level diff of every block and
    excerpts included), each parse included; and the result."""
    from stackwars_ir.diff import diff_files

    def blocks_only():
        return diff_files(a, b)

    holder = {}

    def whole():
        holder["r"] = diff_files(a, b).result()

    return best_of(blocks_only, repeat=2), best_of(whole, repeat=2), holder["r"]


def process_seconds(a: Path, b: Path) -> float:
    """One whole `stackwars-ir diff --ops` process, best of three."""
    exe = str(Path(sys.executable).parent / "stackwars-ir")

    def run():
        subprocess.run([exe, "diff", str(a), str(b), "--ops"], capture_output=True, check=False)

    return best_of(run, repeat=3)


def main() -> None:
    from stackwars_ir.diff.ops import fold_patterns, op_totals
    from stackwars_ir.report.sentences import op_pattern, op_totals_text

    captures = captures_dir()
    base = captures / "gpt2-base"
    a, b = base / "jax.mlir", base / "torch-torch_xla.mlir"
    if a.exists() and b.exists():
        blocks_s, whole_s, r = op_level(a, b)
        print(f"gpt2 base, jax vs torch_xla: block diff {blocks_s:.2f} s, with the op-level diff {whole_s:.2f} s "
              f"(parse included); a whole `stackwars-ir diff --ops` process {process_seconds(a, b):.2f} s "
              "(goal < 1 s)")
        print("  " + op_totals_text(op_totals(r.blocks)))
        layers = {d.layer for d in r.blocks if d.layer}
        norms = [d for d in r.blocks if d.role == "norm" and d.layer]
        rewritten = [d for d in norms if any(g.status == "rewritten" and "stablehlo.batch_norm_training" in g.names_b
                                             for g in d.op_diff.groups)]
        reshapes = [d for d in r.blocks if d.role in ("attention", "mlp") and d.layer
                    and any(g.status == "only_b" and set(g.names_b) == {"stablehlo.reshape"} for g in d.op_diff.groups)]
        print(f"  {len(layers)} layers; norm blocks with batch_norm_training as a rewritten group: {len(rewritten)} of "
              f"{len(norms)}; attention/MLP blocks with reshapes only in torch_xla: {len(reshapes)} of "
              f"{sum(1 for d in r.blocks if d.role in ('attention', 'mlp') and d.layer)}")
        for p in fold_patterns(r.blocks):
            if p.layered and p.role == "norm" and p.group.status == "rewritten":
                print("  " + op_pattern(p, r.names))
    else:
        print(f"no GPT-2 base captures in {base} (see the usage line); skipped")
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a.mlir", Path(d) / "b.mlir"
        t0 = time.perf_counter()
        a.write_text(gpt2_layers_module(750, debug_info=True))
        b.write_text(gpt2_layers_module(750, debug_info=False))  # no locations: structural mode
        made = time.perf_counter() - t0
        blocks_s, whole_s, r = op_level(a, b)
        ops = r.a.ops, r.b.ops
        print(f"generated GPT-2, 750 layers ({ops[0]} and {ops[1]} ops; with vs without locations): block diff "
              f"{blocks_s:.2f} s, with the op-level diff {whole_s:.2f} s (goal < 15 s); "
              f"a whole `diff --ops` process {process_seconds(a, b):.2f} s; lowering took {made:.0f} s")
        print("  " + op_totals_text(op_totals(r.blocks)))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
