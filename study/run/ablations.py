"""What the study's three IR differences cost, measured by changing them: docs/findings-ablations.md.

For GPT-2 and BERT at base size, the forward pass and the training step: each captured from JAX and
torch_xla (`stackwars-ir capture M --size base --exporter torch_xla [--step train]`, where the
capture is missing), then `stackwars-ir ablate JAX TORCH_XLA --rounds 3 --json`, one at a time, with
nothing else running (its rounds are fresh workers timing JAX, torch_xla and each rewritten variant
in turns). The page (study.ablations) says, for each claim (LayerNorm
lowering, flattening, embeddings), what rewriting it changed, and, where libtpu is installed
(`make setup-tpu`), the TPU v6e compiler's estimate of each variant (compile-only). Finished records are kept under
--results and in benchmarks/records/ablations (restored before a run, the finished ones added after)
and never recomputed; --render rebuilds the page from them alone.

Usage: .venv/bin/python -m study.run.ablations [--results out/findings-ablations] [--render]
       > docs/findings-ablations.md
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .host import made, rel, run_cli
from study.ablations import PAIRS, ablations_page, record_name

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "benchmarks" / "records" / "ablations"
CAPTURES = ROOT / "out" / "captures"
ROUNDS = 3
TARGET = "tpu-v6e"  # the study's device: the compiler's estimates where libtpu is installed


def measure(model: str, step: str, results: Path, log) -> None:
    """One model and step ablated (captured first where missing); a finished record is never redone."""
    record = results / record_name(model, step)
    if record.exists():
        return
    stem = "" if step == "forward" else "-train"
    a, b = CAPTURES / f"{model}-base" / f"jax{stem}.mlir", CAPTURES / f"{model}-base" / f"torch-torch_xla{stem}.mlir"
    if not (a.exists() and b.exists()):
        print(f"ablations: capturing {model} base {step} ...", file=sys.stderr, flush=True)
        if run_cli(["capture", model, "--size", "base", "--exporter", "torch_xla", "--step", step,
                    "--out", rel(CAPTURES), "--force"], log):
            return
    print(f"ablations: ablating {model} base {step} ({ROUNDS} rounds) ...", file=sys.stderr, flush=True)
    # exit 2 with a record: a variant failed its check, which the page reports
    run_cli(["ablate", rel(a), rel(b), "--out", rel(ROOT / "out" / "ablate" / f"{model}-base-{step}"),
             "--rounds", str(ROUNDS), "--json", rel(record)], log)
    if record.exists():
        made(record)


def estimate(model: str, step: str, results: Path) -> None:
    """A finished record given the TPU v6e compiler's estimates of A, B and each checked variant
    (compile-only; where libtpu is installed and the record has none yet), written back in place."""
    import importlib.util
    import json

    from stackwars_ir.ablate import Ablation
    from stackwars_ir.ablate.run import estimated
    from stackwars_ir.common.files import write_atomic

    record = results / record_name(model, step)
    if not record.exists() or importlib.util.find_spec("libtpu") is None:
        return
    abl = Ablation.from_json(json.loads(record.read_text()))
    if abl.target:
        return
    paths = [abl.a, abl.b] + [v.path for v in abl.variants if v.timed]
    if not all(Path(p).exists() for p in paths):
        print(f"ablations: {record.name}: its files are gone, no estimates (run it again to make them)", file=sys.stderr)
        return
    print(f"ablations: estimating {model} base {step} for {TARGET} ...", file=sys.stderr, flush=True)
    write_atomic(record, json.dumps(estimated(abl, paths, TARGET, None, None, None).as_json(), indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "findings-ablations")
    ap.add_argument("--render", action="store_true", help="compute nothing: the page from --results")
    a = ap.parse_args()
    a.results = a.results.resolve()
    os.chdir(ROOT)
    a.results.mkdir(parents=True, exist_ok=True)
    from stackwars_ir.sweep.kept import keep, restore

    restore(KEPT, a.results)
    if not a.render:
        with open(a.results / "log.txt", "a") as log:
            for model, step in PAIRS:
                measure(model, step, a.results, log)
            for model, step in PAIRS:
                estimate(model, step, a.results)
        KEPT.mkdir(parents=True, exist_ok=True)
        keep(a.results, KEPT)
    print(ablations_page(a.results), end="")


if __name__ == "__main__":
    main()
