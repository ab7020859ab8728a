"""The capture artifact: one exported module, its arguments' meaning, and where its files go."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StackwarsError

# What the capture code writes: bumped whenever a capture's text or meaning changes for the same
# request (2: torch_xla's training step names its ops' modules and phases; 3: its loss's ops too;
# 4: its sidecar records the host reads of each step).
# `bench MODEL` reuses a capture on disk only from the same revision; the sidecar records it under
# `run`, beside the parts that differ between runs, so the goldens compare as before.
CAPTURE_REVISION = 4


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


@dataclass(frozen=True)
class Capture:
    """One exported module: its text, the meaning of its arguments and how long each stage took."""

    framework: str  # "jax" | "torch"
    exporter: str  # "jax" | "torch_xla" | "torchax"
    text: str = field(repr=False)
    arguments: tuple[Argument, ...] = field(repr=False)
    seconds: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict, repr=False)  # name -> numpy array (torch_xla lifted constants)
    outputs: tuple = field(default=(), repr=False)  # training step: {"index", "kind", "name"} per result
    stem_suffix: str = ""  # "-train" for a training step
    extra: dict = field(default_factory=dict, repr=False)  # route-specific evidence for the sidecar

    @property
    def stem(self) -> str:
        return ("jax" if self.framework == "jax" else f"torch-{self.exporter}") + self.stem_suffix

    def __str__(self) -> str:
        return f"Capture({self.stem}, {len(self.arguments)} arguments, {len(self.text)} chars)"


def target_paths(out_dir: Path, model: str, size: str, capture_stem: str) -> tuple[Path, Path]:
    folder = Path(out_dir) / f"{model}-{size}"
    return folder / f"{capture_stem}.mlir", folder / f"{capture_stem}.json"


def refuse_existing(paths: list[Path], force: bool) -> None:
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise StackwarsError(f"{existing[0]}: already exists", fix="pass --force to overwrite, or --out DIR")
