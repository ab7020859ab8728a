"""Tall-skinny matrix multiply of two inputs, in PyTorch and JAX (memory-bound)."""
from __future__ import annotations

import numpy as np

from . import Entry

ENTRY = Entry(
    "matmul_skinny", "tall-skinny multiply A @ B, A [batch, m, k], B [batch, k, 8] (memory-bound)",
    {"tiny": dict(k=64, n=8), "base": dict(k=1024, n=8)},
    {"tiny": dict(batch=1, seq=256), "base": dict(batch=1, seq=4096)}, seq_meaning="rows m", loss=None, workload=True)
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import Matmul

    return Matmul().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k, n = SIZES[size]["k"], SIZES[size]["n"]
    return {"a": rng.standard_normal((batch, seq, k), dtype=np.float32) * np.float32(1 / np.sqrt(k)),
            "b": rng.standard_normal((batch, k, n), dtype=np.float32)}


def jax_model(size: str, weights: dict[str, np.ndarray]):
    from .matmul import Matmul

    return Matmul("")
