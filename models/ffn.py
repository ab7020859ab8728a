"""FFN: Linear-GELU-Linear, in PyTorch and as a Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Linear, Scoped, gelu_erf

ENTRY = Entry(
    "ffn", "feed-forward block Linear-GELU-Linear on [batch, seq, d], the study's FFN",
    {"tiny": dict(d=64, hidden=256), "base": dict(d=768, hidden=3072),
     "narrow": dict(d=4, hidden=16)},
    {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128),
     "narrow": dict(batch=1, seq=4)})
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import FFN

    return FFN(SIZES[size]["d"], SIZES[size]["hidden"]).eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}


class FFN(Scoped):
    def __init__(self, w):
        super().__init__("")
        self.fc1 = Linear(w, "fc1", "fc1")
        self.fc2 = Linear(w, "fc2", "fc2")

    def __call__(self, x):
        import jax

        with jax.named_scope("act"):
            h = gelu_erf(self.fc1(x))
        return self.fc2(h)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return FFN(weights)
