"""The findings page: each claim of the Stack Wars study, measured by stackwars-ir on this machine.

A sweep of study/grids/findings.toml into --results (default out/sweeps/findings): GPT-2, BERT and
ResNet-50 at base size captured from JAX, torch_xla and torchax, diffed, every capture timed beside the
native runtimes (each model's in one job, run alone after every untimed job), seed 002's workloads,
the training steps, and the TPU v6e compiler's estimates; then docs/findings.md from the records
(study renders it). Finished jobs are never recomputed: run again after a kill,
or with --render to rebuild the page from the results alone. `make findings-main` writes it (about two
hours on 2 cores); on a machine with a GPU, `make findings BACKEND=gpu` writes docs/findings-gpu.md (the
CUDA PJRT plugin: `make setup-gpu`).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import with_kept


ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "study" / "grids" / "findings.toml"
HOST_RECORDS = ROOT / "out" / "findings-host"  # `make findings-host`'s: section 12 renders them
HOST_KEPT = ROOT / "benchmarks" / "records" / "host"  # and where that keeps them
PROTOCOLS_KEPT = ROOT / "benchmarks" / "records" / "host-protocols"  # section 12's protocols (study.run.protocols)
ABLATION_RECORDS = ROOT / "out" / "findings-ablations"  # `make findings-ablations`'s: section 13 renders them
ABLATION_KEPT = ROOT / "benchmarks" / "records" / "ablations"


def grid_tables(path: Path, backend: str, size: str | None) -> list[dict]:
    """The grid's tables for BACKEND (gpu: timed there, no TPU estimates, no profiles, and no torch_xla
    lazy loop in training, which has no CUDA route here); `size` for every model (a quick check)."""
    import tomllib

    from stackwars_ir.common.targets import is_tpu

    out = []
    for t in tomllib.loads(path.read_text())["grid"]:
        t = dict(t, **({"sizes": [size]} if size else {}))
        if backend != "cpu":
            if any(is_tpu(x) for x in t.get("targets", ())):
                continue
            t["targets"] = [backend]
            t.pop("profile", None)
            if t.get("steps") == ["train"]:
                t["baselines"] = [b for b in t.get("baselines", []) if b != "torch_xla"]
        out.append(t)
    return out


def run(grid: Path, results: Path, backend: str = "cpu", size: str | None = None, render: bool = False, jobs: int = 2,
        retry_failed: bool = False, retry_noisy: bool = False):
    """The sweep (or, with `render`, what the results folder holds), as the page's Results."""
    from study import Results
    from study.page import shown
    from stackwars_ir.sweep.execute import captures_gone, run_sweep
    from stackwars_ir.sweep.grid import grid_of

    def progress(message: str) -> None:
        print(f"findings: {message}", file=sys.stderr, flush=True)

    g = grid_of(grid_tables(grid, backend, size), shown(grid, ROOT))
    if render:
        report = run_sweep(g, results, render_only=True)
        if gone := captures_gone(report.records, results):  # sections 10 and 11 diff the captures again (kernels trace to the blocks of their graphs)
            print(f"findings: error: {results}: {len(gone)} of the records' captures are not there, or hold other "
                  "bytes than their records (fix: run without --render to capture them again: minutes; nothing "
                  "finished is recomputed but what read other bytes)", file=sys.stderr)
            sys.exit(2)
        return Results(report)
    return Results(run_sweep(g, results, jobs=jobs, retry_failed=retry_failed, retry_noisy=retry_noisy,
                             progress=progress))


def page(res, grid: Path = GRID, backend: str = "cpu") -> str:
    """docs/findings.md (findings-BACKEND.md) of RES, the page's Results."""
    from study import findings_page
    from stackwars_ir.sweep.kept import restore

    if backend == "cpu":  # section 12's records, kept by `make findings-host` (benchmarks/records/host); 13's
        HOST_RECORDS.mkdir(parents=True, exist_ok=True)
        restore(HOST_KEPT, HOST_RECORDS)
        (HOST_RECORDS / "protocols").mkdir(exist_ok=True)  # its protocols' rounds, kept by study.run.protocols
        restore(PROTOCOLS_KEPT, HOST_RECORDS / "protocols")
        ABLATION_RECORDS.mkdir(parents=True, exist_ok=True)
        restore(ABLATION_KEPT, ABLATION_RECORDS)
    return findings_page(res, backend, grid, ROOT, HOST_RECORDS, ABLATION_RECORDS if backend == "cpu" else None)


def html_report(res, backend: str) -> None:
    """GPT-2's diff of JAX against torch_xla with its bench, as out/gpt2-SIZE[-BACKEND]-report.html."""
    from stackwars_ir.bench.run import BenchReport
    from stackwars_ir.diff.result import DiffResult
    from stackwars_ir.report import write_outputs

    bench, diff = res.bench("gpt2"), res.diff("gpt2", "forward", "torch_xla")
    if isinstance(bench, BenchReport) and isinstance(diff, DiffResult):
        size = next(r.job.request.size for r in res.report.records if r.job.request.model == "gpt2")
        (ROOT / "out").mkdir(exist_ok=True)
        suffix = "" if backend == "cpu" else f"-{backend}"
        write_outputs(diff, html_path=ROOT / "out" / f"gpt2-{size}{suffix}-report.html", bench=bench)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=Path, default=GRID)
    ap.add_argument("--results", type=Path, default=None, help="default out/sweeps/findings (-gpu)")
    ap.add_argument("--jobs", type=int, default=2, help="local workers for the untimed jobs (timed ones run alone)")
    ap.add_argument("--render", action="store_true", help="compute nothing: the page from --results")
    ap.add_argument("--retry-failed", action="store_true", help="run the jobs that failed before again")
    ap.add_argument("--retry-noisy", action="store_true",
                    help="run again the timed jobs taken on a noisy machine (sweep --retry-noisy)")
    ap.add_argument("--size", default=None, help="every model at this size (default: the grid's, base)")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--kept", default=None,
                    help="the records kept in the repository (default benchmarks/records/findings(-gpu); '' for none)")
    a = ap.parse_args()
    name = "findings" if a.backend == "cpu" else f"findings-{a.backend}"
    results = (a.results or ROOT / "out" / "sweeps" / name).resolve()  # before the chdir: as the user named it
    kept = ROOT / "benchmarks" / "records" / name if a.kept is None else (Path(a.kept).resolve() if a.kept else None)
    os.chdir(ROOT)
    # the captures the records name, kept beside them (kept-captures/): sections 10 and 11 diff them
    # again, and a capture made again need not come out byte for byte (benchmarks/records/README.md)
    res = with_kept(str(kept) if kept else "", results, "findings",
                    lambda: run(a.grid, results, a.backend, a.size, a.render, a.jobs, a.retry_failed, a.retry_noisy),
                    lambda got: got.report, captures=True)
    html_report(res, a.backend)
    print(page(res, a.grid, a.backend), end="")


if __name__ == "__main__":
    main()
