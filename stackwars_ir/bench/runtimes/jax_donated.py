"""jax.jit's training loop with the parameters and AdamW's state donated, as JAX's docs advise.

Donated through jax.jit's `donate_argnums`.
"""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ...workload import Request
from ...workload.train import TrainState
from . import jax_jit
from .shared import Setup

if TYPE_CHECKING:
    import numpy as np
    import torch


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """jax_jit.train with its state donated: XLA writes each step's results into the buffers it was
    given. A forward pass has nothing to donate: this runtime has no `forward`."""
    return jax_jit.train(adapter, req, model, weights, state, backend, donate=True)
