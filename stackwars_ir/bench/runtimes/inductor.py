"""torch.compile's native runtime: the forward compiled, or the user's loop with the model compiled.

Its compiler is inductor.
"""
from __future__ import annotations

import copy
from types import ModuleType
from typing import TYPE_CHECKING

from ...workload import Request
from ...workload.train import TrainState
from ...workload.values import copy_on
from ..host import UNMARKED, torch_meter
from ..inductor_profile import KernelOrigins, profile_compiled_runs
from ..xla_profile import Profile
from .shared import (
    WARM_STEPS, Setup, dynamo_counters, no_grad_step, nothing, prepared, synchronizer, torch_device, torch_loop,
)

if TYPE_CHECKING:
    import numpy as np
    import torch


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """`torch.compile(model)` (dynamo's caches reset first: its first call traces and compiles)."""
    import torch

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    device = torch_device(backend)
    compiled = torch.compile(copy_on(model, device))
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]
    sync = synchronizer(device)

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = compiled(*xs)
        clock.mark("forward")
        sync()
        clock.mark("wait")
        return out

    run.meter = torch_meter
    return Setup("torch.compile (inductor)", "torch.compile", run, dynamo_counters, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """The user's loop with `torch.compile(model)`: dynamo traces the forward, AOTAutograd derives the
    backward, inductor compiles both; the loss (outside the model) and AdamW's step run eagerly. The
    counters say how many graphs dynamo compiled at each step."""
    import torch

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    device = torch_device(backend)
    step, sync = torch_loop(model, state, device, compile_model=True), synchronizer(device)

    def run(clock=UNMARKED):
        loss = step(clock)
        sync()
        clock.mark("wait")
        return loss

    run.meter = torch_meter
    return Setup("torch.compile training step (model compiled, AdamW eager)", "torch.compile", run,
                 dynamo_counters, nothing)


def profile(req: Request, runs: int, backend: str = "cpu") -> Profile:
    """torch.profiler over the steady runs, the graphs compiled here with inductor's provenance on
    (inductor_profile.KernelOrigins): the forward as `forward` runs it, or the user's loop."""
    import torch

    _, model, _, inputs = prepared(req)
    torch._dynamo.reset()
    m = copy.deepcopy(model)
    with KernelOrigins(req.train) as origins:
        if req.train:
            step = torch_loop(m, inputs, "cpu", compile_model=True, copy_model=False, compile_backend=origins.backend)
        else:
            step = no_grad_step(torch.compile(m, backend=origins.backend), inputs.values())
        for _ in range(WARM_STEPS):  # compiles the forward graph, and the backward at the first backward
            step()
    return profile_compiled_runs(step, origins, runs, req.train)
