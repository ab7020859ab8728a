"""What several native runtimes share: the setup they return, their counters, and the loops they run.

A runtime module (bench/runtimes/*.py) has `forward` and, where it times a training loop, `train`,
each (adapter, req, model, weights, inputs or TrainState, backend) -> Setup; `profile(req, runs,
backend)` where `bench --profile` profiles it.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Callable, NamedTuple

from ...common.errors import BenchError, MissingExtra
from ...common.routes import TORCHAX
from ...workload import Request, prepare, prepare_values
from ...workload.train import OpNames, TrainState, optimizer, torch_loss, train_state
from ...workload.values import copy_on
from ..host import UNMARKED, jax_meter
from ..kernels import kernels_of
from ..xla_profile import Profile, profile_runs

if TYPE_CHECKING:
    import jax
    import numpy as np
    import torch
    from jax.stages import Wrapped


class Setup(NamedTuple):
    """A native runtime set up for one request: `run(clock)` is one timed run (it returns the output,
    checked against PyTorch eager's), `counters()` the runtime's own counters read around the runs
    (None: it has none), `done()` what to release after the runs."""

    label: str  # the row's label: "jax.jit (native)"
    kind: str  # the runtime, as bench.answer and routes.Route.native name it: "jax.jit"
    run: Callable
    counters: Callable[[], dict] | None
    done: Callable[[], None]


def nothing() -> None:
    """Nothing to release (a Setup's `done`), or to wait for (a synchronizer on the CPU)."""


# jax.monitoring has no way to remove a listener: one per process counts every backend compile.
_JAX_EVENTS = {"compiles": 0, "persistent cache hits": 0}


def jax_counters() -> dict:
    """JAX's backend compiles and persistent-cache hits in this process so far (a listener is
    registered at the first call)."""
    import jax

    if not getattr(jax_counters, "registered", False):
        def on_duration(name, _secs, **_kw):
            if name == "/jax/core/compile/backend_compile_duration":
                _JAX_EVENTS["compiles"] += 1

        def on_event(name, **_kw):
            if name == "/jax/compilation_cache/cache_hits":
                _JAX_EVENTS["persistent cache hits"] += 1

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        jax.monitoring.register_event_listener(on_event)
        jax_counters.registered = True
    return dict(_JAX_EVENTS)


def dynamo_counters() -> dict:
    """Dynamo's graphs compiled and recompiles in this process so far."""
    from torch._dynamo.utils import counters

    return {"graphs compiled": counters["stats"]["unique_graphs"],
            "recompiles": counters["recompiles"].total() if counters["recompiles"] else 0}


def xla_counters() -> dict:
    """torch_xla's counters, and its own clocks: `compile ms` is XLA compiling the graphs (its
    CompileTime metric), `execute ms` running them on torch_xla's XLA, from the call until the
    results are ready (ExecuteTime); the rest of a run is tracing the step and dispatching it."""
    import torch_xla.debug.metrics as met

    def counter(name):
        return met.counter_value(name) or 0

    def total_ms(name):
        data = met.metric_data(name)  # (samples, accumulated nanoseconds, recent samples), None before any
        return round(data[1] / 1e6, 3) if data else 0.0

    return {"compiles": counter("UncachedCompile"), "cache hits": counter("CachedCompile"),
            "executions": counter("ExecuteComputation"), "compile ms": total_ms("CompileTime"),
            "execute ms": total_ms("ExecuteTime")}


def torch_device(backend: str) -> str:
    """PyTorch's device for `backend` ("cpu", or "cuda" for a GPU); BenchError where there is none."""
    if backend == "cpu":
        return "cpu"
    import torch

    if backend in ("gpu", "cuda") and torch.cuda.is_available():
        return "cuda"
    raise BenchError(f"PyTorch has no {backend} device here", fix="use --backend cpu, or a CUDA build of torch")


def synchronizer(device: str) -> Callable[[], None]:
    """What waits for `device`'s queued kernels (CUDA runs them asynchronously; the CPU does not)."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else nothing


def torch_where(device: str) -> str:
    """Where torch runs, for a row's label: its threads on the CPU, the GPU's name."""
    import torch

    return f"{torch.get_num_threads()} threads" if device == "cpu" else torch.cuda.get_device_name()


def lazy_cpu_only(backend: str) -> None:
    """BenchError unless `backend` is the CPU: torch_xla here has no other device."""
    if backend != "cpu":
        raise BenchError(f"torch_xla lazy: no {backend} route on this stack (torch_xla 2.8 deprecated XLA:CUDA, "
                         "2.9 removed it, and its CUDA plugin was never on PyPI)",
                         fix="compare the torch_xla StableHLO capture on the XLA GPU runtime instead")
    os.environ.setdefault("PJRT_DEVICE", "CPU")


def require_torchax() -> None:
    """MissingExtra unless torchax imports."""
    try:
        import torchax  # noqa: F401
    except Exception as e:
        raise MissingExtra(TORCHAX.name, e) from e


def as_captured(fn: Callable[..., object], req: Request) -> Callable[..., object]:
    """`fn`, tracing the twin's layers as the request's program runs them (models/_nnx.py run_layers)."""
    if not (req.scan_layers or req.remat):
        return fn
    from ...models import _nnx

    def traced(*args):
        with _nnx.layers_as(scan=req.scan_layers, remat=req.remat):
            return fn(*args)
    return traced


def on_xla(model: torch.nn.Module, inputs: dict[str, np.ndarray]) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """A copy of `model` and the inputs placed on torch_xla's device, their transfers done (not part
    of the first run)."""
    import torch
    import torch_xla

    dev = torch_xla.device()
    m = copy_on(model, dev)
    xs = [torch.from_numpy(v).to(dev) for v in inputs.values()]
    torch_xla.sync()
    return m, xs


def no_grad_step(m: Callable[..., object], arrays: Iterable[np.ndarray]) -> Callable:
    """`m`'s forward on the CPU tensors of `arrays` (numpy), without gradients: one call a step."""
    import torch

    xs = [torch.from_numpy(v) for v in arrays]

    def run():
        with torch.no_grad():
            return m(*xs)

    return run


def jitted_loop(fn: Wrapped, args: dict, device: jax.Device) -> Callable:
    """A jitted training step's run in a loop (`fn`: new, so its first call compiles): each step's
    parameters and AdamW state are the last step's results; its meter is jax.jit's."""
    import jax

    box = {k: jax.device_put(v, device) for k, v in args.items()}

    def run(clock=UNMARKED):
        loss, box["params"], box["opt_state"] = fn(box["params"], box["opt_state"], box["buffers"], box["inputs"])
        clock.mark("dispatch")
        loss = loss.block_until_ready()  # one execution: its outputs are ready together
        clock.mark("wait")
        return loss

    run.hlo = lambda: fn.lower(box["params"], box["opt_state"], box["buffers"], box["inputs"]).compile().as_text()
    run.meter = jax_meter
    return run


def torch_loop(model: torch.nn.Module, state: TrainState, device: str | torch.device, compile_model: bool = False,
               op_names: bool = False, copy_model: bool = True,
               compile_backend: str | Callable[..., object] = "inductor") -> Callable:
    """The user's training step (zero_grad, loss, backward, AdamW) on its own copy of `model` (or on
    `model` itself), its forward `torch.compile`d (with `compile_backend`) if `compile_model`; with
    `op_names`, each lazy op named after its module and phase as the torch_xla capture names them
    (workload.train.OpNames)."""
    import contextlib

    import torch

    m = copy_on(model, device) if copy_model else model.to(device)
    opt = optimizer(list(m.parameters()))
    xs = [torch.from_numpy(v).to(device) for k, v in state.inputs.items() if k != "target"]
    target = torch.from_numpy(state.inputs["target"]).to(device) if "target" in state.inputs else None
    forward = torch.compile(m, backend=compile_backend) if compile_model else None

    if op_names:
        names = lambda: OpNames(m)  # noqa: E731
    else:
        names = contextlib.nullcontext

    def step(clock=UNMARKED):
        opt.zero_grad(set_to_none=True)
        with names() as named:
            loss = torch_loss(m, state.loss, xs, target, forward=forward)
            clock.mark("forward and loss")
            if named is not None:
                named.backward = True
            loss.backward()
            clock.mark("backward")
        opt.step()
        clock.mark("optimizer step")
        return loss.detach()

    step.model = m
    return step


def lazy_loop(step: Callable[..., object]) -> Callable:
    """A torch_xla training loop's run: the step (traced, or dynamo's graphs launched), the sync that runs
    its lazy graph, the wait for the device."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    torch_xla.sync()

    def run(clock=UNMARKED):
        loss = step(clock)
        torch_xla.sync()
        clock.mark("sync")
        xm.wait_device_ops()
        clock.mark("wait")
        return loss

    return run


WARM_STEPS = 3  # before a profile's runs: torch_xla compiles step 1's graph and step 2's (the steady one), then runs it


def prepared(req: Request, torch_model: bool = True
             ) -> tuple[ModuleType, torch.nn.Module | None, dict[str, np.ndarray], dict[str, np.ndarray] | TrainState]:
    """(adapter, model, weights, inputs) of `req`'s workload; for a training step, the inputs are its
    TrainState (workload.train.train_state). Without `torch_model`, a forward's values may come from an
    earlier process (workload.prepare_values), the model None."""

    w = prepare(req) if torch_model or req.train else prepare_values(req)
    inputs = w.inputs
    if req.train:
        inputs = train_state(req, w.model, w.inputs, w.reference)
    return w.adapter, w.model, w.weights, inputs


def jitted_profile(setup: Callable[..., Setup], req: Request, runs: int, backend: str = "cpu") -> Profile:
    """bench.profile.Profile of a jitted runtime's steady runs (`setup`: its forward or train), its
    kernels read from the executable's optimized HLO (`run.hlo()`), after WARM_STEPS runs."""

    adapter, model, weights, inputs = prepared(req, torch_model=False)  # jax.jit's: the JAX twin
    run = setup(adapter, req, model, weights, inputs, backend).run
    for _ in range(WARM_STEPS):
        run()
    return profile_runs(run, kernels_of(run.hlo()), runs, 0.0, backend)

