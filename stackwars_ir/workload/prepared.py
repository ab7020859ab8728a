"""A request made real: the seeded PyTorch model, weights, inputs, eager reference, argument values.

The eager reference is made in float64 too.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import models
from ..common.errors import CaptureError, MissingExtra
from . import kept_values
from .request import Request
from .train import loss_of
from .values import FLOAT64_BYTES, as_float64, float64_copy

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Workload:
    """A request made real: the adapter, the seeded PyTorch model, its weights and inputs as numpy,
    and PyTorch eager's output on them (read by name: a Workload is not unpacked by position)."""

    adapter: object
    model: object
    weights: dict
    inputs: dict
    reference: np.ndarray


_KEPT: dict | None = None


def keep_prepared() -> None:
    """From now on, this process builds each request's workload once (a bench worker runs many jobs
    on the same weights). The model is shared between callers: none may change it."""
    global _KEPT
    if _KEPT is None:
        _KEPT = {}


def prepare(req: Request) -> Workload:
    """The PyTorch model with seeded weights, its weights as numpy, inputs and the eager reference
    output; the adapter's contract checked on the way (models/_contract.py), its errors in one line."""
    if _KEPT is not None:
        if req not in _KEPT:
            _KEPT[req] = _prepare(req)
        return _KEPT[req]
    return _prepare(req)


def prepare_values(req: Request) -> Workload:
    """A forward request's workload without its PyTorch model where an earlier process kept its values
    (kept_values: no torch, no model library imported, nothing run): the adapter, weights, inputs and
    reference, `model` None. Else prepare(req), its values kept for the next process. For a caller that
    runs no PyTorch model (jax.jit's forward). A training step's kept values are its state after step 1,
    not these: `req.train` is refused (ValueError)."""
    if req.train:
        raise ValueError("prepare_values: a forward request only (a training step's kept values are its state)")
    kept = kept_values.read(req)
    if kept is not None:
        weights, inputs, reference = kept
        return Workload(adapter=models.adapter(req.model), model=None, weights=weights, inputs=inputs,
                        reference=reference)
    w = prepare(req)
    kept_values.keep(req, w.weights, w.inputs, w.reference)
    return w


def _prepare(req: Request) -> Workload:
    from ..models import _contract as contract

    try:
        import torch
    except Exception as e:
        raise MissingExtra("torch", e) from e
    entry = models.entry(req.model)
    with contract.blame(entry):
        adapter = models.adapter(req.model)
        contract.require(entry, adapter, "torch_model", "inputs")
        torch.manual_seed(req.seed)
        model = adapter.torch_model(req.size)
        contract.check_torch_model(entry, model)
        if req.step == "train":
            contract.check_loss(entry, adapter, model, loss_of(req.model))
        perturb(model, req.seed)
        # Buffers too, persistent or not: torch.export lifts them all into arguments.
        tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        weights = {k: v.detach().cpu().numpy().copy() for k, v in sorted(tensors.items())}
        try:
            inputs = adapter.inputs(req.size, req.batch, req.seq, np.random.default_rng(req.seed))
        except ValueError as e:  # the adapter refuses these sizes: its own words, at its own line, no fix guessed
            raise contract.refusal(entry, e) from e
        contract.check_inputs(entry, inputs, adapter.inputs)
    with contract.blame(entry, "the forward of torch_model(size)'s model"), torch.no_grad():
        output = model(*[torch.from_numpy(v) for v in inputs.values()])
    contract.check_output(entry, output)
    return Workload(adapter=adapter, model=model, weights=weights, inputs=inputs, reference=output.numpy())


class Exact(NamedTuple):
    """The model run in float64 on the same weights and inputs (parity's measure of float32's own
    rounding: capture/parity.py), or why it was not run."""

    value: object  # the output as a float64 array; for a training step, parameter name -> gradient
    why: str = ""


def float64_output(model: torch.nn.Module, inputs: dict) -> Exact:
    """The model's output in float64 (its float64 copy on float64 inputs; a model whose copy would pass
    values.FLOAT64_BYTES run in float64 module by module instead: float64_streamed), or why there is
    none: a model whose forward makes float32 tensors of its own may refuse float64, and is then only
    held to the hard bound."""
    import torch

    m64, why = float64_copy(model)
    try:
        with torch.no_grad():
            if m64 is None:
                out = float64_streamed(model, inputs)
                if out is None:
                    return Exact(None, why)
            else:
                out = m64(*as_float64(inputs))
        return Exact(np.asarray(out.detach().numpy(), dtype=np.float64), "")
    except Exception as e:  # noqa: BLE001 - any failure only costs the float64 comparison
        first = (str(e).strip().splitlines() or [""])[0][:160]
        return Exact(None, f"the model does not run in float64: {type(e).__name__}: {first}")


def float64_streamed(model: torch.nn.Module, inputs: dict) -> torch.Tensor | None:
    """The model's output in float64 without a float64 copy of it: on entering a module whose tensors
    (its own and its children's) fit FLOAT64_BYTES in float64, they all become float64, and float32
    again on leaving it (float32 to float64 and back is exact: the model is left as it was); a larger
    module's own tensors alone. So a layer is float64 while it runs (its code may read a child's dtype
    before calling it: ViT's patch embedding casts the pixels to its convolution's) and the memory
    beyond the model is about one layer's float64 tensors. None where one module's own tensors pass
    the limit."""
    import torch

    def floating(tensors):
        return [t for t in tensors if t.is_floating_point()]

    whole = {}
    for m in model.modules():
        every = floating((*m.parameters(), *m.buffers()))
        mine = floating((*m.parameters(recurse=False), *m.buffers(recurse=False)))
        if 8 * sum(t.numel() for t in mine) > FLOAT64_BYTES:
            return None
        whole[m] = every if 8 * sum(t.numel() for t in every) <= FLOAT64_BYTES else mine
    kept: dict = {}  # id(tensor) -> (tensor, its dtype before): float64 now
    cast: list = []  # per module entered and not left: the tensors it made float64

    def enter(mod, args):
        mine = [t for t in whole[mod] if id(t) not in kept]
        for t in mine:
            kept[id(t)] = (t, t.dtype)
            t.data = t.data.to(torch.float64)
        cast.append(mine)

    def leave(mod, args, out):
        for t in cast.pop() if cast else ():
            t.data = t.data.to(kept.pop(id(t))[1])

    hooks = [h for m in model.modules() for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    try:
        return model(*as_float64(inputs))
    finally:
        for h in hooks:
            h.remove()
        for t, dtype in kept.values():  # a forward that raised before leaving
            t.data = t.data.to(dtype)


def perturb(model: torch.nn.Module, seed: int) -> None:
    """Make every tensor matter: transformers initialises biases to 0, norms to 1 and BN statistics to 0/1."""
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, t in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
            if not t.is_floating_point():
                continue
            noise = torch.randn(t.shape, generator=gen)
            if name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=gen))
            elif name.endswith(("bias", "running_mean")):
                t.copy_(0.02 * noise)
            elif t.dim() == 1 and name.endswith("weight"):  # layer/batch norm scale
                t.copy_(1.0 + 0.1 * noise)


@dataclass(frozen=True)
class Argument:
    """One argument of the captured function: which parameter, buffer, constant or input it is."""

    index: int
    kind: str  # "parameter" | "buffer" | "constant" | "input"
    name: str
    shape: tuple[int, ...]
    dtype: str

    def as_json(self) -> dict:
        return {"index": self.index, "kind": self.kind, "name": self.name,
                "shape": list(self.shape), "dtype": self.dtype}


def argument_values(arguments: Iterable[Argument], constants: dict, weights: dict[str, np.ndarray],
                    inputs: dict[str, np.ndarray], who: str = "") -> list[np.ndarray]:
    """The arrays to call a captured function with, in its argument order (`who` names it in errors)."""
    values = []
    for arg in arguments:
        if arg.kind == "input":
            src = inputs[arg.name]
        elif arg.name in constants:
            src = constants[arg.name]
        elif arg.name in weights:
            src = weights[arg.name]
        else:  # e.g. a tensor the model makes inside forward, lifted by torch.export (GPT-Neo's mask value)
            raise CaptureError(f"{who}: argument {arg.index} ({arg.name!r}, {arg.kind}) is neither a weight, "
                               "an input nor a recorded constant, so the capture cannot be run to check parity",
                               fix="this exporter does not yet record the values of tensors lifted by torch.export; "
                                   "try another --exporter")
        array = np.asarray(src)
        shape = tuple(arg.shape)
        if array.shape != shape and _squeezed(array.shape) != _squeezed(shape):
            # never reshaped to fit: a transposed or fused twin weight would be silently scrambled
            turned = len(shape) == 2 and array.shape == shape[::-1]
            raise CaptureError(
                f"{who}: argument {arg.index} ({arg.name!r}, {arg.kind}) has shape {list(shape)} in the export, "
                f"but its value has shape {list(array.shape)}" + (" (the transpose)" if turned else ""),
                fix=(f"store the twin's {arg.name} transposed as PyTorch does (kernel.T), or map it with .T in the "
                     "adapter's weight mapping" if turned else
                     f"make the twin's {arg.name} the shape of its PyTorch tensor (split or join fused weights "
                     "in the adapter's weight mapping)"))
        values.append(array.astype(arg.dtype, copy=False).reshape(shape))
    return values


def _squeezed(shape: tuple) -> tuple:
    """A shape without its unit dimensions: a value of shape (1, 64) is one of shape (64,) written otherwise."""
    return tuple(d for d in shape if d != 1)


