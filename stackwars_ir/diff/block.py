"""A block (the ops of one component, e.g. layer 3's attention), its key and label.

Also what both segmentation strategies (provenance, structure) share.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from ..ir.model import Module, Op

ROLES = ("embedding", "rotary", "shared", "norm", "attention", "mlp", "residual", "conv", "batchnorm", "pool",
         "head", "optimizer", "other")

# Roles whose blocks align layer by layer; the others align by their order in the program.
LAYERED = ("norm", "attention", "mlp", "residual")

# A training step's phases, read from JAX's transformation scopes (ir.locations.provenance):
# forward (under jvp), backward (under transpose: the gradient of the block it names), and the
# optimizer update (ops of the step outside both, with no module path).
PHASES = ("forward", "backward", "update")

PHASE_LABEL = {"backward": "(backward)", "update": "(update)"}


@dataclass(frozen=True)
class Block:
    """A run of ops that implement one component, e.g. layer 3's attention."""

    role: str
    layer: tuple  # layer numbers (GPT-2 h.3 -> (3,)); () at the top level
    ordinal: int  # k-th block of this role in this layer (ln_1 -> 0, ln_2 -> 1)
    name: str  # module path, or a made-up name in structural mode ("layer 3 attention")
    ops: tuple = field(repr=False)  # (Op, path) in program order
    phase: str = ""  # training step: "forward", "backward" (the gradient of that block), "update" (optimizer)
    loop: int = -1  # the counted loop (ir.loops, k-th in program order) whose body runs it; -1: none
    trips: int = 0  # that loop's trip count: the block runs once per trip (a scanned layer); 0: not in a loop

    @property
    def key(self) -> tuple:
        return (self.layer, self.role, self.ordinal) + ((self.phase,) if self.phase else ()) + \
            ((("loop", self.loop),) if self.loop >= 0 else ())

    @property
    def label(self) -> str:
        where = ".".join(map(str, self.layer))
        base = f"{self.role}[{where}]#{self.ordinal}" if where else f"{self.role}#{self.ordinal}"
        if self.trips:
            base += f" (scanned x{self.trips})"
        return f"{base} {PHASE_LABEL[self.phase]}" if self.phase in PHASE_LABEL else base

    def histogram(self) -> Counter:
        return Counter(op.name for op, _ in self.ops if not op.name.endswith("return"))


def top_of(module: Module, op: Op) -> int:
    """The id of the op whose region holds `op` at the top of its function (itself if it is there)."""
    while op.parent is not None:
        op = module.ops[op.parent]
    return op.id


def common_prefix(paths: list) -> str:
    split = [p.split(".") for p in paths if p]
    if not split:
        return ""
    first = split[0]
    n = len(first)
    for s in split[1:]:
        n = min(n, len(s))
        for i in range(n):
            if s[i] != first[i]:
                n = i
                break
    return ".".join(first[:n])


def merge_same_key(blocks: list, items: tuple) -> list:
    """Parts of one split with the same key (two residual parts) become one, where the first stood,
    its ops in the order of `items` (the split block's: producers before their users)."""
    first: dict = {}
    out: list = []
    for b in blocks:
        k = (b.key, b.trips)
        if k in first:
            i = first[k]
            out[i] = dataclasses.replace(out[i], ops=out[i].ops + b.ops)
        else:
            first[k] = len(out)
            out.append(b)
    if len(out) == len(blocks):
        return out
    position = {id(op): i for i, (op, _) in enumerate(items)}
    return [dataclasses.replace(b, ops=tuple(sorted(b.ops, key=lambda item: position[id(item[0])]))) for b in out]
