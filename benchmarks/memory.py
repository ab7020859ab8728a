"""Memory plans at published sizes: XLA's plan per executable and target, the compile's time and host memory, and the measured run beside the CPU plan.

    python benchmarks/memory.py --model bert --size base [--targets cpu,tpu-v6e]

Prints a Markdown table (docs/memory.md records a run with its machine). Captures are made, or
reused, under out/bench-captures like bench's; the TPU target needs `make setup-tpu`.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from stackwars_ir.bench.memory import budgets
    from stackwars_ir.sweep import plan_model
    from stackwars_ir.common.files import host
    from stackwars_ir.common.textfmt import human_bytes

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert")
    ap.add_argument("--size", default="base")
    ap.add_argument("--targets", default="cpu")
    ap.add_argument("--steps", default="forward,train")
    args = ap.parse_args()
    h = host()
    print(f"machine: {h.get('processor')}, {h.get('cpus')} cpus; model {args.model}-{args.size}\n")
    print("| step | executable | target | compile s | arguments | outputs | temporaries | code | peak | "
          "run measured / planned | worker peak RSS |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for step in args.steps.split(","):
        for target in args.targets.split(","):
            t0 = time.perf_counter()
            report = plan_model(args.model, size=args.size, step=step, exporters=("torch_xla", "torchax"),
                                out_dir=Path("out") / "bench-captures", target=target, budgets_=budgets("v6e-1"),
                                measure=target == "cpu", timeout=1200,
                                progress=lambda m: print(m, file=sys.stderr))
            wall = time.perf_counter() - t0
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
            for p in report.plans:
                if not p.ok:
                    print(f"| {step} | {p.name} | {target} | failed: {p.error} |")
                    continue
                run = "-"
                if p.measured:
                    planned = p.temp_bytes + p.output_bytes - p.alias_bytes
                    run = f"{human_bytes(p.measured.run_bytes)} / {human_bytes(planned)} " \
                          f"({p.measured.run_bytes / planned:.2f}x)"
                print(f"| {step} | {p.name} | {target} | {p.compile_s:.1f} | {human_bytes(p.argument_bytes)} | "
                      f"{human_bytes(p.output_bytes)} | {human_bytes(p.temp_bytes)} | {human_bytes(p.code_bytes)} | "
                      f"{human_bytes(p.peak_bytes)} | {run} | {human_bytes(rss)} |")
            print(f"<!-- {step} {target}: {wall:.0f} s with captures -->")


if __name__ == "__main__":
    main()
