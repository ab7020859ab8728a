"""Helpers shared by the benchmark scripts: the machine line and a best-of timer."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PJRT_DEVICE", "CPU")
from stackwars_ir.common.runtime import quiet_libtpu  # noqa: E402  (as the CLI: libtpu says nothing on a CPU machine)

quiet_libtpu()


ROOT = Path(__file__).resolve().parents[1]


# GPT-2's and BERT's base captures (batch 2, sequence 64) as `make findings-main`'s sweep writes them.
FINDINGS_CAPTURES = ROOT / "out" / "sweeps" / "findings" / "captures" / "b2-s64"


def captures_dir() -> Path:
    """The --captures option of the scripts that read base captures: `make findings-main`'s, or
    out/bench-captures (where the findings script kept them before it was a sweep); prints the
    machine line first, as every script does."""
    import argparse

    ap = argparse.ArgumentParser()
    default = FINDINGS_CAPTURES if FINDINGS_CAPTURES.exists() else ROOT / "out" / "bench-captures"
    ap.add_argument("--captures", type=Path, default=default)
    folder = ap.parse_args().captures
    print(f"machine: {machine_line()}\n")
    return folder


def machine_line() -> str:
    """The machine a figure was taken on (the findings pages' own line)."""
    from study import machine_line as line

    return line()


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of `repeat` wall times: the least disturbed run on a shared machine. What `fn`
    returns is dropped after the clock stops: freeing a result is not part of making it."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        del result
    return min(times)


def gpt2_layers_module(layers: int, debug_info: bool = True) -> str:
    """A real JAX lowering of a tiny-width GPT-2 with `layers` layers (about 130 ops per layer)."""
    import jax
    import numpy as np
    from flax import nnx
    from stackwars_ir.models import gpt2

    from stackwars_ir.capture.lowering import lower_text

    d = 64
    cfg = dict(n_layer=layers, n_embd=d, n_head=4, vocab_size=512, n_positions=128, layer_norm_epsilon=1e-5)
    rng = np.random.default_rng(0)
    w = {"wte.weight": rng.standard_normal((512, d), np.float32), "wpe.weight": rng.standard_normal((128, d), np.float32),
         "ln_f.weight": np.ones(d, np.float32), "ln_f.bias": np.zeros(d, np.float32)}
    for i in range(layers):
        for name, shape in (("ln_1.weight", (d,)), ("ln_1.bias", (d,)), ("ln_2.weight", (d,)), ("ln_2.bias", (d,)),
                            ("attn.c_attn.weight", (d, 3 * d)), ("attn.c_attn.bias", (3 * d,)),
                            ("attn.c_proj.weight", (d, d)), ("attn.c_proj.bias", (d,)),
                            ("mlp.c_fc.weight", (d, 4 * d)), ("mlp.c_fc.bias", (4 * d,)),
                            ("mlp.c_proj.weight", (4 * d, d)), ("mlp.c_proj.bias", (d,))):
            w[f"h.{i}.{name}"] = rng.standard_normal(shape, np.float32) * 0.02
    graphdef, state = nnx.split(gpt2.GPT2(w, cfg))

    def forward(state, ids):
        return nnx.merge(graphdef, state)(ids)

    if debug_info:
        return lower_text(forward, state, np.zeros((2, 16), np.int32))
    return jax.jit(forward).lower(state, np.zeros((2, 16), np.int32)).as_text()
