"""A pairing judged and said in words: what changed in each pair, its operands' wiring, the groups."""
from __future__ import annotations

import re
from collections import Counter, defaultdict

from ..ir.model import callees
from .ops import OpDiff, OpGroup
from .side import Side
from .signature import COMMUTATIVE, TERMINATORS, bare_signature


def _what_changed(a: Side, b: Side, x: int, y: int) -> tuple:
    sa, sb = a.sig[x], b.sig[y]
    if sa[0] != sb[0]:
        return ()  # another op: its types and attributes are its own
    out = _signature_changes(sa, sb)
    if sa[3] != sb[3]:
        out.append(_region_change(a, b, x, y))
    return tuple(out)


def _signature_changes(sa: tuple, sb: tuple) -> list:
    """Two signatures' result types and attributes where they differ, in words ("result type 2x16x64xf32
    -> 32x64xf32", "comparison_direction EQ -> GE"; a long attribute cut around its first difference)."""
    out = []
    if sa[1] != sb[1]:
        out.append(f"result type {', '.join(map(str, sa[1]))} -> {', '.join(map(str, sb[1]))}")
    attrs_a, attrs_b = dict(sa[2]), dict(sb[2])
    for k in sorted(set(attrs_a) | set(attrs_b), key=str):
        va, vb = attrs_a.get(k, "-"), attrs_b.get(k, "-")
        if va != vb:
            # an attribute on one side only is the whole difference: shown whole up to 240 characters
            # (a DotAlgorithm's accumulation_type was cut off at 60)
            width = 240 if "-" in (va, vb) else 60
            out.append(f"{k} {' -> '.join(_around_difference(_short_form(va), _short_form(vb), width))}")
    return out


def _region_change(a: Side, b: Side, x: int, y: int) -> str:
    """What differs inside two ops' regions, in words: the ops they hold, or, where those are the
    same ops, that one of them reads or is set otherwise."""
    def names(side: Side, i: int) -> Counter:
        return Counter(side.module.ops[c].name.split(".", 1)[-1] for c in side.module.nested.get(i, ())
                       if side.module.ops[c].name not in TERMINATORS)

    na, nb = names(a, x), names(b, y)
    if na != nb:
        gone = ", ".join(f"{k} -{n}" for k, n in sorted((na - nb).items()))
        new = ", ".join(f"{k} +{n}" for k, n in sorted((nb - na).items()))
        return "region ops " + "; ".join(t for t in (gone, new) if t)
    # the same ops: name the first few whose attributes or types differ, in order
    inner_a = [c for c in a.module.nested.get(x, ()) if a.module.ops[c].name not in TERMINATORS]
    inner_b = [c for c in b.module.nested.get(y, ()) if b.module.ops[c].name not in TERMINATORS]
    said = []
    for c, d in zip(inner_a, inner_b):
        sa, sb = bare_signature(a.module, c), bare_signature(b.module, d)
        if sa[0] != sb[0] or sa == sb:
            continue
        said.append(f"its region's {sa[0].split('.', 1)[-1]}: {'; '.join(_signature_changes(sa, sb))}")
        if len(said) == 3:
            break
    if said:
        return "; ".join(said)
    return f"region: the same ops ({', '.join(sorted(na)) or 'none'}), read otherwise or in other regions"


def _wiring(a: Side, b: Side, x: int, y: int, paired_a: dict, paired_b: dict,
            lines_a: dict, lines_b: dict) -> tuple:
    """Where two paired ops' inputs come from, where that differs: 'operand 0 reads argument 1 in A,
    argument 0 in B'. A commutative op's operands compare as a set."""
    ia, ib = a.inputs[x], b.inputs[y]
    na, nb = len(a.module.ops[x].operands), len(b.module.ops[y].operands)
    if na != nb or len(ia) != len(ib):
        return (f"reads {na} operands in A, {nb} in B" if na != nb else
                f"its regions read {len(ia) - na} outside values in A, {len(ib) - nb} in B",)
    # the common case first: each input the result of ops paired with each other, or one argument
    pa, pb = a.producers[x], b.producers[y]
    values_a, values_b = a.module.values, b.module.values
    for k in range(len(ia)):
        p, q = pa[k], pb[k]
        if p is not None and q is not None:
            if paired_a.get(p) is None or paired_a.get(p) != paired_b.get(q) or \
                    a.module.ops[p].results.index(ia[k]) != b.module.ops[q].results.index(ib[k]):
                break
        elif not (p is None and q is None and ia[k] in a.args and ib[k] in b.args and
                  a.args[ia[k]] == b.args[ib[k]] and values_a[ia[k]].producer is None is values_b[ib[k]].producer):
            break
    else:
        return ()
    sa = [a.source(v, paired_a) for v in ia]
    sb = [b.source(v, paired_b) for v in ib]
    order = list(range(len(ia)))
    if a.name(x) in COMMUTATIVE and na == 2 and not (same_source(sa[0], sb[0]) and same_source(sa[1], sb[1])) \
            and same_source(sa[0], sb[1]) and same_source(sa[1], sb[0]):
        order[0], order[1] = 1, 0  # x + y on one side, y + x on the other
    out = []
    for k in range(len(ia)):
        (ka, pa), (kb, pb) = sa[k], sb[order[k]]
        if not same_source(sa[k], sb[order[k]]):
            what = f"operand {k}" if k < na else f"its region's outside value {k - na}"
            out.append(f"{what} reads {source_words(a, ka[0], pa, lines_a)} in A, "
                       f"{source_words(b, kb[0], pb, lines_b)} in B")
    return tuple(out)


def same_source(source_a: tuple, source_b: tuple) -> bool:
    """Whether two sources (Side.source) are one value: a key in common."""
    return any(k in source_b[0] for k in source_a[0])


def source_words(side: Side, key: tuple, op_id: int | None, lines: dict) -> str:
    kind = key[0]
    if kind == "arg":
        return f"argument {key[1]!r}" if isinstance(key[1], str) else f"argument {key[1]}"
    if kind == "param":
        return f"its function's argument {key[1]}"
    if kind == "region argument":
        return f"region argument {key[1]}"
    op = side.module.ops[op_id] if op_id is not None else None
    if kind == "value" and op is not None and op.attr("value") is not None:
        return f"constant {_short(op.attr('value'))}"
    name = op.name.split(".", 1)[-1] if op is not None else "?"
    line = lines.get(op_id, (0,))[0] if op_id is not None and lines else 0
    where = f" (line {line})" if line else f" (op {op_id})"
    return f"{name}{where}" + (" (this side only)" if kind == "new" else "")


def _short_form(v) -> str:
    """An attribute's value as the diff words it: a dimension list as [0,1], an enum by its value
    (#stablehlo<comparison_direction EQ> -> EQ)."""
    if isinstance(v, tuple):
        return "[" + ",".join(map(str, v)) + "]"
    return re.sub(r"#stablehlo<\w+ (\w+)>", r"\1", str(v))


def _around_difference(ta: str, tb: str, width: int = 60) -> tuple:
    """Two long printed attributes cut to the part where they first differ ('...3.0, 4.0]>' ->
    '...3.0, 5.0]>'), so the reader sees the difference; short ones whole."""
    if len(ta) <= width and len(tb) <= width:
        return ta, tb
    i = 0
    while i < min(len(ta), len(tb)) and ta[i] == tb[i]:
        i += 1
    start = max(0, i - width // 3)
    return tuple(("..." if start else "") + t[start:start + width] + ("..." if len(t) > start + width else "")
                 for t in (ta, tb))


def _short(v) -> str:
    text = _short_form(v)
    return text if len(text) <= 60 else text[:57] + "..."


def op_diff(a: Side, b: Side, pair_ab: dict, lines_a: dict, lines_b: dict, paired_a: dict,
            paired_b: dict) -> OpDiff:
    matched, groups = [], []
    for x in a.order:
        y = pair_ab.get(x)
        if y is None:
            continue
        what = _what_changed(a, b, x, y) if a.sig[x] != b.sig[y] else ()
        if a.sig[x] != b.sig[y] and not what:
            what = ("differs in what it computes",)  # never reached: each part of a signature is named
        what += _wiring(a, b, x, y, paired_a, paired_b, lines_a, lines_b)
        if not what:  # the same op on the same values, its regions' ops (the same) with it
            matched.append((x, y))
            matched.extend(zip(a.children.get(x, ()), b.children.get(y, ())))
        else:
            ids_a, ids_b = _with_children(a, [x]), _with_children(b, [y])
            groups.append((a.pos[x], OpGroup("changed", ids_a, ids_b, (a.name(x),), (b.name(y),),
                                             what, _lines(ids_a, lines_a), _lines(ids_b, lines_b))))
    pair_ba = {y: x for x, y in pair_ab.items()}
    pieces_a = _pieces(a, pair_ab)
    pieces_b = _pieces(b, pair_ba)
    # Each piece touches pairs; pieces of the two sides touching a common pair are one group.
    owner: dict = {}  # pair (A's op id) -> group index
    parent = list(range(len(pieces_a) + len(pieces_b)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for gi, (ops, touch) in enumerate(pieces_a):
        for t in touch:
            owner.setdefault(("a", t), []).append(gi)
    for gj, (ops, touch) in enumerate(pieces_b):
        for t in touch:
            owner.setdefault(("b", pair_ba[t]), []).append(len(pieces_a) + gj)
    for t in {k[1] for k in owner}:
        ia, ib = owner.get(("a", t), []), owner.get(("b", t), [])
        if ia and ib:
            for i in ia + ib[1:]:
                parent[find(i)] = find(ib[0])
    # Pieces that touch no pair at all, on both sides: the block was written another way as a whole
    # (batch_norm_inference for the spelled-out math, with nothing in common): one rewritten group.
    loose_a = [gi for gi, (_, touch) in enumerate(pieces_a) if not touch]
    loose_b = [len(pieces_a) + gj for gj, (_, touch) in enumerate(pieces_b) if not touch]
    if loose_a and loose_b:
        for i in loose_a + loose_b[1:]:
            parent[find(i)] = find(loose_b[0])
    merged = defaultdict(lambda: ([], []))
    for gi, (ops, _) in enumerate(pieces_a):
        merged[find(gi)][0].extend(ops)
    for gj, (ops, _) in enumerate(pieces_b):
        merged[find(len(pieces_a) + gj)][1].extend(ops)
    for ops_a, ops_b in merged.values():
        ops_a.sort(key=a.pos.get)
        ops_b.sort(key=b.pos.get)
        status = "rewritten" if ops_a and ops_b else ("only_a" if ops_a else "only_b")
        where = a.pos[ops_a[0]] if ops_a else _a_position(b, ops_b[0], pair_ba, a)
        ids_a, ids_b = _with_children(a, ops_a), _with_children(b, ops_b)
        what = ()
        if len(ops_a) == 1 == len(ops_b):  # one op for one op between the same pairs: that op, changed
            status = "changed"
            x, y = ops_a[0], ops_b[0]
            na, nb = a.name(x), b.name(y)
            if na == nb:  # the same op, unpaired: say what differs as for a pair
                what = _what_changed(a, b, x, y) + _wiring(a, b, x, y, paired_a, paired_b, lines_a, lines_b) \
                    or (("calls a function that computes otherwise",) if callees(a.module.ops[x])
                        else ("the same op where the other side's differs around it",))
            else:
                if na.split(".", 1)[-1] != nb.split(".", 1)[-1]:
                    na, nb = na.split(".", 1)[-1], nb.split(".", 1)[-1]  # the dialect only where it is the change
                what = (f"op {na} -> {nb}",)
        groups.append((where, OpGroup(status, ids_a, ids_b, tuple(a.name(i) for i in ops_a),
                                      tuple(b.name(i) for i in ops_b), what, _lines(ids_a, lines_a),
                                      _lines(ids_b, lines_b))))
    groups.sort(key=lambda g: g[0])
    return OpDiff(tuple(matched), tuple(g for _, g in groups), a.size, b.size)


def _lines(ids, lines: dict) -> tuple:
    if not lines:
        return ()
    return tuple(lines[i][0] if i in lines else 0 for i in ids)


def _a_position(b: Side, y: int, pair_ba: dict, a: Side) -> float:
    """Where in A's order an only-B op sits: just after the last paired op before it in B."""
    k = b.pos[y]
    for z in reversed(b.order[:k]):
        if z in pair_ba:
            return a.pos[pair_ba[z]] + 0.5
    return -0.5


def _with_children(side: Side, ops: list) -> tuple:
    out = []
    for i in ops:
        out.append(i)
        out.extend(side.children.get(i, ()))
    return tuple(out)


def _pieces(side: Side, paired: dict) -> list:
    """The unpaired ops cut into connected pieces (dataflow either way): (ops, paired ops touched)."""
    seen, out = set(), []
    for start in side.order:
        if start in paired or start in seen:
            continue
        ops, touch, stack = [], set(), [start]
        seen.add(start)
        while stack:
            i = stack.pop()
            ops.append(i)
            near = [p for p in side.producers[i] if p is not None] + [u for u, _ in side.users[i]]
            for n in near:
                if n in paired:
                    touch.add(n)
                elif n not in seen:
                    seen.add(n)
                    stack.append(n)
        out.append((ops, touch))
    return out
