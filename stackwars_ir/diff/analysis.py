"""Two modules diffed: blocks segmented and aligned, each pair with its op diff; the study's summaries.

Per block: op diffs; then the study's summaries, and source excerpts. Measured kernels, times and
host time are joined to the blocks by diff/measured.py.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import models
from ..common.errors import StackwarsError
from ..common.files import read_sidecar
from ..common.routes import ROUTES, SHOWN_VERSIONS
from ..ir import load_single, no_gc, sharding
from ..ir.model import Module
from .align import Alignment, align
from .block import Block
from .blocks import Segmentation, segment
from .findings import BlockFacts, block_findings, facts, flattened
from .matcher import match_blocks
from .program import Program, interface_changes
from .result import NO_PATH, BlockResult, DiffResult, SideResult, Summary, Unmatched, counter_delta, first_of_each_role

EXCERPT_LINES = 40


@dataclass(frozen=True)
class BlockDiff:
    """One aligned pair of blocks: both sides' facts, what differs, and IR excerpts."""

    a: Block = field(repr=False)
    b: Block = field(repr=False)
    facts_a: BlockFacts = field(repr=False)
    facts_b: BlockFacts = field(repr=False)
    findings: tuple  # diff.findings.Finding

    @property
    def label(self) -> str:
        """A's block's label; where only B's block runs in a loop, it says so."""
        if self.b.trips and not self.a.trips:
            return f"{self.a.label} (B scanned x{self.b.trips})"
        return self.a.label

    @property
    def delta(self) -> Counter:
        """B - A per op, as BlockResult.delta and git diff A B count: + is more in B."""
        return counter_delta(self.facts_b.histogram, self.facts_a.histogram)


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
    """The live analysis of `diff` (both modules parsed, aligned): its result() is the one model every
    rendering (text, JSON, Markdown, HTML) and the saved JSON read."""

    a: Side
    b: Side
    alignment: Alignment = field(repr=False)
    blocks: tuple  # BlockDiff, in A's program order
    summary: tuple  # (topic, sentence): the study's questions answered for this pair

    def __str__(self) -> str:
        return f"DiffReport({self.a.name} vs {self.b.name}: {len(self.blocks)} aligned blocks)"

    def result(self, excerpts: str = "all") -> DiffResult:
        """The typed result every rendering reads: everything found, without the live modules.
        excerpts: "all" blocks' IR excerpts (a saved result, the HTML: its graph view shows any
        block's), only the first block of each role's ("first_of_role": what the Markdown shows), or
        "none" (what the text shows without --excerpts). ValueError for another word."""
        if excerpts not in ("all", "first_of_role", "none"):
            raise ValueError(f"excerpts={excerpts!r}: all, first_of_role or none")
        with no_gc():  # 100,000s of long-lived values made: the cyclic GC would rescan the modules (10%)
            return self._result(excerpts)

    def _result(self, excerpts: str) -> DiffResult:
        lines_a, lines_b = source_lines(self.a.module), source_lines(self.b.module)
        shown = set(range(len(self.blocks))) if excerpts == "all" else set() if excerpts == "none" else \
            set(first_of_each_role(d.a.role for d in self.blocks))
        blocks = []
        ids = [(_op_ids(d.a), _op_ids(d.b)) for d in self.blocks]
        args_a, args_b = argument_identities(self.a.module, self.b.module)
        # the whole programs' fingerprints, while the matcher's forked child pairs its share of the blocks
        # (their op signatures, derived once per module, are then this process's matcher's too)
        programs = []
        op_diffs, paired_a, paired_b = match_blocks(
            self.a.module, self.b.module, ids, lines_a, lines_b, args_a, args_b,
            meanwhile=lambda: programs.extend((Program(self.a.module, args_a), Program(self.b.module, args_b))))
        program_a, program_b = programs
        interface = interface_changes(program_a, program_b, args_a, args_b, paired_a, paired_b, lines_a, lines_b)
        same = not interface and program_a.print == program_b.print
        for i, d in enumerate(self.blocks):
            ids_a, ids_b = ids[i]
            blocks.append(BlockResult(
                d.label, d.a.phase, d.a.layer, d.a.role, d.a.ordinal, d.a.name or NO_PATH, d.b.name or NO_PATH,
                ids_a, ids_b,
                d.facts_a.as_json(), d.facts_b.as_json(), d.findings,
                tuple(excerpt(self.a.module, d.a, lines=lines_a)) if i in shown else (),
                tuple(excerpt(self.b.module, d.b, lines=lines_b)) if i in shown else (),
                op_diff=op_diffs[i]))
        al = self.alignment
        return DiffResult(_side_result(self.a), _side_result(self.b), al.method, al.reason, al.coverage, tuple(blocks),
                          tuple(_unmatched(b) for b in al.only_a), tuple(_unmatched(b) for b in al.only_b),
                          self.summary, flow_a=_flow(self.a.module, [d.a for d in self.blocks]),
                          flow_b=_flow(self.b.module, [d.b for d in self.blocks]),
                          interface=interface, same_program=same)

    def as_json(self) -> dict:
        return self.result().as_json()


def _flow(module: Module, blocks: list) -> tuple:
    """(i, j) for each pair of blocks where an op of block i produces a value an op of block j reads."""
    where = {}
    for i, blk in enumerate(blocks):
        for op, _ in blk.ops:
            where.setdefault(op.id, i)
    values, ops = module.values, module.ops
    edges = set()
    for j, blk in enumerate(blocks):
        for op, _ in blk.ops:
            for v in op.operands:
                p = values[v].producer
                if p is None:
                    continue
                while ops[p].parent is not None and p not in where:  # a region's block argument
                    p = ops[p].parent
                i = where.get(p)
                if i is not None and i != j:
                    edges.add((i, j))
    return tuple(sorted(edges))


def _op_ids(block: Block) -> tuple:
    return tuple(op.id for op, _ in block.ops if not op.name.endswith("return"))


def _unmatched(block: Block) -> Unmatched:
    return Unmatched(block.label, block.name or NO_PATH, len(block.ops))


def _side_result(side: Side) -> SideResult:
    seg = side.segmentation
    import hashlib

    provenance, note = _provenance(side.module.source)
    try:
        digest = hashlib.sha256(Path(side.module.source).read_bytes()).hexdigest()
    except OSError:
        digest = None  # a module parsed from text, not a file
    m = side.module
    loops = m.loop_trips
    executed = m.executed_histogram() if loops else None

    placed = sharding.argument_shardings(m, _argument_names(m.source)) if m.entry.arg_shardings else ()
    return SideResult(side.name, m.source, seg.mode, seg.reason, seg.coverage,
                      sum(side.histogram.values()), len(seg.blocks), dict(side.histogram), provenance, note, digest,
                      loops, None if executed is None else dict(executed), sharding.devices(m),
                      tuple(a._asdict() for a in placed), m.form)


def _argument_names(source: str) -> dict:
    """index -> name of each argument, as the capture's sidecar names them ({} without one)."""

    try:
        sc = read_sidecar(Path(source))
    except Exception:
        return {}
    return {a["index"]: a["name"] for a in sc.arguments if "index" in a and "name" in a} if sc else {}


def argument_identities(a: Module, b: Module) -> tuple[dict, dict]:
    """Which argument each entry argument is (value id -> identity), for both sides alike: the name
    each capture's sidecar gives it (the PyTorch parameter or input it holds, which every route
    records), where both sidecars name every argument of their side, each name once; else its index."""
    named = []
    for m in (a, b):
        names = _argument_names(m.source)
        args = m.entry.args
        if len(names) < len(args) or len(set(names.get(i) for i in range(len(args)))) < len(args):
            named = None
            break
        named.append({v: names[i] for i, v in enumerate(args)})
    if named:
        return named[0], named[1]
    return ({v: i for i, v in enumerate(a.entry.args)}, {v: i for i, v in enumerate(b.entry.args)})


def _provenance(source: str) -> tuple[dict | None, str]:
    """What the capture's sidecar says of a file: model, exporter, this side's own inputs, versions, host."""

    try:
        sc = read_sidecar(Path(source))
    except Exception as e:  # a broken sidecar must not break the diff, but is named in it
        return None, f"sidecar ignored: {e}"
    if not sc:
        return None, "no sidecar"
    v = sc.data.get("versions", {})
    # This side's own function inputs (a JAX capture takes int32 ids where PyTorch takes int64).
    own = [x for x in sc.arguments if x.get("kind") == "input"] or list(sc.inputs)

    data = sc.data
    way = ROUTES.get("jax" if data.get("framework") == "jax" else sc.exporter)
    return {"model": sc.model, "size": sc.size, "exporter": sc.exporter, "step": sc.step,
            "framework": data.get("framework"), "mesh_devices": (data.get("mesh") or {}).get("devices"),
            "route": way.how(sc.step, bool((data.get("program") or {}).get("scan_layers")), bool(data.get("mesh")))
            if way else None,
            "inputs": [{"name": i.get("name"), "dtype": i.get("dtype"), "shape": list(i.get("shape", []))} for i in own],
            "versions": {k: v.get(k) for k in SHOWN_VERSIONS},
            "host": sc.data.get("run", {}).get("host", {}).get("processor")}, ""


def diff_modules(a: Module, b: Module, names: tuple[str, str] = ("A", "B"), mode: str = "auto",
                 cut: tuple[Segmentation | None, Segmentation | None] = (None, None)) -> DiffReport:
    """The two modules segmented (`cut`: either side's segmentation already made, with this `mode` and
    adapter_roles) and aligned block by block, each pair's facts and findings."""
    with no_gc():
        return _diff_modules(a, b, names, mode, cut)


def source(b: Block) -> str:
    """The label of the segmentation's block a paired block stands for: a scanned block's copy for
    one layer (diff.align.unrolled: loop -1, the trip's number first in its layer) is the loop's block."""
    if b.trips and b.loop < 0:
        from dataclasses import replace

        return replace(b, layer=b.layer[1:]).label
    return b.label


def adapter_roles(module: Module) -> tuple:
    """The path-to-role words of the adapter that captured `module`: as its sidecar recorded them, so
    a capture of a user's model diffs the same without the adapter file; for an older sidecar, the
    catalogue's entry of the model it names; none for a file without a sidecar."""

    return _roles_at(module.source)


def _roles_at(source: str) -> tuple:
    """adapter_roles of the module read from `source` (a file, FILE#K)."""
    try:
        side = read_sidecar(Path(source))
        if side is None:
            return ()
        if isinstance(side.roles, dict):
            return tuple(sorted(side.roles.items()))
        entry = models.catalog().get(side.model)
    except (StackwarsError, OSError, ValueError):
        return ()
    return tuple(sorted(entry.roles.items())) if entry else ()


def _roles(source_a: str, source_b: str) -> tuple[tuple, tuple]:
    """Each side's adapter roles. A side whose sidecar is gone or no longer matches (an edited copy of
    a capture) reads its module paths with the other side's words: the same words cut the same blocks."""
    roles_a, roles_b = _roles_at(source_a), _roles_at(source_b)
    return roles_a or roles_b, roles_b or roles_a


def _diff_modules(a: Module, b: Module, names: tuple[str, str], mode: str, cut: tuple) -> DiffReport:
    roles_a, roles_b = _roles(a.source, b.source)
    sa, sb = cut[0] or segment(a, mode, roles_a), cut[1] or segment(b, mode, roles_b)
    al = align(sa, sb)
    diffs = []
    for blk_a, blk_b in al.pairs:
        fa, fb = facts(a, blk_a), facts(b, blk_b)
        diffs.append(BlockDiff(blk_a, blk_b, fa, fb, tuple(block_findings(fa, fb, blk_a, blk_b))))
    report_a, report_b = Side(names[0], a, sa), Side(names[1], b, sb)
    return DiffReport(report_a, report_b, al, tuple(diffs), tuple(study_summary(diffs, (a, b))))


def diff_files(path_a: str | Path, path_b: str | Path, mode: str = "auto") -> DiffReport:
    """diff_modules of two files, parsed side by side: the module read first is segmented (and its
    lines found) while the other is still being parsed. ParseError as ir.load_single."""
    roles = _roles(str(path_a), str(path_b))
    cut: dict = {}

    def ready(i: int, module: Module) -> None:
        if module.source == (str(path_a), str(path_b))[i]:  # the sidecar the roles were read from
            cut[i] = segment(module, mode, roles[i])
        source_lines(module)

    a, b = load_single([path_a, path_b], ready=ready)
    return diff_modules(a, b, side_names(path_a, path_b), mode, (cut.get(0), cut.get(1)))


def side_names(path_a: str | Path, path_b: str | Path) -> tuple[str, str]:
    """Short names for the two sides: the file stems, or the folder too when the stems clash; the same
    file on both sides "A" and "B" after its stem (a folder of "" printed as "/A" before)."""
    a, b = Path(path_a), Path(path_b)
    if a.stem != b.stem:
        return a.stem, b.stem
    if a.parent.name != b.parent.name:
        return f"{a.parent.name}/{a.stem}", f"{b.parent.name}/{b.stem}"
    return f"{a.stem} (A)", f"{b.stem} (B)"


# Transcendental functions: in a backward block, each is a forward value computed again or part of a
# derivative formula (log-softmax's takes exp of its saved output); none means every such value the
# backward needs is read from the forward pass.
TRANSCENDENTAL = ("stablehlo.exponential", "stablehlo.tanh", "stablehlo.logistic", "chlo.erf", "stablehlo.erf",
              "stablehlo.rsqrt", "stablehlo.log")


def training_summary(diffs: list, modules: tuple) -> Summary | None:
    """What a training step's aligned blocks say per side: the optimizer region's size, the
    parameters transposed in the forward and the backward, the transcendental functions the backward
    evaluates (recomputation against saved activations), and the element types its dot_generals
    produce (what gradients accumulate in). None for a forward pass."""
    if not any(d.a.phase for d in diffs):
        return None
    numbers = {}
    for side, module in zip(("a", "b"), modules):
        args = set(module.entry.args)
        transposes = Counter()
        transcendentals, grad_types, update_ops = Counter(), Counter(), 0
        for d in diffs:
            blk = getattr(d, side)
            for op, _ in blk.ops:
                if blk.phase == "update":
                    update_ops += not op.name.endswith("return")
                    continue
                if op.name == "stablehlo.transpose" and op.operands and op.operands[0] in args:
                    transposes[blk.phase] += 1
                if blk.phase == "backward":
                    if op.name in TRANSCENDENTAL:
                        transcendentals[op.name.split(".", 1)[1]] += 1
                    if op.name == "stablehlo.dot_general":
                        grad_types[module.values[op.results[0]].type.dtype] += 1
        numbers[side] = {"optimizer_ops": update_ops,
                         "parameter_transposes": {p: transposes[p] for p in ("forward", "backward")},
                         "backward_transcendentals": dict(sorted(transcendentals.items())),
                         "backward_dot_types": dict(sorted(grad_types.items()))}
    return Summary("training", numbers)


def study_summary(diffs: list, modules: tuple | None = None) -> list[Summary]:
    """The study's three questions, answered from the aligned blocks (report.sentences words them);
    for a training step, what its phases show too."""
    out = []
    norms = [d for d in diffs if d.a.role in ("norm", "batchnorm")]
    if norms:
        def lowering(f: BlockFacts) -> str:
            for n in ("stablehlo.batch_norm_training", "stablehlo.batch_norm_grad", "stablehlo.batch_norm_inference"):
                if f.histogram[n]:
                    return n.split(".", 1)[1]
            # Name what is there: inference batch norm has an rsqrt of its given variance, no reduce.
            ops = [op for op in ("reduce", "rsqrt") if f.histogram[f"stablehlo.{op}"]]
            how = "/".join(ops) + (f"; {f.variance}" if f.variance else "")
            return f"spelled out ({how})" if ops else "other"
        la = Counter(lowering(d.facts_a) for d in norms)
        lb = Counter(lowering(d.facts_b) for d in norms)
        out.append(Summary("normalization", {"blocks": len(norms), "a": [list(x) for x in la.most_common()],
                                             "b": [list(x) for x in lb.most_common()]}))
    # Every dot_general of the module, as its histogram counts them; flattened where an aligned block
    # pair shows the exporter's reshape (findings.flattened), not the model's own.
    flat_a = [x for d in diffs for x in flattened(d.facts_a.dots, d.facts_b.dots)]
    flat_b = [x for d in diffs for x in flattened(d.facts_b.dots, d.facts_a.dots)]
    totals = [m.histogram()["stablehlo.dot_general"] for m in modules] if modules else \
        [sum(len(d.facts_a.dots) for d in diffs), sum(len(d.facts_b.dots) for d in diffs)]
    if any(totals):
        def flat(dots, total) -> dict:
            return {"flattened": len(dots), "dots": total,
                    "example": [dots[0].flattened_from, dots[0].lhs] if dots else None}
        out.append(Summary("flattening", {"a": flat(flat_a, totals[0]), "b": flat(flat_b, totals[1])}))
    emb = [d for d in diffs if d.a.role == "embedding"]
    if emb:
        def how(fs) -> dict:
            f = _merge(fs)
            return {"iota": bool(f.iota), "constant_tables": bool(f.constant_tables), "calls": sorted(f.calls),
                    "gathers": f.histogram["stablehlo.gather"], "converts": sorted(f.converts)}
        out.append(Summary("embedding", {"a": how([d.facts_a for d in emb]), "b": how([d.facts_b for d in emb])}))
    train = training_summary(diffs, modules) if modules else None
    if train:
        out.append(train)
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


# An op's line (`%3 = stablehlo.add ...`, `"stablehlo.case"(...)`), matched over the whole file (MULTILINE),
# each match the whole line; a line that names no op (a location, a block label, a closing brace)
# cannot match: its first character is none of these.
_OP_LINES = re.compile(r'^[ \t]*(?:%[^=\n]*=[ \t]*)?"?([a-z_]\w*(?:\.[\w.]+)?)"?[ \t(<{\r].*$', re.M)
_LOC_TAIL = re.compile(r"\s+loc\((?:[^()]|\([^()]*\))*\)\s*$")


def source_lines(module: Module) -> dict | None:
    """Op id -> (line number, the line as written) in the module's own file, matched op by op in
    program order; None when the file cannot be read or the match fails somewhere (a region printed
    in its compact form, `reduce ... applies stablehlo.add`, has no lines of its own: its ops get
    none). The trailing location is dropped from each line. Found once per module."""
    if "source lines" not in module.scratch:
        module.scratch["source lines"] = _source_lines(module)
    return module.scratch["source lines"]


def _source_lines(module: Module) -> dict | None:
    try:
        text = Path(module.source).read_text(errors="replace")
    except (OSError, ValueError):
        return None
    candidates = []
    n, at = 1, 0
    for m in _OP_LINES.finditer(text):  # one pass in the regex engine: 110k-op files are read in a blink
        name = m.group(1)
        name = {"return": "func.return", "call": "func.call"}.get(name, name)
        if "." not in name or name == "func.func":
            continue
        n += text.count("\n", at, m.start())
        at = m.start()
        # MHLO reads as StableHLO (ir.parse legalizes it)
        candidates.append((n, "stablehlo." + name[5:] if name.startswith("mhlo.") else name, m.group(0)))
    out, j = {}, 0
    for op in module.ops:
        if j < len(candidates) and candidates[j][1] == op.name:
            out[op.id] = candidates[j][0], candidates[j][2]  # the line as written: excerpt() drops its location
            j += 1
        elif op.parent is None:
            return None  # the text and the parsed module disagree: no line numbers rather than wrong ones
    return out


def excerpt(module: Module, block: Block, limit: int = EXCERPT_LINES, lines: dict | None = None) -> list[str]:
    """The block's ops as IR lines: with `lines` (source_lines) the file's own lines and line numbers
    (`L123: %12 = stablehlo.add %10, %11 : tensor<2x16x64xf32>`), else compact lines rebuilt from the
    parsed ops (`%12 = stablehlo.add %10, %11 : 2x16x64xf32`, values numbered by the parser)."""
    out = []
    if lines:
        for op, _ in block.ops:
            if op.name.endswith("return") or op.id not in lines:
                continue
            n, text = lines[op.id]
            text = _LOC_TAIL.sub("", text.strip())
            out.append(f"L{n}: {text}")
            if len(out) == limit:
                out.append(f"... {len(block.ops) - limit} more ops")
                break
        if out:
            return out
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
