"""torchax's native runtime: the module as a JAX function, or its training step, under jax.jit.

The module becomes a JAX function through `torchax.extract_jax`.
"""
from __future__ import annotations

import copy
from types import ModuleType
from typing import TYPE_CHECKING

from ...common.routes import TORCHAX
from ...common.runtime import runtime
from ...workload import Request, jax_inputs
from ...workload.exported import torchax_step
from ...workload.train import TrainState
from ..host import UNMARKED, jax_meter
from .shared import Setup, jax_counters, jitted_loop, nothing, require_torchax

if TYPE_CHECKING:
    import numpy as np
    import torch


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """torchax's jitted call: `torchax.extract_jax(model)` makes the module a JAX function of its
    weights and inputs, which jax.jit compiles; each call dispatches it, as jax.jit's row does."""
    require_torchax()
    import jax
    import torchax

    device = runtime(backend).device
    jax_counters()
    state, fn = torchax.extract_jax(copy.deepcopy(model))
    jitted = jax.jit(fn)  # new: its first call compiles
    state = jax.device_put(state, device)
    args = tuple(jax.device_put(v, device) for v in jax_inputs(inputs).values())

    def run(clock=UNMARKED):
        out = jitted(state, args)
        clock.mark("dispatch")
        out = jax.block_until_ready(out)
        clock.mark("wait")
        return out

    run.hlo, run.meter = lambda: jitted.lower(state, args).compile().as_text(), jax_meter
    return Setup("torchax jitted call (jax.jit of torchax.extract_jax)", TORCHAX.native, run, jax_counters, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """torchax's jitted training step: the model and its loss exported (torch.export), run by torchax's
    interpreter under jax.value_and_grad with optax's AdamW (workload.exported's torchax step, the
    function the torchax capture lowers), under jax.jit in a loop: each step's parameters and AdamW
    state are the last step's results; its host time per step is a jax.jit dispatch."""
    require_torchax()
    import jax

    device = runtime(backend).device
    jax_counters()
    step, args = torchax_step(model, state, weights=weights)
    run = jitted_loop(jax.jit(step), args, device)
    return Setup("torchax jitted training step (jax.jit, optax AdamW)", TORCHAX.native, run, jax_counters, nothing)
