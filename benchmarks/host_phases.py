"""Host phases of each native runtime's steady step (bench --host) at a published size, and what the
phasing costs: the marks' cost (torch_xla reads its metrics at each), the module hooks' and
torch.profiler's, each from interleaved pairs of plain and instrumented runs (ratio, 95% interval).

Usage: .venv/bin/python benchmarks/host_phases.py [--model gpt2] [--size base] [--steps forward,train]
       [--runtimes torch_xla,jax,eager,inductor] [--runs 10]
Each runtime and step runs in a process of its own (torch_xla and dynamo keep state per process).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import machine_line


def one(model: str, size: str, step: str, name: str, runs: int) -> dict:
    """In this process: runtime `name`'s steady step phased, and the instruments' costs."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    from stackwars_ir.bench.host import Clock, ModuleClock, one_run, phases_of, timer_meter
    from stackwars_ir.bench.native import setup_of
    from stackwars_ir.common.runstats import rounds_ratio
    from stackwars_ir.workload import Request, prepare

    req = Request(model, size, step=step).validated()
    if req.train:
        from stackwars_ir.workload.train import register_torch_xla

        register_torch_xla()
    w = prepare(req)
    adapter, m, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    if req.train:
        from stackwars_ir.workload.train import train_state

        inputs = train_state(req, m, inputs, reference)
    label, _, run, _, done = setup_of(name, req.train)(adapter, req, m, weights, inputs, "cpu")
    meter = getattr(run, "meter", timer_meter)()
    firsts = []
    for _ in range(2):  # the first and second runs, marked
        firsts.append(Clock(meter.read))
        run(firsts[-1])
    for _ in range(2):  # past the allocator's warm-up
        run()
    model = getattr(run, "model", None)

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def cost(instrumented) -> list:
        """Instrumented / plain, per interleaved pair (the order alternating within the pairs)."""
        out = []
        for i in range(runs):
            if i % 2:
                slow, plain = timed(instrumented), timed(run)
            else:
                plain, slow = timed(run), timed(instrumented)
            out.append(slow / plain)
        return out

    costs = {"marks": cost(lambda: run(Clock(meter.read)))}
    if model is not None:
        clock = ModuleClock(model, backward=req.train)  # a training step's backward is clocked too

        def hooked():
            with clock:
                run()
        costs["module hooks"] = cost(hooked)
    if meter.profiled:
        from torch.profiler import ProfilerActivity, profile

        def profiled():
            with profile(activities=[ProfilerActivity.CPU]):
                run()
        costs["torch.profiler"] = cost(profiled)
    host = phases_of(run, runs, meter, model, "forward" if req.train else "")
    host = dataclasses.replace(host, first=one_run(firsts[0], meter)[1], second=one_run(firsts[1], meter)[1])
    done()
    return {"label": label, "host": host.as_json(),
            "costs": {k: list(rounds_ratio(v)) for k, v in costs.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="base")
    ap.add_argument("--steps", default="forward,train")
    ap.add_argument("--runtimes", default="torch_xla,jax,eager,inductor,torch_xla_dynamo,torchax")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--one", nargs=2, metavar=("STEP", "RUNTIME"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.model, a.size, a.one[0], a.one[1], a.runs)))
        return
    from stackwars_ir.bench.host import HostPhases

    print(f"machine: {machine_line()}")
    print(f"{a.model} {a.size}: each runtime's steady step (the median of {a.runs} phased runs), and each "
          f"instrument's cost: instrumented / plain over {a.runs} interleaved pairs, geometric mean (95% interval)\n")
    from stackwars_ir.bench.native import FORWARD_ONLY

    for step in a.steps.split(","):
        for name in a.runtimes.split(","):
            if step != "forward" and name in FORWARD_ONLY:
                continue
            child = subprocess.run([sys.executable, __file__, "--model", a.model, "--size", a.size, "--runs",
                                    str(a.runs), "--one", step, name], capture_output=True, text=True,
                                   cwd=Path(__file__).parent)
            if child.returncode:
                print(f"{step} {name}: failed: {child.stderr.strip().splitlines()[-1:]}\n")
                continue
            got = json.loads(child.stdout.strip().splitlines()[-1])
            h = HostPhases.from_json(got["host"])
            top = ", ".join(f"{p.name} {p.seconds * 1e3:,.2f}" for p in h.phases if not p.parent)
            print(f"{step} {got['label']}: step {h.wall_s * 1e3:,.2f} ms ({top}); named {h.coverage:.0%}, "
                  f"by the runtime's own clocks {h.by_runtime:.0%}"
                  + (f"; device {h.device_s * 1e3:,.2f} ms (its own clock)" if h.device_s is not None else ""))
            for p in h.phases:
                if p.parent:
                    print(f"    {p.parent} / {p.name}: {p.seconds * 1e3:,.2f} ms ({p.source})")
            for p in h.profiled:
                print(f"    torch.profiler / {p.name}: {p.seconds * 1e3:,.2f} ms")
            if h.modules:
                from stackwars_ir.bench.host import layered

                groups = layered(h.modules)[:5]
                print("    host by module: " + ", ".join(f"{k or '(model)'} {s * 1e3:,.2f}" for k, s, _, _ in groups)
                      + f" (of {h.hooked_wall_s * 1e3:,.2f} ms under the hooks)")
            for note in h.notes:
                print(f"    note: {note}")
            for which, phases in (("first", h.first), ("second", h.second)):
                if phases:
                    from stackwars_ir.report.text import runs_text

                    print(f"    {which} run: {runs_text(phases)}")
            print("    cost: " + "; ".join(f"{k} {r:.3f}x ({lo:.3f}-{hi:.3f})" for k, (r, lo, hi) in
                                          got["costs"].items()))
            print()


if __name__ == "__main__":
    main()
