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
