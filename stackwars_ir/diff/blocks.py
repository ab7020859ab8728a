"""Segmentation: cut a module's ops into semantic blocks (embedding, norm, attention, MLP, conv, ...).

Two strategies, one module each: by provenance (diff/provenance.py: an op's module path names its
layer and role) and, for files without locations, by structure (diff/structure.py: anchor ops claim
their nearest ops in the dataflow graph); diff/block.py holds the Block both return.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..ir.loops import loop_context
from ..ir.model import Module
from ..ir.scopes import AUTO_PROVENANCE, path_coverage, phases as find_phases
from .block import Block
from .provenance import backward_by_saved, by_provenance, split_coarse, split_shared
from .structure import by_structure, loops_by_structure, scans_layers

@dataclass(frozen=True)
class Segmentation:
    """A module cut into blocks; `mode` says which evidence was used."""

    module: Module = field(repr=False)
    mode: str  # "provenance" | "structure"
    blocks: tuple
    coverage: float  # share of ops whose location names a module path
    reason: str = ""  # why this mode: asked for, or auto's choice from the coverage


def segment(module: Module, mode: str = "auto", roles: tuple = ()) -> Segmentation:
    """Blocks of the entry function (calls inlined). mode: auto, provenance or structure. `roles`:
    the adapter's own (word, role) pairs for module-path words the generic table does not know."""
    items = [(op, path) for op, path in module.inlined if not op.name.endswith("return")]
    phases = find_phases(module)
    # A training step's optimizer and a loop's own plumbing (JAX's `while.body`: each trip's slice of
    # the stacked parameters) name no module by nature: they count neither way (ir/scopes.py).
    coverage = path_coverage(module, phases)
    use = mode if mode != "auto" else ("provenance" if coverage >= AUTO_PROVENANCE else "structure")
    reason = (f"--mode {mode}" if mode != "auto" else
              f"auto: {coverage:.0%} of ops carry a module path ({'at least' if use == 'provenance' else 'under'} "
              f"{AUTO_PROVENANCE:.0%})")
    loops = _loops(module)
    if use == "provenance":
        blocks = split_coarse(module, split_shared(module, by_provenance(items, phases, roles, loops)))
        if phases and loops:
            blocks = backward_by_saved(module, blocks)
    else:
        blocks = loops_by_structure(module, by_structure(module, items, layered=scans_layers(module, loops)), loops)
    blocks = _embeddings_by_size(module, blocks)
    return Segmentation(module, use, tuple(blocks), round(coverage, 4), reason)


def _loops(module: Module) -> dict:
    """id(op) -> (k, trips) of the counted loop whose body runs it (ir.loops.loop_context)."""
    if not any(loop.counted for loop in module.loops.values()):
        return {}

    return {id(op): ctx for (op, _), ctx in zip(module.inlined, loop_context(module)) if ctx is not None}


def _embeddings_by_size(module: Module, blocks: list) -> list:
    """Number embedding blocks by table size, largest first (token, position, token type), so
    they pair up whatever order an exporter printed them in."""
    def table(b: Block) -> int:
        sizes = [module.values[op.operands[0]].type.numel or 0 for op, _ in b.ops
                 if op.name in ("stablehlo.gather", "func.call") and op.operands]
        return max(sizes, default=0)

    renumber = {}
    for phase in {b.phase for b in blocks}:  # a training step numbers each phase's embeddings alike
        emb = sorted((b for b in blocks if b.role == "embedding" and not b.layer and b.phase == phase),
                     key=lambda b: (-table(b), b.ordinal))
        renumber.update({id(b): i for i, b in enumerate(emb)})
    return [dataclasses.replace(b, ordinal=renumber[id(b)]) if id(b) in renumber else b for b in blocks]
