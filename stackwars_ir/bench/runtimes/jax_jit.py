"""jax.jit's native runtime: the JAX twin's forward, or its training step in a loop, under jax.jit."""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ...common.runtime import runtime
from ...workload import Request, jax_inputs
from ...workload.train import TrainState, jax_step
from ..host import UNMARKED, jax_meter
from ..xla_profile import Profile
from .shared import Setup, as_captured, jax_counters, jitted_loop, jitted_profile, nothing

if TYPE_CHECKING:
    import numpy as np
    import torch

FORWARD_WITHOUT_TORCH = True  # its forward runs the JAX twin on the weights: `model` may be None there


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """The twin (nnx.split, merged inside the jitted call) on the request's weights and inputs: its
    first call traces, lowers and compiles (arguments are placed before it)."""
    import jax
    from flax import nnx

    device = runtime(backend).device
    jax_counters()
    graphdef, state = nnx.split(adapter.jax_model(req.size, weights))
    fn = jax.jit(as_captured(lambda s, *a: nnx.merge(graphdef, s)(*a), req))  # new: its first call compiles
    args = [jax.device_put(v, device) for v in jax_inputs(inputs).values()]
    state = jax.device_put(state, device)

    def run(clock=UNMARKED):
        out = fn(state, *args)
        clock.mark("dispatch")
        out = out.block_until_ready()
        clock.mark("wait")
        return out

    run.hlo = lambda: fn.lower(state, *args).compile().as_text()  # its kernels, for --profile
    run.meter = jax_meter
    return Setup("jax.jit (native)", "jax.jit", run, jax_counters, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str, donate: bool = False) -> Setup:
    """The captured step's own function under jax.jit, in a loop: each step's parameters and AdamW
    state are the last step's results. Undonated, as captured: every step returns new buffers beside
    the old ones; `donate`: the step writes its results into the buffers it was given."""
    import jax

    device = runtime(backend).device
    jax_counters()
    step, args = jax_step(adapter, req.size, state, weights)
    run = jitted_loop(jax.jit(as_captured(step, req), donate_argnums=(0, 1) if donate else ()), args, device)
    if donate:
        return Setup("jax.jit training step, state donated (native)", "jax.jit donated", run, jax_counters, nothing)
    return Setup("jax.jit training step (native)", "jax.jit", run, jax_counters, nothing)


def profile(req: Request, runs: int, backend: str = "cpu") -> Profile:
    """jax's profiler over the steady runs: the same XLA as the StableHLO rows, its kernels' op_name
    the JAX capture's."""
    return jitted_profile(train if req.train else forward, req, runs, backend)
