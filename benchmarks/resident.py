"""IR against runtime: each row's measured resident growth beside XLA's plan, StableHLO executables and native runtimes.

    python benchmarks/resident.py --model gpt2 --size base [--steps forward,train]

Prints a Markdown table (docs/memory.md records a run with its machine): for each StableHLO executable
its planned peak (arguments + outputs - aliased + temporaries) and what its bench row took (compile,
arguments placed, every run); for jax.jit, PyTorch eager and torch_xla's lazy loop what their rows took
(their own copy of the weights and state, compile, every run). Captures are made, or reused, under
out/bench-captures.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from stackwars_ir.sweep import bench_model
    from stackwars_ir.common.files import host
    from stackwars_ir.common.textfmt import human_bytes

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="base")
    ap.add_argument("--steps", default="forward,train")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    h = host()
    print(f"machine: {h.get('processor')}, {h.get('cpus')} cpus; model {args.model}-{args.size}\n")
    print("| step | row | planned peak (XLA) | resident growth of the row | growth / plan | steady ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for step in args.steps.split(","):
        t0 = time.perf_counter()
        report = bench_model(args.model, size=args.size, exporters=("torch_xla", "torchax"),
                             baselines=("jax", "jax_donate", "eager", "torch_xla") if step == "train" else
                             ("jax", "eager", "torch_xla"), out_dir=Path("out") / "bench-captures",
                             timeout=args.timeout, step=step, progress=lambda m: print(m, file=sys.stderr))
        plan = None
        for _, e in report.rows:
            if not e.ok:
                print(f"| {step} | {e.name} | failed: {e.error} | | | |")
                continue
            m = e.memory
            if e.kind == "stablehlo" and m and plan is None:  # the first executable's (JAX's) plan
                plan = m["argument_bytes"] + m["output_bytes"] + m["temp_bytes"]  # nothing is aliased here
            planned = m["argument_bytes"] + m["output_bytes"] + m["temp_bytes"] if m else None
            ratio = f"{e.resident_bytes / planned:.2f}x" if planned and e.resident_bytes else \
                (f"{e.resident_bytes / plan:.2f}x JAX's plan" if plan and e.resident_bytes else "-")
            print(f"| {step} | {e.name} | {human_bytes(planned) if planned else '-'} | "
                  f"{human_bytes(e.resident_bytes) if e.resident_bytes is not None else '-'} | {ratio} | "
                  f"{e.timing.steady * 1e3:.3g} |")
        print(f"\n{step}: {time.perf_counter() - t0:.0f} s\n", file=sys.stderr)


if __name__ == "__main__":
    main()
