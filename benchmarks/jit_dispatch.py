"""Where jax.jit's time goes beside the bare executable: one model's forward timed as a bare PJRT
execute of its StableHLO, as jax.jit over the NNX state pytree (how the jax.jit baseline calls it), as
jax.jit over a flat list of arrays, and as the AOT-compiled object, interleaved in one process.

Usage: .venv/bin/python benchmarks/jit_dispatch.py [--model gpt2] [--size base] [--backend cpu|gpu]
"""
from __future__ import annotations

import argparse
import statistics

from _common import machine_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="base")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import jax
    from flax import nnx

    from stackwars_ir.bench.timing import measure
    from stackwars_ir.workload import Request, prepare
    from stackwars_ir.workload import jax_inputs
    from stackwars_ir.common.runtime import runtime

    rt = runtime(a.backend)
    print(f"machine: {machine_line()}; backend {rt.platform} ({rt.device.device_kind}), jax {jax.__version__}\n")
    req = Request(a.model, a.size, "jax").validated()
    w = prepare(req)
    adapter, weights, inputs = w.adapter, w.weights, w.inputs
    graphdef, state = nnx.split(adapter.jax_model(a.size, weights))
    args = [jax.device_put(v, rt.device) for v in jax_inputs(inputs).values()]
    state = jax.device_put(state, rt.device)
    leaves, treedef = jax.tree_util.tree_flatten(state)

    def forward(s, *x):
        return nnx.merge(graphdef, s)(*x)

    tree = jax.jit(forward)
    flat = jax.jit(lambda ls, *x: forward(jax.tree_util.tree_unflatten(treedef, ls), *x))
    compiled = jax.jit(forward).lower(state, *args).compile()
    exe = rt.compile(jax.jit(forward).lower(state, *args).as_text(), "bare")
    buffers = [*leaves, *args]
    ways = {
        "bare PJRT execute (what bench times)": lambda: rt.run(exe, buffers),
        "jax.jit(f)(state pytree, ...) (the jax.jit baseline)": lambda: tree(state, *args).block_until_ready(),
        "jax.jit(f)(flat list of arrays, ...)": lambda: flat(leaves, *args).block_until_ready(),
        "jax.jit(f).lower(...).compile()(state, ...)": lambda: compiled(state, *args).block_until_ready(),
    }
    times = {k: [] for k in ways}
    for _ in range(a.rounds):  # interleaved, so drift hits every way alike
        for name, run in ways.items():
            times[name].append(measure(run, min_time=0.5, max_time=5.0).steady)
    bare = statistics.median(times["bare PJRT execute (what bench times)"])
    print(f"{a.model} {a.size}, {len(leaves)} parameter arrays; median of {a.rounds} interleaved steady states\n")
    print(f"| way | steady ms | / bare execute |\n| --- | ---: | ---: |")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1e3:.3f} | {m / bare:.3f} |")


if __name__ == "__main__":
    main()
