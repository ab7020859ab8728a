"""An op-level diff of two blocks as a value: its groups by status, and patterns folded over blocks."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import BlockResult

STATUSES = ("matched", "changed", "rewritten", "only_a", "only_b")


@dataclass(frozen=True)
class OpGroup:
    """Ops of A and of B that the matcher put together: one op each (changed), or a group on one
    side for a group on the other (rewritten), or ops on one side only (only_a, only_b)."""

    status: str
    ops_a: tuple  # op ids in A's module, program order, each followed by the ops of its regions
    ops_b: tuple
    names_a: tuple  # the names of the group's ops, regions' ops left out (a reduce's body is the reduce)
    names_b: tuple
    what: tuple = ()  # changed: ("result type 2x16x64xf32 -> 32x64xf32", "comparison_direction GT -> GE")
    lines_a: tuple = ()  # each op's line in its file (0: not known), when the file could be read
    lines_b: tuple = ()

    def as_json(self) -> dict:
        return {"status": self.status, "ops_a": list(self.ops_a), "ops_b": list(self.ops_b),
                "names_a": list(self.names_a), "names_b": list(self.names_b), "what": list(self.what),
                "lines_a": list(self.lines_a), "lines_b": list(self.lines_b)}

    @classmethod
    def from_json(cls, d: dict) -> "OpGroup":
        return cls(d["status"], tuple(d["ops_a"]), tuple(d["ops_b"]), tuple(d["names_a"]), tuple(d["names_b"]),
                   tuple(d.get("what", ())), tuple(d.get("lines_a", ())), tuple(d.get("lines_b", ())))

    @property
    def pattern(self) -> tuple:
        """What the group is, without where: the same change in every layer has one pattern."""
        return (self.status, tuple(sorted(Counter(self.names_a).items())),
                tuple(sorted(Counter(self.names_b).items())), self.what)


@dataclass(frozen=True)
class OpDiff:
    """The op-level diff of one aligned pair of blocks."""

    matched: tuple  # (op id in A, op id in B): identical ops
    groups: tuple  # OpGroup: changed, rewritten, only_a, only_b, in A's program order (B's where A has none)
    ops_a: int  # ops of the block on each side, regions' ops included (they follow the op holding them)
    ops_b: int

    @property
    def identical(self) -> bool:
        return not self.groups

    def count(self, status: str) -> int:
        """Ops of A (of B for only_b) with this status, regions' ops included."""
        if status == "matched":
            return len(self.matched)
        return self._counts.get(status, 0)

    @cached_property
    def _counts(self) -> Counter:
        counts: Counter = Counter()
        for g in self.groups:
            counts[g.status] += len(g.ops_b if g.status == "only_b" else g.ops_a)
        return counts

    def status_of(self) -> tuple[dict, dict]:
        """Op id -> status, for each side."""
        a, b = {}, {}
        for x, y in self.matched:
            a[x] = b[y] = "matched"
        for g in self.groups:
            for x in g.ops_a:
                a[x] = g.status
            for y in g.ops_b:
                b[y] = g.status
        return a, b

    def as_json(self) -> dict:
        return {"ops_a": self.ops_a, "ops_b": self.ops_b,
                "counts": {s: self.count(s) for s in STATUSES},
                "matched": [list(p) for p in self.matched], "groups": [g.as_json() for g in self.groups]}

    @classmethod
    def from_json(cls, d: dict) -> "OpDiff":
        return cls(tuple(tuple(p) for p in d["matched"]), tuple(OpGroup.from_json(g) for g in d["groups"]),
                   d["ops_a"], d["ops_b"])


@dataclass(frozen=True)
class OpPattern:
    """One op-level change as it repeats over blocks of one kind: "in 12 of 12 layers, norm#0's
    batch_norm_training (A) is the reduce/rsqrt math of B"."""

    phase: str
    role: str
    ordinal: int
    group: OpGroup  # the first block's instance (its op ids are that block's)
    blocks: int  # blocks of this kind that have the change
    of: int  # blocks of this kind
    first: str  # the label of the first block that has it
    layered: bool  # blocks of this kind are per layer

    def as_json(self) -> dict:
        return {"phase": self.phase, "role": self.role, "ordinal": self.ordinal, "blocks": self.blocks,
                "of": self.of, "first": self.first, "layered": self.layered, "group": self.group.as_json()}


def fold_patterns(blocks: Iterable[BlockResult]) -> tuple:
    """The op-level changes of all aligned blocks (diff.result.BlockResult), each said once for the
    blocks of one kind (phase, role, ordinal) that have it, in program order of first appearance."""
    kinds: dict = {}
    for blk in blocks:
        kinds.setdefault((blk.phase, blk.role, blk.ordinal, bool(blk.layer)), []).append(blk)
    out = []
    for (phase, role, ordinal, _), members in kinds.items():
        seen: dict = {}
        for blk in members:
            if blk.op_diff is None:
                continue
            for g in blk.op_diff.groups:
                k = g.pattern
                if k in seen:
                    if seen[k][2] != blk.label:
                        seen[k][1] += 1
                        seen[k][2] = blk.label
                else:
                    seen[k] = [g, 1, blk.label, blk.label]
        for g, n, _, first in seen.values():
            out.append(OpPattern(phase, role, ordinal, g, n, len(members), first, bool(members[0].layer)))
    return tuple(out)


def op_totals(blocks: Iterable[BlockResult]) -> dict:
    """Ops of each status over all aligned blocks (diff.result.BlockResult) that have an op-level diff."""
    diffs = [d.op_diff for d in blocks if d.op_diff is not None]
    return {s: sum(d.count(s) for d in diffs) for s in STATUSES} if diffs else {}
