"""A workload's values between frameworks: float64 copies, JAX's inputs, pytree leaf names.

The float64 copies are of a model and its inputs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import jax
    import torch

FLOAT64_BYTES = 4 << 30  # a float64 copy of the weights above this is not made (an 8B model: 64 GB)


def float64_copy(model: torch.nn.Module) -> tuple[torch.nn.Module | None, str]:
    """A float64 copy of a PyTorch model, or why none is made (too large for this limit)."""
    import copy

    size = 8 * sum(t.numel() for t in (*model.parameters(), *model.buffers()) if t.is_floating_point())
    if size > FLOAT64_BYTES:
        return None, f"a float64 copy would take {size / 2**30:.1f} GiB, over {FLOAT64_BYTES / 2**30:.0f} GiB"
    return copy.deepcopy(model).double(), ""


def copy_on(model: torch.nn.Module, device: torch.device | str) -> torch.nn.Module:
    """A copy of a PyTorch model whose tensors live on `device`, each copied straight there: not
    `copy.deepcopy(model).to(device)`, whose host copy of every tensor is a second model's worth of
    memory at its peak (LLaMA-3.2-1B: 4.6 GiB more while torch_xla's lazy copy is made). Tied tensors
    stay tied; the module tree, its hooks and attributes are deep-copied as before."""
    import copy

    import torch

    memo: dict = {}
    for t in (*model.parameters(), *model.buffers()):
        if id(t) not in memo:
            moved = t.detach().to(device, copy=True)
            memo[id(t)] = torch.nn.Parameter(moved, requires_grad=t.requires_grad) \
                if isinstance(t, torch.nn.Parameter) else moved
    return copy.deepcopy(model, memo)


def as_float64(inputs: dict) -> list:
    """The inputs as torch tensors, the floating ones in float64."""
    import torch

    return [torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v) for v in inputs.values()]


def leaf_name(path: jax.tree_util.KeyPath) -> str:
    """A JAX pytree path as the PyTorch name of the tensor it holds (h.0.attn.c_attn.weight)."""
    import jax

    parts = []
    for key in path:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(key.name)
    if parts and parts[-1] == "value":  # nnx.Variable leaf
        parts.pop()
    return ".".join(parts)


def jax_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """JAX runs without x64, as its users do: int64 token ids become int32."""
    return {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in inputs.items()}
