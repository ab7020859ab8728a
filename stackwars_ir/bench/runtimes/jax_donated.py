"""jax.jit's training loop with the parameters and AdamW's state donated, as JAX's docs advise.

Donated through jax.jit's `donate_argnums`.
"""
from __future__ import annotations

from . import jax_jit
from .shared import Setup


def train(adapter, req, model, weights, state, backend) -> Setup:
    """jax_jit.train with its state donated: XLA writes each step's results into the buffers it was
    given. A forward pass has nothing to donate: this runtime has no `forward`."""
    return jax_jit.train(adapter, req, model, weights, state, backend, donate=True)
