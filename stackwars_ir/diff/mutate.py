"""Mutation testing of the diff: real programs changed in meaning (each must be reported, in its block) or in spelling only (each must be identical).

A mutant is made with the real MLIR bindings on a fresh parse of the program, verified by MLIR (an
invalid one is not made), and printed; `judge` diffs it against the original text as a user would
(parse, segment, align, op diff) and says whether the diff answered right. benchmarks/mutations.py runs
this over the shared corpus and the golden captures (docs/benchmarks.md); tests/test_mutations.py a
seeded subset.
"""
from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass, field

# Mutants that change what the program computes: the diff must say so (exit 1), in the block of the op.
MEANING = ("swap_operands", "retarget_operand", "attribute", "constant", "comparison", "region_op",
           "delete_op", "add_op")
# Variants that change only how it is written: the diff must say "identical" (exit 0).
SPELLING = ("generic_form", "no_locations", "bytecode", "ssa_names", "helper_names", "reorder",
            "commutative", "mhlo")
COMMUTATIVE = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
                         "stablehlo.and", "stablehlo.or", "stablehlo.xor"})
# Ops whose order or presence is an effect of its own: never moved, deleted or added around.
_EFFECTS = re.compile(r"custom_call|rng|infeed|outfeed|send|recv|all_|collective|reduce_scatter|"
                      r"optimization_barrier|partition_id|replica_id|return|func\.|sdy\.|composite|while|case|if$")
_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")


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


def mutants(text: str, source: str, rng: random.Random, kinds=MEANING + SPELLING) -> list:
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

    from ..ir.parse import CONTEXTS

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
            return _text_mutant(source, kind, _renamed_ssa(text), "every SSA value renamed")
        try:
            done = _SPELLINGS[kind](module, ops, rng) if kind in _SPELLINGS else _MEANINGS[kind](module, ops, rng, ir)
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
    """(op, parent op or None) of every op as the parser numbers them (ir/parse.py: the functions'
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


def _pick(rng: random.Random, candidates: list):
    return rng.choice(candidates) if candidates else None


def _word(op, i: int) -> str:
    return f"{op.name} (op {i})"


def _pure(op) -> bool:
    return not _EFFECTS.search(op.name) and not len(op.regions)


# Meaning-changing mutations: each returns (target op number, what, print form) or None.

def _swap_operands(module, ops, rng, ir, within=None):
    cands = [(i, op) for i, (op, parent) in enumerate(ops) if (within is None or within(parent))
             and op.name not in COMMUTATIVE and _pure(op) and len(op.operands) >= 2
             and op.operands[0].type == op.operands[1].type and op.operands[0] != op.operands[1]
             and not _same_constant(op.operands[0], op.operands[1])]
    hit = _pick(rng, cands)
    if hit is None:
        return None
    i, op = hit
    a, b = op.operands[0], op.operands[1]
    op.operands[0], op.operands[1] = b, a
    return i, f"swap the first two operands of {_word(op, i)}", "text"


def _retarget_operand(module, ops, rng, ir, within=None):
    cands = []
    for i, (op, parent) in enumerate(ops):
        if (within is not None and not within(parent)) or not len(op.operands) or op.name == "func.return":
            continue
        for k, v in enumerate(op.operands):
            others = [w for w in _visible(op) if w.type == v.type and w != v and not _same_constant(v, w)]
            if others:
                cands.append((i, op, k, others))
    hit = _pick(rng, cands)
    if hit is None:
        return None
    i, op, k, others = hit
    op.operands[k] = rng.choice(others)
    return i, f"operand {k} of {_word(op, i)} pointed at another value of its type", "text"


def _same_constant(v, w, depth: int = 0) -> bool:
    """Whether two values are one value: the same, one constant value (another copy, or a splat
    broadcast to its own shape), or the same op on values that are one value (a computation made
    twice): swapping or pointing at such a value changes nothing."""
    v, w = _through_call(v), _through_call(w)
    if v == w:
        return True
    cv, cw = _constant_value(v), _constant_value(w)
    if cv is not None and cv == cw:
        return True
    from jaxlib.mlir import ir

    ov, ow = v.owner, w.owner
    if depth > 8 or not isinstance(ov, (ir.Operation, ir.OpView)) or not isinstance(ow, (ir.Operation, ir.OpView)):
        return False
    ov, ow = ov.operation, ow.operation
    if ov.name != ow.name or len(ov.operands) != len(ow.operands) or len(ov.regions) or len(ow.regions) \
            or list(ov.results).index(v) != list(ow.results).index(w):
        return False
    if _attrs_text(ov) != _attrs_text(ow):
        return False
    return all(_same_constant(x, y, depth + 1) for x, y in zip(ov.operands, ow.operands))


def _through_call(v, depth: int = 0):
    """What a func.call's result is inside its callee (the value the callee returns); any other
    value as it is."""
    from jaxlib.mlir import ir

    owner = v.owner
    if depth > 8 or not isinstance(owner, (ir.Operation, ir.OpView)) or owner.operation.name != "func.call":
        return v
    call = owner.operation
    module = call
    while module is not None and module.name != "builtin.module":
        module = module.parent
    if module is None:
        return v
    name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    try:
        callee = ir.SymbolTable(module.operation)[name].operation
    except KeyError:
        return v
    ret = list(callee.regions[0].blocks[0].operations)[-1].operation
    k = list(call.results).index(v)
    return _through_call(ret.operands[k], depth + 1) if k < len(ret.operands) else v


def _attrs_text(op) -> list:
    """An op's attributes as sorted (name, printed) pairs. Read by name: an attribute the bindings
    cannot downcast (a complex constant) raises TypeError there, where reading it any other way
    aborts the process."""
    out = []
    for key in op.attributes:
        key = key if isinstance(key, str) else key.name
        try:
            out.append((key, str(op.attributes[key])))
        except TypeError as e:
            out.append((key, str(e)))
    return sorted(out)


def _constant_value(v, depth: int = 0):
    """(elements as printed, type) of a constant's value, a splat seen through broadcasts and
    reshapes; None for anything else."""
    from jaxlib.mlir import ir

    v = _through_call(v)
    owner = v.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or depth > 4:
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if op.name.endswith(".constant"):
        text = dict(_attrs_text(op)).get("value", "")
        m = re.fullmatch(r"dense<([^<>\[\]]*)> : .*", text)
        return ("splat", m.group(1), str(v.type)) if m else (text, str(v.type))
    if op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape") and len(op.operands) == 1:
        inner = _constant_value(op.operands[0], depth + 1)
        if inner is not None and inner[0] == "splat":
            return ("splat", inner[1], str(v.type))
    return None


def _visible(op) -> list:
    """Values an op may read: its block's arguments and the results of the ops before it in the block."""
    block = op.block
    out = list(block.arguments)
    for other in block.operations:
        other = other.operation
        if other == op:
            break
        out.extend(other.results)
    return out


def _attribute(module, ops, rng, ir, within=None, only=None):
    cands = []
    for i, (op, parent) in enumerate(ops):
        if (within is not None and not within(parent)) or op.name.startswith(("func.", "sdy.")):
            continue
        for named in op.attributes:
            key = named if isinstance(named, str) else named.name
            if key in ("value", "callee", "sym_name", "decomposition", "call_target_name", "backend_config") \
                    or (only and key != only):
                continue
            cands.append((i, op, key))
    rng.shuffle(cands)
    for i, op, key in cands[:12]:
        old = op.attributes[key]
        for new in _other_values(old, rng, ir):
            op.attributes[key] = new
            try:
                op.verify()
            except ir.MLIRError:
                continue
            if str(new) != str(old):
                return i, f"{key} of {_word(op, i)}: {_cut(str(old))} -> {_cut(str(new))}", "text"
        op.attributes[key] = old
    return None


def _cut(text: str) -> str:
    return text if len(text) <= 50 else text[:47] + "..."


def _other_values(a, rng, ir) -> list:
    """Other values of an attribute's kind, most likely valid first."""
    text = str(a)
    out = []
    m = re.search(r"comparison_direction (\w+)", text)
    if m:
        return [ir.Attribute.parse(text.replace(m.group(1), d)) for d in _DIRECTIONS if d != m.group(1)]
    if "precision" in text:
        for p in ("HIGHEST", "HIGH", "DEFAULT"):
            new = re.sub(r"precision \w+", f"precision {p}", text)
            if new != text:
                out.append(ir.Attribute.parse(new))
        return out
    if isinstance(a, ir.BoolAttr):
        return [ir.BoolAttr.get(not a.value)]
    if isinstance(a, ir.IntegerAttr):
        return [ir.IntegerAttr.get(a.type, a.value + d) for d in (1, -1, 2)]
    if isinstance(a, ir.FloatAttr):
        return [ir.FloatAttr.get(a.type, a.value * 2 + 1)]
    if isinstance(a, ir.DenseI64ArrayAttr):
        values = list(a)
        cands = []
        if len(values) > 1:
            cands.append(list(reversed(values)))
            cands.append(values[1:] + values[:1])
        if values:
            cands.append(values[:-1] + [values[-1] + 1])
            cands.append(values[:-1] + [max(0, values[-1] - 1)])
        return [ir.DenseI64ArrayAttr.get(c) for c in cands if c != values]
    if isinstance(a, ir.DenseIntElementsAttr):  # an older spelling of dimensions
        values = [int(x) for x in a]
        if len(values) > 1:
            t = ir.ShapedType(a.type)
            return [ir.DenseIntElementsAttr.get(__import__("numpy").array(list(reversed(values)), dtype="int64"),
                                                type=t)]
    # dimension numbers and other structured attributes: a number in them changed
    nums = list(re.finditer(r"(?<![\w.])(\d+)(?![\w.])", text))
    rng.shuffle(nums)
    for m in nums[:4]:
        for d in (1, -1):
            n = int(m.group(1)) + d
            if n >= 0:
                try:
                    out.append(ir.Attribute.parse(text[:m.start()] + str(n) + text[m.end():]))
                except (ir.MLIRError, ValueError):
                    continue
    return out


def _comparison(module, ops, rng, ir):
    return _attribute(module, ops, rng, ir, only="comparison_direction")


def _constant(module, ops, rng, ir, within=None):
    import numpy as np

    cands = [(i, op) for i, (op, parent) in enumerate(ops) if op.name.endswith(".constant")
             and (within is None or within(parent))]
    rng.shuffle(cands)
    for i, op in cands[:8]:
        a = op.attributes["value"]
        try:
            values = np.array(ir.DenseElementsAttr(a))
        except (TypeError, ValueError, RuntimeError):
            continue
        t = ir.ShapedType(a.type)
        if values.size == 0 or values.dtype.kind not in "fiub":
            continue
        new = values.copy().reshape(-1) if values.ndim else values.reshape(1).copy()
        k = rng.randrange(new.size)
        if new.dtype.kind == "b":
            new[k] = not new[k]
        elif new.dtype.kind == "f":
            with np.errstate(over="ignore"):
                new[k] = new[k] * 2 + 1 if np.isfinite(new[k]) and abs(new[k]) < 1e30 else 0
        else:
            new[k] = new[k] + 1 if new[k] < np.iinfo(new.dtype).max else new[k] - 1
        try:
            if a.is_splat:  # written as its one element, at the constant's type
                x = new.reshape(-1)[0]
                literal = ("true" if x else "false") if new.dtype.kind == "b" else \
                    repr(float(x)) if new.dtype.kind == "f" else str(int(x))
                attr = ir.Attribute.parse(f"dense<{literal}> : {a.type}")
            else:
                attr = ir.DenseElementsAttr.get(np.ascontiguousarray(new.reshape(values.shape)), type=t.element_type)
        except (TypeError, ValueError, RuntimeError, ir.MLIRError):
            continue
        if str(attr) == str(a):
            continue
        op.attributes["value"] = attr
        return i, f"one element of {_word(op, i)} changed", "text"
    return None


def _region_op(module, ops, rng, ir):
    """One of the other mutations applied to an op inside a region (a reduce's body, a loop's)."""
    def inside(parent) -> bool:
        return parent is not None

    kinds = [_attribute, _swap_operands, _retarget_operand, _constant]
    rng.shuffle(kinds)
    for make in kinds:
        done = make(module, ops, rng, ir, within=inside)
        if done is not None:
            i, what, form = done
            return i, f"in a region: {what}", form
    return None


def _delete_op(module, ops, rng, ir):
    cands = [(i, op) for i, (op, parent) in enumerate(ops) if _pure(op) and len(op.results) == 1
             and any(v.type == op.results[0].type for v in op.operands)]
    hit = _pick(rng, cands)
    if hit is None:
        return None
    i, op = hit
    keep = next(v for v in op.operands if v.type == op.results[0].type)
    op.results[0].replace_all_uses_with(keep)
    name = _word(op, i)
    op.erase()
    return i, f"{name} deleted, its readers reading its operand", "text"


def _add_op(module, ops, rng, ir):
    cands = [(i, op) for i, (op, parent) in enumerate(ops) if len(op.results) == 1 and _pure(op)
             and re.match(r"tensor<[0-9x]*(f|bf|i(?!1>)|ui)\d+>", str(op.results[0].type))]
    hit = _pick(rng, cands)
    if hit is None:
        return None
    i, op = hit
    r = op.results[0]
    name = "stablehlo.negate" if "f" in str(r.type).split("x")[-1] else "stablehlo.not"
    if "ui" in str(r.type).split("x")[-1]:
        name = "stablehlo.not"
    with ir.InsertionPoint(op):
        new = ir.Operation.create(name, results=[r.type], operands=[r], loc=op.location)
    new.move_after(op)
    r.replace_all_uses_except(new.result, new)
    return i, f"a {name.split('.')[1]} added after {_word(op, i)}", "text"


_MEANINGS = {"swap_operands": _swap_operands, "retarget_operand": _retarget_operand, "attribute": _attribute,
             "constant": _constant, "comparison": _comparison, "region_op": _region_op,
             "delete_op": _delete_op, "add_op": _add_op}


# Spelling-only variants.

def _generic(module, ops, rng):
    return None, "printed in MLIR's generic form", "generic"


def _no_locations(module, ops, rng):
    return None, "printed without locations", "no_locations"


def _bytecode(module, ops, rng):
    return None, "written as MLIR bytecode", "bytecode"


def _helper_names(module, ops, rng):
    from jaxlib.mlir import ir

    renamed = 0
    for top in module.body.operations:
        top = top.operation
        if top.name != "func.func" or "sym_visibility" not in top.attributes:
            continue
        old = ir.StringAttr(top.attributes["sym_name"]).value
        new = f"{old}_renamed{renamed}"
        ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
        ir.SymbolTable.set_symbol_name(top, new)
        renamed += 1
    return (None, f"{renamed} helper functions renamed", "text") if renamed else None


def _reorder(module, ops, rng):
    cands = []
    for i, (op, parent) in enumerate(ops):
        if not _pure(op):
            continue
        block = op.block
        before = []
        for other in block.operations:
            other = other.operation
            if other == op:
                break
            before.append(other)
        operands = list(op.operands)
        last = -1  # the last op before it that makes one of its operands
        for k, other in enumerate(before):
            if any(r in operands for r in other.results):
                last = k
        if last + 1 < len(before) - 1:
            cands.append((op, before[last + 1]))
    hit = _pick(rng, cands)
    if hit is None:
        return None
    op, anchor = hit
    op.move_before(anchor)
    return None, f"{op.name} moved up before an op it does not depend on", "text"


def _commutative(module, ops, rng):
    cands = [op for op, _ in ops if op.name in COMMUTATIVE and len(op.operands) == 2
             and op.operands[0] != op.operands[1]]
    op = _pick(rng, cands)
    if op is None:
        return None
    a, b = op.operands[0], op.operands[1]
    op.operands[0], op.operands[1] = b, a
    return None, f"the operands of {op.name} swapped", "text"


def _mhlo(module, ops, rng):
    from jaxlib.mlir import passmanager
    from jaxlib.mlir.dialects import mhlo

    from ..ir import parse

    if not parse._MHLO_PASSES:
        mhlo.register_mhlo_passes()
        parse._MHLO_PASSES = True
    passmanager.PassManager.parse("builtin.module(stablehlo-legalize-to-hlo)").run(module.operation)
    return None, "legalized to MHLO", "text"


_SPELLINGS = {"generic_form": _generic, "no_locations": _no_locations, "bytecode": _bytecode,
              "helper_names": _helper_names, "reorder": _reorder, "commutative": _commutative, "mhlo": _mhlo}

_SSA = re.compile(r"%([A-Za-z_$.][\w$.-]*|\d+)")


def _renamed_ssa(text: str) -> str | None:
    """Every SSA name replaced by another, consistently (`%0` -> `%v_0`, `%arg1` -> `%v_arg1`)."""
    if "%" not in text:
        return None
    return _SSA.sub(lambda m: f"%v_{m.group(1).replace('.', '_')}", text)


def judge(original: bytes, mutant: Mutant) -> Verdict:
    """Diff the original against the mutant as `stackwars-ir diff` does and say whether the answer is
    right: a meaning-changing mutant differs, and the block of the op changed says so (or that
    op's block is one side's alone); a spelling variant is identical."""
    from ..ir.model import Module
    from ..ir.parse import parse_wire
    from .analysis import diff_modules

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


def run(sources: list, rounds: int = 1, seed: int = 0, max_bytes: int = 200_000, progress=None) -> MutationReport:
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
