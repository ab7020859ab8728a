"""Shardings read from a module, Shardy or GSPMD alike: its mesh and each entry argument's split.

An argument's split is read per dimension.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .model import Module


class ArgSharding(NamedTuple):
    """How one entry argument is split: per dimension, into how many parts and over which mesh axes
    (GSPMD names none); `text` as the module writes it."""

    index: int
    name: str
    shape: tuple
    parts: tuple  # per dimension: the number of pieces (1: whole)
    axes: tuple  # per dimension: the mesh axes it is split over, joined by "," ("" for none or unnamed)
    replicated_on: int  # devices holding the same piece (GSPMD's last_tile_dim_replicate; Shardy: the rest)
    text: str

    @property
    def split(self) -> str:
        return split_text(self.parts, self.axes)

    def same_split(self, other: "ArgSharding") -> bool:
        """Whether both split the same dimensions into the same number of pieces (axis names aside:
        GSPMD has none)."""
        return self.parts == other.parts


def split_text(parts: Sequence[int], axes: Sequence[str]) -> str:
    """"[fsdp, tp]", "[4, -]" (GSPMD names no axis), "whole"."""
    if all(p == 1 for p in parts):
        return "whole"
    return "[" + ", ".join(a if a else (str(p) if p > 1 else "-") for p, a in zip(parts, axes)) + "]"


def mesh(module: Module) -> dict:
    """The module's sdy mesh axes {name: size} (the first mesh), {} for none."""
    for op in module.ops:
        if op.name == "sdy.mesh":
            return {a: int(n) for a, n in re.findall(r'"(\w+)"=(\d+)', op.attr("mesh") or "")}
    return {}


def devices(module: Module) -> int:
    """How many devices the module is sharded over: its mesh's, or its largest GSPMD device list's."""
    axes = mesh(module)
    if axes:
        n = 1
        for size in axes.values():
            n *= size
        return n
    most = 1
    for text in module.entry.arg_shardings:
        m = re.search(r"devices=\[([\d,]+)\]", text)
        if m:
            n = 1
            for t in m.group(1).split(","):
                n *= int(t)
            most = max(most, n)
    return most


def argument_shardings(module: Module, names: Mapping[int, str] | None = None) -> tuple:
    """Each entry argument's ArgSharding (`names`: the sidecar's argument names by index); () for a
    module with none."""
    f = module.entry
    if not f.arg_shardings:
        return ()
    axes = mesh(module)
    out = []
    for i, (vid, text) in enumerate(zip(f.args, f.arg_shardings)):
        shape = tuple(module.type_of(vid).shape)
        name = (names or {}).get(i) or module.values[vid].name or f"%arg{i}"
        parts, on, replicated = _read(text, len(shape), axes)
        out.append(ArgSharding(i, name, shape, parts, on, replicated, text))
    return tuple(out)


def _read(text: str, rank: int, axes: dict) -> tuple:
    """(parts per dim, axes per dim, replication) of one sharding attribute."""
    whole = ((1,) * rank, ("",) * rank)
    if text.startswith("#sdy.sharding"):
        body = re.search(r"\[(.*)\]", text)
        dims = re.findall(r"\{([^}]*)\}", body.group(1)) if body else []
        parts, names = [], []
        for d in dims[:rank]:
            on = re.findall(r'"(\w+)"', d)
            n = 1
            for a in on:
                n *= axes.get(a, 1)
            parts.append(n)
            names.append(",".join(on))
        parts += [1] * (rank - len(parts))
        names += [""] * (rank - len(names))
        total = 1
        for n in axes.values():
            total *= n
        used = 1
        for n in parts:
            used *= n
        return tuple(parts), tuple(names), total // used if used else 1
    m = re.search(r"devices=\[([\d,]+)\]", text)
    if not m:  # {replicated}, {maximal device=0}, "": whole on each device
        return whole[0], whole[1], 1
    tiles = [int(t) for t in m.group(1).split(",")]
    parts = tuple(tiles[:rank]) + (1,) * max(0, rank - len(tiles))
    replicated = tiles[rank] if "last_tile_dim_replicate" in text and len(tiles) > rank else 1
    return parts, ("",) * rank, replicated
