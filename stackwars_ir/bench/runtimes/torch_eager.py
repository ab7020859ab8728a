"""PyTorch eager's native runtime: the module's forward, or the user's training loop (AdamW), op by op."""
from __future__ import annotations

import copy
from types import ModuleType
from typing import TYPE_CHECKING

from ...workload import Request
from ...workload.train import TrainState
from ...workload.values import copy_on
from ..eager_profile import profile_eager_runs
from ..host import UNMARKED, torch_meter
from ..xla_profile import Profile
from .shared import (
    WARM_STEPS, Setup, no_grad_step, nothing, prepared, synchronizer, torch_device, torch_loop, torch_where,
)

if TYPE_CHECKING:
    import numpy as np
    import torch


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """The module's forward without gradients on its own copy of the weights (nothing to compile)."""
    import torch

    device = torch_device(backend)
    m = copy_on(model, device)  # its own weights, as every row holds its own
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]
    sync = synchronizer(device)

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = m(*xs)
        clock.mark("forward")
        sync()  # CUDA kernels run asynchronously: the clock stops when they are done
        clock.mark("wait")
        return out

    run.model, run.meter = m, torch_meter  # bench --host clocks the host in each of its modules
    return Setup(f"torch eager ({torch_where(device)})", "torch eager", run, None, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """The user's loop: zero_grad, loss, backward, AdamW's step, each step from the last one's state."""
    device = torch_device(backend)
    step, sync = torch_loop(model, state, device), synchronizer(device)

    def run(clock=UNMARKED):
        loss = step(clock)
        sync()
        clock.mark("wait")
        return loss

    run.model, run.meter = step.model, torch_meter
    return Setup(f"torch eager training step ({torch_where(device)})", "torch eager", run, None, nothing)


def profile(req: Request, runs: int, backend: str = "cpu") -> Profile:
    """torch.profiler over the steady runs, each op traced to its module (bench.eager_profile)."""

    _, model, _, inputs = prepared(req)
    m = copy.deepcopy(model)  # the copy the loop runs is the one whose modules get ranges
    step = torch_loop(m, inputs, "cpu", copy_model=False) if req.train else no_grad_step(m, inputs.values())
    for _ in range(WARM_STEPS):
        step()
    return profile_eager_runs(step, m, runs, req.train)
