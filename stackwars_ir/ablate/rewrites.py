"""Rewrites of one exporter's lowering into another's, made on the module through the MLIR bindings.

Each rewrite turns every site of one kind of difference the diff names (diff/findings.py) into the
form the other side uses, keeping what the program computes: a site's new ops carry the location of
the op they replace (so the diff puts them in the same block) and its results replace that op's
results. A rewrite never reads or writes the module's text; the caller prints the changed module.

Sources: batch_norm_training and batch_norm_grad as spelled out by XLA's BatchNormExpander
(xla/service/batchnorm_expander.cc) and by JAX's LayerNorm (mean, then the mean of the squared
deviations); JAX's `jnp.take` (negative indices wrapped, the lookup in the index's own type).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .mlir import At, float_of, head, histogram, int_of, is_float, ops_of, producer, replace, shape_of

if TYPE_CHECKING:
    from jaxlib.mlir import ir


class CannotApply(Exception):
    """A rewrite met a site it cannot turn into the other form: `op` (its printed form's head) and why."""

    def __init__(self, op: str, why: str) -> None:
        super().__init__(f"{op}: {why}")
        self.op, self.why = op, why


@dataclass(frozen=True)
class Rewrite:
    """One kind of difference and the rewrite that removes it.

    name: what the CLI and the reports call it (`--only NAME`); finding: the diff findings it
    removes, as finding_key names them (diff/findings.py `Finding.kind`, with the op of a high_level
    one); what: one line saying what it does; site: what it rewrites, as "B has no SITE" reads."""

    name: str
    finding: tuple
    what: str
    site: str
    topic: str = ""  # the diff's whole-module summary that restates its findings (diff.result.Summary.topic)


NORM = Rewrite("norm", ("high_level batch_norm_training", "high_level batch_norm_grad"), "batch_norm_training/batch_norm_grad spelled out as JAX lowers a norm "
               "(reduce for the mean, reduce of the squared deviation for the variance, rsqrt)",
               "batch_norm_training or batch_norm_grad", "normalization")
FLATTEN = Rewrite("flatten", ("flattening",), "dot_general on the operands before a flattening reshape "
                  "(rank kept, as JAX multiplies), its result reshaped to the flattened shape",
                  "dot_general reading a reshape that merges dimensions it can split", "flattening")
EMBEDDING = Rewrite("embedding", ("indices", "converts"), "constant index tables made iota; gather indices "
                    "converted to ui32 read in their own type with negative indices wrapped, as jnp.take does",
                    "constant position table (0, 1, ..., n-1) or gather index converted from signed to unsigned",
                    "embedding")
REWRITES = (NORM, FLATTEN, EMBEDDING)


def finding_key(kind: str, numbers: dict) -> str:
    """A diff finding's name as a rewrite's `finding` lists it: its kind, and for a high-level op
    one side alone uses, that op (`high_level batch_norm_training`)."""
    op = numbers.get("op") if kind == "high_level" else None
    return f"{kind} {str(op).split('.')[-1]}" if op else kind


def by_name(name: str) -> Rewrite:
    for r in REWRITES:
        if r.name == name:
            return r
    raise KeyError(name)


@dataclass(frozen=True)
class Applied:
    """What one rewrite did to a module: `sites` changed (ops replaced), and the op names added and
    removed (name -> count)."""

    rewrite: str
    sites: int
    added: dict
    removed: dict


REVERSIBLE = ("flatten",)  # rewrites that also run the other way round, where A has the form B lacks
REVERSED = " (reverse)"  # how Applied names a rewrite run the other way round: "flatten (reverse)"


def apply(module: ir.Module, rewrite: Rewrite, reverse: bool = False) -> Applied:
    """Rewrite every site of `rewrite` in `module` (an ir.Module of the jaxlib bindings) in place;
    CannotApply where a site cannot be rewritten (the module is then left half-rewritten: the caller
    parses a fresh copy for each variant). `reverse` (a REVERSIBLE rewrite): the other way round,
    into the form the rewrite removes (flatten: B's dot_generals flattened as A's are)."""
    if reverse and rewrite.name not in REVERSIBLE:
        raise ValueError(f"{rewrite.name} runs one way only")
    before = histogram(module)
    sites = {"norm": _norm, "flatten": _merge if reverse else _flatten, "embedding": _embedding}[rewrite.name](module)
    after = histogram(module)
    added = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) > before.get(k, 0)}
    removed = {k: before[k] - after.get(k, 0) for k in before if before[k] > after.get(k, 0)}
    return Applied(rewrite.name + (REVERSED if reverse else ""), sites, dict(sorted(added.items())),
                   dict(sorted(removed.items())))


# ---------------------------------------------------------------------------------------------- norm


def _norm(module) -> int:
    """batch_norm_training(x, scale, offset) -> (y, mean, var) and batch_norm_grad(x, scale, mean, var,
    dy) -> (dx, dscale, doffset), every one spelled out over the dimensions other than feature_index,
    with N their element count:
      mean = sum(x) / N;  d = x - mean;  var = sum(d * d) / N;  inv = rsqrt(var + eps)
      y = d * (inv * scale) + offset
      xhat = d * inv;  doffset = sum(dy);  dscale = sum(dy * xhat)
      dx = (scale * inv / N) * (N * dy - doffset - xhat * dscale)
    the forms of XLA's BatchNormExpander and of JAX's LayerNorm (variance E[(x - mean)^2])."""
    sites = 0
    for op in ops_of(module, "stablehlo.batch_norm_training") + ops_of(module, "stablehlo.batch_norm_grad"):
        at = At(op)
        eps, fi = float_of(op.attributes["epsilon"]), int_of(op.attributes["feature_index"])
        x = op.operands[0]
        shape = shape_of(x)
        element = at.ir.RankedTensorType(x.type).element_type
        if not is_float(element):
            raise CannotApply(head(op), f"element type {element} is not a float")
        dims = [d for d in range(len(shape)) if d != fi]
        n = 1
        for d in dims:
            n *= shape[d]
        c = [shape[fi]]
        count = at.splat(c, element, n)
        if op.name == "stablehlo.batch_norm_training":
            _, scale, offset = op.operands
            mean = at.binary("divide", at.sum(x, dims), count)
            d = at.binary("subtract", x, at.broadcast(mean, shape, [fi]))
            var = at.binary("divide", at.sum(at.binary("multiply", d, d), dims), count)
            inv = at.op("stablehlo.rsqrt", [var.type], [at.binary("add", var, at.splat(c, element, eps))])
            y = at.binary("add", at.binary("multiply", d, at.broadcast(at.binary("multiply", inv, scale), shape, [fi])),
                          at.broadcast(offset, shape, [fi]))
            replace(op, [y, mean, var])
        else:
            _, scale, mean, var, dy = op.operands
            inv = at.op("stablehlo.rsqrt", [var.type], [at.binary("add", var, at.splat(c, element, eps))])
            d = at.binary("subtract", x, at.broadcast(mean, shape, [fi]))
            xhat = at.binary("multiply", d, at.broadcast(inv, shape, [fi]))
            doffset = at.sum(dy, dims)
            dscale = at.sum(at.binary("multiply", dy, xhat), dims)
            factor = at.binary("divide", at.binary("multiply", scale, inv), count)
            inner = at.binary("subtract", at.binary("subtract", at.binary("multiply", dy, at.splat(shape, element, n)),
                                                    at.broadcast(doffset, shape, [fi])),
                              at.binary("multiply", xhat, at.broadcast(dscale, shape, [fi])))
            dx = at.binary("multiply", at.broadcast(factor, shape, [fi]), inner)
            replace(op, [dx, dscale, doffset])
        sites += 1
    return sites


# ---------------------------------------------------------------------------------------------- flatten


def _groups(before: list, after: list) -> list | None:
    """How a reshape from `before` to `after` merges consecutive dimensions: for each dimension of
    `after`, the dimensions of `before` it holds (None where the reshape does more than merge)."""
    groups, i = [], 0
    for size in after:
        group, prod = [], 1
        while i < len(before):
            group.append(i)
            prod *= before[i]
            i += 1
            if prod >= size:
                break
        if prod != size or not group:
            return None
        groups.append(group)
    while i < len(before) and before[i] == 1 and groups:  # trailing unit dimensions join the last group
        groups[-1].append(i)
        i += 1
    return groups if i == len(before) else None


def _flatten(module) -> int:
    """dot_general(reshape(x), w), the reshape merging consecutive dimensions of x, made
    dot_general(x, w) with its dimension numbers remapped (a merged free dimension becomes its
    parts; a merged batch or contracting dimension becomes its parts on both operands, so both must
    have been merged alike: a weight gradient's x^T dy over the flattened batch and sequence), then
    reshaped to the flattened result: the product runs at x's rank, as JAX's does, and every later
    op reads the same values."""
    from jaxlib.mlir import ir

    sites = 0
    for op in ops_of(module, "stablehlo.dot_general"):
        numbers = op.attributes["dot_dimension_numbers"]
        dn = {k: list(getattr(_dims(numbers), k)) for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract")}
        sides, flattening = [], []
        for operand in op.operands[:2]:
            src = producer(operand)
            g = _groups(shape_of(src.operands[0]), shape_of(operand)) if src is not None and src.name == "stablehlo.reshape" \
                else None
            full = shape_of(src.operands[0]) if g else []
            # a real merge: two or more dimensions longer than 1 in one group (dropping a unit
            # dimension, as both exporters do for a batch of 1, flattens nothing)
            sides.append((src.operands[0], g) if g and any(sum(full[i] > 1 for i in x) > 1 for x in g) else None)
            if sides[-1] is not None and src not in flattening:
                flattening.append(src)
        plan = _unflattened(sides, dn, [shape_of(v) for v in op.operands[:2]])
        if plan is None:
            continue
        reads, new = plan
        at = At(op)
        lhs, rhs = (o if r is None else r[0] if shape_of(r[0]) == r[1] else at.reshape(r[0], r[1])
                    for r, o in zip(reads, op.operands[:2]))
        result = ir.RankedTensorType(op.results[0].type)
        out_shape = _product_shape([shape_of(lhs), shape_of(rhs)], new)
        attrs = {name: op.attributes[name] for name in op.attributes}
        attrs["dot_dimension_numbers"] = ir.Attribute.parse(_dims_text(new))
        product = at.ir.Operation.create("stablehlo.dot_general", results=[at.tensor(out_shape, result.element_type)],
                                         operands=[lhs, rhs], attributes=attrs, loc=at.loc, ip=at.ip).results[0]
        replace(op, [product if out_shape == list(result.shape) else at.reshape(product, list(result.shape))])
        for reshape in flattening:  # the flattening reshape, where nothing else reads it
            if not list(reshape.results[0].uses):
                reshape.erase()
        sites += 1
    return sites


def _merge(module) -> int:
    """The flatten rewrite the other way round, where A flattens and B does not: each dot_general
    made as torch_xla writes it, every run of two or more dimensions of one kind merged into one by
    a reshape of its operand: batch dimensions (consecutive on both operands, paired in order),
    contracting dimensions (likewise), and each operand's free dimensions (consecutive); the product,
    at the lower rank, reshaped to the result's shape, so every later op reads the same values.
    `x @ W` over [2,16,64] becomes [32,64] @ W; a weight gradient's contraction over batch and
    sequence becomes one over their product."""
    from jaxlib.mlir import ir

    sites = 0
    for op in ops_of(module, "stablehlo.dot_general"):
        dn = {k: list(getattr(_dims(op.attributes["dot_dimension_numbers"]), k))
              for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract")}
        shapes = [shape_of(v) for v in op.operands[:2]]
        plan = _merged(dn, shapes)
        if plan is None:
            continue
        groups, new = plan
        at = At(op)
        operands = []
        for value, grouped, shape in zip(op.operands[:2], groups, shapes):
            target = [math.prod(shape[d] for d in g) for g in grouped]
            operands.append(value if target == shape else at.reshape(value, target))
        result = ir.RankedTensorType(op.results[0].type)
        out_shape = _product_shape([shape_of(v) for v in operands], new)
        attrs = {name: op.attributes[name] for name in op.attributes}
        attrs["dot_dimension_numbers"] = ir.Attribute.parse(_dims_text(new))
        product = at.ir.Operation.create("stablehlo.dot_general", results=[at.tensor(out_shape, result.element_type)],
                                         operands=operands, attributes=attrs, loc=at.loc, ip=at.ip).results[0]
        replace(op, [product if out_shape == list(result.shape) else at.reshape(product, list(result.shape))])
        sites += 1
    return sites


def _merged(dn: dict, shapes: list):
    """Which dimensions _merge merges: for each operand, its dimensions grouped (each group
    consecutive, in order), and the new dimension numbers; None where no run of two or more merges."""
    def run(ds: list) -> bool:
        return len(ds) >= 2 and ds == list(range(ds[0], ds[0] + len(ds)))

    free = [[i for i in range(len(s)) if i not in dn[f"{x}_batch"] + dn[f"{x}_contract"]]
            for x, s in zip(("lhs", "rhs"), shapes)]
    merge = {"batch": run(dn["lhs_batch"]) and run(dn["rhs_batch"]),
             "contract": run(dn["lhs_contract"]) and run(dn["rhs_contract"]) and
             [shapes[0][d] for d in dn["lhs_contract"]] == [shapes[1][d] for d in dn["rhs_contract"]],
             "free0": run(free[0]), "free1": run(free[1])}
    if not any(merge.values()):
        return None
    groups, index = [], []
    for n, (x, s) in enumerate(zip(("lhs", "rhs"), shapes)):
        grouped, at = [], {}
        for d in range(len(s)):
            kind = "batch" if d in dn[f"{x}_batch"] else "contract" if d in dn[f"{x}_contract"] else f"free{n}"
            if merge[kind] and grouped and grouped[-1][0] == kind:
                grouped[-1][1].append(d)
            else:
                grouped.append((kind, [d]))
            at[d] = len(grouped) - 1
        groups.append([g for _, g in grouped])
        index.append(at)
    new = {k: list(dict.fromkeys(index[0 if k.startswith("lhs") else 1][d] for d in dn[k])) for k in dn}
    return groups, new


def _dims(attr):
    """The four dimension lists of a #stablehlo.dot attribute (read from its printed form)."""
    import re
    from types import SimpleNamespace

    text = str(attr)

    def get(key):
        m = re.search(key + r"\s*=\s*\[([^\]]*)\]", text)
        return [int(x) for x in m.group(1).split(",") if x.strip()] if m else []

    return SimpleNamespace(lhs_batch=get("lhs_batching_dimensions"), rhs_batch=get("rhs_batching_dimensions"),
                           lhs_contract=get("lhs_contracting_dimensions"), rhs_contract=get("rhs_contracting_dimensions"))


def _dims_text(dn: dict) -> str:
    parts = []
    for key, name in (("lhs_batch", "lhs_batching_dimensions"), ("rhs_batch", "rhs_batching_dimensions"),
                      ("lhs_contract", "lhs_contracting_dimensions"), ("rhs_contract", "rhs_contracting_dimensions")):
        if dn[key]:
            parts.append(f"{name} = [{', '.join(map(str, dn[key]))}]")
    return "#stablehlo.dot<" + ", ".join(parts) + ">"


def _product_shape(shapes: list, dn: dict) -> list:
    """dot_general's result shape: batch dimensions, then lhs free, then rhs free, each in order."""
    lhs, rhs = shapes
    free_l = [i for i in range(len(lhs)) if i not in dn["lhs_batch"] + dn["lhs_contract"]]
    free_r = [i for i in range(len(rhs)) if i not in dn["rhs_batch"] + dn["rhs_contract"]]
    return [lhs[i] for i in dn["lhs_batch"]] + [lhs[i] for i in free_l] + [rhs[i] for i in free_r]


def _unflattened(sides: list, dn: dict, shapes: list):
    """The product on the unflattened operands: for each operand, its source and the shape to read
    it in (None: the operand as it is), and the new dimension numbers; None where nothing can be
    unflattened. A merged free dimension is split into its parts; a merged batch or contracting
    dimension only where its partner on the other operand splits into the same sizes, and is kept
    merged otherwise (the operand then read through a reshape that merges only those)."""
    if sides[0] is None and sides[1] is None:
        return None
    maps, full = [], []
    for side, shape in zip(sides, shapes):
        maps.append(side[1] if side else [[i] for i in range(len(shape))])
        full.append(shape_of(side[0]) if side else shape)
    split = [[len(g) > 1 for g in m] for m in maps]
    for kl, kr in (("lhs_batch", "rhs_batch"), ("lhs_contract", "rhs_contract")):
        for dl, dr in zip(dn[kl], dn[kr]):
            if [full[0][i] for i in maps[0][dl]] != [full[1][i] for i in maps[1][dr]]:
                split[0][dl] = split[1][dr] = False
    if not any(any(s) for s in split):
        return None
    reads, where = [], []
    for side, m, sp, shape, f in zip(sides, maps, split, shapes, full):
        dims, at = [], []
        for d, g in enumerate(m):
            at.append(list(range(len(dims), len(dims) + (len(g) if sp[d] else 1))))
            dims.extend([f[i] for i in g] if sp[d] else [shape[d]])
        where.append(at)
        reads.append(None if side is None or not any(sp) else (side[0], dims))
    new = {k: [i for d in dn[k] for i in where[0 if k.startswith("lhs") else 1][d]] for k in dn}
    return reads, new


# ---------------------------------------------------------------------------------------------- embedding


def _embedding(module) -> int:
    """Two rewrites of a table lookup into jnp.take's form:
    - a constant integer index table holding 0, 1, ..., n-1 along one dimension (a position table)
      made stablehlo.iota over that dimension;
    - gather(table, convert(i, i64 -> ui32)) made gather(table, select(i < 0, i + rows, i)): the index
      read in its own type, a negative one wrapped from the end, as jnp.take reads it (a valid index
      selects the same row either way)."""
    import numpy as np
    from jaxlib.mlir import ir

    sites = 0
    for op in ops_of(module, "stablehlo.constant"):
        t = ir.RankedTensorType(op.results[0].type)
        if t.rank < 1 or not isinstance(t.element_type, ir.IntegerType) or not any(
                u.owner.name == "stablehlo.gather" for u in op.results[0].uses):
            continue
        values = np.asarray(ir.DenseElementsAttr(op.attributes["value"]))
        if values.shape != tuple(t.shape) or values.size < 2:
            continue
        dim = next((d for d in range(t.rank) if t.shape[d] > 1 and np.array_equal(
            values, np.broadcast_to(np.arange(t.shape[d]).reshape([-1 if i == d else 1 for i in range(t.rank)]),
                                    values.shape))), None)
        if dim is None:
            continue
        at = At(op)
        replace(op, [at.op("stablehlo.iota", [t], [], {"iota_dimension": ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), dim)})])
        sites += 1
    for op in ops_of(module, "stablehlo.gather"):
        src = producer(op.operands[1])
        if src is None or src.name != "stablehlo.convert":
            continue
        wide = src.operands[0]
        before = ir.RankedTensorType(wide.type).element_type
        after = ir.RankedTensorType(src.results[0].type).element_type
        if not (isinstance(before, ir.IntegerType) and isinstance(after, ir.IntegerType)
                and ir.IntegerType(after).is_unsigned and not ir.IntegerType(before).is_unsigned):
            continue
        dims = str(op.attributes["dimension_numbers"])
        if "start_index_map = [0]" not in dims:
            continue
        rows = shape_of(op.operands[0])[0]
        at = At(op)
        shape = shape_of(wide)
        wrapped = at.op("stablehlo.select", [wide.type], [at.compare(wide, at.splat(shape, before, 0), "LT"),
                                                          at.binary("add", wide, at.splat(shape, before, rows)), wide])
        op.operands[1] = wrapped
        if not list(src.results[0].uses):
            src.erase()
        sites += 1
    return sites
