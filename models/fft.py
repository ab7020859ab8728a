"""Real FFT magnitude, in PyTorch and JAX (seed 002's FFT); torch_xla cannot capture it."""
from __future__ import annotations

import numpy as np

from . import CATALOG
from ._nnx import Scoped

SIZES = CATALOG["fft"].sizes


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
