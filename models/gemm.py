"""GEMM: one matrix multiply, in PyTorch and as a Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Scoped, param

ENTRY = Entry(
    "gemm", "one matrix multiply x @ W ([batch*seq, d] x [d, d]), the study's GEMM",
    {"tiny": dict(d=64), "base": dict(d=1024), "narrow": dict(d=4)},
    {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128),
     "narrow": dict(batch=1, seq=4)})
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import Gemm

    return Gemm(SIZES[size]["d"]).eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch * seq, SIZES[size]["d"]), dtype=np.float32)}


class Gemm(Scoped):
    def __init__(self, w):
        super().__init__("")
        self.weight = param(w, "weight")

    def __call__(self, x):
        import jax.numpy as jnp

        return jnp.matmul(x, self.weight[...])


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Gemm(weights)
