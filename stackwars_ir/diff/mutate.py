"""Mutation testing of the diff: real programs changed in meaning or in spelling only, each judged.

A change in meaning must be reported, in its block; a change in spelling only must diff identical.

A mutant is made with the real MLIR bindings on a fresh parse of the program, verified by MLIR (an
invalid one is not made), and printed; `judge` diffs it against the original text as a user would
(parse, segment, align, op diff) and says whether the diff answered right. benchmarks/mutations.py runs
this over the shared corpus and the golden captures (docs/benchmarks.md); tests/test_mutations.py a
seeded subset.
"""
from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..ir.model import Module
from ..ir.parse import CONTEXTS, parse_wire
from .analysis import diff_modules
from .mutants import MEANING_CHANGES, SPELLING_CHANGES, renamed_ssa

# Mutants that change what the program computes: the diff must say so (exit 1), in the block of the op.
MEANING = ("swap_operands", "retarget_operand", "attribute", "constant", "comparison", "region_op",
           "delete_op", "add_op")
# Variants that change only how it is written: the diff must say "identical" (exit 0).
SPELLING = ("generic_form", "no_locations", "bytecode", "ssa_names", "helper_names", "reorder",
            "commutative", "mhlo")


@dataclass(frozen=True)
class Mutant:
    """One program made from another: what was done, to which op, and its bytes (text or bytecode)."""

    source: str  # the original's label (its file)
    kind: str  # one of MEANING or SPELLING
    target: int | None  # the op changed, numbered as the parser numbers the original's ops; None: none
    what: str  # in words: "swap the operands of stablehlo.subtract (op 4)"
    data: bytes = field(repr=False)

    @property
    def changes_meaning(self) -> bool:
        return self.kind in MEANING


@dataclass(frozen=True)
class Verdict:
    """How the diff answered one mutant: right or not, and what it said."""

    mutant: Mutant
    right: bool
    said: str  # the diff's answer in a few words (what differs, or "identical")


def mutants(text: str, source: str, rng: random.Random, kinds: Iterable[str] = MEANING + SPELLING) -> list:
    """One mutant of each kind that this program allows (a program without a comparison has no
    "comparison" mutant), each made on a fresh parse of `text`."""
    out = []
    for kind in kinds:
        made = _make(text, source, kind, rng)
        if made is not None:
            out.append(made)
    return out


def _make(text: str, source: str, kind: str, rng: random.Random) -> Mutant | None:
    from jaxlib.mlir import ir

    if "!quant." in text:
        # jaxlib's bindings read !quant types only once a portable artifact has loaded the dialect into
        # the context (ir/parse.py reads such files with IREE's): whether one parses would hang on what the
        # process ran before. Quantized programs are left out, the same in every run.
        return None
    ctx = CONTEXTS.jaxlib()
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError:
            return None
        ops = _numbered(module)
        if kind == "ssa_names":
            return _text_mutant(source, kind, renamed_ssa(text), "every SSA value renamed")
        try:
            done = SPELLING_CHANGES[kind](module, ops, rng) if kind in SPELLING_CHANGES else MEANING_CHANGES[kind](module, ops, rng, ir)
        except (ir.MLIRError, ValueError, TypeError, IndexError, RuntimeError):
            return None
        if done is None:
            return None
        target, what, form = done
        try:
            module.operation.verify()
        except ir.MLIRError:
            return None
        return Mutant(source, kind, target, what, _printed(module, form))


def _printed(module, form: str) -> bytes:
    if form == "bytecode":
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        return buf.getvalue()
    return module.operation.get_asm(enable_debug_info=form != "no_locations",
                                    print_generic_op_form=form == "generic").encode()


def _text_mutant(source: str, kind: str, text: str | None, what: str) -> Mutant | None:
    return None if text is None else Mutant(source, kind, None, what, text.encode())


def _numbered(module) -> list:
    """(op, parent op or None) of every op as the parser numbers them (ir/builder.py: the functions'
    ops in order, each followed by the ops of its regions; module-level others in place)."""
    out = []

    def walk(op, parent):
        out.append((op, parent))
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    walk(inner.operation, op)

    for top in module.body.operations:
        top = top.operation
        if top.name == "func.func":
            for region in top.regions:
                for block in region.blocks:
                    for op in block.operations:
                        walk(op.operation, None)
        else:
            walk(top, None)
    return out


# Meaning-changing mutations: each returns (target op number, what, print form) or None.


# Spelling-only variants.


def judge(original: bytes, mutant: Mutant) -> Verdict:
    """Diff the original against the mutant as `stackwars-ir diff` does and say whether the answer is
    right: a meaning-changing mutant differs, and the block of the op changed says so (or that
    op's block is one side's alone); a spelling variant is identical."""

    a = Module.from_wire(*parse_wire(original, mutant.source)[:1])
    b = Module.from_wire(*parse_wire(mutant.data, mutant.source + "~")[:1])
    result = diff_modules(a, b).result(excerpts="first_of_role")
    said = _said(result)
    if not mutant.changes_meaning:
        return Verdict(mutant, not result.differs, said)
    if not result.differs:
        return Verdict(mutant, False, said)
    around = {mutant.target}  # the op, and the ops whose regions hold it (a block lists those)
    i = mutant.target
    while i is not None and i < len(a.ops) and a.ops[i].parent is not None:
        i = a.ops[i].parent
        around.add(i)
    holding = [d for d in result.blocks if around & set(d.ops_a)]
    right = any(d.differs for d in holding) or (not holding and bool(result.only_a or result.only_b)) \
        or (not holding and bool(result.interface))
    return Verdict(mutant, right, said)


def _said(result) -> str:
    if not result.differs:
        return "identical"
    for d in result.blocks:
        if d.op_diff is not None:
            for g in d.op_diff.groups:
                names = ", ".join(n.split(".", 1)[-1] for n in (g.names_a or g.names_b)[:3])
                return f"{d.label}: {g.status} {names}" + (f": {g.what[0]}" if g.what else "")
        if d.delta:
            return f"{d.label}: ops " + ", ".join(f"{k} {v:+d}" for k, v in list(d.delta.items())[:3])
    if result.interface:
        return "entry function: " + result.interface[0]
    if result.only_a or result.only_b:
        return "blocks on one side only"
    return "op counts differ"


@dataclass(frozen=True)
class MutationReport:
    """A mutation run: per kind, mutants made and answered right; every wrong answer with what it said."""

    sources: int
    made: dict  # kind -> mutants made
    right: dict  # kind -> answered right
    misses: tuple  # Verdict of every wrong answer
    errors: tuple  # (source, kind, what, error) where the diff itself failed

    def total(self, meaning: bool) -> tuple[int, int]:
        """(made, right) over the meaning-changing kinds, or over the spelling-only ones."""
        kinds = MEANING if meaning else SPELLING
        return sum(self.made.get(k, 0) for k in kinds), sum(self.right.get(k, 0) for k in kinds)

    def lines(self) -> list[str]:
        """The run as a Markdown table and the list of misses."""
        out = ["| kind | changes meaning | mutants | answered right | misses |", "| --- | --- | ---: | ---: | ---: |"]
        for kind in MEANING + SPELLING:
            n, r = self.made.get(kind, 0), self.right.get(kind, 0)
            out.append(f"| {kind} | {'yes' if kind in MEANING else 'no'} | {n:,} | {r:,} | {n - r:,} |")
        for meaning in (True, False):
            n, r = self.total(meaning)
            share = f"{(n - r) / n:.2%}" if n else "-"
            out.append(f"| **all {'meaning-changing' if meaning else 'spelling-only'}** | | **{n:,}** | **{r:,}** | "
                       f"**{n - r:,} ({share})** |")
        for v in self.misses:
            out.append(f"- miss: {v.mutant.kind}, {v.mutant.source}: {v.mutant.what}; the diff said: {v.said}")
        for source, kind, what, error in self.errors:
            out.append(f"- error: {kind}, {source}: {what}: {error}")
        return out


def run(sources: list, rounds: int = 1, seed: int = 0, max_bytes: int = 200_000,
        progress: Callable[[int], object] | None = None) -> MutationReport:
    """Every kind of mutant of every source (each `rounds` times, seeded), each judged: the whole
    mutation test. Sources over `max_bytes` are left out (the parse and the printer dominate)."""
    from collections import Counter
    from pathlib import Path

    rng = random.Random(seed)
    made, right, misses, errors = Counter(), Counter(), [], []
    used = 0
    for path in sources:
        data = Path(path).read_bytes()
        if len(data) > max_bytes:
            continue
        text = data.decode("utf-8", errors="replace")
        used += 1
        label = Path(path).name if "corpus" in str(path) else str(path)
        for _ in range(rounds):
            for m in mutants(text, label, rng):
                made[m.kind] += 1
                try:
                    v = judge(data, m)
                except Exception as e:  # noqa: BLE001 (a failure of the diff is a finding of the run)
                    errors.append((label, m.kind, m.what, f"{type(e).__name__}: {str(e)[:200]}"))
                    continue
                if v.right:
                    right[m.kind] += 1
                else:
                    misses.append(v)
        if progress:
            progress(used)
    return MutationReport(used, dict(made), dict(right), tuple(misses), tuple(errors))
