"""Element-wise chain sin(a * b + a) + b, in PyTorch and JAX (seed 002's add, multiply, sine)."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Scoped

ENTRY = Entry(
    "elementwise", "element-wise chain sin(a * b + a) + b on two [batch, n] arrays (seed 002's add, multiply, sine)",
    {"tiny": {}, "base": {}},
    {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n", loss=None, workload=True)
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import Elementwise

    return Elementwise().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.standard_normal((batch, seq), dtype=np.float32),
            "b": rng.standard_normal((batch, seq), dtype=np.float32)}


class Elementwise(Scoped):
    def __call__(self, a, b):
        import jax.numpy as jnp

        return jnp.sin(a * b + a) + b


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Elementwise("")
