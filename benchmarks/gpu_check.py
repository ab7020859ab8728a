"""One prepared GPU run (issue 77): native runtimes' steady steps on the GPU in rounds, the same steps predicted
from this CPU machine's host work plus the GPU's kernel time, and the page; all in one folder of at most 8 files.

What runs, each bench a fresh process (`stackwars-ir bench MODEL --baselines jax,torchax,eager,inductor
--host`), rounds outermost:
  1. on the GPU (base size, batch 2): the native runtimes' steady steps and host phases, and the jax
     capture's StableHLO timed by PJRT (the kernels XLA compiles for the model, with no framework above);
  2. the prediction of each native step from host work measured on this CPU machine where the device
     costs nothing (the narrow size of the headline issue, benchmarks/records/gpu-predict, made by
     --cpu-host here) plus the GPU's kernel time: from overlapped (the longer) to serial (the sum); each
     figure the geometric mean of its rounds with its 95% interval; the prediction's verdict per cell;
  3. with --page (on a GPU, after the rest is saved): docs/findings-gpu.md regenerated into the folder by
     `python -m study.run.findings --backend gpu`, for as long as --page-budget allows (finished jobs are kept).
The ablation and profile-import GPU checks are not built (profiles of GPU planes are refused, issue 74);
the page says so.

Usage: benchmarks/gpu_check.sh [--out out/gpu-check]             (on a GPU machine: make setup-gpu first)
       .venv/bin/python benchmarks/gpu_check.py --cpu-host          (here: the CPU host-work records, kept)
       .venv/bin/python benchmarks/gpu_check.py --dry-run --models gpt2 --rounds 2 --out DIR   (the suite's)
Run it alone: other work on the cores is another measurement.
"""
from __future__ import annotations

import argparse
import datetime
import json
import lzma
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (the project on sys.path)

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "benchmarks" / "records" / "gpu-predict"
MODELS = ("gpt2", "bert", "resnet50")
BASELINES = ("jax", "torchax", "eager", "inductor")
MAX_FILES = 8


def bench(model: str, size: str, backend: str, out: Path, batch: int | None = None, runs: int | None = None) -> dict:
    """One `stackwars-ir bench` process's JSON report ({"error": ...} where it failed); `runs`: each row's
    steady-state runs (bench --runs; None: adaptive)."""
    cmd = [sys.executable, "-m", "stackwars_ir.cli", "bench", model, "--size", size, "--baselines",
           ",".join(BASELINES), "--host", "--backend", backend, "--json", str(out), "--out", str(out.parent / "captures")]
    if batch:
        cmd += ["--batch", str(batch)]
    if runs:
        cmd += ["--runs", str(runs)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if not out.exists():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"error": f"bench exited {done.returncode}: {tail}"}
    return json.loads(out.read_text().replace(str(out.parent) + "/", ""))  # a kept record names no temp folder


def rows_of(report: dict) -> dict:
    """{kind: (steady s, host s)} of a bench JSON report: each native row's steady step and its host work
    (top-level host phases but the wait), and "xla" for the jax capture's StableHLO (host None)."""
    from stackwars_ir.bench.predict import host_seconds
    from stackwars_ir.bench.run import BenchReport

    out = {}
    if report.get("error"):
        return out
    for _, e in BenchReport.from_json(report).rows:
        if not e.ok or e.timing is None:
            continue
        if e.kind == "stablehlo":
            if Path(e.label).name == "jax.mlir":
                out["xla"] = (e.timing.steady, None)
            continue
        out[e.kind] = (e.timing.steady, host_seconds(e.host.phases)[0] if e.host else None)
    return out


def figure(values):
    """The geometric mean of per-round values with its 95% interval across rounds (None for none)."""
    from study.protocols import Figure

    return Figure.of(values)


def ms(f) -> str:
    return "-" if f is None else f.ms()


def cpu_host(models, rounds: int, size: str, folder: Path) -> None:
    """This machine's host work per native runtime at SIZE (narrow: where the CPU device costs nothing),
    each round a fresh bench, written to FOLDER as MODEL-SIZE-rR.json (xz where FOLDER is KEPT)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for r in range(1, rounds + 1):
            for m in models:
                name = f"{m}-{size}-r{r}.json"
                if (folder / name).exists() or (folder / f"{name}.xz").exists():
                    continue
                got = bench(m, size, "cpu", Path(d) / name)
                got["made"] = {"date": datetime.date.today().isoformat(), "round": r}
                data = (json.dumps(got) + "\n").encode()
                if folder == KEPT:
                    (folder / f"{name}.xz").write_bytes(lzma.compress(data))
                else:
                    (folder / name).write_bytes(data)
                print(f"gpu_check: {name}: {got.get('error') or 'ok'}", file=sys.stderr, flush=True)


def keep_host(measured: dict, size: str, folder: Path) -> None:
    """Write MEASURED's rounds ({model: [bench report per round]}) to FOLDER as cpu_host names them
    (MODEL-SIZE-rR.json): the dry run's host records, where measuring is cpu_host's bench already."""
    folder.mkdir(parents=True, exist_ok=True)
    for m, reports in measured.items():
        for r, got in enumerate(reports, 1):
            (folder / f"{m}-{size}-r{r}.json").write_text(json.dumps(got) + "\n")


def read_host(folder: Path, model: str, size: str) -> list[dict]:
    """The CPU host-work rounds of MODEL at SIZE: {kind: (steady, host)} per round."""
    out = []
    for p in sorted(folder.glob(f"{model}-{size}-r*.json*")):
        data = lzma.decompress(p.read_bytes()) if p.suffix == ".xz" else p.read_bytes()
        out.append(rows_of(json.loads(data)))
    return out


def measure(models, rounds: int, size: str, backend: str, folder: Path, batch: int | None,
            budget_s: float = float("inf"), runs: int | None = None) -> dict:
    """{model: [bench report per round]} on BACKEND, also written as FOLDER/measured.json after each bench
    (a run cut short keeps what it finished). No bench is begun that the longest so far says would end
    past BUDGET_S: rounds are outermost, so a cut leaves every model with the same rounds, or one fewer."""
    measured: dict = {m: [] for m in models}
    start, longest = time.perf_counter(), 0.0
    with tempfile.TemporaryDirectory() as d:
        for r in range(1, rounds + 1):
            for m in models:
                if time.perf_counter() - start + longest > budget_s:
                    print(f"gpu_check: {m} round {r} not begun: the budget ({budget_s:.0f} s) would run out",
                          file=sys.stderr, flush=True)
                    continue
                t0 = time.perf_counter()
                got = bench(m, size, backend, Path(d) / f"{m}-r{r}.json", batch, runs)
                measured[m].append(got)
                (folder / "measured.json").write_text(json.dumps(measured) + "\n")
                longest = max(longest, time.perf_counter() - t0)
                print(f"gpu_check: {m} round {r} on {backend}: {got.get('error') or 'ok'} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return measured


def page(measured: dict, host_folder: Path, host_size: str, backend: str, size: str, machine: str) -> str:
    """prediction.md: each native runtime's steady step on BACKEND, predicted and measured."""
    lines = [f"# Predicted from this CPU machine, measured on {backend}", "",
             f"Generated by benchmarks/gpu_check.py on {datetime.date.today().isoformat()}; measured on **{machine}** "
             f"({backend}, {size} size); host work from the CPU records at the {host_size} size "
             f"({host_folder.name}). Each figure: the geometric mean of its rounds with its 95% interval.", "",
             "- **Predicted** step: host work measured on the CPU where its device costs nothing, plus the kernel "
             "time of the model's XLA program on this device (the jax capture timed by PJRT, no framework above "
             "it; for torch eager and torch.compile an assumption: their kernels are not XLA's), from overlapped "
             "(the longer of the two) to serial (their sum).",
             "- **Verdict**: *inside* when the measured interval meets the predicted range; otherwise how far "
             "the measurement lies from it.", "",
             "| model | runtime | host, CPU (ms) | kernels, XLA (ms) | predicted (ms) | measured (ms) | verdict |",
             "|---|---|---|---|---|---|---|"]
    from stackwars_ir.bench.answer import native_kind

    for model, reports in measured.items():
        rounds = [rows_of(r) for r in reports]
        host_rounds = read_host(host_folder, model, host_size)
        kernels = figure([r["xla"][0] for r in rounds if "xla" in r])
        for name in BASELINES:
            kind = native_kind(name)
            got = figure([r[kind][0] for r in rounds if kind in r])
            host = figure([r[kind][1] for r in host_rounds if kind in r and r[kind][1]])
            if got is None:
                errors = [r.get("error") for r in reports if r.get("error")]
                lines.append(f"| {model} | {kind} | {ms(host)} | {ms(kernels)} | - | failed: "
                             f"{(errors or ['no steady step'])[0][:120]} | - |")
                continue
            if host is None or kernels is None:
                lines.append(f"| {model} | {kind} | {ms(host)} | {ms(kernels)} | - | {ms(got)} | no prediction |")
                continue
            low, high = max(host.mean, kernels.mean), host.mean + kernels.mean
            verdict = ("inside" if got.low <= high and got.high >= low else
                       f"{got.mean / high:.2f}x the serial prediction" if got.mean > high else
                       f"{low / got.mean:.2f}x below the overlapped prediction")
            lines.append(f"| {model} | {kind} | {ms(host)} | {ms(kernels)} | {low * 1e3:.3f}-{high * 1e3:.3f} | "
                         f"{ms(got)} | {verdict} |")
    lines += ["", "Not run here: the ablations' and the profile import's GPU checks (a profile's GPU planes are "
              "refused by `diff --bench-profile`: issue 74).", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "gpu-check")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--dry-run", action="store_true",
                    help="the CPU backend at tiny size, 10 steady runs a row; its measured rounds are the host records")
    ap.add_argument("--cpu-host", action="store_true", help="make this machine's narrow host-work records (kept)")
    ap.add_argument("--page", action="store_true", help="then regenerate findings-gpu.md into --out")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds the measurements may take (the GPU "
                    "is lent 15 minutes at once, its start included)")
    ap.add_argument("--page-budget", type=float, default=120.0, help="seconds the page's sweep may take")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    if a.cpu_host:
        cpu_host(models, a.rounds, "narrow", KEPT)
        return
    a.out.mkdir(parents=True, exist_ok=True)
    backend, size, batch = ("cpu", "tiny", None) if a.dry_run else ("gpu", "base", 2)
    with tempfile.TemporaryDirectory() as d:
        host_folder, host_size = (Path(d) / "cpu-host", "tiny") if a.dry_run else (KEPT, "narrow")
        # the dry run checks the pipeline, not the figures: 10 steady runs a row (adaptive: up to 10 s a row)
        measured = measure(models, a.rounds, size, backend, a.out, batch, float("inf") if a.dry_run else a.budget,
                           runs=10 if a.dry_run else None)
        if a.dry_run:  # the host records are the measured rounds themselves: the same CPU bench at tiny size
            keep_host(measured, host_size, host_folder)
        from study import machine_line

        (a.out / "prediction.md").write_text(page(measured, host_folder, host_size, backend, size, machine_line()))
    print((a.out / "prediction.md").read_text())
    if a.page and not a.dry_run:
        try:
            done = subprocess.run([sys.executable, "study/run/findings.py", "--backend", "gpu"], cwd=ROOT,
                                  capture_output=True, text=True, timeout=a.page_budget)
            (a.out / "findings-gpu.md").write_text(done.stdout)
        except subprocess.TimeoutExpired:
            print("gpu_check: the page's sweep ran out of --page-budget; its finished jobs are kept (run again)",
                  file=sys.stderr)
    files = [p for p in a.out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        print(f"gpu_check: {a.out} holds {len(files)} files, more than {MAX_FILES}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
