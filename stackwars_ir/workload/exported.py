"""torch.export's programs as JAX functions (torchax's interpreter), and torchax's training step.

What torchax's capture lowers and its native loop runs.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import CaptureError, MissingExtra
from ..common.progress import Stages
from ..common.routes import PACKAGE, TORCHAX
from ..common.runtime import enable_x64
from .train import TrainState, adamw_state, adamw_step, torch_loss

if TYPE_CHECKING:
    import torch


def jax_dtype(torch_dtype: torch.dtype | str) -> type:
    """The JAX dtype of a torch dtype (`torch.float32` -> `jnp.float32`), for abstract arguments."""
    import jax.numpy as jnp

    return {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "int64": jnp.int64, "int32": jnp.int32,
            "float64": jnp.float64, "bool": jnp.bool_}[str(torch_dtype).replace("torch.", "")]


def needs_x64(inputs: Mapping[str, np.ndarray]) -> bool:
    return any(v.dtype in (np.int64, np.float64) for v in inputs.values())


def exported_states(program: torch.export.ExportedProgram) -> tuple[list, list]:
    """Names and tensors of the program's non-input placeholders, in the graph's own order.

    torchax's `_extract_states_from_exported_program` (the pinned 0.0.13 and torch_xla 2.9.0's copy,
    0.0.6, alike: docs/stacks.md) returns parameters, then buffers, then
    lifted constants' values without their names: where a model makes a tensor inside forward
    (GPT-Neo's mask value) the names and values no longer line up, and a 128x128 mask buffer was
    passed where the scalar belonged (measured: "Incompatible shapes for broadcasting"). The graph
    signature's input_specs give every placeholder's kind and name in call order.
    """
    from torch.export.graph_signature import InputKind

    tables = {**program.state_dict, **(getattr(program, "constants", None) or {})}
    names, values = [], []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        names.append(spec.target)
        values.append(tables[spec.target])
    return names, values


def torchax_function(ep: torch.export.ExportedProgram,
                     tx_export: ModuleType) -> tuple[list, list, Callable[[list, list], tuple]]:
    """torchax.export.exported_program_to_jax, with a named scope per FX node."""
    import jax
    import torchax

    from torch.export import default_decompositions

    # torchax 0.0.13 fills its op table (ops_registry.all_aten_ops) when its environment loads its ops,
    # no longer when torchax.export is imported (torch_xla's copy, 0.0.6, did): without this, a capture
    # that makes no environment first (a training step from shapes) fails on its first op
    # ("AssertionError: aten.embedding.default")
    torchax.default_env()
    # torchax runs run_decompositions twice (core ATen's table, then its own), each a full re-trace
    # through AOT autograd: 93% of exported_program_to_jax's time on GPT-2 base (cProfile), the JAX trace
    # and lowering after it 0.5 s. One pass with torchax's table over core ATen's gives the same
    # StableHLO text on every adapter, forward and training, in less than half the time (6.3 -> 2.8 s).
    table = default_decompositions()
    table.update(tx_export.decompositions.DECOMPOSITIONS)
    program = ep.run_decompositions(table)
    names, states = exported_states(program)
    mutations = len(program.graph_signature.buffers_to_mutate)

    class ScopedInterpreter(tx_export.JaxInterpreter):
        def run_node(self, n):
            stack = n.meta.get("nn_module_stack") or {}
            path = list(stack.values())[-1][0] if stack else ""
            if not path:
                return super().run_node(n)
            with jax.named_scope(path):
                return super().run_node(n)

    def forward(states, inputs):
        return tuple(ScopedInterpreter(program.graph_module).run(
            *states, *inputs, enable_io_processing=False)[mutations:])

    return names, states, forward


def torchax_step(model: torch.nn.Module, state: TrainState, stages: Stages | None = None, parts: bool = False,
                 weights: dict | None = None) -> tuple:
    """torchax's training step of `model` and its loss: torch.export of the loss, torchax's interpreter
    of it under jax.value_and_grad, optax's AdamW; (step, args) with args' params, opt_state, buffers and
    inputs, from `state` (the captured step 2), or from `weights` with a fresh optimizer state (a user's
    first step: bench's torchax training loop jits it, as jax_step does JAX's); with `parts` also the
    lifted constants, whether the inputs need x64 and whether the state is abstract (the capture's)."""
    try:
        import jax
        import torchax
        from torchax import export as tx_export
    except Exception as e:
        raise MissingExtra(PACKAGE[TORCHAX.name], e) from e

    stages = stages or Stages()
    abstract = any(isinstance(v, jax.ShapeDtypeStruct) for v in state.params.values())
    with stages.stage("torch.export (loss" + (", meta)" if abstract else ")"), hold_ctrl_c=True):
        ep = export_loss(model, state, meta=abstract)
    with stages.stage("torchax decompositions and arguments" + (" (abstract)" if abstract else ""), hold_ctrl_c=True):
        names, consts, forward = torchax_function(ep, tx_export)
        wide = needs_x64(state.inputs)
        values = state.values() if not abstract else {}
        with enable_x64(wide):
            if abstract:
                params = {n: state.params[n] for n in names if n in state.params}
                fixed = {n: jax.ShapeDtypeStruct(tuple(c.shape), jax_dtype(c.dtype))
                         for n, c in zip(names, consts) if n not in state.params}
                lifted = {n for n in fixed if n not in state.buffers}
            else:
                env = torchax.default_env()
                start = state.params if weights is None else weights
                params = {n: jax.numpy.asarray(start[n]) for n in names if n in state.params}
                fixed = {n: (jax.numpy.asarray(values[n]) if n in values else env.t2j_copy(c))
                         for n, c in zip(names, consts) if n not in state.params}
                lifted = {n: np.asarray(fixed[n]) for n in fixed if n not in values}
            inputs = {k: jax.numpy.asarray(v) for k, v in state.inputs.items()}

        order = list(state.inputs)  # the export's order; a dict through jax.jit comes back key-sorted

        def loss_fn(params, buffers, inputs):
            args = [params[n] if n in params else buffers[n] for n in names]
            return forward(args, [inputs[k] for k in order])[0]

        tx, step = adamw_step(loss_fn)
        opt_state = jax.eval_shape(tx.init, params) if abstract else \
            adamw_state(tx, state) if weights is None else tx.init(params)
        args = {"params": params, "opt_state": opt_state, "buffers": fixed, "inputs": inputs}
    return (step, args, lifted, wide, abstract) if parts else (step, args)


def export_loss(model: torch.nn.Module, state: TrainState, meta: bool = False) -> torch.export.ExportedProgram:
    """torch.export of the model with its loss as forward, parameter names and module paths unchanged
    (from meta-device example inputs when `meta`)."""
    import torch

    m = copy.deepcopy(model)
    loss, base = state.loss, type(m)

    def forward(self, *xs):
        tensors, target = (xs[:-1], xs[-1]) if loss == "mse" else (xs, None)
        return torch_loss(self, loss, list(tensors), target, forward=super(sub, self).forward)

    sub = type(base.__name__, (base,), {"forward": forward, "__module__": base.__module__})
    m.__class__ = sub  # a subclass, not a wrapper: no "model." prefix on names and module paths
    example = tuple(torch.empty(v.shape, dtype=getattr(torch, str(v.dtype)), device="meta") if meta
                    else torch.from_numpy(v) for v in state.inputs.values())
    try:
        return torch.export.export(m, example)
    except Exception as e:
        raise CaptureError(f"torch.export of the loss failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e
