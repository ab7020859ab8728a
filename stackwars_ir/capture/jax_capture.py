"""Lower a model's Flax NNX twin with jax.jit, weights as arguments, named scopes kept as locations."""
from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..common.progress import Stages
from ..common.errors import CaptureError
from ..workload import Argument, jax_inputs, leaf_name
from .artifact import Capture
from .lowering import Placement, lower_text

if TYPE_CHECKING:
    from flax import nnx


def capture_jax(adapter: ModuleType, size: str, weights: dict[str, np.ndarray],
                inputs: dict[str, np.ndarray], stages: Stages, scan: bool = False, remat: bool = False,
                buffers: Collection[str] = frozenset(), placement: Placement | None = None) -> Capture:
    """The twin's forward lowered, its layers scanned and/or rematerialized where asked (run_layers),
    its arguments placed on a mesh where a `placement` (lowering.Placement) says."""
    from flax import nnx

    with stages.stage("build jax"):
        try:
            model = adapter.jax_model(size, weights)
        except KeyError as e:  # a weight name the twin built wrong: the PyTorch names nearest it
            key = e.args[0] if e.args else None
            if isinstance(key, str) and key not in weights:
                from ..models._contract import nearest

                near = nearest(key, weights)
                e.add_note(f"nearest PyTorch names: {', '.join(near)}" if near else "no PyTorch name is near it")
            raise
        graphdef, state = nnx.split(model)

    def forward(state, *args):
        return nnx.merge(graphdef, state)(*args)

    args = list(jax_inputs(inputs).values())
    arguments = twin_arguments(state, inputs, buffers)
    unknown = [a.name for a in arguments if a.kind != "input" and a.name not in weights]
    if unknown:
        from ..models._contract import unknown_parameter

        raise unknown_parameter(adapter, unknown[0], weights)
    with stages.stage("jax.jit lower"), layer_program(adapter, scan, remat):
        text = lower_text(forward, state, *args, named=[(a.kind, a.name) for a in arguments], placement=placement)
    return Capture("jax", "jax", text, arguments, dict(stages.seconds))


def twin_arguments(state: nnx.State, inputs: dict, buffers: Collection[str] = frozenset()) -> tuple[Argument, ...]:
    """The twin's forward arguments: its state's leaves (named after the PyTorch tensors; `buffers`:
    the names that are PyTorch buffers, not parameters), then the inputs."""
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    arguments = [Argument(i, "buffer" if leaf_name(p) in buffers else "parameter", leaf_name(p), tuple(v.shape),
                          str(v.dtype)) for i, (p, v) in enumerate(leaves)]
    arguments += [Argument(len(arguments) + j, "input", name, tuple(a.shape), str(a.dtype))
                  for j, (name, a) in enumerate(jax_inputs(inputs).items())]
    return tuple(arguments)


@contextlib.contextmanager
def layer_program(adapter: ModuleType, scan: bool, remat: bool) -> Iterator[None]:
    """While inside, the twin's run_layers scans and/or rematerializes its layers; a twin that runs
    none through it, asked to, is one line (models/_nnx.py)."""
    from ..models import _nnx

    with _nnx.layers_as(scan=scan, remat=remat) as record:
        yield
    if (scan or remat) and not record["used"]:
        flag = "--scan-layers" if scan else "--remat"
        raise CaptureError(f"{Path(adapter.__file__).name}: the JAX twin runs no layers through "
                           f"models._nnx.run_layers, so {flag} cannot apply to it",
                           fix="write its loop over the layers as x = run_layers(self.layers, x, ...) "
                               "(docs/adapters.md), or capture with --framework torch")
