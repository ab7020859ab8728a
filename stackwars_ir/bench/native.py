"""Native baselines beside the StableHLO executables: jax.jit, PyTorch eager, torch.compile, torch_xla."""
from __future__ import annotations

import os
import time

from . import Executable
from .timing import Timeout, measure

BASELINES = ("jax", "eager", "inductor", "torch_xla")


def run_baselines(req, which, deadline_s: float | None) -> list[Executable]:
    from ..capture import prepare

    adapter, model, weights, inputs, _ = prepare(req)
    out = []
    for name in which:
        fn = {"jax": _jax, "eager": _eager, "inductor": _inductor, "torch_xla": _torch_xla}[name]
        try:
            out.append(fn(adapter, req, model, weights, inputs, deadline_s))
        except Timeout:
            out.append(Executable(name, name, None, None,
                                  error=f"{name}: ran past --timeout {deadline_s} s before a steady-state run"))
        except Exception as e:  # a baseline that fails is reported, the others still run
            out.append(Executable(name, name, None, None, error=f"{name}: {type(e).__name__}: "
                                  f"{' '.join(str(e).split())[:200]}"))
    return out


def _deadline(s):
    return time.monotonic() + s if s else None


def _jax(adapter, req, model, weights, inputs, deadline_s) -> Executable:
    import jax
    from flax import nnx

    from ..capture.jax_capture import jax_inputs

    graphdef, state = nnx.split(adapter.jax_model(req.size, weights))
    fn = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))
    args = [jax.device_put(v) for v in jax_inputs(inputs).values()]
    state = jax.device_put(state)
    timing = measure(lambda: fn(state, *args).block_until_ready(), deadline=_deadline(deadline_s))
    return Executable("jax.jit (native)", "jax.jit", None, timing, arguments="same weights and inputs")


def _eager(adapter, req, model, weights, inputs, deadline_s) -> Executable:
    import torch

    xs = [torch.from_numpy(v) for v in inputs.values()]

    def run():
        with torch.no_grad():
            model(*xs)

    timing = measure(run, deadline=_deadline(deadline_s))
    return Executable(f"torch eager ({torch.get_num_threads()} threads)", "torch eager", None, timing,
                      arguments="same weights and inputs")


def _inductor(adapter, req, model, weights, inputs, deadline_s) -> Executable:
    import torch

    compiled = torch.compile(model)
    xs = [torch.from_numpy(v) for v in inputs.values()]

    def run():
        with torch.no_grad():
            compiled(*xs)

    timing = measure(run, deadline=_deadline(deadline_s))
    return Executable("torch.compile (inductor)", "torch.compile", None, timing, arguments="same weights and inputs")


def _torch_xla(adapter, req, model, weights, inputs, deadline_s) -> Executable:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    dev = torch_xla.device()
    m = model.to(dev)
    xs = [torch.from_numpy(v).to(dev) for v in inputs.values()]

    def run():
        with torch.no_grad():
            m(*xs)
        torch_xla.sync()
        xm.wait_device_ops()

    try:
        timing = measure(run, deadline=_deadline(deadline_s))
    finally:
        model.to("cpu")
    return Executable("torch_xla lazy tensors", "torch_xla lazy", None, timing, arguments="same weights and inputs")
