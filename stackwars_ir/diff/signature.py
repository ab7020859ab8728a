"""What an op computes without its operands: name, result types, attributes and its regions' print."""
from __future__ import annotations

import re

from ..ir.model import Module, Op

COMMUTATIVE = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
                         "stablehlo.and", "stablehlo.or", "stablehlo.xor"})
TERMINATORS = frozenset({"func.return", "stablehlo.return", "mhlo.return", "sdy.return"})

# Attributes that name a helper function rather than say what is computed: the helper's ops are compared
# where the block inlines them (Module.inlined), so two names for one helper are one helper.
_NAMING = frozenset({"callee", "decomposition", "called_computations", "sym_name"})


def splat_key(module: Module, op: Op) -> tuple | None:
    """("splat", element, dtype, shape) of a constant whose elements are all one value, else None."""
    if not op.name.endswith(".constant") or not op.attr("splat") or len(op.results) != 1:
        return None
    m = re.match(r"dense<([^<>]*)>", str(op.attr("value") or ""))
    if m is None:
        return None
    t = module.values[op.results[0]].type
    return ("splat", m.group(1), t.dtype, t.shape)


def resolved_values(module: Module) -> dict:
    """value id -> the value it is through calls (Module.through_calls, through_returns), for the values
    where that is another: the arguments of helpers called once, the results of calls."""
    hit = module.scratch.get("resolved")
    if hit is None:
        hit = {}
        for op in module.ops:
            if op.name == "func.call" or op.name.endswith(".composite"):
                for v in op.results:
                    to = module.through_returns(v)
                    if to != v:
                        hit[v] = to
        for f in module.funcs:
            for v in f.args:
                to = module.through_returns(module.through_calls(v))
                if to != v:
                    hit[v] = to
        module.scratch["resolved"] = hit
    return hit


def op_signature(module: Module, i: int) -> tuple:
    """(signature, captured) of op `i`, its regions' print included (_region_print), derived once per
    module: every block and the whole program read the same."""
    cache = module.scratch.setdefault("op signatures", {})
    hit = cache.get(i)
    if hit is None:
        inner = module.nested.get(i, ())
        region, captured = _region_print(module, i, inner) if inner else (None, ())
        hit = cache[i] = (_signature(module, module.ops[i], region), captured)
    return hit


def bare_signature(module: Module, i: int) -> tuple:
    """The signature of op `i` without its regions (as a nested op is printed), derived once."""
    cache = module.scratch.setdefault("bare signatures", {})
    hit = cache.get(i)
    if hit is None:
        hit = cache[i] = _signature(module, module.ops[i], None)
    return hit


def _region_print(module: Module, holder: int, inner: tuple) -> tuple:
    """(fingerprint, captured) of what an op's regions compute: every nested op's name, result types,
    attributes and where its operands come from (another nested op's result, a region's argument by
    position, or a value from outside: `captured`, in order of first read), as a multiset, so the
    order of independent ops inside a region does not count."""
    ops, values = module.ops, module.values
    local: dict = {}
    captured: list = []
    where = {holder: 0}
    for k, c in enumerate(inner, start=1):
        where[c] = k
    prints = []
    region_of: dict = {}  # which of the holder's regions each nested op sits in (a case's branches differ)
    region = 0
    for c in inner:
        op = ops[c]
        if op.parent == holder:
            region_of[c] = region
            if op.name in TERMINATORS:  # a terminator ends the region (StableHLO regions hold one block)
                region += 1
        else:
            region_of[c] = region_of.get(op.parent, region)
        refs = []
        for v in op.operands:
            r = local.get(v)
            if r is None:
                val = values[v]
                if val.producer in where and v not in ops[val.producer].results:
                    r = ("region argument", where[val.producer], val.arg_index)
                else:
                    if v not in captured:
                        captured.append(v)
                    r = ("outside", captured.index(v), str(val.type))
            refs.append(r)
        if op.name in COMMUTATIVE:
            refs.sort(key=repr)  # x + y and y + x alike
        h = hash((region_of[c], bare_signature(module, c), tuple(refs)))
        for k, r in enumerate(op.results):
            local[r] = ("op", h, k)
        prints.append(h)
    return hash(tuple(sorted(prints))), tuple(captured)


def _signature(module: Module, op: Op, region) -> tuple:
    """What an op computes, without its operands: its name, result types, every attribute (a helper's
    name aside; defaults one exporter spells and another omits left out) and its regions' print."""
    types = tuple(module.values[v].type for v in op.results)  # Tensor: (shape, dtype), compared as is
    attrs = tuple((k, v) for k, v in op.attrs if k not in _NAMING and not _is_default(k, v)
                  and not (k == "compare_type" and op.operands and
                           _default_compare(module.values[op.operands[0]].type.dtype) in str(v)))
    return (op.name, types, attrs, region)


def _default_compare(dtype: str) -> str:
    """The comparison type a compare takes when it names none: FLOAT for floats, SIGNED for signed
    integers, UNSIGNED for unsigned ones and booleans (StableHLO's spec)."""
    if dtype.startswith(("f", "bf", "complex")):
        return "comparison_type FLOAT>"
    if dtype.startswith("ui") or dtype == "i1":
        return "comparison_type UNSIGNED>"
    return "comparison_type SIGNED>"


def _is_default(key: str, value) -> bool:
    """An attribute one exporter spells out at its default where the other leaves it out."""
    if key in ("indices_are_sorted", "unique_indices", "has_side_effect"):
        return value is False
    if key == "precision_config":
        return all(p == "DEFAULT" for p in re.findall(r"precision (\w+)", str(value)))
    if key in ("lhs_dilation", "rhs_dilation", "window_strides", "window_dilations", "base_dilations"):
        return isinstance(value, tuple) and all(v == 1 for v in value)
    if key == "padding":
        return re.fullmatch(r"dense<[\[\]0, ]*> : tensor<\d+x2xi64>", str(value)) is not None
    if key == "window_reversal":
        return re.fullmatch(r"array<i1(: false(, false)*)?>", str(value)) is not None
    if key == "result_accuracy":
        return re.fullmatch(r"#stablehlo\.result_accuracy<mode = #stablehlo\.result_accuracy_mode<DEFAULT>>",
                            str(value)) is not None
    if key == "backend_config":
        return value in ("", "{}")
    return False
