"""Block transplant: aligned blocks of B replaced by A's, their inputs and outputs found by value.

For the differences no named rewrite covers (ablate.rewrites), the coarser experiment: B with one
kind of block (norm, attention, MLP, embedding) computed by A's ops instead of its own. The diff
aligns the blocks (diff.align); what A's block reads is found among B's values, and what B's block
gave its readers among A's block's values, by running both programs on the same arguments (the
captures' weights and inputs) and comparing the values elementwise within B's parity tolerance,
through a reshape where one side flattens, a transpose where one side stores a weight transposed,
and a convert between integer types. A value found no way stops that block (listed, never guessed).
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..bench.arguments import signature_arguments
from ..common.errors import StackwarsError
from ..common.files import sidecar_of
from ..common.runtime import runtime
from ..diff import diff_files
from ..diff.block import top_of
from ..ir.parse import mlir_context
from .mlir import At, head, histogram, ops_of, shape_of
from .result import DEFAULT_ATOL, DEFAULT_RTOL
from .rewrites import CannotApply

if TYPE_CHECKING:
    import numpy as np
    from jaxlib.mlir import ir

KINDS = ("norm", "attention", "mlp", "embedding")  # the block roles (diff.block.ROLES) transplanted by default
# Ops a transplant may remove once nothing reads them: StableHLO's and CHLO's, but those with an
# effect (or a region that may hold one) only where listed as pure.
PURE_DIALECT = ("stablehlo.", "chlo.")
PURE = ("stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.sort", "stablehlo.scatter", "stablehlo.map",
        "stablehlo.select_and_scatter")
EFFECTS = ("stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng_bit_generator", "stablehlo.infeed",
           "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv", "stablehlo.after_all", "stablehlo.all_reduce",
           "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter", "stablehlo.collective_permute",
           "stablehlo.collective_broadcast", "stablehlo.optimization_barrier", "stablehlo.while", "stablehlo.if",
           "stablehlo.case", "stablehlo.composite")
MAX_PERMUTED_RANK = 5  # a value of higher rank is matched only as it is or reshaped, never transposed


class NothingToTransplant(CannotApply):
    """No block to transplant: none of the kind differs, or the files' arguments cannot be matched."""


@dataclass(frozen=True)
class Transplanted:
    """What a transplant did to B: `blocks` of `differing` aligned pairs of `kind` (a role, or a block
    label) replaced by A's; added/removed: op names -> count, whole module; skipped: (block label, why)
    for each differing pair left as it was."""

    kind: str
    blocks: int
    differing: int
    added: dict
    removed: dict
    skipped: tuple = ()
    labels: tuple = ()  # the transplanted blocks' labels (A's)
    adapters: dict = field(default_factory=dict)  # ops added to read one side's values as the other's: name -> count


def selects(kind: str, label: str, role: str) -> bool:
    """Whether the aligned block of `label` and `role` is one `kind` names: a role (every block of
    it) or a block's label as the diff prints it (`attention[3]#0`, `mlp[1]#0 (backward)`)."""
    return kind == label if is_label(kind) else kind == role


def is_label(kind: str) -> bool:
    """Whether `kind` names one block (its label: `norm[0]#1`) rather than a role."""
    return "#" in kind


def transplant_file(a: Path, b: Path, kind: str) -> tuple[str, Transplanted]:
    """B's text with every differing aligned block that `kind` selects (selects) replaced by A's,
    and what was done. Compiles and runs A and B on XLA:CPU (in a worker: isolate). Raises
    CannotApply where no block could be transplanted, saying why for the first."""
    from jaxlib.mlir import ir

    report = diff_files(a, b)
    pairs = [(d.a, d.b) for d in report.blocks if selects(kind, d.label, d.a.role) and (d.findings or any(d.delta.values()))]
    if not pairs:
        raise NothingToTransplant(kind, f"no aligned {kind} block differs between {Path(a).name} and {Path(b).name}")
    arrays_a, arrays_b, atol, rtol = _arguments(Path(a), Path(b), report.a.module, report.b.module)
    with mlir_context(), ir.Location.unknown():
        ma, mb = (ir.Module.parse(Path(p).read_bytes() if str(p).endswith(".mlirbc") else Path(p).read_text())
                  for p in (a, b))
        side_a, side_b = _Side(report.a, ma), _Side(report.b, mb)
        before = histogram(mb)
        plans, skipped = [], []
        for blk_a, blk_b in pairs:
            try:
                plans.append(_Plan(side_a, side_b, blk_a, blk_b))
            except CannotApply as e:
                skipped.append((blk_a.label, f"{e.op}: {e.why}"))
        if plans:
            want_a = {k for p in plans for k in p.needs_a}
            want_b = {k for p in plans for k in p.needs_b(side_b)}
            got_a = side_a.evaluate(sorted(want_a, key=_order), arrays_a)
            got_b = side_b.evaluate(sorted(want_b, key=_order), arrays_b)
            labels, adapters = [], Counter()
            for p in plans:
                try:
                    adapters.update(p.apply(side_a, side_b, got_a, got_b, atol, rtol))
                    labels.append(p.label)
                except CannotApply as e:
                    skipped.append((p.label, f"{e.op}: {e.why}"))
        if not plans or not labels:
            label, why = skipped[0]
            raise CannotApply(label, why)
        side_b.drop_dead()
        if not mb.operation.verify():
            raise StackwarsError(f"{b}: the module with A's {kind} blocks does not verify",
                                 fix="report it: a transplant made invalid StableHLO")
        after = histogram(mb)
        added = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(after) if after.get(k, 0) > before.get(k, 0)}
        removed = {k: before[k] - after.get(k, 0) for k in sorted(before) if before[k] > after.get(k, 0)}
        return mb.operation.get_asm(enable_debug_info=True), Transplanted(kind, len(labels), len(pairs), added, removed,
                                                                             tuple(skipped), tuple(labels),
                                                                             dict(sorted(adapters.items())))


def _arguments(a: Path, b: Path, ma, mb) -> tuple:
    """A's and B's argument arrays and B's parity tolerance; CannotApply unless both hold a
    capture's real values (synthetic ones on each side would hold unrelated weights)."""
    import numpy as np

    out = []
    for path, m in ((a, ma), (b, mb)):
        side, _ = sidecar_of(path)
        arrays, origin, _ = signature_arguments(m, side, np.random.default_rng(0))
        if origin.startswith("synthetic"):
            raise NothingToTransplant(str(path), "its arguments would be synthetic: a transplant finds A's values in B by "
                                         "running both on the same weights (a capture with its sidecar)")
        out.append(arrays)
    side, _ = sidecar_of(b)
    parity = (side.data.get("parity") or {}) if side else {}
    return out[0], out[1], float(parity.get("atol", DEFAULT_ATOL)), float(parity.get("rtol", DEFAULT_RTOL))


def _order(key) -> tuple:
    return (-1, key[1]) if key[0] == "arg" else key


class _Side:
    """One module as the diff read it (its model, segmentation) and as the bindings hold it: the
    entry function's top-level ops line up one to one with the model's."""

    def __init__(self, side, module):
        from jaxlib.mlir import ir

        self.model, self.module, self.blocks = side.module, module, side.segmentation.blocks
        entry = side.module.entry
        self.func = next(o for o in module.body.operations
                         if o.operation.name == "func.func" and ir.StringAttr(o.attributes["sym_name"]).value == entry.name)
        self.block = self.func.regions[0].blocks[0]
        self.ops = [o.operation for o in self.block.operations]
        tops = [i for i in entry.ops if side.module.ops[i].parent is None]
        if len(tops) != len(self.ops) or any(side.module.ops[i].name != o.name for i, o in zip(tops, self.ops)):
            raise CannotApply(side.module.source, "the bindings' ops do not line up with the diff's model")
        self.index = {op_id: k for k, op_id in enumerate(tops)}
        self.position = {o: k for k, o in enumerate(self.ops)}
        self.owners: dict = {}  # top-level op index -> labels of the blocks holding ops under it
        for blk in self.blocks:
            for k in self.tops(blk):
                self.owners.setdefault(k, set()).add(blk.label)
        self.current: dict = {}  # B: a value's key -> the value now standing for it (after a transplant)
        self.erased: set = set()  # B: top-level op indices removed by a transplant
        self.brought: dict = {}  # B: A's function name -> its name in B (functions a transplant copied)
        self.dead = {k for k, o in enumerate(self.ops) if o.results and not any(True for r in o.results for _ in r.uses)}

    def tops(self, blk) -> list:
        """The block's top-level op indices (an op in a region or a callee counts as the op holding it)."""

        entry = self.model.entry.name
        return sorted({self.index[top_of(self.model, op)] for op, _ in blk.ops
                       if op.func == entry and top_of(self.model, op) in self.index})

    def key(self, value) -> tuple | None:
        """A top-level value's name that survives a re-parse: ("arg", i) or (op index, result number);
        None for a value inside a region."""
        from jaxlib.mlir import ir

        owner = value.owner
        if isinstance(owner, ir.Block):
            return ("arg", ir.BlockArgument(value).arg_number) if owner == self.block else None
        k = self.position.get(owner.operation if hasattr(owner, "operation") else owner)
        return None if k is None else (k, ir.OpResult(value).result_number)

    def value(self, key):
        if key in self.current:
            return self.current[key]
        return self.block.arguments[key[1]] if key[0] == "arg" else self.ops[key[0]].results[key[1]]

    def evaluate(self, keys: list, arrays: list) -> dict:
        """key -> the value's array, the module compiled on XLA:CPU with those values as extra results."""
        import numpy as np
        from jaxlib.mlir import ir

        if not keys:
            return {}
        copy = ir.Module.parse(self.module.operation.get_asm(enable_debug_info=True))
        twin = _Side.__new__(_Side)
        twin.func = next(o for o in copy.body.operations
                         if o.operation.name == "func.func" and o.attributes["sym_name"] == self.func.attributes["sym_name"])
        twin.block = twin.func.regions[0].blocks[0]
        twin.ops, twin.current = [o.operation for o in twin.block.operations], {}
        ret = twin.ops[-1]
        extra = [twin.value(k) for k in keys]
        results = list(ret.operands) + extra
        At(ret).op("func.return", [], results)
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(twin.func.attributes["function_type"]).value)
        twin.func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), [v.type for v in results]))
        if "res_attrs" in twin.func.attributes:
            old = list(ir.ArrayAttr(twin.func.attributes["res_attrs"]))
            twin.func.attributes["res_attrs"] = ir.ArrayAttr.get(old + [ir.DictAttr.get({})] * len(extra))
        rt = runtime("cpu")
        exe = rt.compile(copy.operation.get_asm(), "transplant")
        outs = [np.asarray(x) for x in rt.run(exe, rt.put(arrays, exe))]
        return dict(zip(keys, outs[len(outs) - len(extra):]))

    def drop_dead(self) -> None:
        """Remove what only B's removed blocks read: top-level ops of B whose results nothing reads
        now (a mask only B's attention used), last first, where they were read before and compute
        without effects; then the private functions nothing calls (MLIR's symbol-dce)."""
        from jaxlib.mlir import passmanager

        for k in range(len(self.ops) - 1, -1, -1):
            if k in self.erased or k in self.dead or not self.ops[k].results or self.ops[k].name not in PURE and \
                    not self.ops[k].name.startswith(PURE_DIALECT):
                continue
            if self.ops[k].name in EFFECTS or self.ops[k].regions and self.ops[k].name not in PURE:
                continue
            if not any(True for r in self.ops[k].results for _ in r.uses):
                self.ops[k].erase()
                self.erased.add(k)
        passmanager.PassManager.parse("builtin.module(symbol-dce)").run(self.module.operation)


class _Plan:
    """One aligned pair, read from the two modules before anything changes: A's ops to clone and
    the values they read from outside (keys in A; those a constant or iota makes are cloned too),
    the A values they give, B's ops to remove, what those read and the values they give (keys in B)."""

    def __init__(self, side_a: _Side, side_b: _Side, blk_a, blk_b):
        self.label = blk_a.label
        self.clone, remove = side_a.tops(blk_a), side_b.tops(blk_b)
        if not self.clone or not remove:
            raise CannotApply(self.label, "a side's block has no op in the entry function")
        # A constant (or iota) is no block's own: A's is cloned with the block; B's stays where
        # something outside the block reads it too.
        inside = {side_b.ops[k] for k in remove}
        remove = [k for k in remove if not _is_constant(side_b.ops[k]) or
                  all(_top(side_b, u.owner) in inside for r in side_b.ops[k].results for u in r.uses)]
        for side, ks, own in ((side_a, self.clone, blk_a.label), (side_b, remove, blk_b.label)):
            for k in ks:
                others = side.owners.get(k, set()) - {own}
                if others and not _is_constant(side.ops[k]):
                    raise CannotApply(head(side.ops[k]), f"holds ops of {own} and of {sorted(others)[0]}: "
                                                         "it cannot move alone")
                if side.ops[k].name == "func.return":
                    raise CannotApply(head(side.ops[k]), "is the function's return")
        self.remove = set(remove)
        self.reads = _reads(side_a, self.clone)
        self.constants = {k for k in self.reads if k[0] != "arg" and _is_constant(side_a.ops[k[0]])}
        self.b_reads = set(_reads(side_b, remove))
        self.gives = _given(side_b, remove)
        if not self.gives:
            raise CannotApply(self.label, "nothing outside B's block reads what it computes")
        self.a_gives = _given(side_a, self.clone)
        self.a_values = [(k, r) for k in self.clone for r in range(len(side_a.ops[k].results))]
        self.sizes = {_size(side_a.value(k)) for k in self.reads if k not in self.constants}

    @property
    def needs_a(self) -> set:
        return (set(self.reads) - self.constants) | set(self.a_values)

    def needs_b(self, side_b) -> set:
        """B's values that may stand for A's reads (top-level values outside the block, of a size some
        read has) and the values B's block gives."""
        out = set(self.gives)
        for k, o in enumerate(side_b.ops):
            if k not in self.remove:
                out.update((k, r) for r, v in enumerate(o.results) if _size(v) in self.sizes)
        out.update(("arg", i) for i, v in enumerate(side_b.block.arguments) if _size(v) in self.sizes)
        return out

    def apply(self, side_a, side_b, got_a, got_b, atol, rtol) -> Counter:
        """Find every value first (CannotApply, B untouched, where one is missing); then clone A's
        ops before the first reader of B's block (located as B's block), reading their inputs from
        the B values found equal, point B's readers at the A values found equal, and remove B's block.
        Returns the ops added to read one side's values as the other's (transpose, reshape, convert)."""
        gives = {k: side_b.value(k) for k in self.gives}
        removed = {side_b.ops[k] for k in self.remove}
        tops = [_top(side_b, use.owner) for v in gives.values() for use in v.uses]
        tops = [t for t in tops if t is not None and t not in removed]
        if not tops:
            raise CannotApply(self.label, "nothing outside B's block reads what it computes")
        place = {o.operation: k for k, o in enumerate(side_b.block.operations)}
        anchor = min(tops, key=lambda t: place[t])
        found = {ka: self._found(got_a[ka], side_b, got_b, place, place[anchor], atol, rtol)
                 for ka in self.reads if ka not in self.constants}
        giving = {kb: self._giving(got_b[kb], got_a, atol, rtol) for kb in self.gives}
        last_first = sorted(removed, key=lambda o: -place[o])  # before any change: an op's hash moves with its uses
        at = At(anchor)
        at.loc = _common_location(list(removed))
        values = {}
        for ka in sorted(self.constants, key=_order):
            new = side_a.ops[ka[0]].clone(ip=at.ip)
            _relocate(new, at.loc)
            values[side_a.value(ka)] = new.results[ka[1]]
        made = Counter()
        for ka, (kb, how) in found.items():
            values[side_a.value(ka)] = read_as(at, side_b.value(kb), how, got_a[ka], made)
        for k in self.clone:
            old = side_a.ops[k]
            new = old.clone(ip=at.ip)
            _relocate(new, at.loc)
            _rewire(new, values)
            _bring_callees(new, side_a, side_b)
            for r_old, r_new in zip(old.results, new.results):
                values[r_old] = r_new
        for kb, (ka, how) in giving.items():
            v_new = read_as(at, values[side_a.value(ka)], how, got_b[kb], made)
            gives[kb].replace_all_uses_with(v_new)
            side_b.current[kb] = v_new
        for o in last_first:
            o.erase()
        side_b.erased |= self.remove
        return made

    def _found(self, want, side_b, got_b, place, before: int, atol, rtol) -> tuple:
        """(B's key, how to read it) for the B value equal to A's read `want`, defined before position
        `before` and outside B's block: B's block's own reads first, then the function's arguments,
        then any other, the nearest first. CannotApply if none."""
        def usable(kb) -> bool:
            if kb in self.gives or kb[0] in self.remove:
                return False
            if kb[0] == "arg":
                return True
            if kb[0] in side_b.erased and kb not in side_b.current:
                return False
            owner = side_b.value(kb).owner
            return place.get(owner.operation if hasattr(owner, "operation") else owner, before) < before

        tiers = ([k for k in got_b if k in self.b_reads], [k for k in got_b if k[0] == "arg"], list(got_b))
        seen = set()
        for tier in tiers:
            for kb in sorted((k for k in tier if k not in seen), key=lambda k: -_order(k)[0]):
                seen.add(kb)
                if usable(kb):
                    how = reading(got_b[kb], want, atol, rtol)
                    if how is not None:
                        return kb, how
        raise CannotApply(self.label, f"A's block reads a {_describe(want)} that no value of B holds")

    def _giving(self, want, got_a, atol, rtol) -> tuple:
        """(A's key, how to read it) for the A value equal to what B's block gave: A's block's
        outputs first, then its other values, then what it reads (a value passed through)."""
        order = self.a_gives + [k for k in self.a_values if k not in self.a_gives] + \
            [k for k in self.reads if k not in self.constants]
        for ka in order:
            if ka in got_a:
                how = reading(got_a[ka], want, atol, rtol)
                if how is not None:
                    return ka, how
        raise CannotApply(self.label, f"B's block gives a {_describe(want)} that no value of A's block holds")


def _given(side: _Side, ks: list) -> list:
    """Keys of the results of the ops `ks` read by an op outside them."""
    inside = {side.ops[k] for k in ks}
    return [(k, r) for k in ks for r, v in enumerate(side.ops[k].results)
            if any(_top(side, u.owner) not in inside for u in v.uses)]


def _reads(side: _Side, ks: list) -> list:
    """Keys of the top-level values the ops `ks` (and the ops in their regions) read from outside them."""
    inside = {side.ops[k] for k in ks}
    out = []
    for k in ks:
        for o in _walk(side.ops[k]):
            for v in o.operands:
                key = side.key(v)
                if key is None or (key[0] != "arg" and side.ops[key[0]] in inside) or key in out:
                    continue
                out.append(key)
    return out


def _walk(op) -> list:
    """`op` and every op in its regions, in order."""
    return [op] + ops_of(op)


def _top(side: _Side, op):
    """The op at the top of the entry function holding `op` (itself if there); None if outside it."""
    op = op.operation if hasattr(op, "operation") else op
    while op is not None:
        parent = op.parent
        if parent is None:
            return None
        if parent.name == "func.func":
            return op if parent == side.func.operation else None
        op = parent
    return None


def _is_constant(op) -> bool:
    return op.name in ("stablehlo.constant", "stablehlo.iota") and not len(op.operands)


def _size(value) -> int:
    from jaxlib.mlir import ir

    return math.prod(ir.RankedTensorType(value.type).shape)


def _describe(array) -> str:
    return f"{array.dtype}[{','.join(map(str, array.shape))}]"


def reading(src: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> tuple[int, ...] | None:
    """How `src` (an array) is read to give `want`: a permutation of its dimensions (the identity
    where it only needs a reshape) after which its elements in order equal want's, within atol +
    rtol * |want| (an infinity or NaN only where want has the same; integers and booleans exactly,
    across integer types); None where no such reading exists. The multisets of values are compared
    first (counts of infinities and NaNs, sums and extremes of the finite values), so only a
    plausible pair is permuted."""
    import numpy as np

    if src.size != want.size or src.size == 0:
        return None
    kinds = {np.dtype(src.dtype).kind, np.dtype(want.dtype).kind}
    if "f" in kinds and kinds != {"f"} or "b" in kinds and kinds != {"b"}:
        return None
    if "f" in kinds and src.dtype != want.dtype:
        return None
    exact = "f" not in kinds
    perms = [tuple(range(src.ndim))]
    if 1 < src.ndim <= MAX_PERMUTED_RANK:
        perms += [p for p in itertools.permutations(range(src.ndim)) if p != perms[0]]
    if exact:
        if src.min() != want.min() or src.max() != want.max() or \
                np.sort(src, axis=None).tolist() != np.sort(want, axis=None).tolist():
            return None
        flat = want.ravel()
        return next((p for p in perms if np.array_equal(np.transpose(src, p).ravel(), flat)), None)
    x, y = src.astype(np.float64), want.astype(np.float64)
    if any(int(f(x).sum()) != int(f(y).sum()) for f in (np.isposinf, np.isneginf, np.isnan)):
        return None
    fx, fy = x[np.isfinite(x)], y[np.isfinite(y)]
    if fy.size:
        if abs(fx.sum() - fy.sum()) > np.abs(fy).sum() * rtol + atol * fy.size:
            return None
        if abs(fx.max() - fy.max()) > atol + rtol * abs(fy.max()) or \
                abs(fx.min() - fy.min()) > atol + rtol * abs(fy.min()):
            return None
    flat = y.ravel()
    for p in perms:
        z = np.transpose(x, p).ravel()
        same = (z == flat) | (np.isnan(z) & np.isnan(flat))
        with np.errstate(invalid="ignore"):
            if np.all(same | (np.abs(z - flat) <= atol + rtol * np.abs(flat))):
                return p
    return None


def read_as(at: At, value: ir.Value, perm: tuple, want: np.ndarray, made: Counter[str] | None = None) -> ir.Value:
    """`value` read through transpose(perm), a reshape to want's shape and a convert to its type;
    `made` (a Counter), if given, counts the ops added."""
    from jaxlib.mlir import ir

    made = Counter() if made is None else made
    if list(perm) != list(range(len(perm))):
        shape = shape_of(value)
        t = at.tensor([shape[i] for i in perm], ir.RankedTensorType(value.type).element_type)
        value = at.op("stablehlo.transpose", [t], [value], {"permutation": ir.DenseI64ArrayAttr.get(list(perm))})
        made["stablehlo.transpose"] += 1
    if shape_of(value) != list(want.shape):
        value = at.reshape(value, list(want.shape))
        made["stablehlo.reshape"] += 1
    element = _element(want.dtype, ir)
    if element is not None and ir.RankedTensorType(value.type).element_type != element:
        value = at.op("stablehlo.convert", [at.tensor(list(want.shape), element)], [value])
        made["stablehlo.convert"] += 1
    return value


def _element(dtype, ir):
    import numpy as np

    d = np.dtype(dtype)
    if d.kind == "b":
        return ir.IntegerType.get_signless(1)
    if d.kind in "iu":
        width = d.itemsize * 8
        return ir.IntegerType.get_signless(width) if d.kind == "i" else ir.IntegerType.get_unsigned(width)
    return None  # floats: read only within one type (reading)


def _rewire(op, values: dict) -> None:
    """Point every operand of `op` and of the ops in its regions that `values` maps (A's value -> B's) at its B value."""
    for o in _walk(op):
        for i, v in enumerate(o.operands):
            if v in values:
                o.operands[i] = values[v]


def _relocate(op, loc) -> None:
    for o in _walk(op):
        o.location = loc


def _common_location(ops: list):
    """The location most of `ops` carry (B's block's: the diff then finds the new ops in it)."""
    from collections import Counter

    counts = Counter(str(o.location) for o in ops)
    text = counts.most_common(1)[0][0]
    return next(o.location for o in ops if str(o.location) == text)


def _bring_callees(op, side_a: _Side, side_b: _Side) -> None:
    """Every function a cloned op calls (and those they call), copied from A's module into B's under
    a name B does not use (B's own, where it holds the same function)."""
    from jaxlib.mlir import ir

    for o in _walk(op):
        if o.name != "func.call":
            continue
        name = ir.FlatSymbolRefAttr(o.attributes["callee"]).value
        o.attributes["callee"] = ir.FlatSymbolRefAttr.get(_brought(name, side_a, side_b))


def _brought(name: str, side_a: _Side, side_b: _Side) -> str:
    from jaxlib.mlir import ir

    renames = side_b.brought
    if name in renames:
        return renames[name]
    funcs_a = {ir.StringAttr(o.attributes["sym_name"]).value: o.operation for o in side_a.module.body.operations
               if o.operation.name == "func.func"}
    funcs_b = {ir.StringAttr(o.attributes["sym_name"]).value: o.operation for o in side_b.module.body.operations
               if o.operation.name == "func.func"}
    src = funcs_a.get(name)
    if src is None:
        raise CannotApply(name, "A's block calls a function A's module does not define")
    if name in funcs_b and funcs_b[name].is_structurally_equivalent(src):
        renames[name] = name
        return name
    new = name
    k = 0
    while new in funcs_b:
        k += 1
        new = f"{name}_a{k}"
    renames[name] = new
    copy = src.clone(ip=ir.InsertionPoint(side_b.module.body))
    copy.attributes["sym_name"] = ir.StringAttr.get(new)
    copy.attributes["sym_visibility"] = ir.StringAttr.get("private")
    for region in copy.regions:
        for block in region.blocks:
            for inner in block.operations:
                _bring_callees(inner.operation, side_a, side_b)
    return new
