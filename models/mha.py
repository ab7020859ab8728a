"""MHA: multi-head self-attention, in PyTorch and as a Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Linear, Scoped, attention

ENTRY = Entry(
    "mha", "multi-head self-attention (q, k, v, out projections) on [batch, seq, d], the study's MHA",
    {"tiny": dict(d=64, heads=4), "base": dict(d=768, heads=12),
     "narrow": dict(d=24, heads=12)},
    {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128),
     "narrow": dict(batch=1, seq=4)})
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import MHA

    return MHA(SIZES[size]["d"], SIZES[size]["heads"]).eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}


class MHA(Scoped):
    def __init__(self, w, heads):
        super().__init__("")
        self.q_proj, self.k_proj = Linear(w, "q_proj", "q_proj"), Linear(w, "k_proj", "k_proj")
        self.v_proj, self.out_proj = Linear(w, "v_proj", "v_proj"), Linear(w, "out_proj", "out_proj")
        self.heads = heads

    def __call__(self, x):
        return self.out_proj(attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.heads, causal=False))


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return MHA(weights, SIZES[size]["heads"])
