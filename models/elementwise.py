"""Element-wise chain sin(a * b + a) + b, in PyTorch and JAX (seed 002's add, multiply, sine)."""
from __future__ import annotations

import numpy as np

from . import CATALOG
from ._nnx import Scoped

SIZES = CATALOG["elementwise"].sizes


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
