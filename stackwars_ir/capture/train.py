"""Training-step capture: loss, backward and one AdamW update, from JAX, torch_xla and torchax.

The step itself (loss, AdamW, the state it starts from) is workload/train.py's. The captured step is the second one: every route starts from the state PyTorch eager reaches after
one step on the seeded weights and batch (parameters, AdamW's exp_avg and exp_avg_sq, step 1), so
the second step is the steady one on every side (torch_xla builds a different graph for the first
step, when AdamW creates its state) and its bias correction is not the trivial one. Parity against
PyTorch eager's second step: the loss, the gradients and the AdamW rule (see GRAD_RTOL below).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import CaptureError, MissingExtra, StackwarsError
from ..common.progress import Stages
from ..common.routes import TORCHAX
from ..common.runtime import enable_x64
from ..workload import Argument
from ..workload.exported import torchax_step
from ..workload.mesh import Mesh
from ..workload.train import OpNames, TrainState, jax_step, named_leaves, optimizer, torch_loss
from ..workload.values import copy_on
from .artifact import Capture
from .jax_capture import layer_program
from .lowering import Placement, lower_text
from .sanitize import relativize
from .torch_capture import hlo_debug, lazy_graph, mark_shardings, require_op_names, tensor_id

if TYPE_CHECKING:
    import torch

STEPS_OBSERVED = 3  # torch_xla's graphs are counted over this many steps


def _lower_step(exporter: str, step, args: dict, stages: Stages, x64: bool, constants=None, placement=None) -> Capture:
    """Lower `step` (its arguments placed on a mesh where `placement` says), and name its arguments
    (lifted constants carry their values) and its outputs."""
    import jax

    leaves = named_leaves([(k, args[k]) for k in ("params", "opt_state", "buffers", "inputs")])
    constants = constants or {}
    arguments = tuple(Argument(i, "constant" if name in constants else kind, name, tuple(np.shape(v)),
                               str(v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype))
                      for i, (kind, name, v) in enumerate(leaves))
    with stages.stage("jax.jit lower"):
        text = lower_text(step, args["params"], args["opt_state"], args["buffers"], args["inputs"], x64=x64,
                          named=[(a.kind, a.name) for a in arguments], placement=placement)
    with enable_x64(x64):
        shapes = jax.eval_shape(step, args["params"], args["opt_state"], args["buffers"], args["inputs"])
    loss, params, opt_state = shapes
    outs = named_leaves([("loss", loss), ("params", params), ("opt_state", opt_state)])
    outputs = tuple({"index": i, "kind": kind, "name": name} for i, (kind, name, _) in enumerate(outs))
    return Capture("jax" if exporter == "jax" else "torch", exporter, text, arguments, dict(stages.seconds),
                   constants, outputs=outputs, stem_suffix="-train")


def capture_jax_train(adapter: ModuleType, size: str, state: TrainState, stages: Stages, scan: bool = False,
                      remat: bool = False, placement: Placement | None = None) -> Capture:
    with stages.stage("build jax"):
        step, args = jax_step(adapter, size, state)
    with layer_program(adapter, scan, remat):
        return _lower_step("jax", step, args, stages, x64=False, placement=placement)


def capture_torchax_train(model: torch.nn.Module, state: TrainState, stages: Stages,
                          placement: Placement | None = None) -> Capture:
    """The PyTorch module and loss, exported, run by torchax's interpreter under jax.value_and_grad.

    With a state of shapes (capture/abstract.py: a meta-device model, parameters as
    jax.ShapeDtypeStruct), nothing is materialized: the loss is exported from meta tensors, buffers and
    lifted constants become abstract arguments, and AdamW's state is a fresh one's shapes."""
    try:
        step, args, lifted, wide, abstract = torchax_step(model, state, stages, parts=True)
        if abstract:  # lifted constants without values: named as constants, passed as arguments
            cap = _lower_step(TORCHAX.name, step, args, stages, x64=wide, placement=placement)
            arguments = tuple(a if a.name not in lifted or a.kind != "buffer" else
                              Argument(a.index, "constant", a.name, a.shape, a.dtype) for a in cap.arguments)
            return dataclasses.replace(cap, arguments=arguments)
        return _lower_step(TORCHAX.name, step, args, stages, x64=wide, constants=lifted, placement=placement)
    except StackwarsError:
        raise
    except Exception as e:
        raise CaptureError(f"torchax training export failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e


# ---------------------------------------------------------------------------------------------------
# torch_xla: the real training loop on lazy tensors; the second step's graph is the capture.


def capture_torch_xla_train(model: torch.nn.Module, state: TrainState, stages: Stages, layers: str | None = None,
                            scan: bool = False, remat: bool = False, mesh: Mesh | None = None,
                            tensor_parallel: dict | None = None) -> Capture:
    """The user's training loop on lazy tensors (its layers scanned and/or rematerialized, as
    models/_torch.py layers_as runs them, where asked; on `mesh`, its parameters, inputs and, once step
    1 made them, AdamW's moments placed with SPMD's mark_sharding); the second step's graph is the capture."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    try:
        import torch
        import torch_xla
        import torch_xla.debug.metrics as met
    except Exception as e:
        raise MissingExtra("torch_xla", e) from e

    def counters():
        return {"compiles": met.counter_value("UncachedCompile") or 0,
                "cache hits": met.counter_value("CachedCompile") or 0,
                "executions": met.counter_value("ExecuteComputation") or 0}

    dev = torch_xla.device()
    # From the seeded weights (step 1 creates AdamW's state), exactly as a user's loop runs.
    m = copy_on(model, dev)
    params = {n: p for n, p in m.named_parameters() if n in state.params}
    for n, p in m.named_parameters():
        if n not in params:  # no gradient reaches it (workload.train.train_state): held, as AdamW holds it
            p.requires_grad_(False)
    opt = optimizer(list(params.values()))
    xs = [torch.from_numpy(v).to(dev) for k, v in state.inputs.items() if k != "target"]
    target = torch.from_numpy(state.inputs["target"]).to(dev) if "target" in state.inputs else None
    from ..models._torch import layers_as

    def place(moments: bool) -> None:  # on the mesh: the model and batch, then (after step 1) AdamW's state
        if mesh is None:
            return
        if moments:
            named = [("optimizer", f"{k}.{n}", opt.state[p][k]) for n, p in params.items()
                     for k in ("exp_avg", "exp_avg_sq")]
        else:
            named = [("parameter", n, p) for n, p in params.items()] + [("buffer", n, b) for n, b in m.named_buffers()] \
                + [("input", n, x) for n, x in zip([k for k in state.inputs if k != "target"], xs)] \
                + ([("input", "target", target)] if target is not None else [])
        mark_shardings(mesh, tensor_parallel, named)

    place(moments=False)
    program = contextlib.nullcontext() if layers is None else layers_as(m, layers, scan=scan, remat=remat)
    with stages.stage("torch_xla training loop (3 steps)", hold_ctrl_c=True), hlo_debug(), program:
        try:
            text, arguments, scalars, named, steps = _lazy_loop(m, params, opt, xs, target, state, counters, place)
        except StackwarsError:
            raise
        except Exception as e:
            raise CaptureError(f"torch_xla training step failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    require_op_names(text, "training graph")
    m.to("cpu")
    outputs = tuple({"index": i, "kind": kind, "name": name} for i, (kind, name, _) in enumerate(named))
    return Capture("torch", "torch_xla", text, arguments, dict(stages.seconds), scalars,
                   outputs=outputs, stem_suffix="-train", extra={"torch_xla_steps": steps})


def _lazy_loop(m, params, opt, xs, target, state, counters, place=None):
    """Three steps of the user's loop; the second step's graph is exported before it runs (`place`:
    called with moments=True before step 2, when AdamW's state exists)."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    steps, text, arguments, scalars, named, known = [], None, None, {}, None, {}
    for i in range(1, STEPS_OBSERVED + 1):
        before = counters()
        created = sum(len(v) for v in opt.state.values())  # AdamW's state tensors when the step begins
        if i == 2:  # what each piece of device data the step reads is (see _lazy_graph)
            if place is not None:
                place(moments=True)
            known = {tensor_id(p): ("parameter", n) for n, p in params.items()}
            for n, p in params.items():
                known[tensor_id(opt.state[p]["exp_avg"])] = ("optimizer", f"exp_avg.{n}")
                known[tensor_id(opt.state[p]["exp_avg_sq"])] = ("optimizer", f"exp_avg_sq.{n}")
            names = [k for k in state.inputs if k != "target"]
            known.update({tensor_id(x): ("input", n) for n, x in zip(names, xs)})
            if target is not None:
                known[tensor_id(target)] = ("input", "target")
        with _HostReads() as reads:  # the user's step: zero_grad, forward, backward, optimizer
            opt.zero_grad(set_to_none=True)
            try:
                with OpNames(m) as names:
                    loss = torch_loss(m, state.loss, xs, target)
                    names.backward = True
                    loss.backward()
            except RuntimeError as e:
                if "device_ready_queues_" not in str(e):
                    raise
                raise CaptureError("torch_xla was imported after this process's first PyTorch backward, so "
                                   "autograd has no queue for the XLA device",
                                   fix="call stackwars_ir.workload.train.register_torch_xla() before any "
                                       "backward (the CLI does)") from e
            opt.step()
        if i == 2:
            named = _step_tensors(loss, params, opt)
            text, arguments, scalars = lazy_graph(named, known)
        torch_xla.sync()
        xm.wait_device_ops()  # executions are asynchronous: count them once they ran
        after = counters()
        d = {k: after[k] - before[k] for k in after}
        # torch_xla's compilation cache is process-wide: a graph another capture in this process built
        # (LLaMA's step 1 shares one with an earlier model's) is a cache hit, not a compile. What the
        # sidecar records must not depend on that: every graph the step ran ("graphs"), and the graphs
        # new to this loop: all of step 1's; from step 2 on, the compiles (the loop's own graphs are
        # cache hits by then).
        graphs = d["compiles"] + d["cache hits"]
        steps.append({"step": i, "graphs": graphs, "new graphs": graphs if i == 1 else d["compiles"],
                      "executions": d["executions"], "optimizer state tensors": created,
                      "host reads": reads.found()})
    return text, arguments, scalars, named, steps


class _HostReads:
    """Where the user's step reads a device value on the host (`.item()`, `bool(t)`, `.cpu()`): for
    each such read torch_xla runs a graph computing that value (compiled at its first run), so the
    step runs one graph more. Recorded as the first frame outside torch, torch_xla and stackwars-ir, import-relative
    (measured: GPT-2's second graph per step is transformers' packed-sequence check in its mask code)."""

    SKIP = (os.sep + "torch" + os.sep, os.sep + "torch_xla" + os.sep, os.sep + "stackwars_ir" + os.sep,
            os.sep + "contextlib.py", os.sep + "functools.py")

    def __init__(self):
        from collections import Counter

        self.reads = Counter()
        self.mode = None

    def __enter__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        reads, where = self.reads, self._where
        scalar, copy = torch.ops.aten._local_scalar_dense.default, torch.ops.aten._to_copy.default

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if (func is scalar or (func is copy and str(kwargs.get("device")) == "cpu")) and \
                        any(isinstance(a, torch.Tensor) and a.device.type == "xla" for a in args):
                    reads[f"{func.__name__.split('.')[0]} at {where()}"] += 1
                return func(*args, **kwargs)

        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)

    def found(self) -> list[dict]:
        return [{"read": k, "count": v} for k, v in sorted(self.reads.items())]

    @classmethod
    def _where(cls) -> str:
        import sys

        frame = sys._getframe(2)
        while frame is not None and any(s in frame.f_code.co_filename for s in cls.SKIP):
            frame = frame.f_back
        if frame is None:
            return "?"
        return f"{relativize(frame.f_code.co_filename)}:{frame.f_lineno} ({frame.f_code.co_name})"


def _step_tensors(loss, params, opt) -> list[tuple[str, str, object]]:
    named = [("loss", "loss", loss)]
    named += [("parameter", n, p) for n, p in sorted(params.items())]
    named += [("optimizer", f"exp_avg.{n}", opt.state[p]["exp_avg"]) for n, p in sorted(params.items())]
    named += [("optimizer", f"exp_avg_sq.{n}", opt.state[p]["exp_avg_sq"]) for n, p in sorted(params.items())]
    return named
