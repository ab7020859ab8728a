"""Native baselines beside the StableHLO executables: jax.jit, PyTorch eager, torch.compile, torch_xla.

Every baseline returns its output from each timed run; the first output is checked against
PyTorch eager's on the CPU (bench.proof), and the runtime's own counters are read around the
runs (bench.timing), so a baseline that times nothing is an error, not a number.

What "first run" includes, per row (docs/benchmarks.md says the same):
- jax.jit: tracing, lowering, XLA compile, the transfer of nothing (arguments are placed first), the run;
- torch eager: the run (there is nothing to compile);
- torch.compile: dynamo's trace, inductor's codegen and compile (dynamo's caches are reset first), the run;
- torch_xla lazy: tracing the lazy graph, its XLA compile (unless torch_xla's cache already held that
  graph: the counters say so), the run, and the transfer of the output's handle (not its values).
"""
from __future__ import annotations

import copy
import dataclasses
import os
import time
from pathlib import Path

import numpy as np

from ..errors import StackwarsError
from ..routes import TORCHAX
from ..workload.values import copy_on
from .executable import Executable
from .host import (UNMARKED, Clock, dynamo_xla_meter, jax_meter, one_run, phases_of, timer_meter, torch_meter,
                   xla_meter)
from .proof import Checker
from .timing import Sampling, Timeout, measure

# What a PyTorch user can run instead of torch_xla's lazy tensors (issue 54, item 7): torch_xla through
# dynamo (`torch.compile(backend="openxla")`), and torchax's jitted call (jax.jit of the function
# `torchax.extract_jax` makes of the module). Forward passes, for now.
DYNAMO_XLA = "torch_xla_dynamo"
TORCHAX_JIT = TORCHAX.name
BASELINES = ("jax", "eager", "inductor", "torch_xla", "jax_donate", DYNAMO_XLA, TORCHAX_JIT)
# jax.jit's training loop with the parameters and AdamW's state donated (`donate_argnums`), as JAX's
# docs advise for a training loop: XLA writes each step's results into the buffers it was given.
TRAIN_ONLY = ("jax_donate",)
FORWARD_ONLY: tuple = ()  # every other baseline has a forward pass and a training loop
REFERENCE = "PyTorch eager on the CPU, same weights and inputs"


def baselines_asked(given, step: str, program: str = "", mesh: str = "") -> tuple[str, ...]:
    """The native runtimes asked for ("jax,eager", a tuple of names, or "none"), each one checked;
    with a layers' program (--scan-layers, --remat), jax alone runs the same program natively."""
    if isinstance(given, str):
        given = () if given == "none" else tuple(b for b in given.split(",") if b)
    bad = [b for b in given if b not in BASELINES]
    if bad:  # every baseline has a training loop too
        raise StackwarsError(f"unknown baseline {bad[0]!r}", fix=f"choose from {', '.join(BASELINES)}")
    only = [b for b in given if b in TRAIN_ONLY]
    if only and step == "forward":
        raise StackwarsError(f"baseline {only[0]!r} times a training loop (it donates the parameters and "
                             "optimizer state between steps); a forward pass has nothing to donate",
                             fix="add --step train, or use --baselines jax")
    forward = [b for b in given if b in FORWARD_ONLY]
    if forward and step != "forward":  # none at present; kept for a baseline added forward first
        raise StackwarsError(f"baseline {forward[0]!r} times a forward pass only: its training loop is not "
                             "built yet", fix=f"drop {forward[0]} from --baselines for --step {step}")
    if mesh and given:
        raise StackwarsError(f"the native baselines run on one device, and --mesh {mesh} shards the captures alone",
                             fix="add --baselines none (the sharded captures are timed on as many CPU devices)")
    other = [b for b in given if not b.startswith("jax")]
    if program and other:
        raise StackwarsError(f"baseline {other[0]!r} cannot run the layers as --scan-layers/--remat ask: torch "
                             "eager and inductor have no scan_layers, and torch_xla's native loop runs them as written",
                             fix="use --baselines jax (the twin scanned and rematerialized as captured), or none")
    return tuple(given)


def as_captured(fn, req):
    """`fn`, tracing the twin's layers as the request's program runs them (models/_nnx.py run_layers)."""
    if not (req.scan_layers or req.remat):
        return fn
    from stackwars_ir.models import _nnx

    def traced(*args):
        with _nnx.layers_as(scan=req.scan_layers, remat=req.remat):
            return fn(*args)
    return traced


TRAIN_REFERENCE = "PyTorch eager's first training step on the CPU (its loss), same weights and batch"


def run_baseline(req, name: str, deadline_s: float | None, backend: str = "cpu", asked=None) -> Executable:
    """Native runtime `name`'s row for `req` (a worker's task: bench.run.bench_baselines); `asked`: the
    user's sampling (timing.Asked)."""
    return run_baselines(req, (name,), deadline_s, backend, asked)[0]


def run_baselines(req, which, deadline_s: float | None, backend: str = "cpu", asked=None) -> list[Executable]:
    from ..workload import prepare

    train = req.train
    if train and backend in (None, "cpu"):
        # Before any backward of this worker, whichever baseline it runs first (see register_torch_xla).
        from ..workload.train import register_torch_xla
        from ..errors import MissingExtra

        try:
            register_torch_xla()
        except MissingExtra:
            pass  # the torch_xla row reports it
    w = prepare(req)
    adapter, model, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    what = REFERENCE
    if train:
        from ..workload.train import train_state

        # Each timed run is the next step of a user's loop from the seeded weights: run 1 is step 1.
        inputs = train_state(req, model, inputs, reference)
        reference, what = np.asarray(inputs.first_loss, dtype=np.float32), TRAIN_REFERENCE
    backend = backend or "cpu"
    out = []
    for name in which:
        fn = setup_of(name, train)
        if fn is None and name in TRAIN_ONLY:
            out.append(_failed(name, ValueError(f"{name} times a training loop: bench it with step='train'")))
            continue
        if fn is None:
            out.append(_failed(name, ValueError(f"no {name} baseline (choose from {', '.join(BASELINES)})")))
            continue
        from .memory import ResidentWindow

        # The row's resident growth: its own copy of the weights and state, compile and every run.
        window = ResidentWindow() if backend == "cpu" and ResidentWindow.available() else None
        if window:
            window.__enter__()
        try:
            label, kind, run, counters, done = fn(adapter, req, model, weights, inputs, backend)
        except Exception as e:  # a baseline that cannot start is reported, the others still run
            from stackwars_ir import models
            from stackwars_ir.models._contract import explain

            out.append(_failed(name, explain(models.entry(req.model), e)))  # the adapter's line, if it raised
            continue
        try:
            from ..isolate import started

            started()  # in a bench worker: the time limit of the compile and runs starts now
            checker = Checker(label, reference, backend, what)
            phased = Sampling.of(asked).host  # bench --host: more steady runs, each split into its phases
            meter = getattr(run, "meter", timer_meter)() if phased else None
            timed, firsts = (_marking_firsts(run, meter) if phased else (run, []))
            timing = measure(timed, deadline=_deadline(deadline_s), inspect=checker, counters=counters, asked=asked)
            if window:
                window.__exit__(None, None, None)
            host = phases_of(run, phased, meter, getattr(run, "model", None), "forward" if train else "") \
                if phased else None
            if host and len(firsts) == 2:
                host = dataclasses.replace(host, first=one_run(firsts[0], meter)[1], second=one_run(firsts[1], meter)[1])
            out.append(Executable(label, kind, None, timing, arguments="same weights and inputs",
                                  proof=checker.proof, resident_bytes=window.bytes if window else None, host=host))
        except Timeout:
            out.append(Executable(label, kind, None, None,
                                  error=f"{label}: ran past --timeout {deadline_s} s before a steady-state run"))
        except Exception as e:
            out.append(_failed(label, e, kind))
        finally:
            done()
    return out


def _marking_firsts(run, meter):
    """`run` whose first two calls (the timed first and second runs) are marked with clocks of
    `meter`, kept in the list returned beside it."""
    firsts = []

    def timed():
        if len(firsts) < 2:
            firsts.append(Clock(meter.read))
            return run(firsts[-1])
        return run()

    return timed, firsts


def _failed(label: str, e: Exception, kind: str | None = None) -> Executable:
    from ..errors import StackwarsError

    message = e.one_line() if isinstance(e, StackwarsError) else \
        f"{label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
    return Executable(label, kind or label, None, None, error=message)


def _deadline(s):
    return time.monotonic() + s if s else None


def _nothing() -> None:
    pass


# jax.monitoring has no way to remove a listener: one per process counts every backend compile.
_JAX_EVENTS = {"compiles": 0, "persistent cache hits": 0}


def jax_counters() -> dict:
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


def _jax(adapter, req, model, weights, inputs, backend):
    import jax
    from flax import nnx

    from ..workload import jax_inputs
    from ..runtime import runtime

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
    return "jax.jit (native)", "jax.jit", run, jax_counters, _nothing


def _torch_device(backend: str) -> str:
    if backend == "cpu":
        return "cpu"
    import torch

    if backend in ("gpu", "cuda") and torch.cuda.is_available():
        return "cuda"
    from ..errors import BenchError

    raise BenchError(f"PyTorch has no {backend} device here", fix="use --backend cpu, or a CUDA build of torch")


def _synchronizer(device: str):
    import torch

    return torch.cuda.synchronize if device == "cuda" else _nothing


def _eager(adapter, req, model, weights, inputs, backend):
    import torch

    device = _torch_device(backend)
    m = copy_on(model, device)  # its own weights, as every row holds its own
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]
    sync = _synchronizer(device)

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = m(*xs)
        clock.mark("forward")
        sync()  # CUDA kernels run asynchronously: the clock stops when they are done
        clock.mark("wait")
        return out

    where = f"{torch.get_num_threads()} threads" if device == "cpu" else torch.cuda.get_device_name()
    run.model, run.meter = m, torch_meter  # bench --host clocks the host in each of its modules
    return f"torch eager ({where})", "torch eager", run, None, _nothing


def _dynamo_counters() -> dict:
    from torch._dynamo.utils import counters

    return {"graphs compiled": counters["stats"]["unique_graphs"],
            "recompiles": counters["recompiles"].total() if counters["recompiles"] else 0}


def _inductor(adapter, req, model, weights, inputs, backend):
    import torch

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    device = _torch_device(backend)
    compiled = torch.compile(copy_on(model, device))
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]
    sync = _synchronizer(device)

    def run(clock=UNMARKED):
        with torch.no_grad():
            out = compiled(*xs)
        clock.mark("forward")
        sync()
        clock.mark("wait")
        return out

    run.meter = torch_meter
    return "torch.compile (inductor)", "torch.compile", run, _dynamo_counters, _nothing


def _xla_counters() -> dict:
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


def _torch_xla(adapter, req, model, weights, inputs, backend):
    if backend != "cpu":
        from ..errors import BenchError

        raise BenchError(f"torch_xla lazy: no {backend} route on this stack (torch_xla 2.8 deprecated XLA:CUDA, "
                         "2.9 removed it, and its CUDA plugin was never on PyPI)",
                         fix="compare the torch_xla StableHLO capture on the XLA GPU runtime instead")
    os.environ.setdefault("PJRT_DEVICE", "CPU")
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
    return "torch_xla lazy tensors", "torch_xla lazy", run, _xla_counters, _nothing


def on_xla(model, inputs):
    """A copy of `model` and the inputs placed on torch_xla's device, their transfers done (not part
    of the first run)."""
    import torch
    import torch_xla

    dev = torch_xla.device()
    m = copy_on(model, dev)
    xs = [torch.from_numpy(v).to(dev) for v in inputs.values()]
    torch_xla.sync()
    return m, xs


def _dynamo_xla(adapter, req, model, weights, inputs, backend):
    """torch_xla through dynamo: `torch.compile(model, backend="openxla")`. Dynamo traces the forward
    once, torch_xla lowers and compiles its graph, and each call runs it without tracing the model
    again: the call returns once the graph is launched, `wait` waits for its execution."""
    if backend != "cpu":
        return _torch_xla(adapter, req, model, weights, inputs, backend)  # its one-line error
    os.environ.setdefault("PJRT_DEVICE", "CPU")
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
    return "torch.compile (openxla: torch_xla through dynamo)", "torch_xla dynamo", run, _xla_counters, _nothing


def _torchax_jit(adapter, req, model, weights, inputs, backend):
    """torchax's jitted call: `torchax.extract_jax(model)` makes the module a JAX function of its
    weights and inputs, which jax.jit compiles; each call dispatches it, as jax.jit's row does."""
    import jax

    from ..runtime import runtime
    from ..workload import jax_inputs

    try:
        import torchax
    except Exception as e:
        from ..errors import MissingExtra

        raise MissingExtra(TORCHAX_JIT, e) from e
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
    return "torchax jitted call (jax.jit of torchax.extract_jax)", TORCHAX.native, run, jax_counters, _nothing


# Training steps (`bench MODEL --step train`): each run is the next step of the user's own loop,
# from the seeded weights and a fresh AdamW, so runs 1, 2 and 3 are steps 1, 2 and 3. The loss of
# run 1 is the proof (PyTorch eager's step 1); `state` is workload.train's TrainState.


def _jax_train(adapter, req, model, weights, state, backend, donate: bool = False):
    """The captured step's own function under jax.jit, in a loop: each step's parameters and AdamW
    state are the last step's results. Undonated, as captured: every step returns new buffers beside
    the old ones; `donate`: the step writes its results into the buffers it was given."""
    import jax

    from ..workload.train import jax_step
    from ..runtime import runtime

    device = runtime(backend).device
    jax_counters()
    step, args = jax_step(adapter, req.size, state, weights)
    run = _jitted_loop(jax.jit(as_captured(step, req), donate_argnums=(0, 1) if donate else ()), args, device)

    if donate:
        return "jax.jit training step, state donated (native)", "jax.jit donated", run, jax_counters, _nothing
    return "jax.jit training step (native)", "jax.jit", run, jax_counters, _nothing


def _jitted_loop(fn, args: dict, device):
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


def _jax_train_donated(adapter, req, model, weights, state, backend):
    return _jax_train(adapter, req, model, weights, state, backend, donate=True)


def torch_loop(model, state, device, compile_model: bool = False, op_names: bool = False, copy_model: bool = True,
                compile_backend="inductor"):
    """The user's training step (zero_grad, loss, backward, AdamW) on its own copy of `model` (or on
    `model` itself), its forward `torch.compile`d (with `compile_backend`) if `compile_model`; with
    `op_names`, each lazy op named after its module and phase as the torch_xla capture names them
    (workload.train.OpNames)."""
    import contextlib

    import torch

    from ..workload.train import optimizer, torch_loss

    m = copy_on(model, device) if copy_model else model.to(device)
    opt = optimizer(list(m.parameters()))
    xs = [torch.from_numpy(v).to(device) for k, v in state.inputs.items() if k != "target"]
    target = torch.from_numpy(state.inputs["target"]).to(device) if "target" in state.inputs else None
    forward = torch.compile(m, backend=compile_backend) if compile_model else None

    if op_names:
        from ..workload.train import OpNames

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


def _eager_train(adapter, req, model, weights, state, backend):
    import torch

    device = _torch_device(backend)
    step, sync = torch_loop(model, state, device), _synchronizer(device)

    def run(clock=UNMARKED):
        loss = step(clock)
        sync()
        clock.mark("wait")
        return loss

    where = f"{torch.get_num_threads()} threads" if device == "cpu" else torch.cuda.get_device_name()
    run.model, run.meter = step.model, torch_meter
    return f"torch eager training step ({where})", "torch eager", run, None, _nothing


def _inductor_train(adapter, req, model, weights, state, backend):
    """The user's loop with `torch.compile(model)`: dynamo traces the forward, AOTAutograd derives the
    backward, inductor compiles both; the loss (outside the model) and AdamW's step run eagerly. The
    counters say how many graphs dynamo compiled at each step."""
    import torch

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    device = _torch_device(backend)
    step, sync = torch_loop(model, state, device, compile_model=True), _synchronizer(device)

    def run(clock=UNMARKED):
        loss = step(clock)
        sync()
        clock.mark("wait")
        return loss

    run.meter = torch_meter
    return "torch.compile training step (model compiled, AdamW eager)", "torch.compile", run, _dynamo_counters, _nothing


def _dynamo_xla_train(adapter, req, model, weights, state, backend):
    """The user's loop with `torch.compile(model, backend="openxla")` on torch_xla: dynamo traces the
    forward once, AOTAutograd derives the backward, torch_xla compiles both graphs and launches them at
    each step without tracing the model again; the loss (outside the model) and AdamW's step are lazy
    ops traced at each step and run by the sync, as in the lazy loop."""
    if backend != "cpu":
        return _torch_xla(adapter, req, model, weights, state.inputs, backend)  # its one-line error
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla

    torch._dynamo.reset()  # first is first: nothing this process compiled before is reused
    run = _lazy_loop(torch_loop(model, state, torch_xla.device(), compile_model=True, compile_backend="openxla"))
    run.meter = dynamo_xla_meter
    return ("torch.compile training loop (openxla: torch_xla through dynamo; AdamW lazy)", "torch_xla dynamo", run,
            _xla_counters, _nothing)


def _torchax_train(adapter, req, model, weights, state, backend):
    """torchax's jitted training step: the model and its loss exported (torch.export), run by torchax's
    interpreter under jax.value_and_grad with optax's AdamW (capture.train's torchax step, the function
    the torchax capture lowers), under jax.jit in a loop: each step's parameters and AdamW state are
    the last step's results; its host time per step is a jax.jit dispatch."""
    import jax

    from ..capture.train import torchax_step
    from ..runtime import runtime

    try:
        import torchax  # noqa: F401
    except Exception as e:
        from ..errors import MissingExtra

        raise MissingExtra(TORCHAX_JIT, e) from e
    device = runtime(backend).device
    jax_counters()
    step, args = torchax_step(model, state, weights=weights)
    run = _jitted_loop(jax.jit(step), args, device)
    return "torchax jitted training step (jax.jit, optax AdamW)", TORCHAX.native, run, jax_counters, _nothing


def _lazy_loop(step):
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


def _torch_xla_train(adapter, req, model, weights, state, backend):
    if backend != "cpu":
        return _torch_xla(adapter, req, model, weights, state.inputs, backend)  # its one-line error
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch_xla

    step = torch_loop(model, state, torch_xla.device())
    run = _lazy_loop(step)
    run.meter, run.model = xla_meter, step.model
    return "torch_xla lazy training loop", "torch_xla lazy", run, _xla_counters, _nothing


# Which native runtimes `bench MODEL --profile` profiles, each in a worker of its own after the timed
# rows (profile_baseline): jax.jit, torch eager and torch.compile, forward and training loop; torch_xla's
# lazy forward and training loop on its own XLA build.
PROFILED = {(name, step) for name in ("jax", "eager", "inductor", "torch_xla") for step in ("forward", "train")}
_WARM_STEPS = 3  # torch_xla compiles step 1's graph and step 2's (the steady one), then runs it


def profile_baseline(req, name: str, runs: int, backend: str = "cpu"):
    """bench.profile.Profile of native runtime `name`'s steady runs for `req` (after _WARM_STEPS
    runs), each kernel or op traced to the module path and phase the captures' blocks carry:
    jax.jit's by jax's profiler (the same XLA as the StableHLO rows; its kernels' op_name is the JAX
    capture's), torch eager's by torch.profiler (eager_profile), torch.compile's by torch.profiler with
    inductor's kernels traced through its provenance (inductor_profile), torch_xla's by its own
    (_lazy_profile). Run in a fresh process (a worker of its own)."""
    from ..errors import BenchError
    from .profile import GPU_PLATFORMS, cpu_only

    if not (name == "jax" and backend in GPU_PLATFORMS):  # jax.jit's kernels are read on a GPU too
        cpu_only(backend or "cpu")
    if (name, req.step) not in PROFILED:
        raise BenchError(f"--profile: no profile of the {name} baseline's {req.step} step yet",
                         fix="drop --profile for this baseline")
    if name == "torch_xla":
        return _lazy_profile(req, runs)
    from ..workload import prepare

    train = req.train
    w = prepare(req)
    adapter, model, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    if train:
        from ..workload.train import train_state

        inputs = train_state(req, model, inputs, reference)
    if name == "eager":
        from .eager_profile import profile_eager_runs

        m = copy.deepcopy(model)  # the copy the loop runs is the one whose modules get ranges
        step = torch_loop(m, inputs, "cpu", copy_model=False) if train else _eager_step(m, inputs.values())
        for _ in range(_WARM_STEPS):
            step()
        return profile_eager_runs(step, m, runs, train)
    if name == "inductor":
        return _inductor_profile(model, inputs, runs, train)
    from .kernels import kernels_of
    from .profile import profile_runs

    _, _, run, _, _ = setup_of(name, train)(adapter, req, model, weights, inputs, backend or "cpu")
    for _ in range(_WARM_STEPS):
        run()
    return profile_runs(run, kernels_of(run.hlo()), runs, 0.0, backend or "cpu")


def _inductor_profile(model, inputs, runs: int, train: bool):
    """torch.compile's steady runs profiled, its graphs compiled here with inductor's provenance on
    (inductor_profile.KernelOrigins): the forward as `_inductor` runs it, or the user's loop."""
    import torch

    from .inductor_profile import KernelOrigins, profile_compiled_runs

    torch._dynamo.reset()
    m = copy.deepcopy(model)
    with KernelOrigins(train) as origins:
        if train:
            step = torch_loop(m, inputs, "cpu", compile_model=True, copy_model=False, compile_backend=origins.backend)
        else:
            step = _eager_step(torch.compile(m, backend=origins.backend), inputs.values())
        for _ in range(_WARM_STEPS):  # compiles the forward graph, and the backward at the first backward
            step()
    return profile_compiled_runs(step, origins, runs, train)


def _eager_step(m, arrays):
    import torch

    xs = [torch.from_numpy(v) for v in arrays]

    def run():
        with torch.no_grad():
            return m(*xs)

    return run


def _lazy_profile(req, runs: int):
    """torch_xla's lazy training loop, profiled by torch_xla's own profiler: each op is named after
    its module and phase as the capture names them (XLA_HLO_DEBUG metadata, which torch_xla's XLA
    keeps in the kernels' op_name), so each kernel of its XLA build traces to a block of the captured
    StableHLO. Needs a fresh process: torch_xla reads XLA_HLO_DEBUG and its XLA reads XLA_FLAGS once,
    at their first graph."""
    import glob
    import tempfile

    from ..errors import BenchError
    from .kernels import kernels_of
    from .profile import profile_lazy_runs

    with tempfile.TemporaryDirectory(prefix="stackwars-torch_xla-hlo-") as folder:
        # Its post-optimization HLO names the kernels its profiler's events carry; dumped as XLA
        # compiles, never recompiled for it (torch_xla's XLA_DUMP_POST_OPTIMIZATIONS recompiles every
        # step's graph: the steps would all be first executions).
        os.environ.update(PJRT_DEVICE="CPU", XLA_HLO_DEBUG="1", XLA_FLAGS=(
            f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={folder} --xla_dump_hlo_as_text "
            "--xla_dump_hlo_module_re=SyncTensorsGraph").strip())
        from ..workload import prepare
        from ..workload.train import register_torch_xla, train_state

        register_torch_xla()
        import torch_xla
        import torch_xla.core.xla_model as xm

        w = prepare(req)
        model, inputs, reference = w.model, w.inputs, w.reference
        train = req.train
        step = torch_loop(model, train_state(req, model, inputs, reference), torch_xla.device(), op_names=True) \
            if train else _lazy_forward(model, inputs, torch_xla.device())

        def run():
            out = step()  # alive through the sync: a lazy graph with no live output never runs
            torch_xla.sync()
            xm.wait_device_ops()
            return out

        for _ in range(_WARM_STEPS):
            run()
        graphs = [kernels_of(Path(f).read_text()) for f in sorted(glob.glob(f"{folder}/*.cpu_after_optimizations.txt"))]
        if not graphs:
            raise BenchError("torch_xla's XLA dumped no optimized graph (XLA_FLAGS was read before this profile)",
                             fix="profile torch_xla in a fresh process (bench does)")
        profile = profile_lazy_runs(run, graphs, runs, 0.0, note=(
            "torch_xla lazy, profiled by torch_xla's profiler: each op named after its module (XLA_HLO_DEBUG), "
            "which slows tracing, not the kernels"))
    if train:
        return profile
    import dataclasses  # a forward capture's blocks have no phase: neither have its kernels

    return dataclasses.replace(profile, kernels=tuple(dataclasses.replace(k, phase="") for k in profile.kernels))


def _lazy_forward(model, inputs, device):
    """torch_xla lazy's forward pass on its own copy of `model`, each op named after its module."""
    import torch

    from ..workload.train import OpNames

    m = copy_on(model, device)
    xs = [torch.from_numpy(v).to(device) for v in inputs.values()]

    def step():
        with torch.no_grad(), OpNames(m):
            return m(*xs)

    return step


def setup_of(name: str, train: bool):
    """Baseline NAME's setup (its training loop's when `train`), or None: (adapter, req, model,
    weights, inputs or TrainState, backend) -> (label, kind, run, counters, done). Looked up at each
    call, so a test can replace one. benchmarks/page_faults.py runs the training loops with it too."""
    if train:
        return {"jax": _jax_train, "eager": _eager_train, "inductor": _inductor_train,
                "torch_xla": _torch_xla_train, "jax_donate": _jax_train_donated, DYNAMO_XLA: _dynamo_xla_train,
                TORCHAX_JIT: _torchax_train}.get(name)
    return {"jax": _jax, "eager": _eager, "inductor": _inductor, "torch_xla": _torch_xla, DYNAMO_XLA: _dynamo_xla,
            TORCHAX_JIT: _torchax_jit}.get(name)
