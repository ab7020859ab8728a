"""Alignment: map the blocks of one segmentation onto another's, like with like, layer by layer."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .block import LAYERED, Block
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

    blocks_a, blocks_b = unrolled(a.blocks, b.blocks), unrolled(b.blocks, a.blocks)
    blocks_b, renamed = by_names(blocks_a, blocks_b)
    by_key = _align_by(blocks_a, blocks_b, lambda blk: blk.key, "key")
    if by_key.coverage >= KEY_ENOUGH:
        named = f"; {renamed} numbered by their module names, not their order in the file" if renamed else ""
        return replace(by_key, reason=f"pairing by key covered {by_key.coverage:.0%} of blocks (enough from "
                                      f"{KEY_ENOUGH:.0%}){named}")
    by_order = _align_by(_numbered(blocks_a), _numbered(blocks_b), lambda item: item[0], "order")
    why = f"pairing by key covered {by_key.coverage:.0%} (under {KEY_ENOUGH:.0%}), by order {by_order.coverage:.0%}"
    # Order wins only by pairing more blocks that are something: pairing the k-th unnamed "other"
    # block of each side (a loop's plumbing with another program's glue) says nothing.
    best = by_key if _named_coverage(by_key) >= _named_coverage(by_order) else by_order
    return replace(best, reason=why + (": kept key" if best is by_key else ": fell back to order"))


def by_names(blocks_a: Iterable[Block], blocks_b: Sequence[Block]) -> tuple[tuple, int]:
    """B's blocks, each of a layer's several blocks of one role numbered as A's block of the same
    module path is, where both sides name the same modules there (each once): an exporter that
    prints Whisper's conv2 before conv1 must not pair conv1 with conv2. With how many were renumbered."""
    from dataclasses import replace

    def groups(blocks):
        out: dict = {}
        for blk in blocks:
            out.setdefault((blk.layer, blk.role, blk.phase, blk.loop), []).append(blk)
        return out

    mine, theirs = groups(blocks_a), groups(blocks_b)
    ordinal: dict = {}
    for g, bs in theirs.items():
        names_a, names_b = [b.name for b in mine.get(g, ())], [b.name for b in bs]
        if len(names_b) < 2 or sorted(names_a) != sorted(names_b) or len(set(names_b)) != len(names_b) \
                or not all(names_b):
            continue
        wanted = {b.name: b.ordinal for b in mine[g]}
        ordinal.update({id(b): wanted[b.name] for b in bs if wanted[b.name] != b.ordinal})
    return tuple(replace(b, ordinal=ordinal[id(b)]) if id(b) in ordinal else b for b in blocks_b), len(ordinal)


def _named_coverage(al: Alignment) -> float:
    """The coverage of an alignment counting only blocks with a role (not "other")."""
    def named(blocks):
        return [b for b in blocks if b.role != "other"]

    pairs = [p for p in al.pairs if p[0].role != "other" or p[1].role != "other"]
    total = len(pairs) + max(len(named(al.only_a)), len(named(al.only_b)))
    return len(pairs) / total if total else 1.0


def unrolled(blocks: Sequence[Block], other: Iterable[Block]) -> tuple:
    """`blocks` with each block of a counted loop's body (a scanned layer's norm, attention, MLP,
    residual) repeated once per trip as layers 0, 1, ... (its layer numbers inside the body after
    those), where `other` has such blocks layer by layer: each copy is the same ops, labelled
    scanned, and pairs with the other side's layer of that number. A side that scans too keeps
    its loop's blocks, which pair with the other's by loop."""
    from dataclasses import replace

    layered = {(b.role, b.phase) for b in other if b.layer and b.loop < 0 and b.role in LAYERED}
    repeat = [blk.loop >= 0 and blk.role in LAYERED and (blk.role, blk.phase) in layered for blk in blocks]
    out, done = [], set()
    for blk, r in zip(blocks, repeat):
        if not r:
            out.append(blk)
        elif (blk.loop, blk.phase) not in done:  # the loop's body, layer by layer, where it starts
            done.add((blk.loop, blk.phase))
            body = [b for b, rb in zip(blocks, repeat) if rb and (b.loop, b.phase) == (blk.loop, blk.phase)]
            out += [replace(b, layer=(i,) + b.layer, loop=-1) for i in range(blk.trips) for b in body]
    return tuple(out)


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


