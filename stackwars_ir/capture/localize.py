"""Where a suspect Flax twin first leaves its PyTorch model: module by module, against float64."""
from __future__ import annotations

import contextlib
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..workload import as_float64, float64_copy, jax_inputs
from .parity import FLOOR, normwise

if TYPE_CHECKING:
    import torch


class Divergence(NamedTuple):
    """The first module (in the order PyTorch finishes them) whose twin output lies beyond the noise."""

    module: str  # its PyTorch path
    multiple: float  # the twin's norm-wise error there against float64, in units of float32 eager's
    compared: int  # modules compared before it, itself included

    def words(self) -> str:
        return f"{self.module} ({self.multiple:.3g}x float32 eager's error there; {self.compared} modules compared)"


def first_divergence(adapter: ModuleType, size: str, model: torch.nn.Module, weights: dict, inputs: dict,
                     limit: float) -> Divergence | None:
    """Run PyTorch's model in float32 and float64 and the twin eagerly, each module's output kept,
    and return the first module whose twin output is more than `limit` times float32 eager's error
    from the float64 one (None: none is; the difference lies in the backward, the update, or
    outside every module both sides name alike). Twin modules are known by their PyTorch path: a
    models._nnx.Scoped chain of scopes, or the NNX attribute path."""
    import torch

    m64, _ = float64_copy(model)
    if m64 is None:
        return None
    with torch.no_grad():
        ours32 = _torch_outputs(model, [torch.from_numpy(v) for v in inputs.values()])
        ours64 = _torch_outputs(m64, as_float64(inputs))
    twin = adapter.jax_model(size, weights)
    theirs = _twin_outputs(twin, list(jax_inputs(inputs).values()))
    compared = 0
    for name, want in ours32.items():
        got, exact = theirs.get(name), ours64.get(name)
        if got is None or exact is None or np.shape(got) != np.shape(want) or np.shape(exact) != np.shape(want):
            continue
        compared += 1
        multiple = normwise(got, exact) / max(normwise(want, exact), FLOOR)
        if multiple > limit:
            return Divergence(name, multiple, compared)
    return None


def _array(out):
    """A module's output as one array (the first of a tuple), or None."""
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    try:
        return np.asarray(out.detach().numpy() if hasattr(out, "detach") else out, dtype=np.float64)
    except Exception:  # noqa: BLE001 - a dict, a string, ...: not compared
        return None


def _torch_outputs(model, args) -> dict:
    """PyTorch path -> the module's first output, in the order modules finish."""
    out: dict = {}
    hooks = []
    def keep(name):
        def hook(_module, _inputs, output) -> None:  # returns None: the output itself is left as it is
            if name not in out:
                out[name] = _array(output)
        return hook

    for name, module in model.named_modules():
        if name:
            hooks.append(module.register_forward_hook(keep(name)))
    try:
        model(*args)
    finally:
        for h in hooks:
            h.remove()
    return {k: v for k, v in out.items() if v is not None}


def _twin_outputs(twin, args) -> dict:
    """The twin run eagerly, each NNX module's first output under its PyTorch path (both spellings)."""
    from flax import nnx

    paths = {id(m): ".".join(map(str, p)) for p, m in nnx.iter_graph(twin) if isinstance(m, nnx.Module)}
    classes = {type(m) for _, m in nnx.iter_graph(twin) if isinstance(m, nnx.Module)}
    out: dict = {}
    scopes: list = []

    def wrap(call):
        def recorded(self, *a, **k):
            scope = getattr(self, "scope", None)
            scopes.append(scope if isinstance(scope, str) else "")
            try:
                result = call(self, *a, **k)
            finally:
                chain = ".".join(s for s in scopes if s)
                scopes.pop()
            value = _array(result)
            if value is not None:
                for name in (chain, paths.get(id(self), "")):
                    if name:
                        out.setdefault(name, value)
            return result
        return recorded

    with contextlib.ExitStack() as undo:
        for cls in classes:
            own = cls.__dict__.get("__call__")
            cls.__call__ = wrap(cls.__call__)
            undo.callback(lambda cls=cls, own=own: setattr(cls, "__call__", own) if own is not None
                          else delattr(cls, "__call__"))
        twin(*args)
    return out
