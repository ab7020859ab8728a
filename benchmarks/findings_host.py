"""The study's table reconstructed for its device (a TPU v6e) from this machine: docs/findings-host.md.

For each of the study's workloads at base size, two runs of the CLI (each runtime in a worker of
its own): `bench W --size base --baselines jax,torch_xla --host` (host phases of jax.jit's and
torch_xla lazy's first, second and steady runs, measured here) and `bench W --size base --target
tpu-v6e` (the TPU compiler's run estimate and its compile wall time, on this host, compile-only);
for GPT-2, BERT and ResNet-50 a third, the other PyTorch routes' host work beside them. Each cell is
predicted by stackwars_ir.bench.predict under the assumptions the page states, and the page rendered
by stackwars_ir.report.findings.host. Finished runs are kept under --results and never recomputed;
--render rebuilds the page from them alone.

Usage: .venv/bin/python benchmarks/findings_host.py [--workloads gemm,ffn,mha,gpt2,bert,resnet50]
       [--results out/findings-host] [--render] > docs/findings-host.md
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import _common  # noqa: F401  (the project on sys.path, PJRT_DEVICE=CPU)
from stackwars_ir.report.findings.host import ROUTE_BASELINES, ROUTES_OF, TARGET, WORKLOADS, host_page

ROOT = Path(__file__).resolve().parents[1]


def run_cli(args: list, log) -> int:
    cli = [str(ROOT / ".venv" / "bin" / "stackwars-ir")] if (ROOT / ".venv" / "bin" / "stackwars-ir").exists() \
        else [sys.executable, "-m", "stackwars_ir.cli"]
    done = subprocess.run(cli + args, cwd=ROOT, capture_output=True, text=True)
    log.write(f"$ stackwars-ir {' '.join(args)}\nexit {done.returncode}\n{done.stderr[-2000:]}\n")
    return done.returncode


def measure(workload: str, results: Path, log) -> None:
    captures = results / "captures"
    bench, v6e = results / f"{workload}-bench.json", results / f"{workload}-{TARGET}.json"
    if not bench.exists():
        run_cli(["bench", workload, "--size", "base", "--baselines", "jax,torch_xla", "--host", "--json", str(bench),
                 "--out", str(captures)], log)
    if not v6e.exists():
        run_cli(["bench", workload, "--size", "base", "--target", TARGET, "--json", str(v6e), "--out", str(captures)],
                log)


def measure_routes(workload: str, results: Path, log) -> None:
    """What a PyTorch user can run instead of torch_xla's lazy tensors (issue 54, item 7), timed beside it
    and jax.jit with their host phases: the study's models, forward."""
    record = results / f"{workload}-routes.json"
    if not record.exists():
        run_cli(["bench", workload, "--size", "base", "--baselines", ROUTE_BASELINES, "--host", "--json", str(record),
                 "--out", str(results / "captures")], log)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "findings-host")
    ap.add_argument("--render", action="store_true")
    a = ap.parse_args()
    workloads = [w for w in a.workloads.split(",") if w]
    a.results.mkdir(parents=True, exist_ok=True)
    if not a.render:
        with open(a.results / "log.txt", "a") as log:
            for w in workloads:
                measure(w, a.results, log)
            for w in (w for w in workloads if w in ROUTES_OF):
                measure_routes(w, a.results, log)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    sys.stdout.write(host_page(workloads, a.results.resolve(), commit, ROOT))


if __name__ == "__main__":
    main()
