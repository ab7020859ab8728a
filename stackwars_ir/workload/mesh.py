"""Device mesh (`--mesh fsdp=4,tp=2`) and the one rule placing each argument's dimensions on its axes."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..common.errors import StackwarsError

# The axes a mesh may name, and what each shards (MaxText's names; torchtitan's FSDP and TP alike):
#   dp   data parallel: the inputs' batch dimension; parameters and optimizer state replicated.
#   fsdp fully sharded: the batch dimension too, and each parameter (and its AdamW moments) along its
#        largest dimension that the axis divides and tensor parallelism left free.
#   tp   tensor parallel: the dimension the adapter's ENTRY names per parameter (attention heads and MLP
#        hidden: q/k/v/gate/up on their output features, o/down on their input features).
AXES = ("dp", "fsdp", "tp")
BATCH_AXES = ("dp", "fsdp")
FIX = "name axes with sizes, e.g. --mesh fsdp=8 or --mesh fsdp=2,tp=2 (axes: dp, fsdp, tp)"


@dataclass(frozen=True)
class Mesh:
    """Named axes and their sizes, in the order given (the device grid is row-major over them)."""

    axes: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, text: str) -> "Mesh":
        axes = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            m = re.fullmatch(r"([a-z]+)\s*=\s*(\d+)", part)
            if not m:
                raise StackwarsError(f"--mesh {text!r}: {part!r} is not AXIS=SIZE", fix=FIX)
            name, size = m.group(1), int(m.group(2))
            if name not in AXES:
                raise StackwarsError(f"--mesh {text!r}: unknown axis {name!r}", fix=FIX)
            if size < 1:
                raise StackwarsError(f"--mesh {text!r}: axis {name} must have 1 device or more", fix=FIX)
            if name in dict(axes):
                raise StackwarsError(f"--mesh {text!r}: axis {name} is named twice", fix=FIX)
            axes.append((name, size))
        if not axes:
            raise StackwarsError(f"--mesh {text!r} names no axis", fix=FIX)
        return cls(tuple(axes))

    @property
    def devices(self) -> int:
        n = 1
        for _, size in self.axes:
            n *= size
        return n

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.axes)

    def size(self, axis: str) -> int:
        return dict(self.axes).get(axis, 1)

    @property
    def text(self) -> str:
        return ",".join(f"{a}={n}" for a, n in self.axes)

    @property
    def stem(self) -> str:
        """The file-stem suffix: "-fsdp8", "-fsdp2-tp2"."""
        return "".join(f"-{a}{n}" for a, n in self.axes)

    def spec(self, kind: str, name: str, shape: tuple[int, ...], tp: dict | None = None) -> tuple:
        """Per dimension of one argument, the mesh axes it is split over (a tuple of names, () where
        it is whole). kind: the sidecar's argument kind (parameter, optimizer, input, buffer, ...)."""
        out = [()] * len(shape)
        if kind == "input":
            axes = tuple(a for a in BATCH_AXES if self.size(a) > 1)
            if shape and axes and shape[0] % _product(self, axes) == 0:
                out[0] = axes
            return tuple(out)
        if kind == "optimizer" and name != "step":
            name = name.split(".", 1)[1]  # exp_avg.<parameter>: placed as its parameter
        elif kind not in ("parameter", "optimizer"):
            return tuple(out)  # buffers and constants (rotary tables, masks): whole on every device
        if kind == "optimizer" and name == "step":
            return tuple(out)
        taken = None
        if self.size("tp") > 1:
            dim = tensor_parallel_dim(name, tp or {})
            if dim is not None and dim < len(shape) and shape[dim] % self.size("tp") == 0:
                out[dim], taken = ("tp",), dim
        n = self.size("fsdp")
        if n > 1:
            free = [d for d in range(len(shape)) if d != taken and shape[d] % n == 0]
            if free:
                out[max(free, key=lambda d: (shape[d], -d))] = ("fsdp",)
        return tuple(out)


def tensor_parallel_dim(name: str, tp: dict) -> int | None:
    """The dimension ENTRY's tensor_parallel table gives a parameter (by the longest matching name
    ending), or None."""
    hits = [(len(end), dim) for end, dim in tp.items() if name == end or name.endswith("." + end)]
    return max(hits)[1] if hits else None


def _product(mesh: Mesh, axes) -> int:
    n = 1
    for a in axes:
        n *= mesh.size(a)
    return n


def spec_text(spec: tuple) -> str:
    """[{"fsdp"}, {}] as Shardy writes it, for tables: "[fsdp, -]"."""
    return "[" + ", ".join(",".join(d) if d else "-" for d in spec) + "]"
