"""The capture artifact: one exported module and its arguments' meaning."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.routes import ROUTES
from ..workload import Argument

@dataclass(frozen=True)
class Capture:
    """One exported module: its text, the meaning of its arguments and how long each stage took."""

    framework: str  # "jax" | "torch"
    exporter: str  # the route's name (routes.ROUTES)
    text: str = field(repr=False)
    arguments: tuple[Argument, ...] = field(repr=False)
    seconds: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict, repr=False)  # name -> numpy array (torch_xla lifted constants)
    outputs: tuple = field(default=(), repr=False)  # training step: {"index", "kind", "name"} per result
    stem_suffix: str = ""  # "-train" for a training step
    extra: dict = field(default_factory=dict, repr=False)  # route-specific evidence for the sidecar

    @property
    def stem(self) -> str:
        return ROUTES["jax" if self.framework == "jax" else self.exporter].stem() + self.stem_suffix

    def __str__(self) -> str:
        return f"Capture({self.stem}, {len(self.arguments)} arguments, {len(self.text)} chars)"


def refuse_existing(paths: list[Path], force: bool) -> None:
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise StackwarsError(f"{existing[0]}: already exists", fix="pass --force to overwrite, or --out DIR")
