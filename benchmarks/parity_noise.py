"""How far correct captures lie from the float64 model, in units of float32 eager's own error (the
multiple parity holds to NOISE_MULTIPLE): every zoo model, every route, forward and training step.

    python benchmarks/parity_noise.py [--size tiny] [--models gpt2,bert] [--steps forward,train]
"""
from __future__ import annotations

import argparse
import platform
import tempfile
from dataclasses import replace
from pathlib import Path


def main() -> None:
    from stackwars_ir import models
    from stackwars_ir.capture import run
    from stackwars_ir.capture.parity import NOISE_MULTIPLE
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.workload import Request

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--models", default=",".join(models.catalog()))
    ap.add_argument("--steps", default="forward,train")
    ap.add_argument("--exporters", default="torch_xla,torchax")
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, size {args.size}; limit {NOISE_MULTIPLE:g}x")
    print(f"{'model':14} {'step':8} {'route':28} {'vs float64':>11} {'eager f32':>10} {'multiple':>9}")
    multiples = []
    for name in args.models.split(","):
        for step in args.steps.split(","):
            if step == "train" and models.entry(name).loss is None:
                continue
            req = Request(name, args.size, "both", step=step, exporters=tuple(args.exporters.split(",")))
            _, cannot = models.exporters_for(name, req.exporters, step)
            if cannot:  # fft through torch_xla, ResNet-50's step through either: the routes that capture it
                req = replace(req, exporters=tuple(e for e in req.exporters if e not in cannot)) \
                    if len(cannot) < len(req.exporters) else replace(req, framework="jax")
            with tempfile.TemporaryDirectory() as out:
                try:
                    result = run(req, Path(out), show=False)
                except StackwarsError as e:
                    print(f"{name:14} {step:8} error: {e}")
                    continue
            for p in result.parity:
                m = p.multiple
                multiples.append(m) if m is not None else None
                print(f"{name:14} {step:8} {p.stem:28} {p.exact_error or 0:11.3g} {p.eager_error or 0:10.3g} "
                      f"{'' if m is None else f'{m:.3g}':>9} {p.verdict}{'' if m is not None else ' (' + p.unmeasured + ')'}",
                      flush=True)
    if multiples:
        print(f"# {len(multiples)} captures: multiple median {sorted(multiples)[len(multiples) // 2]:.3g}, "
              f"largest {max(multiples):.3g}")


if __name__ == "__main__":
    main()
