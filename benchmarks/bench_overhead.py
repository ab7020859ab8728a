"""Bench harness accuracy: a JAX capture compiled from its text against jax.jit of the same function
(steady states should agree within 5%), and the harness's per-iteration cost on a trivial module
against a bare execute loop (within 10% on the CPU, 5% on a GPU).

Usage: .venv/bin/python benchmarks/bench_overhead.py [--model gpt2] [--size base] [--backend cpu|gpu]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="base")
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()
    import jax
    import numpy as np
    from flax import nnx

    from stackwars_ir.bench.run import bench_files
    from stackwars_ir.bench.timing import measure
    from stackwars_ir.capture import run
    from stackwars_ir.workload import Request, prepare
    from stackwars_ir.workload import jax_inputs
    from stackwars_ir.common.runtime import runtime

    rt = runtime(a.backend)
    print(f"machine: {machine_line()}; backend {rt.platform} ({rt.device.device_kind}), jax {jax.__version__}\n")
    with tempfile.TemporaryDirectory() as d:
        req = Request(a.model, a.size, "jax").validated()
        run(req, Path(d), show=False)
        path = Path(d) / f"{a.model}-{a.size}" / "jax.mlir"
        w = prepare(req)
        adapter, weights, inputs = w.adapter, w.weights, w.inputs
        graphdef, state = nnx.split(adapter.jax_model(a.size, weights))
        fn = jax.jit(lambda s, *x: nnx.merge(graphdef, s)(*x))
        args = [jax.device_put(v, rt.device) for v in jax_inputs(inputs).values()]
        state = jax.device_put(state, rt.device)
        ratios = []
        for _ in range(3):  # interleave, so drift on a shared machine hits both alike
            text = bench_files([path], a.backend, with_peaks=False).rows[0][1].timing.steady
            native = measure(lambda: fn(state, *args).block_until_ready()).steady
            ratios.append(text / native)
            print(f"{a.model} {a.size}: from text {text * 1e3:.2f} ms, jax.jit {native * 1e3:.2f} ms, "
                  f"ratio {text / native:.3f}")
        print(f"median ratio {statistics.median(ratios):.3f} (goal within 0.95..1.05)\n")

    exe = rt.compile("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n")
    bufs = rt.put([np.ones(4, np.float32)])
    n = 20000
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            for o in exe.execute(bufs):
                o.block_until_ready()
        bare = (time.perf_counter() - t0) / n
        harness = measure(lambda: rt.run(exe, bufs), min_iters=n, max_iters=n, max_time=60).steady
        print(f"trivial module: bare execute loop {bare * 1e6:.1f} us/iter, harness median {harness * 1e6:.1f} "
              f"us/iter, ratio {harness / bare:.3f} (goal <= {1.10 if rt.platform == 'cpu' else 1.05:.2f})")


if __name__ == "__main__":
    main()
