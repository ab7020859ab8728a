"""The routes from a model to StableHLO and the steps they capture: one table every stage reads.

The routes: jax, torch_xla, torchax, torch_tpu.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


class Step(str, Enum):
    """What a capture computes: the model's forward, or one training step (loss, backward, AdamW)."""

    FORWARD = "forward"
    TRAIN = "train"

    @property
    def suffix(self) -> str:
        """Of the file stem: "-train" for a training step."""
        return "-train" if self is Step.TRAIN else ""


STEPS = tuple(s.value for s in Step)


@dataclass(frozen=True)
class Route:
    """One way from a model to StableHLO: its framework, file stem and what it can capture.

    `scan_layers` and `remat` hold why a route cannot capture that program ("" where it can);
    `weightless`: it can capture from shapes alone (--abstract)."""

    name: str  # as users spell it: the --exporter value, or "jax"
    framework: str  # "jax" | "torch"
    summary: str  # how it gets to StableHLO, in words
    weightless: bool = True
    scan_layers: str = ""
    remat: str = ""
    lazy: str = ""  # the route's other path for what its usual one cannot trace ("": none)
    native: str = ""  # the bench kind of the runtime a user of this route runs the model with ("": none timed)
    train: str = ""  # why it cannot capture a training step ("": it can)
    # why it runs in a version stack of its own, not the lock's environment ("": it runs in the lock's)
    stack: str = ""
    shapes: str = ""  # why it cannot capture from shapes alone, where `weightless` is False

    def stem(self, step: str = "forward", program: str = "") -> str:
        """The file stem of its capture: jax, torch-torch_xla, jax-train, torch-torchax-train-fsdp2 ..."""
        return ("jax" if self.framework == "jax" else f"torch-{self.name}") + Step(step).suffix + program

    def how(self, step: str = "forward", scan_layers: bool = False, mesh: bool = False) -> str:
        """How a capture with these settings is made, in words (capture.run's choice of path)."""
        if self.lazy and (step == Step.TRAIN or scan_layers or mesh):
            why = "training step" if step == Step.TRAIN else "scan_layers" if scan_layers else "sharded over a mesh"
            return f"{self.lazy} ({why}: the graph a torch_xla user's step builds)"
        if self.framework == "jax" and scan_layers:
            return f"{self.summary} (the twin's layers scanned)"
        return self.summary


JAX = Route("jax", "jax", "jax.jit(...).lower", native="jax.jit")
TORCH_XLA = Route("torch_xla", "torch", "torch.export, then torch_xla's exported-program path", weightless=False,
                  lazy="torch_xla's lazy tensors", native="torch_xla lazy",
                  shapes="its lazy tensors hold data (torch_xla 2.9 has no meta-device or fake-tensor route to StableHLO)")
TORCHAX = Route("torchax", "torch", "torch.export, then torchax",
                scan_layers="torch.export cannot trace torch_xla's scan_layers, and torchax has no scan of a "
                            "module list",
                remat="torchax differentiates the exported loss with jax.value_and_grad, which a "
                      "torch.utils.checkpoint inside it does not reach", native="torchax jit")
TORCH_TPU = Route("torch_tpu", "torch", "torch.export, then TorchTPU's MLIR exporter (XLA's CPU PJRT plugin as its device)",
                  weightless=False, shapes="TorchTPU's exporter is wired here for captures with weights only",
                  scan_layers="TorchTPU's route captures a forward of the unrolled model only here",
                  remat="TorchTPU's route captures a forward only here",
                  train="TorchTPU's training step needs its own capturable AdamW and split into 3 graphs when tried "
                        "(docs/stacks.md); its route captures a forward only here",
                  stack="TorchTPU (torch-tpu 0.2.0) needs torch >= 2.11, and the lock's torch is 2.9, torch_xla's last "
                        "release")
ROUTES = {r.name: r for r in (JAX, TORCH_XLA, TORCHAX, TORCH_TPU)}
# The distributions that lower each route, by the names pip and import know them by.
PACKAGE = {JAX.name: "jax", TORCH_XLA.name: "torch_xla", TORCHAX.name: TORCHAX.name, TORCH_TPU.name: "torch_tpu"}
TORCH_SIDE = ("torch", PACKAGE[TORCH_XLA.name], PACKAGE[TORCHAX.name], PACKAGE[TORCH_TPU.name])  # what a PyTorch route's capture imports
SHOWN_VERSIONS = ("jax", "torch", PACKAGE[TORCH_XLA.name], PACKAGE[TORCHAX.name], "transformers")  # a capture's provenance, as diff and its report show it
EXPORTERS = tuple(name for name, r in ROUTES.items() if r.framework == "torch")  # --exporter's choices
LOCK_EXPORTERS = tuple(e for e in EXPORTERS if not ROUTES[e].stack)  # those the lock's environment runs ('all')
WEIGHTLESS = tuple(e for e in EXPORTERS if ROUTES[e].weightless)  # the PyTorch routes that capture from shapes


def weightless(exporters: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(those of `exporters` that capture from shapes, the others)."""
    return tuple(e for e in exporters if ROUTES[e].weightless), tuple(e for e in exporters if not ROUTES[e].weightless)


def route(name: str) -> Route:
    """The route of that name (a KeyError names an unknown one: Request.validated refuses it first)."""
    return ROUTES[name]
