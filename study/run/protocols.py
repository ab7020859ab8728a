"""The study's candidate timing protocols measured: each (workload, size, protocol) run in three fresh
processes (rounds), graphs compiled at steps 1-3 and steady host work with the device idle
(stackwars_ir.bench.protocols), records for docs/findings-host.md.

What runs, rounds outermost (a round's processes one after another, so the three rounds of a cell are
minutes apart): every protocol of every workload at the narrow size (the base model's layers, heads and
op count, tensors a few elements wide: host work where device work is negligible, as on a TPU); the
eval protocols of GPT-2, BERT and ResNet-50 at base size (how host work relates to tensor size); and
GPT-2 base's PyTorch eval again beside two spinning processes (the load's effect). Finished records
are kept under --results and in benchmarks/records/host-protocols, and never recomputed.

Usage: .venv/bin/python -m study.run.protocols [--rounds 3] [--workloads gemm,...] [--only-render]
       .venv/bin/python -m study.run.protocols --one WORKLOAD SIZE FRAMEWORK PROTOCOL  (one record, to stdout)
Run it alone: other work on the two cores is another measurement (the loaded rounds are that, on purpose).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "benchmarks" / "records" / "host-protocols"
RESULTS = ROOT / "out" / "findings-host" / "protocols"
WORKLOADS = ("gemm", "ffn", "mha", "gpt2", "bert", "resnet50")
AT_BASE = ("gpt2", "bert", "resnet50")
LOADED = ("gpt2", "base", "pytorch", "eval")  # measured again beside LOAD spinning processes, and paused
LOAD = 2
PAUSE_S = 0.2  # "paused": slept before each steady step (do the runtime's idle worker threads slow the next?)


def _spin(stop) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


def jobs(workloads, rounds: int):
    """(round, workload, size, framework, protocol, condition) in run order; condition "idle", "loaded"
    (beside LOAD spinning processes) or "paused" (PAUSE_S before each steady step)."""
    from stackwars_ir.bench.protocols import PROTOCOLS

    for r in range(1, rounds + 1):
        for w in workloads:
            for p in PROTOCOLS:
                yield r, w, "narrow", p.framework, p.name, "idle"
        for w in (w for w in workloads if w in AT_BASE):
            for fw in ("pytorch", "jax"):
                yield r, w, "base", fw, "eval", "idle"
        if LOADED[0] in workloads:
            yield (r, *LOADED, "loaded")
            yield (r, *LOADED, "paused")


def record_name(r: int, w: str, size: str, fw: str, proto: str, condition: str, stack: str | None = None) -> str:
    tail = "" if condition == "idle" else f"-{condition}"
    return f"{w}-{size}-{fw}-{proto}-r{r}{tail}{'-stack-' + stack if stack else ''}.json"


def stack_jobs(stack: str, rounds: int):
    """(round, workload, size, framework, protocol) of the study's likely versions: torch_xla lazy's GPT-2
    and BERT eval forward at narrow and base size under STACK, beside the lock's same jobs."""
    for r in range(1, rounds + 1):
        for w in ("gpt2", "bert"):
            for size in ("narrow", "base"):
                yield r, w, size, "pytorch", "eval"


def command(w: str, size: str, fw: str, proto: str, stack: str | None, pause_s: float = 0.0) -> tuple[list, dict | None]:
    """The fresh process's command line (and environment): this project's Python, or a version stack's
    worker with this project's code copied in (stackwars_ir.isolate.stacks.worker_command)."""
    if not stack:
        return [sys.executable, "-m", "study.run.protocols", "--one", w, size, fw, proto, "--pause", str(pause_s)], None
    from stackwars_ir.isolate.stacks import find, worker_command

    boot = ("import json; from stackwars_ir.bench.protocols import measure; "
            f"print(json.dumps(measure({w!r}, {size!r}, {fw!r}, {proto!r}, pause_s={pause_s!r}).as_json()), flush=True)")
    cmd, env = worker_command(find(stack), boot)
    env.setdefault("PJRT_DEVICE", "CPU")
    return cmd, env


@contextlib.contextmanager
def load(condition: str):
    """LOAD processes spinning on the cores while inside, for the "loaded" condition; nothing otherwise."""
    if condition != "loaded":
        yield
        return
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    spinners = [ctx.Process(target=_spin, args=(stop,), daemon=True) for _ in range(LOAD)]
    for s in spinners:
        s.start()
    try:
        yield
    finally:
        stop.set()
        for s in spinners:
            s.join()


def run_one(w: str, size: str, fw: str, proto: str, condition: str = "idle", stack: str | None = None) -> dict:
    try:
        with load(condition):
            cmd, env = command(w, size, fw, proto, stack, PAUSE_S if condition == "paused" else 0.0)
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        return {"workload": w, "size": size, "framework": fw, "protocol": proto, "compiles": [], "first": [],
                "trace": [], "launch": [], "wait": [], "error": "timed out after 900 s", "ok": False}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"workload": w, "size": size, "framework": fw, "protocol": proto, "compiles": [], "first": [],
                "trace": [], "launch": [], "wait": [], "error": f"the process exited {done.returncode}: {tail}",
                "ok": False}
    got = json.loads(lines[-1])
    got["conditions"]["spinning processes beside"] = LOAD if condition == "loaded" else 0
    if stack:
        got["stack"] = stack
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=4, metavar=("WORKLOAD", "SIZE", "FRAMEWORK", "PROTOCOL"))
    ap.add_argument("--pause", type=float, default=0.0, help="with --one: seconds slept before each steady step")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--kept", default=str(KEPT))
    ap.add_argument("--stack", help="also run stack_jobs under this version stack (`stackwars-ir stack add`)")
    a = ap.parse_args()
    if a.one:
        from stackwars_ir.bench.protocols import measure

        print(json.dumps(measure(*a.one, pause_s=a.pause).as_json()), flush=True)
        return
    measure_all([w for w in a.workloads.split(",") if w], a.rounds, a.results, Path(a.kept) if a.kept else None,
                a.stack)


def previous_name(r: int, condition: str) -> str:
    return f"{LOADED[0]}-{LOADED[1]}-bench-host-r{r}-{condition}.json"


def _rel(path: Path) -> str:
    """PATH relative to the project where it lies inside it: a kept record names no machine's folder."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def run_previous(r: int, condition: str, results: Path) -> dict:
    """The previous page's protocol once, in a fresh process: `stackwars-ir bench gpt2 --size base
    --baselines jax,torch_xla --host` (host phases timed beside the device's run on the same cores),
    idle or beside LOAD spinning processes; its JSON report in the record's "bench"."""
    out = results / f".{previous_name(r, condition)}.bench"
    cli = [sys.executable, "-m", "stackwars_ir.cli"]
    with load(condition):
        done = subprocess.run(cli + ["bench", LOADED[0], "--size", LOADED[1], "--baselines", "jax,torch_xla", "--host",
                                     "--json", _rel(out), "--out", _rel(results.parent / "captures")],
                              cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0 or not out.exists():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"protocol": "bench --host", "condition": condition, "error": f"exited {done.returncode}: {tail}",
                "ok": False}
    bench = json.loads(out.read_text())
    out.unlink()
    return {"protocol": "bench --host", "condition": condition, "spinning processes beside":
            LOAD if condition == "loaded" else 0, "bench": bench, "error": ""}


def measure_all(workloads, rounds: int, results: Path, kept: Path | None, stack: str | None = None) -> None:
    """Every job of `jobs` (and of `stack_jobs` under STACK) that RESULTS lacks, run and written there;
    restored from and kept into KEPT."""
    from stackwars_ir.common.files import write_set
    from stackwars_ir.sweep.kept import carried

    results.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    with carried(kept, results, lambda m: print(f"host_protocols: {m}", file=sys.stderr, flush=True)):
        todo = [(*j, None) for j in jobs(workloads, rounds)]
        # Each stack job, then the lock's same job right after it (condition beside-STACK): the two sides'
        # rounds interleaved, so a drift between days or hours does not pass for a version's effect.
        todo += [t for j in stack_jobs(stack, rounds) for t in ((*j, "idle", stack), (*j, f"beside-{stack}", None))] \
            if stack else []
        for r, w, size, fw, proto, condition, on in todo:
            path = results / record_name(r, w, size, fw, proto, condition, on)
            if path.exists():
                continue
            got = run_one(w, size, fw, proto, condition, on)
            got.update(round=r, made={"date": datetime.date.today().isoformat(), "commit": commit})
            if condition.startswith("beside-"):
                got["beside"] = condition.removeprefix("beside-")
            write_set([(path, (json.dumps(got, indent=1) + "\n").encode())])
            print(f"host_protocols: {path.name}: {got['compiles']} {got['error'][:120]}", file=sys.stderr, flush=True)
        if LOADED[0] in workloads and not stack:
            # The previous page's protocol in rounds, idle and loaded interleaved: does its swing between
            # regenerations (forward 31.6, 22.4, 7.0 ms) follow the load, as the step protocol's does?
            for r in range(1, rounds + 1):
                for condition in ("idle", "loaded"):
                    path = results / previous_name(r, condition)
                    if path.exists():
                        continue
                    got = run_previous(r, condition, results)
                    got.update(round=r, made={"date": datetime.date.today().isoformat(), "commit": commit})
                    write_set([(path, (json.dumps(got, indent=1) + "\n").encode())])
                    print(f"host_protocols: {path.name}: {got['error'][:120] or 'ok'}", file=sys.stderr, flush=True)

if __name__ == "__main__":
    main()
