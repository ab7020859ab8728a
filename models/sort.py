"""Sort along the last axis, in PyTorch and JAX (seed 002's sort)."""
from __future__ import annotations

import numpy as np

from . import CATALOG
from ._nnx import Scoped

SIZES = CATALOG["sort"].sizes


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
