"""Alignment: map the blocks of one segmentation onto another's, like with like, layer by layer."""
from __future__ import annotations

from dataclasses import dataclass

from .blocks import Segmentation


@dataclass(frozen=True)
class Alignment:
    """Matched block pairs in A's order, and the blocks of each side left without a partner."""

    pairs: tuple  # ((Block, Block), ...)
    only_a: tuple
    only_b: tuple
    method: str  # "key": same layer, role and ordinal; "order": k-th block of a role to k-th
    reason: str = ""  # why this method: the coverages that chose it

    @property
    def coverage(self) -> float:
        total = len(self.pairs) + max(len(self.only_a), len(self.only_b))
        return len(self.pairs) / total if total else 1.0


KEY_ENOUGH = 0.8  # a pairing by key that leaves more than a fifth of the blocks unpaired falls back to order


def align(a: Segmentation, b: Segmentation) -> Alignment:
    """Pair blocks by (layer, role, ordinal); where that leaves over a fifth unpaired (different
    naming of layers, one side without locations), pair the k-th block of each role instead."""
    from dataclasses import replace

    by_key = _align_by(a.blocks, b.blocks, lambda blk: blk.key, "key")
    if by_key.coverage >= KEY_ENOUGH:
        return replace(by_key, reason=f"pairing by key covered {by_key.coverage:.0%} of blocks (enough from "
                                      f"{KEY_ENOUGH:.0%})")
    by_order = _align_by(_numbered(a.blocks), _numbered(b.blocks), lambda item: item[0], "order")
    why = f"pairing by key covered {by_key.coverage:.0%} (under {KEY_ENOUGH:.0%}), by order {by_order.coverage:.0%}"
    best = by_key if by_key.coverage >= by_order.coverage else by_order
    return replace(best, reason=why + (": kept key" if best is by_key else ": fell back to order"))


def _numbered(blocks) -> list:
    """(role, k) for the k-th block of each role, layers first, then program order."""
    position = {id(b): i for i, b in enumerate(blocks)}
    out, counts = [], {}
    for blk in sorted(blocks, key=lambda b: (b.role, b.layer, b.ordinal, position[id(b)])):
        k = counts.get(blk.role, 0)
        counts[blk.role] = k + 1
        out.append(((blk.role, k), blk))
    out.sort(key=lambda item: position[id(item[1])])
    return out


def _align_by(a_items, b_items, key, method: str) -> Alignment:
    unwrap = (lambda item: item[1]) if method == "order" else (lambda item: item)
    b_by_key = {}
    for item in b_items:
        b_by_key.setdefault(key(item), item)
    pairs, only_a, used = [], [], set()
    for item in a_items:
        other = b_by_key.get(key(item))
        if other is not None and key(item) not in used:
            used.add(key(item))
            pairs.append((unwrap(item), unwrap(other)))
        else:
            only_a.append(unwrap(item))
    only_b = [unwrap(item) for item in b_items if key(item) not in used]
    return Alignment(tuple(pairs), tuple(only_a), tuple(only_b), method)


