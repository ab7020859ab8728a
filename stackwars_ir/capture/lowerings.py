"""Which function lowers each PyTorch route to StableHLO, for a forward and for a training step.

A forward is lowered from torch.export's program, a training step from the model and its state.
"""
from __future__ import annotations

from collections.abc import Callable

from ..common.routes import TORCHAX, TORCH_TPU, TORCH_XLA
from .artifact import Capture
from .lowering import placement
from .torch_capture import capture_torch_xla, capture_torchax
from .torchtpu_route import capture_torch_tpu
from .train import capture_torch_xla_train, capture_torchax_train


def _torch_xla_train(model, state, stages, req, entry):
    return capture_torch_xla_train(model, state, stages, entry.layers, scan=req.scan_layers, remat=req.remat,
                                   mesh=req.mesh_spec, tensor_parallel=entry.tensor_parallel)


def _torchax_train(model, state, stages, req, entry):
    return capture_torchax_train(model, state, stages, placement(req))


def forward(route: str) -> Callable[..., Capture]:
    """`fn(exported_program, inputs, stages, placement=None) -> Capture`: how `route` lowers a forward that
    torch.export traced (a route's other path, `Route.lazy`, is capture.torch_capture's lazy capture)."""

    return {TORCH_XLA.name: capture_torch_xla, TORCHAX.name: capture_torchax, TORCH_TPU.name: capture_torch_tpu}[route]


def train_step(route: str) -> Callable[..., Capture]:
    """`fn(model, state, stages, request, catalogue entry) -> Capture`: how `route` lowers one training step."""
    return {TORCH_XLA.name: _torch_xla_train, TORCHAX.name: _torchax_train}[route]
