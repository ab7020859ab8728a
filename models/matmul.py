"""Square matrix multiply of two inputs, in PyTorch and JAX (seed 002's matmul)."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Scoped

ENTRY = Entry(
    "matmul", "square matrix multiply A @ B, both [batch, n, n] inputs (seed 002's matmul)",
    {"tiny": {}, "base": {}},
    {"tiny": dict(batch=1, seq=100), "base": dict(batch=1, seq=2000)}, seq_meaning="matrix size n", loss=None, workload=True)
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import Matmul

    return Matmul().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    scale = np.float32(1 / np.sqrt(seq))  # keeps the products' magnitude near 1 at every n
    return {"a": rng.standard_normal((batch, seq, seq), dtype=np.float32) * scale,
            "b": rng.standard_normal((batch, seq, seq), dtype=np.float32)}


class Matmul(Scoped):
    def __call__(self, a, b):
        import jax.numpy as jnp

        return jnp.matmul(a, b)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Matmul("")
