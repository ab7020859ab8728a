"""PyTorch helpers: models whose forward takes positional tensors, as torch_xla's exporter requires."""
from __future__ import annotations

from typing import Callable


def positional(cls, config, pick: Callable, init: dict | None = None, **fixed_kwargs):
    """An instance of a subclass of `cls` whose forward takes one positional tensor and returns one tensor.

    A subclass, not a wrapper module, so state_dict keys and nn_module_stack paths stay
    exactly those of the transformers model (`h.3.attn.c_attn`, not `model.h.3...`).
    """
    import inspect

    first = list(inspect.signature(cls.forward).parameters)[1]  # after `self`

    def forward(self, x):
        return pick(super(sub, self).forward(**{first: x}, **fixed_kwargs))

    sub = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__})
    return sub(config, **(init or {})).eval()


# Below `positional`, whose line numbers torch_xla's captures carry in their stack traces.
import contextlib  # noqa: E402


def _positional(args: tuple, kwargs: dict):
    """(the tensors among a call's arguments, a function rebuilding (args, kwargs) from them): the rest
    (None, flags, caches) is held as it was."""
    import torch
    from torch.utils import _pytree as pytree

    flat, spec = pytree.tree_flatten((args, kwargs))
    held = [None if isinstance(x, torch.Tensor) else (x,) for x in flat]
    tensors = tuple(x for x in flat if isinstance(x, torch.Tensor))

    def rebuild(values):
        it = iter(values)
        return pytree.tree_unflatten([next(it) if h is None else h[0] for h in held], spec)

    return tensors, rebuild


def _first(out):
    """A layer's hidden state: the output itself, or the first of a tuple (transformers' older layers)."""
    return out[0] if isinstance(out, tuple) else out


@contextlib.contextmanager
def layers_as(model, attr: str, scan: bool = False, remat: bool = False):
    """While inside, the layers of `model` (the nn.ModuleList at `attr`) run as the capture asks, the
    model's own loop over them unchanged: `scan`, under torch_xla's scan_layers (the first layer's call
    runs them all, the others pass their input on); `remat`, each layer under torch_xla's checkpoint
    (torch.utils.checkpoint with an optimization barrier, so XLA cannot merge the recomputation back
    into the forward), or with scan, scan_layers' min-cut rematerializing partitioner.

    The layers' other arguments (rotary tables, masks, position ids) are the same in every layer: with
    scan, each is a buffer of a per-layer wrapper, so scan_layers slices it like a weight (its carry
    takes floating tensors that need a gradient only)."""
    import torch

    layers = model.get_submodule(attr)

    class Carried(torch.nn.Module):
        def __init__(self, layer, tensors, rebuild):
            super().__init__()
            self.layer, self.rebuild, self.n = layer, rebuild, len(tensors)
            for j, t in enumerate(tensors):
                self.register_buffer(f"arg{j}", t, persistent=False)

        def forward(self, h):
            args, kwargs = self.rebuild([getattr(self, f"arg{j}") for j in range(self.n)])
            return _first(type(self.layer).forward(self.layer, h, *args, **kwargs))

    def scanned(i: int):
        def forward(h, *args, **kwargs):
            if i:
                return h
            from torch_xla.experimental.scan_layers import scan_layers

            tensors, rebuild = _positional(args, kwargs)
            more = {}
            if remat:
                from functorch.compile import min_cut_rematerialization_partition

                more["partition_fn"] = min_cut_rematerialization_partition
            out = scan_layers([Carried(layer, tensors, rebuild) for layer in layers], h, **more)
            # One op inside the first layer's call: a namer of ops (the capture's OpNames) names the
            # loop's own ops there, not at their first reader outside.
            return out.clone()
        return forward

    def checkpointed(layer):
        def forward(h, *args, **kwargs):
            from torch_xla.utils.checkpoint import checkpoint

            tensors, rebuild = _positional(args, kwargs)

            def run(h, *values):
                a, k = rebuild(values)
                return _first(type(layer).forward(layer, h, *a, **k))

            return checkpoint(run, h, *tensors)  # reentrant, as torch_xla's own: kwargs travel as tensors
        return forward

    for i, layer in enumerate(layers if scan or remat else ()):
        layer.forward = scanned(i) if scan else checkpointed(layer)
    if scan and len(layers):
        # What the first layer's call computes is the whole loop: a namer of ops by module (the
        # capture's OpNames) names it after the list (`layers`), as JAX's scan is named.
        layers[0].scanned_as = attr
    try:
        yield layers
    finally:
        for layer in layers:
            layer.__dict__.pop("forward", None)
            layer.__dict__.pop("scanned_as", None)
