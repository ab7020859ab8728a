"""torch_xla's native runtime: the model on lazy tensors, each step traced, synced and run.

The first sync compiles the step's graph.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ...common.errors import BenchError
from ...workload import Request, prepare
from ...workload.train import OpNames, TrainState, register_torch_xla, train_state
from ...workload.values import copy_on
from ..host import UNMARKED, xla_meter
from ..kernels import kernels_of
from ..xla_profile import Profile, profile_lazy_runs
from .shared import WARM_STEPS, Setup, lazy_cpu_only, lazy_loop, nothing, on_xla, torch_loop, xla_counters

if TYPE_CHECKING:
    import numpy as np
    import torch


def forward(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray],
            inputs: dict[str, np.ndarray], backend: str) -> Setup:
    """The forward on lazy tensors, then `torch_xla.sync()` (the graph's compile at first, its run)
    and the wait for the device; the output stays alive through the sync."""
    lazy_cpu_only(backend)
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    m, xs = on_xla(model, inputs)

    def run(clock=UNMARKED):
        # The output stays alive through the sync: a lazy graph with no live output is never
        # compiled or executed (what this baseline timed before: nothing).
        with torch.no_grad():
            out = m(*xs)
        clock.mark("forward")
        torch_xla.sync()
        clock.mark("sync")
        xm.wait_device_ops()
        clock.mark("wait")
        return out

    run.meter, run.model = xla_meter, m
    return Setup("torch_xla lazy tensors", "torch_xla lazy", run, xla_counters, nothing)


def train(adapter: ModuleType, req: Request, model: torch.nn.Module, weights: dict[str, np.ndarray], state: TrainState,
          backend: str) -> Setup:
    """The user's loop on lazy tensors: each step traced, then synced and run."""
    lazy_cpu_only(backend)
    import torch_xla

    step = torch_loop(model, state, torch_xla.device())
    run = lazy_loop(step)
    run.meter, run.model = xla_meter, step.model
    return Setup("torch_xla lazy training loop", "torch_xla lazy", run, xla_counters, nothing)


def profile(req: Request, runs: int, backend: str = "cpu") -> Profile:
    """torch_xla's lazy forward or training loop, profiled by torch_xla's own profiler: each op is
    named after its module and phase as the capture names them (XLA_HLO_DEBUG metadata, which
    torch_xla's XLA keeps in the kernels' op_name), so each kernel of its XLA build traces to a block
    of the captured StableHLO. Needs a fresh process: torch_xla reads XLA_HLO_DEBUG and its XLA reads
    XLA_FLAGS once, at their first graph."""

    with tempfile.TemporaryDirectory(prefix="stackwars-torch_xla-hlo-") as folder:
        # Its post-optimization HLO names the kernels its profiler's events carry; dumped as XLA
        # compiles, never recompiled for it (torch_xla's XLA_DUMP_POST_OPTIMIZATIONS recompiles every
        # step's graph: the steps would all be first executions).
        os.environ.update(PJRT_DEVICE="CPU", XLA_HLO_DEBUG="1", XLA_FLAGS=(
            f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={folder} --xla_dump_hlo_as_text "
            "--xla_dump_hlo_module_re=SyncTensorsGraph").strip())

        register_torch_xla()
        import torch_xla
        import torch_xla.core.xla_model as xm

        w = prepare(req)
        model, inputs, reference = w.model, w.inputs, w.reference
        step = torch_loop(model, train_state(req, model, inputs, reference), torch_xla.device(), op_names=True) \
            if req.train else _named_forward(model, inputs, torch_xla.device())

        def run():
            out = step()  # alive through the sync: a lazy graph with no live output never runs
            torch_xla.sync()
            xm.wait_device_ops()
            return out

        for _ in range(WARM_STEPS):
            run()
        graphs = [kernels_of(Path(f).read_text()) for f in sorted(glob.glob(f"{folder}/*.cpu_after_optimizations.txt"))]
        if not graphs:
            raise BenchError("torch_xla's XLA dumped no optimized graph (XLA_FLAGS was read before this profile)",
                             fix="profile torch_xla in a fresh process (bench does)")
        profile = profile_lazy_runs(run, graphs, runs, 0.0, note=(
            "torch_xla lazy, profiled by torch_xla's profiler: each op named after its module (XLA_HLO_DEBUG), "
            "which slows tracing, not the kernels"))
    if req.train:
        return profile
    # a forward capture's blocks have no phase: neither have its kernels
    return dataclasses.replace(profile, kernels=tuple(dataclasses.replace(k, phase="") for k in profile.kernels))


def _named_forward(model, inputs, device):
    """torch_xla lazy's forward pass on its own copy of `model`, each op named after its module."""
    import torch

    m = copy_on(model, device)
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]

    def step():
        with torch.no_grad(), OpNames(m):
            return m(*xs)

    return step
