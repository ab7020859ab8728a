"""Native runtimes timed beside the StableHLO executables: their table and their rows.

Their table names one module each in bench/runtimes.

Every baseline returns its output from each timed run; the first output is checked against
PyTorch eager's on the CPU (bench.proof), and the runtime's own counters are read around the
runs (bench.timing), so a baseline that times nothing is an error, not a number.

What "first run" includes, per row (docs/benchmarks.md says the same):
- jax.jit: tracing, lowering, XLA compile, the transfer of nothing (arguments are placed first), the run;
- torch eager: the run (there is nothing to compile);
- torch.compile: dynamo's trace, inductor's codegen and compile (a cold start: dynamo's caches reset, inductor's
  in a new empty folder, runtimes/inductor.cold_start), the run;
- torch_xla lazy: tracing the lazy graph, its XLA compile (unless torch_xla's cache already held that
  graph: the counters say so), the run, and the transfer of the output's handle (not its values).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from .. import models
from ..common.errors import BenchError, MissingExtra, StackwarsError
from ..common.routes import STEPS, TORCHAX
from ..isolate.task import started
from ..workload import Request, prepare, prepare_values
from ..workload.train import register_torch_xla, train_state
from .executable import Executable
from .host import Clock, one_run, phases_of, timer_meter
from .planning import ResidentWindow
from .proof import Checker
from .runtimes import inductor, jax_donated, jax_jit, torch_eager, torch_xla_dynamo, torch_xla_lazy, torchax_jit
from .runtimes.shared import Setup
from .timing import Asked, Sampling, Timeout, measure
from .xla_profile import GPU_PLATFORMS, Profile, cpu_only


@dataclass(frozen=True)
class NativeRuntime:
    """A native runtime bench times beside the captures: its --baselines name and its module
    (bench/runtimes: `forward` and `train` for the steps it times, `profile` where --profile
    profiles it). A new runtime is its module and its row in RUNTIMES."""

    name: str
    code: ModuleType

    @property
    def steps(self) -> tuple[str, ...]:
        """The steps it times: "forward", "train", or both."""
        return tuple(s for s in STEPS if hasattr(self.code, "forward" if s == "forward" else "train"))

    def setup(self, train: bool) -> Callable[..., Setup] | None:
        """Its setup for a forward pass or a training loop (shared.Setup's maker), None if it has none;
        looked up at each call, so a test can replace one."""
        return getattr(self.code, "train" if train else "forward", None)

    def needs_torch_model(self, train: bool) -> bool:
        """Whether its setup runs the PyTorch model; one that does not (its module's
        FORWARD_WITHOUT_TORCH: jax.jit's forward runs the JAX twin) may take values kept by an earlier
        process (workload.prepare_values)."""
        return train or not getattr(self.code, "FORWARD_WITHOUT_TORCH", False)



# What a PyTorch user can run instead of torch_xla's lazy tensors (issue 54, item 7): torch_xla through
# dynamo (`torch.compile(backend="openxla")`), and torchax's jitted call (jax.jit of the function
# `torchax.extract_jax` makes of the module). jax_donate: jax.jit's training loop with the parameters
# and AdamW's state donated (`donate_argnums`): XLA writes each step's results into the buffers it was given.
DYNAMO_XLA = "torch_xla_dynamo"
TORCHAX_JIT = TORCHAX.name
RUNTIMES = (NativeRuntime("jax", jax_jit), NativeRuntime("eager", torch_eager), NativeRuntime("inductor", inductor),
            NativeRuntime("torch_xla", torch_xla_lazy), NativeRuntime("jax_donate", jax_donated),
            NativeRuntime(DYNAMO_XLA, torch_xla_dynamo), NativeRuntime(TORCHAX_JIT, torchax_jit))
BY_NAME = {r.name: r for r in RUNTIMES}
BASELINES = tuple(BY_NAME)
TRAIN_ONLY = tuple(r.name for r in RUNTIMES if r.steps == ("train",))
FORWARD_ONLY = tuple(r.name for r in RUNTIMES if r.steps == ("forward",))
# Which native runtimes `bench MODEL --profile` profiles, each in a worker of its own after the timed
# rows (profile_baseline): those whose module has a `profile`, forward and training loop.
PROFILED = {(r.name, step) for r in RUNTIMES if hasattr(r.code, "profile") for step in r.steps}
REFERENCE = "PyTorch eager on the CPU, same weights and inputs"
TRAIN_REFERENCE = "PyTorch eager's first training step on the CPU (its loss), same weights and batch"


def baselines_asked(given: str | Sequence[str], step: str, program: str = "", mesh: str = "") -> tuple[str, ...]:
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


def run_baseline(req: Request, name: str, deadline_s: float | None, backend: str = "cpu",
                 asked: Asked | None = None) -> Executable:
    """Native runtime `name`'s row for `req` (a worker's task: bench.run.bench_baselines); `asked`: the
    user's sampling (timing.Asked)."""
    return run_baselines(req, (name,), deadline_s, backend, asked)[0]


def run_baselines(req: Request, which: Iterable[str], deadline_s: float | None, backend: str = "cpu",
                  asked: Asked | None = None) -> list[Executable]:
    train = req.train
    if train and backend in (None, "cpu"):
        # Before any backward of this worker, whichever baseline it runs first (see register_torch_xla).

        try:
            register_torch_xla()
        except MissingExtra:
            pass  # the torch_xla row reports it
    which = tuple(which)
    torch_model = any(BY_NAME[n].needs_torch_model(train) for n in which if n in BY_NAME)
    w = prepare(req) if torch_model else prepare_values(req)
    adapter, model, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    what = REFERENCE
    if train:
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

        # The row's resident growth: its own copy of the weights and state, compile and every run.
        window = ResidentWindow() if backend == "cpu" and ResidentWindow.available() else None
        if window:
            window.__enter__()
        try:
            label, kind, run, counters, done = fn(adapter, req, model, weights, inputs, backend)
        except Exception as e:  # a baseline that cannot start is reported, the others still run
            from ..models._contract import explain

            out.append(_failed(name, explain(models.entry(req.model), e)))  # the adapter's line, if it raised
            continue
        try:
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
    message = e.one_line() if isinstance(e, StackwarsError) else \
        f"{label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
    return Executable(label, kind or label, None, None, error=message)


def _deadline(s):
    return time.monotonic() + s if s else None


def profile_baseline(req: Request, name: str, runs: int, backend: str = "cpu") -> Profile:
    """bench.profile.Profile of native runtime `name`'s steady runs for `req` (after shared.WARM_STEPS
    runs), each kernel or op traced to the module path and phase the captures' blocks carry, by the
    runtime module's own `profile` (jax.jit's by jax's profiler, torch eager's and torch.compile's by
    torch.profiler, torch_xla's by its own). Run in a fresh process (a worker of its own)."""

    if not (name == "jax" and backend in GPU_PLATFORMS):  # jax.jit's kernels are read on a GPU too
        cpu_only(backend or "cpu")
    if (name, req.step) not in PROFILED:
        raise BenchError(f"--profile: no profile of the {name} baseline's {req.step} step yet",
                         fix="drop --profile for this baseline")
    # In a worker: the profile prepares, compiles and runs in one call, all under the user's --timeout
    # (an inductor training step's compile passed the 300 s setup limit on a slowed 2-core machine).
    started()
    return BY_NAME[name].code.profile(req, runs, backend or "cpu")


def setup_of(name: str, train: bool) -> Callable[..., Setup] | None:
    """Baseline NAME's setup (its training loop's when `train`), or None: (adapter, req, model,
    weights, inputs or TrainState, backend) -> runtimes.shared.Setup. Looked up at each call, so a
    test can replace one. benchmarks/page_faults.py runs the training loops with it too."""
    runtime = BY_NAME.get(name)
    return runtime.setup(train) if runtime else None
