"""Sort along the last axis, in PyTorch and JAX (seed 002's sort)."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Scoped

ENTRY = Entry(
    "sort", "sort along the last axis of [batch, n] (seed 002's sort)",
    {"tiny": {}, "base": {}},
    {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n", loss=None, workload=True)
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import Sort

    return Sort().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, seq), dtype=np.float32)}


class Sort(Scoped):
    def __call__(self, x):
        import jax.numpy as jnp

        return jnp.sort(x, axis=-1)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Sort("")
