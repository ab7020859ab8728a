"""Abstract capture: a model lowered from shapes and dtypes alone, no weight materialized.

JAX's twin and torchax both capture this way.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .. import models
from ..common.errors import CaptureError
from ..common.progress import Stages
from ..common.routes import TORCHAX
from ..isolate.task import started
from ..workload import Argument, Request, jax_inputs
from ..workload.exported import jax_dtype, torchax_function
from ..workload.shapes import meta_model
from ..workload.train import TrainState, loss_of
from .artifact import Capture
from .jax_capture import layer_program, twin_arguments
from .lowering import lower_text, placement
from .torch_capture import spec_kind, torchax_named
from .train import capture_jax_train, capture_torchax_train

if TYPE_CHECKING:
    import torch

NOT_CHECKED = "abstract capture: no weight was materialized, so nothing ran; the adapter's tiny size carries the parity evidence"


def capture_abstract(req: Request, frameworks: tuple[str, ...], stages_for: Callable[[str], Stages],
                     elsewhere: Callable[[tuple], Capture] | None = None) -> tuple[list[Capture], dict]:
    """Captures of `req` from shapes: JAX's twin under nnx.eval_shape, torchax from the meta-device
    model's torch.export. Returns the captures and the inputs' shapes/dtypes (as numpy zeros of size 0
    are not wanted, a dict name -> (shape, dtype)). `elsewhere(parts)`: the JAX capture made from
    abstract_parts' plain values by another process (a version stack's worker) instead of this one."""
    adapter, model = meta_model(req)
    parts = abstract_parts(req, adapter, model)
    inputs = parts[1]
    if req.train:
        _check_train(req, frameworks)
        parts = (parts[0], _with_target(req, model, inputs), *parts[2:])
    captures = []
    if "jax" in frameworks:
        captures.append(elsewhere(parts) if elsewhere is not None else abstract_jax(req, *parts, stages_for))
    if "torch" in frameworks:
        req.check_weightless()
        if req.train:
            captures.append(capture_torchax_train(model, _abstract_state(req, *parts), stages_for("torchax train"),
                                                  placement(req)))
        else:
            captures.append(_torchax_abstract(model, inputs, stages_for(TORCHAX.name), placement(req)))
    return captures, inputs


def abstract_parts(req: Request, adapter: ModuleType, model: torch.nn.Module) -> tuple:
    """(specs, inputs, buffers, trainable): every tensor's shape and dtype name, the inputs, the names
    of the buffers and of the trainable parameters; plain values, no torch object."""
    inputs = adapter.inputs(req.size, req.batch, req.seq, np.random.default_rng(req.seed))
    if req.dtype != "float32":  # a model in bfloat16 takes its images (float inputs) in bfloat16, as its users cast them
        wide = numpy_dtype(req.dtype)
        inputs = {k: v.astype(wide) if np.issubdtype(v.dtype, np.floating) else v for k, v in inputs.items()}
    specs = {k: (tuple(t.shape), str(t.dtype).replace("torch.", "")) for k, t in
             sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items())}
    return specs, inputs, frozenset(k for k, _ in model.named_buffers()), \
        frozenset(k for k, _ in model.named_parameters())


def stack_abstract_jax(req: Request, *parts: dict | frozenset) -> Capture:
    """A stack's worker's task: abstract_jax from abstract_parts' plain values, its time limit started
    once they are here."""

    started()
    return abstract_jax(req, *parts, _quiet)


def _quiet(what: str):
    return Stages(what, show=False)


def abstract_jax(req: Request, specs: dict[str, tuple[tuple[int, ...], str]], inputs: dict[str, np.ndarray],
                 buffers: frozenset[str], trainable: frozenset[str], stages_for: Callable[[str], Stages]) -> Capture:
    """The JAX twin's forward or training step lowered from shapes (this process's jax: a stack's
    worker calls this with its parent's abstract_parts)."""

    adapter = models.adapter(req.model)
    if req.train:
        return capture_jax_train(adapter, req.size, _abstract_state(req, specs, inputs, buffers, trainable),
                                 stages_for("jax train"), scan=req.scan_layers, remat=req.remat,
                                 placement=placement(req))
    import jax
    from flax import nnx

    st = stages_for("jax")
    with st.stage("build jax (abstract)"):
        sds = {k: jax.ShapeDtypeStruct(s, jax_dtype(d)) for k, (s, d) in specs.items()}
        abstract = nnx.eval_shape(lambda w: adapter.jax_model(req.size, w), sds)
        graphdef, state = nnx.split(abstract)

    def forward(state, *args):
        return nnx.merge(graphdef, state)(*args)

    args = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in jax_inputs(inputs).values()]

    arguments = twin_arguments(state, inputs, buffers)
    with st.stage("jax.jit lower"), layer_program(adapter, req.scan_layers, req.remat):
        text = lower_text(forward, state, *args, named=[(a.kind, a.name) for a in arguments],
                          placement=placement(req))
    return Capture("jax", "jax", text, arguments, dict(st.seconds))


def _torchax_abstract(model, inputs, st, placement=None) -> Capture:
    import jax
    import torch
    from torchax import export as tx_export

    with st.stage("torch.export (meta)", hold_ctrl_c=True):
        try:
            meta_inputs = tuple(torch.empty(v.shape, dtype=getattr(torch, str(v.dtype)), device="meta")
                                for v in inputs.values())
            ep = torch.export.export(model, meta_inputs)
        except Exception as e:
            raise CaptureError(f"torch.export of the meta-device model failed: {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from e
    with st.stage("torchax to StableHLO (abstract)", hold_ctrl_c=True):
        names, states, func = torchax_function(ep, tx_export)
        wide = any(v.dtype in (np.int64, np.float64) for v in inputs.values())
        with jax.enable_x64(wide):
            abstract_states = [jax.ShapeDtypeStruct(tuple(s.shape), jax_dtype(s.dtype)) for s in states]
            args = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs.values()]
        kinds = {s.target: spec_kind(s) for s in ep.graph_signature.input_specs if s.target}
        t0 = time.perf_counter()
        text = lower_text(func, abstract_states, args, x64=wide, named=torchax_named(names, kinds, inputs),
                          placement=placement)
        st.seconds["lower"] = time.perf_counter() - t0
    arguments = [Argument(i, kinds.get(n, "constant"), n, tuple(s.shape), str(s.dtype).replace("torch.", ""))
                 for i, (n, s) in enumerate(zip(names, states))]
    arguments += [Argument(len(arguments) + j, "input", n, tuple(v.shape), str(v.dtype))
                  for j, (n, v) in enumerate(inputs.items())]
    return Capture("torch", TORCHAX.name, text, tuple(arguments), dict(st.seconds))


def _check_train(req, frameworks) -> None:
    """The training step from shapes: JAX's route (value_and_grad and optax's AdamW) and torchax's (the
    meta-device model's exported loss under the same step), each from a fresh optimizer state's shapes."""
    if "torch" in frameworks:
        req.check_weightless()


def _with_target(req, model, inputs: dict) -> dict:
    """The inputs of the training step: a language model's as they are (its targets are its tokens
    shifted); a regression loss's ("mse") with a target shaped as the output, which the meta-device
    model's forward gives without a weight (the step with weights draws it at the reference's shape:
    workload.train.train_state). Its values are zeros: nothing runs."""
    import torch

    if loss_of(req.model) != "mse":
        return inputs
    with torch.no_grad():  # every input as a meta tensor of its shape and dtype (numpy's names are torch's)
        out = model(*[torch.empty(v.shape, dtype=getattr(torch, v.dtype.name), device="meta") for v in inputs.values()])
    return {**inputs, "target": np.zeros(tuple(out.shape), numpy_dtype(str(out.dtype).removeprefix("torch.")))}


def numpy_dtype(name: str) -> type | np.dtype:
    """A dtype by torch's and numpy's name (float32, int64), numpy's own or ml_dtypes' (bfloat16)."""
    import ml_dtypes

    return getattr(ml_dtypes, name, None) or np.dtype(name)


def _abstract_state(req, specs, inputs, buffers, trainable):
    """A TrainState of shapes: parameters and buffers as ShapeDtypeStructs, no moments yet."""
    import jax

    sds = {k: jax.ShapeDtypeStruct(s, jax_dtype(d)) for k, (s, d) in specs.items()}
    return TrainState(loss_of(req.model), {k: v for k, v in sds.items() if k in trainable},
                      {k: v for k, v in sds.items() if k not in trainable}, {}, {}, 1, inputs, float("nan"),
                      {}, {}, {})
