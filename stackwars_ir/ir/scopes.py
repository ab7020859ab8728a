"""Which op provenance names a model's module, and which only JAX's own scopes (loops, remat)."""
from __future__ import annotations

import functools

from .model import Module

# The scope jax.checkpoint (nn.remat, nnx.remat) gives the forward ops it recomputes in the backward
# (the torch_xla capture names its recomputation with it too), and the words around it.
REMAT = "rematted_computation"
REMAT_WORDS = frozenset({"checkpoint", "remat", REMAT, "remat2"})

# Words of the paths JAX gives a loop's own plumbing (the counter, each trip's slice of the stacked
# parameters): `Model.while.body`; such ops stay "other", not a scanned layer's residual.
LOOP_WORDS = frozenset({"while", "body", "cond", "scan"})
# The call JAX wraps a scanned body in: `while.body.closed_call.layers` (jax <= 0.10),
# `while.body.eval_jaxpr.layers` (jax 0.12).
CALL_WORDS = frozenset({"closed_call", "eval_jaxpr"})

AUTO_PROVENANCE = 0.5  # diff --mode auto segments by module paths when at least this share of ops has one


@functools.lru_cache(maxsize=65536)
def loop_scoped(path: str) -> bool:
    """Whether a path holds only a loop's scopes (`while.body`, `while.cond`): its plumbing."""
    words = [w for w in path.split(".") if w and w not in CALL_WORDS and w not in REMAT_WORDS]
    return bool(words) and all(w in LOOP_WORDS for w in words)


@functools.lru_cache(maxsize=65536)
def names_a_module(path: str) -> bool:
    """Whether a path names a module, not only JAX's own scopes: a loop's plumbing (`while.body`),
    rematerialization's, or an einsum's spec (`bthd,bshd->bhts`), which a model without named
    scopes (Flax NNX) carries on every op of a scanned body."""
    return any(w and w not in LOOP_WORDS and w not in REMAT_WORDS and w not in CALL_WORDS and "->" not in w
               for w in path.split("."))


def phases(module: Module) -> dict | None:
    """Op id -> phase for a training step (any op under jvp or transpose), else None."""
    items = [(op, ph) for (op, _), ph in zip(module.inlined, module.inlined_phases) if not op.name.endswith("return")]
    if not any(ph for _, ph in items):
        return None
    return {id(op): ph for op, ph in items}


_UNSET: dict = {}


def counted_ops(module: Module, found: dict | None = _UNSET) -> list:
    """The (op, path) pairs whose provenance decides how a module is segmented: the entry's
    top-level ops (calls inlined), a training step's optimizer left out (its ops have no module path
    by nature), and a loop's own plumbing left out (it names no module either way). `found`: the
    module's phases(), where the caller has them."""
    items = [(op, path) for op, path in module.inlined if not op.name.endswith("return")]
    entry = module.entry.name
    top = [(op, path) for op, path in items if op.parent is None or op.func != entry]
    found = phases(module) if found is _UNSET else found
    if found:
        top = [(op, path) for op, path in top if found.get(id(op))]
    return [(op, path) for op, path in top if not loop_scoped(path)] or top


def path_coverage(module: Module, found: dict | None = _UNSET) -> float:
    """The share of counted_ops that carry a module path (diff segments by paths from AUTO_PROVENANCE up);
    `found`: the module's phases(), where the caller has them."""
    top = counted_ops(module, found)
    return sum(1 for _, p in top if names_a_module(p)) / len(top) if top else 0.0


def named_alike(module: Module, other: Module) -> float:
    """The share of `module`'s counted_ops whose path, or a module above it, is a path of `other`'s
    ops: how much of a twin's provenance names the modules its PyTorch side names."""
    top = counted_ops(module)
    theirs = {p for _, p in counted_ops(other) if p}

    def alike(path: str) -> bool:
        words = path.split(".")
        return any(".".join(words[:i]) in theirs for i in range(len(words), 0, -1))

    return sum(1 for _, p in top if p and alike(p)) / len(top) if top else 0.0
