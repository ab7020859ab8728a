"""The mutation test's mutations: each kind that changes what a program computes, each that respells."""
from __future__ import annotations

import random
import re

from ..ir import parse

COMMUTATIVE = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
                         "stablehlo.and", "stablehlo.or", "stablehlo.xor"})

# Ops whose order or presence is an effect of its own: never moved, deleted or added around.
_EFFECTS = re.compile(r"custom_call|rng|infeed|outfeed|send|recv|all_|collective|reduce_scatter|"
                      r"optimization_barrier|partition_id|replica_id|return|func\.|sdy\.|composite|while|case|if$")

_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")


def _pick(rng: random.Random, candidates: list):
    return rng.choice(candidates) if candidates else None


def _word(op, i: int) -> str:
    return f"{op.name} (op {i})"


def _pure(op) -> bool:
    return not _EFFECTS.search(op.name) and not len(op.regions)


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


MEANING_CHANGES = {"swap_operands": _swap_operands, "retarget_operand": _retarget_operand, "attribute": _attribute,
             "constant": _constant, "comparison": _comparison, "region_op": _region_op,
             "delete_op": _delete_op, "add_op": _add_op}


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

    if not parse._MHLO_PASSES:
        mhlo.register_mhlo_passes()
        parse._MHLO_PASSES = True
    passmanager.PassManager.parse("builtin.module(stablehlo-legalize-to-hlo)").run(module.operation)
    return None, "legalized to MHLO", "text"


SPELLING_CHANGES = {"generic_form": _generic, "no_locations": _no_locations, "bytecode": _bytecode,
              "helper_names": _helper_names, "reorder": _reorder, "commutative": _commutative, "mhlo": _mhlo}

_SSA = re.compile(r"%([A-Za-z_$.][\w$.-]*|\d+)")


def renamed_ssa(text: str) -> str | None:
    """Every SSA name replaced by another, consistently (`%0` -> `%v_0`, `%arg1` -> `%v_arg1`)."""
    if "%" not in text:
        return None
    return _SSA.sub(lambda m: f"%v_{m.group(1).replace('.', '_')}", text)
