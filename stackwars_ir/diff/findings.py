"""Findings: what differs inside an aligned pair of blocks, as records (report.sentences words them)."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..ir.model import Module, Op
from ..ir.scopes import REMAT
from .block import Block

HIGH_LEVEL = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_grad", "stablehlo.batch_norm_inference",
              "stablehlo.custom_call",
              "stablehlo.gather", "stablehlo.scatter", "stablehlo.convolution", "stablehlo.reduce_window",
              "chlo.erf", "stablehlo.erf", "stablehlo.logistic")
DECOMPOSED = ("stablehlo.reduce", "stablehlo.rsqrt", "stablehlo.sqrt", "stablehlo.divide", "stablehlo.subtract")


@dataclass(frozen=True)
class Dot:
    """One dot_general: operand and result types, batching dims, and whether its input was
    flattened (a reshape merging dimensions right before it)."""

    lhs: str
    rhs: str
    out: str
    batching: int
    flattened_from: str | None  # the type before the merging reshape, e.g. "2x16x64xf32"
    id: int = -1  # the op's id in its module

    def as_json(self) -> dict:
        return {"lhs": self.lhs, "rhs": self.rhs, "result": self.out, "batching_dims": self.batching,
                "flattened_from": self.flattened_from}


@dataclass(frozen=True)
class BlockFacts:
    """What one block does, as the findings read it."""

    histogram: Counter
    dots: tuple
    converts: Counter  # "i64->ui32" -> count
    calls: Counter  # callee names, numeric suffixes removed (@_take_0 -> @_take)
    custom_calls: Counter
    iota: int
    constant_tables: int  # non-splat integer constants (index tables)
    constants: int  # non-splat constants of any type
    broadcasts: int
    recomputed: int = 0  # forward ops a rematerialization recomputes in the backward (JAX's rematted_computation)
    variance: str = ""  # how a spelled-out norm computes its variance (variance_form), "" where no reduce squares

    def as_json(self) -> dict:
        return {"histogram": dict(sorted(self.histogram.items())), "dot_generals": [d.as_json() for d in self.dots],
                "converts": dict(self.converts), "calls": dict(self.calls),
                "custom_calls": dict(self.custom_calls), "iota": self.iota,
                "constant_index_tables": self.constant_tables, "materialized_constants": self.constants,
                "broadcasts": self.broadcasts, "recomputed": self.recomputed,
                **({"variance": self.variance} if self.variance else {})}


def facts(module: Module, block: Block) -> BlockFacts:
    """What `block` of `module` does (BlockFacts), from one pass over its ops bucketed by name."""
    by_name: dict = {}
    remat = 0
    for op, path in block.ops:
        name = op.name
        if name.endswith("return"):
            continue
        bucket = by_name.get(name)
        if bucket is None:
            by_name[name] = [op]
        else:
            bucket.append(op)
        if REMAT in path and REMAT in path.split("."):
            remat += 1
    none: list = []
    type_of = module.type_of
    converts = Counter()
    for op in by_name.get("stablehlo.convert", none):
        if op.operands and op.results:
            converts[f"{type_of(op.operands[0]).dtype}->{type_of(op.results[0]).dtype}"] += 1
    consts = [op for op in by_name.get("stablehlo.constant", none) if not op.attr("splat", False)]
    return BlockFacts(
        histogram=Counter({name: len(bucket) for name, bucket in by_name.items()}),
        dots=tuple(_dot(module, op) for op in by_name.get("stablehlo.dot_general", none)),
        converts=converts,
        calls=Counter("@" + re.sub(r"_\d+$", "", op.attr("callee") or "?") for op in by_name.get("func.call", none)),
        custom_calls=Counter(op.attr("call_target_name") or "?" for op in by_name.get("stablehlo.custom_call", none)),
        iota=len(by_name.get("stablehlo.iota", none)),
        constant_tables=sum(1 for op in consts if op.results and "i" in type_of(op.results[0]).dtype
                            and type_of(op.results[0]).rank >= 1),
        constants=len(consts),
        broadcasts=len(by_name.get("stablehlo.broadcast_in_dim", none)),
        recomputed=remat,
        variance=variance_form(module, by_name.get("stablehlo.reduce", none)),
    )


# How a spelled-out norm computes its variance, in the words a finding uses:
CENTERED = "variance E[(x - mean)^2]"  # two passes: the mean, then the mean of the squared deviations (JAX's twins)
ONE_PASS = "variance E[x^2] - mean^2"  # one pass over x: the mean of the squares less the squared mean (cancels)
ONE_REDUCE = "variance E[x^2] - mean^2 in one variadic reduce"  # both sums in one reduce (TorchTPU's LayerNorm)
MEAN_SQUARE = "mean square E[x^2], no mean (RMS)"  # RMSNorm: the mean of the squares alone
_PASS_THROUGH = ("stablehlo.convert", "stablehlo.broadcast_in_dim", "stablehlo.reshape")


def variance_form(module: Module, ops: list) -> str:
    """How the block's reduces compute a variance, or "" where none reduces a square: the squared
    deviation from the mean (CENTERED), the mean of the squares less the squared mean from two
    reduces (ONE_PASS) or from one reduce of two results (ONE_REDUCE), or the mean square alone
    (MEAN_SQUARE). The two one-pass forms lose digits where the mean is large beside the spread, and
    clamp the difference at zero (a `maximum`). `ops`: the block's ops (its reduces are read)."""
    reduces = [op for op in ops if op.name == "stablehlo.reduce" and op.operands]
    if not reduces:
        return ""
    if any(len(r.results) > 1 and _squares(module, r.operands[1]) for r in reduces):
        return ONE_REDUCE
    squared = [sq for r in reduces for sq in (_squares(module, r.operands[0]),) if sq is not None]
    if not squared:
        return ""
    base = _source(module, squared[0].operands[0])
    if base is not None and base.name == "stablehlo.subtract":
        return CENTERED
    return ONE_PASS if len(reduces) > len(squared) else MEAN_SQUARE


def _source(module: Module, value: int):
    """The op producing `value`, through converts, broadcasts and reshapes; None for an argument."""
    op = None
    for _ in range(8):
        src = module.values[value].producer
        if src is None:
            return None
        op = module.ops[src]
        if op.name not in _PASS_THROUGH or not op.operands:
            return op
        value = op.operands[0]
    return op


def _squares(module: Module, value: int):
    """The op squaring into `value` (x * x, x ** 2, chlo.square), or None."""
    op = _source(module, value)
    if op is None:
        return None
    if op.name == "stablehlo.multiply" and len(op.operands) == 2 and op.operands[0] == op.operands[1]:
        return op
    if op.name in ("stablehlo.power", "chlo.square"):  # jax 0.12 writes lax.square as chlo.square
        return op
    return None


def recomputed(block: Block) -> tuple:
    """The ids of the block's ops that recompute the forward pass in the backward (rematerialized)."""
    return tuple(op.id for op, path in block.ops if not op.name.endswith("return") and REMAT in path.split("."))


def op_ids(block: Block, name: str) -> tuple:
    """The ids of the block's ops named `name`, in block order (what a finding is about)."""
    return tuple(op.id for op, _ in block.ops if op.name == name)


def _dot(module: Module, op: Op) -> Dot:
    lhs, rhs = (module.type_of(v) for v in op.operands[:2])
    out = module.type_of(op.results[0])
    flat = None
    src = module.values[op.operands[0]].producer
    if src is not None:
        prod = module.ops[src]
        if prod.name == "stablehlo.reshape":
            before = module.type_of(prod.operands[0])
            if before.rank > lhs.rank and before.shape[-1:] == lhs.shape[-1:]:
                flat = str(before)
    return Dot(str(lhs), str(rhs), str(out), len(op.attr("lhs_batching_dimensions", ()) or ()), flat, op.id)


@dataclass(frozen=True)
class Finding:
    """One thing that differs between two aligned blocks, as data: what kind, about which side
    ("a", "b", or "" for both), its figures, and the ops (ids in each module) it is about."""

    kind: str  # high_level | calls | custom_calls | indices | flattening | converts | remat
    side: str
    numbers: dict
    ops_a: tuple = ()
    ops_b: tuple = ()

    def as_json(self) -> dict:
        return {"kind": self.kind, "side": self.side, "numbers": self.numbers,
                "ops_a": list(self.ops_a), "ops_b": list(self.ops_b)}

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        return cls(d["kind"], d["side"], d["numbers"], tuple(d.get("ops_a", ())), tuple(d.get("ops_b", ())))


def block_findings(fa: BlockFacts, fb: BlockFacts, a: Block, b: Block) -> list[Finding]:
    """What differs between two aligned blocks `a` and `b` (empty when nothing does)."""
    out = []
    blocks = {"a": a, "b": b}
    for x, fx, fy in (("a", fa, fb), ("b", fb, fa)):
        high = [n for n in HIGH_LEVEL if fx.histogram[n] and not fy.histogram[n] and n != "stablehlo.custom_call"]
        for n in high:
            spelled = {k: fy.histogram[k] for k in DECOMPOSED if fy.histogram[k]} if "batch_norm" in n else {}
            ids = op_ids(blocks[x], n)
            out.append(Finding("high_level", x, {"op": n, "count": fx.histogram[n], "spelled_out": spelled},
                               *((ids, ()) if x == "a" else ((), ids))))
    for kind, attr in (("calls", "calls"), ("custom_calls", "custom_calls")):
        ca, cb = getattr(fa, attr), getattr(fb, attr)
        if ca != cb:
            out.append(Finding(kind, "", {"a": dict(sorted(ca.items())), "b": dict(sorted(cb.items()))}))
    if (fa.iota > 0) != (fb.iota > 0) and (fa.constant_tables or fb.constant_tables):
        x = "a" if fa.iota else "b"
        ids = op_ids(blocks[x], "stablehlo.iota")
        out.append(Finding("indices", x, {}, *((ids, ()) if x == "a" else ((), ids))))
    flat = _flattening(fa, fb)
    if flat:
        out.append(flat)
    if fa.recomputed != fb.recomputed:
        out.append(Finding("remat", "", {"a": fa.recomputed, "b": fb.recomputed}, recomputed(a), recomputed(b)))
    if fa.converts != fb.converts:
        out.append(Finding("converts", "", {"a": dict(sorted(fa.converts.items())), "b": dict(sorted(fb.converts.items()))},
                           op_ids(a, "stablehlo.convert"), op_ids(b, "stablehlo.convert")))
    if fa.variance and fb.variance and fa.variance != fb.variance:
        out.append(Finding("variance", "", {"a": fa.variance, "b": fb.variance},
                           op_ids(a, "stablehlo.reduce"), op_ids(b, "stablehlo.reduce")))
    return out


def flattened(mine: tuple, other: tuple) -> list:
    """The dot_generals of `mine` whose input an exporter flattened: a reshape merged its dimensions
    right before it, into a shape no dot_general of the other side's block takes. Where the other
    side multiplies that very shape, the reshape is the model's own (OPT's reshape(-1, D))."""
    shapes = {d.lhs for d in other}
    return [d for d in mine if d.flattened_from and d.lhs not in shapes]


def _flattening(fa: BlockFacts, fb: BlockFacts) -> Finding | None:
    fla, flb = flattened(fa.dots, fb.dots), flattened(fb.dots, fa.dots)
    if bool(fla) == bool(flb) or not (fa.dots and fb.dots):
        return None
    x, fx, flat, fy = ("a", fa, fla, fb) if fla else ("b", fb, flb, fa)
    d = flat[0]
    kept = sorted({_rank(e.lhs) for e in fy.dots})
    ids = tuple(e.id for e in flat)
    return Finding("flattening", x, {"from": d.flattened_from, "to": d.lhs, "flattened": len(flat),
                                     "dots": len(fx.dots), "kept_ranks": kept}, *((ids, ()) if x == "a" else ((), ids)))


def _rank(t: str) -> int:
    return len(t.split("x")) - 1
