"""Real FFT magnitude, in PyTorch and JAX (seed 002's FFT); torch_xla cannot capture it."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Scoped

ENTRY = Entry(
    "fft", "real FFT magnitude |rfft(x)| (orthonormal) of [batch, n] (seed 002's FFT)",
    {"tiny": {}, "base": {}},
    {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n",
    unsupported={"torch_xla": "torch_xla 2.9 cannot capture aten::_fft_r2c (\"ops not capturable by "
                              "Pytorch/XLA\")"}, loss=None, workload=True)
SIZES = ENTRY.sizes


def torch_model(size: str):
    from ._basic_torch import FFTMagnitude

    return FFTMagnitude().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, seq), dtype=np.float32)}


class FFTMagnitude(Scoped):
    def __call__(self, x):
        import jax.numpy as jnp

        return jnp.abs(jnp.fft.rfft(x, norm="ortho"))


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return FFTMagnitude("")
