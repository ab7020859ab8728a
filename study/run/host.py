"""docs/findings-host.md: the study's table predicted for its TPU v6e from measurements here.

For each of the study's workloads at base size, two runs of the CLI (each runtime in a worker of
its own): `bench W --size base --baselines jax,torch_xla --host` (host phases of jax.jit's and
torch_xla lazy's first, second and steady runs, measured here) and `bench W --size base --target
tpu-v6e` (the TPU compiler's run estimate and its compile wall time, on this host, compile-only);
for GPT-2, BERT and ResNet-50 a third, the other PyTorch routes' host work beside them. Each cell is
predicted by stackwars_ir.bench.predict under the assumptions the page states, and the page rendered
by study.host. Finished runs are kept under --results and never recomputed;
--render rebuilds the page from them alone. Each finished record's day and commit go into its
results' made.json (a restored copy's file date is not its own), and the records are kept in
benchmarks/records/host (restored before a run, the finished ones added after: they survive a bare
machine); their paths are written relative to the project, so a kept record names no machine's folder.

Usage: .venv/bin/python -m study.run.host [--workloads gemm,ffn,mha,gpt2,bert,resnet50]
       [--results out/findings-host] [--render] > docs/findings-host.md
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

from study.host import MADE, ROUTE_BASELINES, ROUTES_OF, TARGET, WORKLOADS, host_page

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "benchmarks" / "records" / "host"


def rel(path: Path) -> str:
    """PATH as the CLI is given it: relative to the project (its working folder) where it lies inside."""
    path = Path(path).resolve()
    return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)


def commit_here() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def made(record: Path) -> None:
    """RECORD's day and commit in its folder's index (study.host.record_dates)."""
    from stackwars_ir.common.files import write_set

    index = record.parent / MADE
    known = json.loads(index.read_text()) if index.exists() else {}
    known[record.name] = {"date": datetime.date.today().isoformat(), "commit": commit_here()}
    write_set([(index, (json.dumps(known, indent=1, sort_keys=True) + "\n").encode())])


def run_cli(args: list, log) -> int:
    cli = [str(ROOT / ".venv" / "bin" / "stackwars-ir")] if (ROOT / ".venv" / "bin" / "stackwars-ir").exists() \
        else [sys.executable, "-m", "stackwars_ir.cli"]
    done = subprocess.run(cli + args, cwd=ROOT, capture_output=True, text=True)
    log.write(f"$ stackwars-ir {' '.join(args)}\nexit {done.returncode}\n{done.stderr[-2000:]}\n")
    record = Path(args[args.index("--json") + 1])
    if done.returncode == 0 and (ROOT / record).exists():
        made(ROOT / record)
    return done.returncode


def measure(workload: str, results: Path, log) -> None:
    captures = results / "captures"
    bench, v6e = results / f"{workload}-bench.json", results / f"{workload}-{TARGET}.json"
    if not bench.exists():
        run_cli(["bench", workload, "--size", "base", "--baselines", "jax,torch_xla", "--host", "--json", rel(bench),
                 "--out", rel(captures)], log)
    if not v6e.exists():
        run_cli(["bench", workload, "--size", "base", "--target", TARGET, "--json", rel(v6e), "--out", rel(captures)],
                log)


def measure_routes(workload: str, results: Path, log) -> None:
    """What a PyTorch user can run instead of torch_xla's lazy tensors (issue 54, item 7), timed beside it
    and jax.jit with their host phases: the study's models, forward."""
    record = results / f"{workload}-routes.json"
    if not record.exists():
        run_cli(["bench", workload, "--size", "base", "--baselines", ROUTE_BASELINES, "--host", "--json", rel(record),
                 "--out", rel(results / "captures")], log)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "findings-host")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--kept", default=str(KEPT),
                    help="the records kept in the repository (benchmarks/records/README.md; '' for none)")
    a = ap.parse_args()
    from stackwars_ir.sweep.kept import carried

    workloads = [w for w in a.workloads.split(",") if w]
    a.results = a.results.resolve()
    a.results.mkdir(parents=True, exist_ok=True)
    with carried(Path(a.kept) if a.kept else None, a.results,
                 lambda m: print(f"findings_host: {m}", file=sys.stderr, flush=True)):
        if not a.render:
            with open(a.results / "log.txt", "a") as log:
                for w in workloads:
                    measure(w, a.results, log)
                for w in (w for w in workloads if w in ROUTES_OF):
                    measure_routes(w, a.results, log)
    if not a.render:  # the study's timing protocols, in rounds of fresh processes (study/run/protocols.py)
        from .protocols import KEPT as PROTOCOLS_KEPT
        from .protocols import measure_all

        measure_all(workloads, 3, a.results / "protocols", PROTOCOLS_KEPT if a.kept else None)
    elif a.kept:
        from .protocols import KEPT as PROTOCOLS_KEPT

        from stackwars_ir.sweep.kept import restore

        (a.results / "protocols").mkdir(exist_ok=True)
        restore(PROTOCOLS_KEPT, a.results / "protocols")
    from study.protocols import protocols_section

    protocols = protocols_section(a.results / "protocols", a.results, workloads)
    sys.stdout.write(host_page(workloads, a.results, protocols))


if __name__ == "__main__":
    main()
