"""GEMM: one matrix multiply, in PyTorch and as a Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import CATALOG
from ._nnx import Scoped, param

SIZES = CATALOG["gemm"].sizes


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
