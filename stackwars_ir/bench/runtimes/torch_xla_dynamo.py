"""torch_xla through dynamo: `torch.compile(model, backend="openxla")`, the forward or the user's loop."""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ...workload import Request
from ...workload.train import TrainState
from ..host import UNMARKED, dynamo_xla_meter
from .shared import Setup, lazy_cpu_only, lazy_loop, nothing, on_xla, torch_loop, xla_counters

if TYPE_CHECKING:
    import numpy as np
    import torch


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """Dynamo traces the forward once, torch_xla lowers and compiles its graph, and each call runs it
    without tracing the model again: the call returns once the graph is launched, `wait` waits for
    its execution."""
    lazy_cpu_only(backend)
    import torch
    import torch_xla.core.xla_model as xm

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    m, xs = on_xla(model, inputs)
    compiled = torch.compile(m, backend="openxla")

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = compiled(*xs)
        clock.mark("forward")
        xm.wait_device_ops()
        clock.mark("wait")
        return out

    run.meter = dynamo_xla_meter
    return Setup("torch.compile (openxla: torch_xla through dynamo)", "torch_xla dynamo", run, xla_counters, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """The user's loop with `torch.compile(model, backend="openxla")` on torch_xla: dynamo traces the
    forward once, AOTAutograd derives the backward, torch_xla compiles both graphs and launches them at
    each step without tracing the model again; the loss (outside the model) and AdamW's step are lazy
    ops traced at each step and run by the sync, as in the lazy loop."""
    lazy_cpu_only(backend)
    import torch
    import torch_xla

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    run = lazy_loop(torch_loop(model, state, torch_xla.device(), compile_model=True, compile_backend="openxla"))
    run.meter = dynamo_xla_meter
    return Setup("torch.compile training loop (openxla: torch_xla through dynamo; AdamW lazy)", "torch_xla dynamo",
                 run, xla_counters, nothing)
