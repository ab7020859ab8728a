"""torch.compile's native runtime: the forward compiled, or the user's loop with the model compiled.

Its compiler is inductor.
"""
from __future__ import annotations

import copy
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from ...common.errors import BenchError
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

# The environment variable that lets torch.compile's first call load what earlier processes compiled ("warm").
COMPILE_CACHE = "STACKWARS_IR_COMPILE_CACHE"


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """`torch.compile(model)`, cold (cold_start): its first call traces and compiles everything."""
    import torch

    device = torch_device(backend)
    release = cold_start()
    try:
        compiled = torch.compile(copy_on(model, device))
        xs = [torch.from_numpy(v).to(device) for v in inputs.values()]
    except BaseException:
        release()
        raise
    sync = synchronizer(device)

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = compiled(*xs)
        clock.mark("forward")
        sync()
        clock.mark("wait")
        return out

    run.meter = torch_meter
    return Setup("torch.compile (inductor)", "torch.compile", run, inductor_counters, release)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """The user's loop with `torch.compile(model)`: dynamo traces the forward, AOTAutograd derives the
    backward, inductor compiles both; the loss (outside the model) and AdamW's step run eagerly. The
    counters say how many graphs dynamo compiled at each step; cold, as `forward`."""
    device = torch_device(backend)
    release = cold_start()
    try:
        step, sync = torch_loop(model, state, device, compile_model=True), synchronizer(device)
    except BaseException:
        release()
        raise

    def run(clock=UNMARKED):
        loss = step(clock)
        sync()
        clock.mark("wait")
        return loss

    run.meter = torch_meter
    return Setup("torch.compile training step (model compiled, AdamW eager)", "torch.compile", run,
                 inductor_counters, release)


def inductor_counters() -> dict:
    """Dynamo's counters (shared.dynamo_counters) and the graphs inductor loaded from its FX graph cache
    rather than compiled (a training step's forward and backward: one each; AOTAutograd's cache, hit
    with them, is not counted again): 0 in a cold start."""
    from torch._dynamo.utils import counters

    return {**dynamo_counters(), "persistent cache hits": counters["inductor"]["fxgraph_cache_hit"]}


def cold_start() -> Callable[[], None]:
    """Nothing torch.compile made before is in reach until the returned call: dynamo's caches reset,
    and inductor's (its FX graphs, AOTAutograd's graphs, compiled kernels, Triton's) in a new empty
    folder, removed by the call (torch._inductor.utils.fresh_cache, PyTorch's own; fresh_inductor_cache
    before torch 2.8). Those caches are on by default and kept on disk between processes: without this,
    a first call after an earlier process's loads what that one compiled (GPT-2 tiny's forward on a
    2-core CPU: 24.9 s cold, 6.2 s warm, docs/benchmarks.md), and a bench's rounds would not measure
    the same first call. With STACKWARS_IR_COMPILE_CACHE=warm, inductor's caches as earlier processes
    left them (a restarted job's first call; `persistent cache hits` counts what it loaded)."""
    import contextlib

    import torch
    from torch._inductor import utils

    torch._dynamo.reset()
    how = os.environ.get(COMPILE_CACHE, "cold") or "cold"
    if how not in ("cold", "warm"):
        raise BenchError(f"{COMPILE_CACHE}={how!r}: not a compile cache policy", fix=f"set {COMPILE_CACHE} to cold "
                         "(the default: each torch.compile row compiles from nothing) or warm, or unset it")
    if how == "warm":
        return nothing
    stack = contextlib.ExitStack()
    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    stack.enter_context(fresh())
    return stack.close


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
