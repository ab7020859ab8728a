"""Diff: segment two modules into blocks, align them, and name what differs (the report model)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..ir.model import Module
from .align import Alignment, align
from .blocks import Block, Segmentation, segment
from .findings import BlockFacts, block_findings, facts, shape_text

DIFF_FORMAT = 1
EXCERPT_LINES = 40


@dataclass(frozen=True)
class BlockDiff:
    """One aligned pair of blocks: both sides' facts, what differs, and IR excerpts."""

    a: Block = field(repr=False)
    b: Block = field(repr=False)
    facts_a: BlockFacts = field(repr=False)
    facts_b: BlockFacts = field(repr=False)
    findings: tuple

    @property
    def label(self) -> str:
        return self.a.label

    @property
    def delta(self) -> Counter:
        return counter_delta(self.facts_a.histogram, self.facts_b.histogram)

    @property
    def differs(self) -> bool:
        return bool(self.delta) or bool(self.findings)


@dataclass(frozen=True)
class Side:
    """One input of the diff: its name, module and segmentation."""

    name: str
    module: Module = field(repr=False)
    segmentation: Segmentation = field(repr=False)

    @property
    def histogram(self) -> Counter:
        return self.module.histogram()


@dataclass(frozen=True)
class DiffReport:
    """The report model of `diff` (and of `report`): rendered as text, JSON, Markdown and HTML."""

    a: Side
    b: Side
    alignment: Alignment = field(repr=False)
    blocks: tuple  # BlockDiff, in A's program order
    summary: tuple  # (topic, sentence): the study's questions answered for this pair

    @property
    def differs(self) -> bool:
        return bool(self.alignment.only_a or self.alignment.only_b) or any(b.differs for b in self.blocks) \
            or self.a.histogram != self.b.histogram

    def __str__(self) -> str:
        return f"DiffReport({self.a.name} vs {self.b.name}: {len(self.blocks)} aligned blocks)"

    def as_json(self) -> dict:
        al = self.alignment
        return {
            "format": DIFF_FORMAT,
            "a": _side_json(self.a), "b": _side_json(self.b),
            "alignment": {"method": al.method, "coverage": round(al.coverage, 4), "pairs": len(al.pairs),
                          "only_a": [blk.label for blk in al.only_a], "only_b": [blk.label for blk in al.only_b]},
            "summary": [{"topic": t, "finding": s} for t, s in self.summary],
            "blocks": [{"label": d.label, "role": d.a.role, "layer": list(d.a.layer),
                        "name_a": d.a.name, "name_b": d.b.name,
                        "ops_a": sum(d.facts_a.histogram.values()), "ops_b": sum(d.facts_b.histogram.values()),
                        "delta": dict(sorted(d.delta.items())), "findings": list(d.findings),
                        "a": d.facts_a.as_json(), "b": d.facts_b.as_json()} for d in self.blocks],
            "differs": self.differs,
        }


def counter_delta(a: Counter, b: Counter) -> Counter:
    """a - b, keeping negative counts and dropping zeros (Counter's own `-` drops negatives)."""
    d = Counter(a)
    d.subtract(b)
    return Counter({k: v for k, v in d.items() if v})


def _side_json(side: Side) -> dict:
    seg = side.segmentation
    return {"name": side.name, "source": side.module.source, "mode": seg.mode, "location_coverage": seg.coverage,
            "ops": sum(side.histogram.values()), "blocks": len(seg.blocks),
            "histogram": dict(sorted(side.histogram.items()))}


def diff_modules(a: Module, b: Module, names: tuple[str, str] = ("A", "B"), mode: str = "auto") -> DiffReport:
    from ..ir import no_gc

    with no_gc():
        return _diff_modules(a, b, names, mode)


def adapter_roles(module: Module) -> tuple:
    """The path-to-role words of the adapter that captured `module` (its sidecar names the model);
    none for a file without a sidecar or of a model not in the catalogue."""
    from stackwars_ir import models

    from ..capture.artifact import read_sidecar
    from ..errors import StackwarsError

    try:
        side = read_sidecar(Path(module.source)) or {}
        entry = models.catalog().get(side.get("model"))
    except (StackwarsError, OSError, ValueError):
        return ()
    return tuple(sorted(entry.roles.items())) if entry else ()


def _diff_modules(a: Module, b: Module, names: tuple[str, str], mode: str) -> DiffReport:
    sa, sb = segment(a, mode, adapter_roles(a)), segment(b, mode, adapter_roles(b))
    al = align(sa, sb)
    diffs = []
    for blk_a, blk_b in al.pairs:
        fa, fb = facts(a, blk_a), facts(b, blk_b)
        diffs.append(BlockDiff(blk_a, blk_b, fa, fb, tuple(block_findings(fa, fb, names))))
    report_a, report_b = Side(names[0], a, sa), Side(names[1], b, sb)
    return DiffReport(report_a, report_b, al, tuple(diffs), tuple(study_summary(diffs, names)))


def diff_files(path_a: str | Path, path_b: str | Path, mode: str = "auto") -> DiffReport:
    from ..ir import load_single

    a, b = load_single([path_a, path_b])
    return diff_modules(a, b, side_names(path_a, path_b), mode)


def side_names(path_a, path_b) -> tuple[str, str]:
    """Short names for the two sides: the file stems, or the folder too when the stems clash."""
    a, b = Path(path_a), Path(path_b)
    if a.stem != b.stem:
        return a.stem, b.stem
    return f"{a.parent.name}/{a.stem}", f"{b.parent.name}/{b.stem}"


def study_summary(diffs: list, names: tuple[str, str]) -> list[tuple[str, str]]:
    """The study's three questions, answered from the aligned blocks."""
    a, b = names
    out = []
    norms = [d for d in diffs if d.a.role in ("norm", "batchnorm")]
    if norms:
        def lowering(f: BlockFacts) -> str:
            for n in ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference"):
                if f.histogram[n]:
                    return n.split(".", 1)[1]
            # Name what is there: inference batch norm has an rsqrt of its given variance, no reduce.
            ops = [op for op in ("reduce", "rsqrt") if f.histogram[f"stablehlo.{op}"]]
            return f"spelled out ({'/'.join(ops)})" if ops else "other"
        la = Counter(lowering(d.facts_a) for d in norms)
        lb = Counter(lowering(d.facts_b) for d in norms)
        out.append(("normalization", f"{len(norms)} norm blocks: {a} {_top(la)}; {b} {_top(lb)}"))
    dots_a = [x for d in diffs if d.a.role in ("attention", "mlp") for x in d.facts_a.dots]
    dots_b = [x for d in diffs if d.a.role in ("attention", "mlp") for x in d.facts_b.dots]
    if dots_a or dots_b:
        def flat(dots) -> str:
            n = sum(1 for x in dots if x.flattened_from)
            example = next((f" ({shape_text(x.flattened_from)} -> {shape_text(x.lhs)})"
                            for x in dots if x.flattened_from), "")
            return f"{n} of {len(dots)} dot_general take a flattened input{example}"
        out.append(("flattening", f"{a}: {flat(dots_a)}; {b}: {flat(dots_b)}"))
    emb = [d for d in diffs if d.a.role == "embedding"]
    if emb:
        def how(fs) -> str:
            f = _merge(fs)
            parts = []
            parts.append("iota positions" if f.iota else ("constant index table" if f.constant_tables else "no index op"))
            if f.calls:
                parts.append("lookup via " + ", ".join(sorted(f.calls)))
            if f.histogram["stablehlo.gather"]:
                parts.append(f"gather x{f.histogram['stablehlo.gather']}")
            if f.converts:
                parts.append("converts " + ", ".join(sorted(f.converts)))
            return "; ".join(parts)
        out.append(("embedding", f"{a}: {how([d.facts_a for d in emb])} | {b}: {how([d.facts_b for d in emb])}"))
    return out


def _merge(fs: list) -> BlockFacts:
    hist, conv, calls = Counter(), Counter(), Counter()
    iota = tables = 0
    for f in fs:
        hist += f.histogram
        conv += f.converts
        calls += f.calls
        iota += f.iota
        tables += f.constant_tables
    return BlockFacts(hist, (), conv, calls, Counter(), iota, tables, 0, 0)


def _top(c: Counter) -> str:
    return ", ".join(f"{k} x{v}" for k, v in c.most_common())


def excerpt(module: Module, block: Block, limit: int = EXCERPT_LINES) -> list[str]:
    """The block's ops as compact IR lines (`%12 = stablehlo.add %10, %11 : 2x16x64xf32`)."""
    lines = []
    for op, _ in block.ops:
        if op.name.endswith("return"):
            continue
        res = ", ".join(f"%{v}" for v in op.results)
        args = ", ".join(f"%{v}" for v in op.operands)
        types = ", ".join(str(module.type_of(v)) for v in op.results)
        extra = ""
        if op.name == "func.call":
            extra = f" @{op.attr('callee')}"
        elif op.name == "stablehlo.custom_call":
            extra = f" @{op.attr('call_target_name')}"
        lines.append(f"{res + ' = ' if res else ''}{op.name}{extra} {args} : {types}".rstrip(" :"))
        if len(lines) == limit:
            lines.append(f"... {len(block.ops) - limit} more ops")
            break
    return lines
