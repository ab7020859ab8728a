"""A model from shapes alone: its meta-device twin, what its weights take, and whether a capture with
them fits this machine (else the request becomes an abstract one)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from .. import models
from ..common.errors import StackwarsError
from ..common.files import host_memory
from ..common.routes import LOCK_EXPORTERS, WEIGHTLESS, weightless
from .request import Request

if TYPE_CHECKING:
    import torch


def meta_model(req: Request) -> tuple[ModuleType, torch.nn.Module]:
    """The PyTorch model on the meta device, in the request's dtype: shapes, no storage."""
    import torch

    from ..models import _contract as contract

    entry = models.entry(req.model)
    with contract.blame(entry):
        adapter = models.adapter(req.model)
        contract.require(entry, adapter, "torch_model", "inputs")
        with torch.device("meta"):
            model = adapter.torch_model(req.size)
        contract.check_torch_model(entry, model)
    return adapter, model.to(getattr(torch, req.dtype))


_WEIGHT_BYTES: dict = {}  # (model, size, dtype) -> bytes: the CLI and the capture both ask, once is enough
_BUILT_REAL: dict = {}  # (model, size, dtype) -> why its meta twin could not be built


def weight_bytes(req: Request) -> int:
    """What the model's weights would take materialized (parameters and buffers), from its meta twin;
    a model that cannot be built on the meta device (it calibrates, or reads a value with .item(),
    while being built) is built for real on the CPU instead, and sizing_note says so. Raises the
    adapter's own error (one line at its line) when neither build works."""
    key = (req.model, req.size, req.dtype)
    if key not in _WEIGHT_BYTES:
        try:
            _, model = meta_model(req)
        except StackwarsError as e:
            model = _built_for_real(req, e)
            _BUILT_REAL[key] = " ".join(e.message.split())
        tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        _WEIGHT_BYTES[key] = sum(t.numel() * t.element_size() for t in tensors.values())
    return _WEIGHT_BYTES[key]


def _built_for_real(req, meta_error: StackwarsError):
    """The model built on the CPU, when its meta build failed; the meta error raised where this fails too
    or where the adapter breaks its contract (a missing function: no build would work)."""
    import torch

    from ..models import _contract as contract

    entry = models.entry(req.model)
    adapter = models.adapter(req.model)
    if not callable(getattr(adapter, "torch_model", None)):
        raise meta_error
    with contract.blame(entry):
        torch.manual_seed(req.seed)
        with torch.device("cpu"):
            model = adapter.torch_model(req.size)
        contract.check_torch_model(entry, model)
    return model.to(getattr(torch, req.dtype))


def sizing_note(req: Request) -> str | None:
    """Why the model's weights were sized by building it for real (None: its meta twin sized them)."""
    why = _BUILT_REAL.get((req.model, req.size, req.dtype))
    return None if why is None else (f"{req.model}-{req.size} cannot be built on the meta device ({why}); "
                                     "built for real on the CPU to size its weights")


def weight_copies(req: Request) -> int:
    """How many times a capture with weights holds them: as torch tensors, numpy copies and JAX arrays
    at once (3); a training step's parity holds their gradients and AdamW's two moments beside them:
    twice again (6)."""
    return 6 if req.train else 3


def too_big(req: Request) -> str | None:
    """Why a capture with weights of `req` would not fit this machine, or None where it fits."""

    ram = host_memory() or 0
    need = weight_bytes(req)
    times = weight_copies(req)
    if ram and times * need > ram:
        return (f"{req.model}-{req.size}'s weights take {need / 2**30:.1f} GiB in {req.dtype}; a capture with "
                f"weights holds them about {times} times{' for a training step' if req.train else ''}, more "
                f"than this machine's {ram / 2**30:.0f} GiB")
    return None


def check_fits(req: Request) -> None:
    """A materialized capture whose weights take more than a third of this machine's memory: refuse, say --abstract."""
    reason = too_big(req)
    if reason:
        raise StackwarsError(reason, fix="add --abstract (shapes only, no parity check)")


def fitted(req: Request, explicit: frozenset | set = frozenset()) -> tuple[Request, str | None]:
    """The request, or, when a published size's weights do not fit this machine (LLaMA-3.1-8B: 28 GiB
    in float32, held about three times by a capture with weights), the same request captured from
    shapes, as if --abstract were given: in bfloat16 (the dtype such weights are published in) unless
    `dtype` is in `explicit`, through the exporters that have a route without weights; with the note
    that says so. What was asked for explicitly (`explicit`: "dtype", "exporters") is kept, and
    refused in one line where it cannot be done."""

    if req.abstract or req.model not in models.CATALOG or req.size not in models.entry(req.model).sizes:
        return req, None
    # Weights are materialized in float32 (another dtype is captured from shapes only).
    sized = dataclasses.replace(req, exporters=req.exporters or WEIGHTLESS[:1], dtype="float32").validated()
    reason = too_big(sized)
    if reason is None:
        return req, sizing_note(sized)
    exporters = req.exporters
    _, left = weightless(exporters)
    if "exporters" in explicit and left:
        raise StackwarsError(f"{reason}, and {left[0]} cannot capture without weights (its lazy tensors hold data)",
                             fix=f"use --exporter {WEIGHTLESS[0]} (captured from shapes), or a size whose weights fit")
    dtype = req.dtype if "dtype" in explicit else "bfloat16"
    swap = ""
    if left:
        exporters = tuple(dict.fromkeys(x if x not in left else WEIGHTLESS[0] for x in exporters))
        swap = f"; {WEIGHTLESS[0]} instead of {', '.join(left)}, which has no route without weights"
    note = (f"{reason}: capturing from shapes (--abstract), in {dtype}{swap}; no weight is materialized and "
            "parity is not checked")
    return dataclasses.replace(req, abstract=True, dtype=dtype, exporters=exporters), note


def exporters_asked(model: str, given: Iterable[str], step: str = "forward") -> tuple[tuple[str, ...], list[str]]:
    """The exporters asked for (repeated, or comma-separated) and notes; 'all' means every exporter
    that can export this model, a note naming each of the others and why."""

    given = tuple(x.strip() for g in given for x in g.split(",") if x.strip())
    if "all" not in given:
        return tuple(dict.fromkeys(given)), []
    if model not in models.CATALOG:
        return LOCK_EXPORTERS, []  # an unknown model gets its one-line error from the request's check
    usable, skipped = models.exporters_for(model, LOCK_EXPORTERS, step)
    return usable, [f"{model}: {e} skipped: {why}" for e, why in skipped.items()]
