"""The study's candidate timing protocols, each run step by step in a fresh process.

Each run counts the graphs compiled per step and times the host work with the device idle.
"""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..common.files import host
from ..workload import Request, jax_inputs, prepare
from ..workload.train import jax_step, register_torch_xla, train_state
from .runtimes.shared import as_captured, jax_counters, on_xla, torch_loop

# Steps timed one by one from the process's first (the study's first and second runs, and a third: does a
# protocol compile again at step 2, or at 3?), then STEADY steps for the steady state.
FIRST_STEPS = 3
STEADY = 20


@dataclass(frozen=True)
class Protocol:
    """One way the study may have timed a step. framework: "pytorch" (torch_xla lazy tensors) or "jax"
    (jax.jit); partner: the JAX protocol a PyTorch one is compared with (its ratio's denominator)."""

    name: str
    framework: str
    what: str
    partner: str = ""


PROTOCOLS = (
    Protocol("eval", "pytorch", "forward in eval mode, the model built on the CPU and moved to the XLA device "
             "(what the tool's adapters do)", "eval"),
    Protocol("train-mode", "pytorch", "forward in train mode: dropout draws random numbers each step, "
             "BatchNorm updates its running statistics", "train-mode"),
    Protocol("built-on-device", "pytorch", "forward in eval mode, the model built under `with torch.device(xla)` "
             "(its parameters' initialization pending into the first step)", "eval"),
    Protocol("fresh-inputs", "pytorch", "forward in eval mode, the inputs drawn anew on the XLA device each step",
             "eval"),
    Protocol("host-read", "pytorch", "forward in eval mode, the output read to the host each step (`.cpu()`)",
             "eval"),
    Protocol("adamw", "pytorch", "a training step in train mode: loss, backward, AdamW (the study's own "
             "explanation of PyTorch's two-run warm-up)", "adamw"),
    Protocol("eval", "jax", "forward, parameters passed to the jitted call (initialized outside it)"),
    Protocol("train-mode", "jax", "forward in train mode, as a Flax training loop runs it: the dropout key an "
             "argument of the jitted call (split inside it, the next key returned), BatchNorm's running "
             "statistics passed in and their update returned"),
    Protocol("init-inside", "jax", "forward, parameters initialized inside the jitted call from a key"),
    Protocol("adamw", "jax", "a training step: loss, gradient, optax's AdamW"),
)


def protocol(framework: str, name: str) -> Protocol:
    for p in PROTOCOLS:
        if p.framework == framework and p.name == name:
            return p
    known = ", ".join(f"{p.framework}/{p.name}" for p in PROTOCOLS)
    raise ValueError(f"no protocol {framework}/{name} (known: {known})")


@dataclass(frozen=True)
class ProtocolRun:
    """One fresh process's run of one protocol. Seconds throughout.

    compiles: graphs compiled at steps 1..FIRST_STEPS (torch_xla's UncachedCompile, jax's backend
    compiles); first: each of those steps' wall time, waited for. Steady steps, each begun with the
    device idle (the previous step waited for): trace (PyTorch: the Python step that traces the lazy
    graph; JAX: the jitted call until it returns), launch (PyTorch: torch_xla.sync(), which compiles if it
    must and starts the execution; JAX: nothing), wait (until the device is done); host = trace + launch.
    calibration: fixed micro-benchmarks taken in the same process before the run (seconds each), so two
    records from two machines or loads can be compared. error: why the protocol could not run ("" if it ran)."""

    workload: str
    size: str
    framework: str
    protocol: str
    compiles: tuple[int, ...] = ()
    first: tuple[float, ...] = ()
    trace: tuple[float, ...] = ()
    launch: tuple[float, ...] = ()
    wait: tuple[float, ...] = ()
    calibration: dict = field(default_factory=dict)
    conditions: dict = field(default_factory=dict)  # load average before and after, threads, versions
    error: str = ""

    @property
    def host(self) -> tuple[float, ...]:
        return tuple(t + s for t, s in zip(self.trace, self.launch))

    def median(self, what: str) -> float:
        """The median over steady steps of 'host', 'trace', 'launch', 'wait' or 'step' (host + wait)."""
        if what == "step":
            return statistics.median(h + w for h, w in zip(self.host, self.wait))
        return statistics.median(getattr(self, what))

    def as_json(self) -> dict:
        return {"workload": self.workload, "size": self.size, "framework": self.framework, "protocol": self.protocol,
                "compiles": list(self.compiles), "first": list(self.first), "trace": list(self.trace),
                "launch": list(self.launch), "wait": list(self.wait), "calibration": self.calibration,
                "conditions": self.conditions, "error": self.error}

    @classmethod
    def from_json(cls, d: dict) -> "ProtocolRun":
        return cls(d["workload"], d["size"], d["framework"], d["protocol"], tuple(d["compiles"]), tuple(d["first"]),
                   tuple(d["trace"]), tuple(d["launch"]), tuple(d["wait"]), d.get("calibration", {}),
                   d.get("conditions", {}), d.get("error", ""))


def calibration() -> dict:
    """Seconds of three fixed micro-benchmarks, medians of 5: a pure-Python loop (200,000 additions),
    200 PyTorch CPU dispatches (adding two one-element tensors), 200 jax dispatches of a jitted
    one-element add. Host work scales with the first two on one machine; comparing them across records
    tells how much of a difference in host work is the machine or its load."""
    import jax
    import jax.numpy as jnp
    import torch

    def py():
        s = 0
        for i in range(200_000):
            s += i
        return s

    a, b = torch.ones(1), torch.ones(1)

    def dispatch():
        for _ in range(200):
            torch.add(a, b)

    add = jax.jit(lambda x: x + 1)
    x = jnp.ones(1)
    add(x).block_until_ready()

    def jax_dispatch():
        y = x
        for _ in range(200):
            y = add(y)
        y.block_until_ready()

    def timed(fn) -> float:
        got = []
        for _ in range(5):
            t = time.perf_counter()
            fn()
            got.append(time.perf_counter() - t)
        return statistics.median(got)

    return {"python loop": timed(py), "torch dispatch": timed(dispatch), "jax dispatch": timed(jax_dispatch)}


def conditions() -> dict:
    import platform

    import torch

    return {"load average": os.getloadavg()[0], "torch threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "processor": host().get("processor"), "system": platform.system(),
            "torch": torch.__version__}


def measure(workload: str, size: str, framework: str, name: str, steady: int = STEADY,
            pause_s: float = 0.0) -> ProtocolRun:
    """Protocol `framework`/`name` on `workload` at `size`, run here (call it in a fresh process: the
    compiles counted at steps 1-3 are this process's first). pause_s: seconds slept before each steady
    step, after the previous one was waited for (the runtime's worker threads given time to go idle).
    A protocol the runtime cannot run gives a ProtocolRun with its error."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    protocol(framework, name)  # known
    cal = calibration()
    before = conditions()
    try:
        step, counter = (_pytorch if framework == "pytorch" else _jax)(workload, size, name)
    except Exception as e:  # noqa: BLE001  (a protocol the runtime refuses is a result, not a crash)
        return ProtocolRun(workload, size, framework, name, calibration=cal, conditions=before,
                           error=_why(e))
    compiles, first = [], []
    try:
        for _ in range(FIRST_STEPS):
            c0, t0 = counter(), time.perf_counter()
            marks = step()
            first.append(marks[-1] - t0)
            compiles.append(counter() - c0)
        trace, launch, wait = [], [], []
        for _ in range(steady):
            if pause_s:
                time.sleep(pause_s)
            t0 = time.perf_counter()
            traced, launched, waited = step()
            trace.append(traced - t0)
            launch.append(launched - traced)
            wait.append(waited - launched)
    except Exception as e:  # noqa: BLE001
        return ProtocolRun(workload, size, framework, name, tuple(compiles), tuple(first), calibration=cal,
                           conditions=before, error=_why(e))
    after = conditions()
    return ProtocolRun(workload, size, framework, name, tuple(compiles), tuple(first), tuple(trace), tuple(launch),
                       tuple(wait), cal, dict(before, **{"load average after": after["load average"], "pause s": pause_s}))


def _why(e: Exception) -> str:
    """An exception as a record's error: its type and its message's first line (300 characters at most)."""
    lines = str(e).splitlines()
    return f"{type(e).__name__}: {lines[0][:300] if lines else ''}"


def _prepared(workload: str, size: str, train: bool = False):
    # The training step runs on torch_xla's lazy tensors here, in train mode, not through an exporter: the
    # request names the exporter that captures every model's step (torch_xla's capture of ResNet-50's is
    # refused for a failure in eval mode), so that validation does not refuse what this protocol can run.
    req = Request(workload, size, step="train" if train else "forward",
                  exporters=("torchax",) if train else ("torch_xla",)).validated()
    if train:
        register_torch_xla()
    w = prepare(req)
    inputs = w.inputs
    if train:
        inputs = train_state(req, w.model, w.inputs, w.reference)
    return req, w, inputs


def _pytorch(workload: str, size: str, name: str):
    """(step, compile counter) of a PyTorch protocol on torch_xla's lazy tensors. step() runs one step
    and returns the perf_counter marks after its trace, its launch and its wait."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    def counter() -> int:
        return met.counter_value("UncachedCompile") or 0

    dev = torch_xla.device()
    if name == "adamw":
        req, w, state = _prepared(workload, size, train=True)
        loop = torch_loop(w.model, state, dev)
        loop.model.train()
        torch_xla.sync()

        def step():
            loss = loop()  # alive through the sync: a lazy graph with no live output is never run
            return _synced(loss)

        return step, counter
    req, w, inputs = _prepared(workload, size)
    if name == "built-on-device":
        with torch.device(dev):
            m = w.adapter.torch_model(size)
        m.eval()
        xs = [torch.from_numpy(v).to(dev) for v in inputs.values()]
    else:
        m, xs = on_xla(w.model, inputs)
        if name == "train-mode":
            m.train()
    if name != "built-on-device":  # there, the parameters' initialization stays pending into step 1
        torch_xla.sync()
        xm.wait_device_ops()
    specs = [(tuple(v.shape), v.dtype, int(v.max()) + 1 if v.dtype.kind in "iu" else None) for v in inputs.values()]

    def fresh():
        out = []
        for shape, dtype, high in specs:
            if high is not None:
                out.append(torch.randint(0, high, shape, device=dev, dtype=torch.int64))
            else:
                out.append(torch.randn(shape, device=dev))
        return out

    def step():
        args = fresh() if name == "fresh-inputs" else xs
        with torch.no_grad():
            out = m(*args)
        if name == "host-read":
            out.cpu()  # syncs: compiles if it must, runs, copies the output
            traced = launched = time.perf_counter()
            return traced, launched, time.perf_counter()
        return _synced(out)

    return step, counter


def _synced(alive) -> tuple:
    """The perf_counter marks (traced, launched, waited) of a traced torch_xla step's sync and wait;
    `alive`, the step's output, is held until its graph has run."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    traced = time.perf_counter()
    torch_xla.sync()
    launched = time.perf_counter()
    xm.wait_device_ops()
    del alive
    return traced, launched, time.perf_counter()


def _jax(workload: str, size: str, name: str):
    """(step, compile counter) of a JAX protocol under jax.jit; step() as _pytorch's (launch empty)."""
    import jax

    jax_counters()

    def counter() -> int:
        return jax_counters()["compiles"]

    device = jax.devices("cpu")[0]
    if name == "adamw":
        req, w, state = _prepared(workload, size, train=True)
        fn, args = jax_step(w.adapter, size, state, w.weights)
        jitted = jax.jit(as_captured(fn, req))
        box = {k: jax.device_put(v, device) for k, v in args.items()}

        def step():
            loss, box["params"], box["opt_state"] = jitted(box["params"], box["opt_state"], box["buffers"],
                                                           box["inputs"])
            traced = time.perf_counter()
            loss.block_until_ready()
            return traced, traced, time.perf_counter()

        return step, counter
    from flax import nnx

    req, w, inputs = _prepared(workload, size)
    model = w.adapter.jax_model(size, w.weights)
    args = [jax.device_put(v, device) for v in jax_inputs(inputs).values()]
    if name == "train-mode":
        return _jax_train_mode(model, args, device), counter
    graphdef, params = nnx.split(model)
    if name == "init-inside":
        shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), params)

        def init_and_run(key, *a):
            leaves, tree = jax.tree.flatten(shapes)
            keys = jax.random.split(key, len(leaves))
            made = [jax.random.normal(k, s.shape, s.dtype) if jax.numpy.issubdtype(s.dtype, jax.numpy.floating)
                    else jax.numpy.zeros(s.shape, s.dtype) for k, s in zip(keys, leaves)]
            return nnx.merge(graphdef, jax.tree.unflatten(tree, made))(*a)

        jitted = jax.jit(init_and_run)
        first = (jax.random.key(0),)
    else:
        jitted = jax.jit(lambda s, *a: nnx.merge(graphdef, s)(*a))
        first = (jax.device_put(params, device),)

    def step():
        out = jitted(*first, *args)
        traced = time.perf_counter()
        out.block_until_ready()
        return traced, traced, time.perf_counter()

    return step, counter


def running_statistic(path: tuple[Hashable, ...], value: object) -> bool:
    """An nnx filter: BatchNorm's running statistics (their PyTorch buffer names), which train mode updates."""
    return bool(path) and path[-1] in ("running_mean", "running_var")


def _jax_train_mode(model, args: list, device):
    """JAX's train-mode step (step() as _pytorch's): the twin under models/_nnx.py training(), the key and the
    running statistics carried from call to call as a Flax loop carries its rng and batch_stats."""
    import jax
    from flax import nnx

    from ..models._nnx import training

    graphdef, stats, params = nnx.split(model, running_statistic, ...)

    def forward(params, stats, key, *a):
        key, drawn = jax.random.split(key)
        m = nnx.merge(graphdef, stats, params)
        with training(drawn):
            out = m(*a)
        return out, nnx.split(m, running_statistic, ...)[1], key

    jitted = jax.jit(forward)
    params = jax.device_put(params, device)
    box = {"stats": jax.device_put(stats, device), "key": jax.device_put(jax.random.key(0), device)}

    def step():
        out, box["stats"], box["key"] = jitted(params, box["stats"], box["key"], *args)
        traced = time.perf_counter()
        out.block_until_ready()
        return traced, traced, time.perf_counter()

    return step
