"""Abstract capture: a model lowered from shapes and dtypes alone, no weight materialized (JAX and torchax)."""
from __future__ import annotations

import time

import numpy as np

from ..errors import CaptureError, StackwarsError
from ..workload import Argument
from ..workload.shapes import meta_model
from .artifact import Capture

NOT_CHECKED = "abstract capture: no weight was materialized, so nothing ran; the adapter's tiny size carries the parity evidence"


def _jax_dtype(torch_dtype):
    import jax.numpy as jnp

    return {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "int64": jnp.int64, "int32": jnp.int32,
            "float64": jnp.float64, "bool": jnp.bool_}[str(torch_dtype).replace("torch.", "")]


def capture_abstract(req, frameworks, stages_for) -> tuple[list[Capture], dict]:
    """Captures of `req` from shapes: JAX's twin under nnx.eval_shape, torchax from the meta-device
    model's torch.export. Returns the captures and the inputs' shapes/dtypes (as numpy zeros of size 0
    are not wanted, a dict name -> (shape, dtype))."""
    import jax

    adapter, model = meta_model(req)
    inputs = adapter.inputs(req.size, req.batch, req.seq, np.random.default_rng(req.seed))
    specs = {k: (tuple(t.shape), t.dtype) for k, t in
             sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items())}
    if req.step == "train":
        return _train(req, frameworks, adapter, model, specs, inputs, stages_for)
    captures = []
    if "jax" in frameworks:
        from flax import nnx

        from ..workload import jax_inputs

        st = stages_for("jax")
        with st.stage("build jax (abstract)"):
            sds = {k: jax.ShapeDtypeStruct(s, _jax_dtype(d)) for k, (s, d) in specs.items()}
            abstract = nnx.eval_shape(lambda w: adapter.jax_model(req.size, w), sds)
            graphdef, state = nnx.split(abstract)

        def forward(state, *args):
            return nnx.merge(graphdef, state)(*args)

        args = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in jax_inputs(inputs).values()]
        from .lowering import lower_text

        from .jax_capture import layer_program, twin_arguments

        arguments = twin_arguments(state, inputs, {k for k, _ in model.named_buffers()})
        with st.stage("jax.jit lower"), layer_program(adapter, req.scan_layers, req.remat):
            text = lower_text(forward, state, *args, named=[(a.kind, a.name) for a in arguments])
        captures.append(Capture("jax", "jax", text, arguments, dict(st.seconds)))
    if "torch" in frameworks:
        for exporter in req.exporters:
            if exporter != "torchax":
                raise StackwarsError(f"{exporter} cannot capture without weights: its lazy tensors hold data "
                                     "(torch_xla 2.9 has no meta-device or fake-tensor route to StableHLO)",
                                     fix="use --exporter torchax with --abstract, or a size whose weights fit")
            captures.append(_torchax_abstract(model, inputs, stages_for("torchax")))
    return captures, inputs


def _torchax_abstract(model, inputs, st) -> Capture:
    import jax
    import torch
    from torchax import export as tx_export

    from .lowering import lower_text
    from .torch_capture import _spec_kind, _torchax_function, torchax_named

    with st.stage("torch.export (meta)"):
        try:
            meta_inputs = tuple(torch.empty(v.shape, dtype=getattr(torch, str(v.dtype)), device="meta")
                                for v in inputs.values())
            ep = torch.export.export(model, meta_inputs)
        except Exception as e:
            raise CaptureError(f"torch.export of the meta-device model failed: {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from e
    with st.stage("torchax to StableHLO (abstract)"):
        names, states, func = _torchax_function(ep, tx_export)
        wide = any(v.dtype in (np.int64, np.float64) for v in inputs.values())
        with jax.enable_x64(wide):
            abstract_states = [jax.ShapeDtypeStruct(tuple(s.shape), _jax_dtype(s.dtype)) for s in states]
            args = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs.values()]
        kinds = {s.target: _spec_kind(s) for s in ep.graph_signature.input_specs if s.target}
        t0 = time.perf_counter()
        text = lower_text(func, abstract_states, args, x64=wide, named=torchax_named(names, kinds, inputs))
        st.seconds["lower"] = time.perf_counter() - t0
    arguments = [Argument(i, kinds.get(n, "constant"), n, tuple(s.shape), str(s.dtype).replace("torch.", ""))
                 for i, (n, s) in enumerate(zip(names, states))]
    arguments += [Argument(len(arguments) + j, "input", n, tuple(v.shape), str(v.dtype))
                  for j, (n, v) in enumerate(inputs.items())]
    return Capture("torch", "torchax", text, tuple(arguments), dict(st.seconds))


def _train(req, frameworks, adapter, model, specs, inputs, stages_for) -> tuple[list[Capture], dict]:
    """The training step from shapes: JAX's route (value_and_grad and optax's AdamW) and torchax's (the
    meta-device model's exported loss under the same step), each from a fresh optimizer state's shapes."""
    import jax

    from ..workload.train import TrainState, loss_of
    from .train import capture_jax_train, capture_torchax_train

    loss = loss_of(req.model)
    if "torch" in frameworks:
        for exporter in req.exporters:
            if exporter != "torchax":
                raise StackwarsError(f"{exporter} cannot capture without weights: its lazy tensors hold data "
                                     "(torch_xla 2.9 has no meta-device or fake-tensor route to StableHLO)",
                                     fix="use --exporter torchax with --abstract, or a size whose weights fit")
    if loss != "lm":
        raise StackwarsError(f"--abstract --step train needs a language model's loss; {req.model}'s is {loss} "
                             "(its target's shape comes from a forward run)",
                             fix="drop --abstract at a size that fits")
    trainable = {k for k, _ in model.named_parameters()}
    sds = {k: jax.ShapeDtypeStruct(s, _jax_dtype(d)) for k, (s, d) in specs.items()}
    state = TrainState(loss, {k: v for k, v in sds.items() if k in trainable},
                       {k: v for k, v in sds.items() if k not in trainable}, {}, {}, 1, inputs, float("nan"),
                       {}, {}, {})
    captures = []
    if "jax" in frameworks:
        captures.append(capture_jax_train(adapter, req.size, state, stages_for("jax train"), scan=req.scan_layers,
                                          remat=req.remat))
    if "torch" in frameworks:
        captures.append(capture_torchax_train(model, state, stages_for("torchax train")))
    return captures, inputs
