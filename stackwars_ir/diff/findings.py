"""Findings: what differs inside an aligned pair of blocks, and across the two modules."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..ir.model import Module, Op
from .blocks import Block

HIGH_LEVEL = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference", "stablehlo.custom_call",
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

    def as_json(self) -> dict:
        return {"histogram": dict(sorted(self.histogram.items())), "dot_generals": [d.as_json() for d in self.dots],
                "converts": dict(self.converts), "calls": dict(self.calls),
                "custom_calls": dict(self.custom_calls), "iota": self.iota,
                "constant_index_tables": self.constant_tables, "materialized_constants": self.constants,
                "broadcasts": self.broadcasts}


def facts(module: Module, block: Block) -> BlockFacts:
    ops = [op for op, _ in block.ops if not op.name.endswith("return")]
    by_id = {op.id: op for op in ops}
    dots = tuple(_dot(module, op, by_id) for op in ops if op.name == "stablehlo.dot_general")
    converts = Counter()
    for op in ops:
        if op.name == "stablehlo.convert" and op.operands and op.results:
            converts[f"{module.type_of(op.operands[0]).dtype}->{module.type_of(op.results[0]).dtype}"] += 1
    consts = [op for op in ops if op.name == "stablehlo.constant" and not op.attr("splat", False)]
    return BlockFacts(
        histogram=Counter(op.name for op in ops),
        dots=dots,
        converts=converts,
        calls=Counter("@" + re.sub(r"_\d+$", "", op.attr("callee") or "?") for op in ops if op.name == "func.call"),
        custom_calls=Counter(op.attr("call_target_name") or "?" for op in ops if op.name == "stablehlo.custom_call"),
        iota=sum(1 for op in ops if op.name == "stablehlo.iota"),
        constant_tables=sum(1 for op in consts if op.results and "i" in module.type_of(op.results[0]).dtype
                            and module.type_of(op.results[0]).rank >= 1),
        constants=len(consts),
        broadcasts=sum(1 for op in ops if op.name == "stablehlo.broadcast_in_dim"),
    )


def _dot(module: Module, op: Op, by_id: dict) -> Dot:
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
    return Dot(str(lhs), str(rhs), str(out), len(op.attr("lhs_batching_dimensions", ()) or ()), flat)


def block_findings(fa: BlockFacts, fb: BlockFacts, names: tuple[str, str]) -> list[str]:
    """Sentences naming what differs between two aligned blocks (empty when nothing does)."""
    a, b = names
    out = []
    for x, fx, fy, y in ((a, fa, fb, b), (b, fb, fa, a)):
        high = [n for n in HIGH_LEVEL if fx.histogram[n] and not fy.histogram[n] and n != "stablehlo.custom_call"]
        for n in high:
            spelled = ", ".join(f"{k.split('.', 1)[1]} x{fy.histogram[k]}" for k in DECOMPOSED
                                if fy.histogram[k]) if "batch_norm" in n else ""
            out.append(f"{x} uses {n} x{fx.histogram[n]}; {y} does not"
                       + (f" and spells it out ({spelled})" if spelled else ""))
    if fa.calls != fb.calls:
        out.append(f"calls: {a} {_counts(fa.calls) or 'none'}; {b} {_counts(fb.calls) or 'none'}")
    if fa.custom_calls != fb.custom_calls:
        out.append(f"custom_call targets: {a} {_counts(fa.custom_calls) or 'none'}; "
                   f"{b} {_counts(fb.custom_calls) or 'none'}")
    if (fa.iota > 0) != (fb.iota > 0) and (fa.constant_tables or fb.constant_tables):
        x, y = (a, b) if fa.iota else (b, a)
        out.append(f"{x} builds indices with iota; {y} materializes a constant index table")
    flat = _flattening(fa, fb, names)
    if flat:
        out.append(flat)
    if fa.converts != fb.converts:
        out.append(f"dtype conversions: {a} {_counts(fa.converts) or 'none'}; {b} {_counts(fb.converts) or 'none'}")
    return out


def _flattening(fa: BlockFacts, fb: BlockFacts, names) -> str | None:
    fla = [d for d in fa.dots if d.flattened_from]
    flb = [d for d in fb.dots if d.flattened_from]
    if bool(fla) == bool(flb) or not (fa.dots and fb.dots):
        return None
    x, fx, flat, y, fy = (names[0], fa, fla, names[1], fb) if fla else (names[1], fb, flb, names[0], fa)
    d = flat[0]
    kept = sorted({_rank(e.lhs) for e in fy.dots})
    return (f"{x} flattens {shape_text(d.flattened_from)} -> {shape_text(d.lhs)} before {len(flat)} of {len(fx.dots)} "
            f"dot_general; {y} keeps rank-{'/'.join(map(str, kept))} operands")


def shape_text(t: str) -> str:
    """ "2x16x64xf32" -> "[2,16,64]" (the study's notation)."""
    return "[" + ",".join(t.split("x")[:-1]) + "]"


def _rank(t: str) -> int:
    return len(t.split("x")) - 1


def _counts(c: Counter) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(c.items()))
