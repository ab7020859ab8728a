"""Op-level diff inside one aligned pair of blocks: which ops match, changed, were rewritten, or exist on one side only.

The method follows XLA's hlo_diff (../shared/PRIOR-ART.md) and adapts it to two frameworks:

1. Identical subgraphs: each op's fingerprint hashes its signature (name, result types, the
   attributes the parser keeps, the names of the ops in its regions) with its operands'
   fingerprints. From the block's sinks back, an op pairs with the first unpaired op of the
   other side with the same fingerprint, and so do their operands, recursively: the whole cone.
2. The same from the other end: fingerprints of what each op feeds (its users', by operand
   position). This pairs what lies downstream of a change, whose upstream cones differ.
3. Neighbours: around each pair, operands at the same position, and users through the same
   operand position, pair when they have the same op name (identical signature: matched;
   otherwise changed, and what changed is named). A reshape, transpose or convert that only one
   side has is looked through (the flattening reshapes PyTorch puts around a dot_general).
4. What stays unpaired is cut into connected pieces per side. Pieces of the two sides that touch
   the same pairs (their inputs come from, or their outputs feed, the same matched ops) form one
   rewritten group: a batch_norm_training on one side for the reduce/rsqrt math on the other.
   A piece that shares no pair with the other side exists only on its side.

An op in a region (a reduce's body) follows the op that holds it.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property

from ..ir.model import Module, Op, callees
from .blocks import top_of

STATUSES = ("matched", "changed", "rewritten", "only_a", "only_b")
# Ops that only move data around: one side may have them where the other has none.
_LOOK_THROUGH = frozenset({"stablehlo.reshape", "stablehlo.transpose", "stablehlo.convert",
                           "stablehlo.broadcast_in_dim"})
_COMMUTATIVE = frozenset({"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
                          "stablehlo.and", "stablehlo.or", "stablehlo.xor"})
# Ops too common, or too exporter-specific, to pair by their rank among ops of their name.
_MOVEMENT = _LOOK_THROUGH | {"stablehlo.constant", "stablehlo.iota", "func.call", "stablehlo.slice",
                             "stablehlo.concatenate", "stablehlo.select", "stablehlo.compare"}
_SKIP = frozenset({"func.return", "stablehlo.return", "mhlo.return", "sdy.return"})
_MAX_ROUNDS = 50  # neighbour propagation reaches its fixpoint in a few rounds; a bound all the same


@dataclass(frozen=True)
class OpGroup:
    """Ops of A and of B that the matcher put together: one op each (changed), or a group on one
    side for a group on the other (rewritten), or ops on one side only (only_a, only_b)."""

    status: str
    ops_a: tuple  # op ids in A's module, program order, each followed by the ops of its regions
    ops_b: tuple
    names_a: tuple  # the names of the group's ops, regions' ops left out (a reduce's body is the reduce)
    names_b: tuple
    what: tuple = ()  # changed: ("result type 2x16x64xf32 -> 32x64xf32", "comparison_direction GT -> GE")
    lines_a: tuple = ()  # each op's line in its file (0: not known), when the file could be read
    lines_b: tuple = ()

    def as_json(self) -> dict:
        return {"status": self.status, "ops_a": list(self.ops_a), "ops_b": list(self.ops_b),
                "names_a": list(self.names_a), "names_b": list(self.names_b), "what": list(self.what),
                "lines_a": list(self.lines_a), "lines_b": list(self.lines_b)}

    @classmethod
    def from_json(cls, d: dict) -> "OpGroup":
        return cls(d["status"], tuple(d["ops_a"]), tuple(d["ops_b"]), tuple(d["names_a"]), tuple(d["names_b"]),
                   tuple(d.get("what", ())), tuple(d.get("lines_a", ())), tuple(d.get("lines_b", ())))

    @property
    def pattern(self) -> tuple:
        """What the group is, without where: the same change in every layer has one pattern."""
        return (self.status, tuple(sorted(Counter(self.names_a).items())),
                tuple(sorted(Counter(self.names_b).items())), self.what)


@dataclass(frozen=True)
class OpDiff:
    """The op-level diff of one aligned pair of blocks."""

    matched: tuple  # (op id in A, op id in B): identical ops
    groups: tuple  # OpGroup: changed, rewritten, only_a, only_b, in A's program order (B's where A has none)
    ops_a: int  # ops of the block on each side, regions' ops included (they follow the op holding them)
    ops_b: int

    @property
    def identical(self) -> bool:
        return not self.groups

    def count(self, status: str) -> int:
        """Ops of A (of B for only_b) with this status, regions' ops included."""
        if status == "matched":
            return len(self.matched)
        return self._counts.get(status, 0)

    @cached_property
    def _counts(self) -> Counter:
        counts: Counter = Counter()
        for g in self.groups:
            counts[g.status] += len(g.ops_b if g.status == "only_b" else g.ops_a)
        return counts

    def status_of(self) -> tuple[dict, dict]:
        """Op id -> status, for each side."""
        a, b = {}, {}
        for x, y in self.matched:
            a[x] = b[y] = "matched"
        for g in self.groups:
            for x in g.ops_a:
                a[x] = g.status
            for y in g.ops_b:
                b[y] = g.status
        return a, b

    def as_json(self) -> dict:
        return {"ops_a": self.ops_a, "ops_b": self.ops_b,
                "counts": {s: self.count(s) for s in STATUSES},
                "matched": [list(p) for p in self.matched], "groups": [g.as_json() for g in self.groups]}

    @classmethod
    def from_json(cls, d: dict) -> "OpDiff":
        return cls(tuple(tuple(p) for p in d["matched"]), tuple(OpGroup.from_json(g) for g in d["groups"]),
                   d["ops_a"], d["ops_b"])


# Attributes that name a helper function rather than say what is computed: the helper's ops are compared
# where the block inlines them (Module.inlined), so two names for one helper are one helper.
_NAMING = frozenset({"callee", "decomposition", "called_computations", "sym_name"})


class _Side:
    """One block's ops with what the matcher reads: signatures, in-block producers and users, and where
    each operand comes from. `args`: entry argument value id -> its identity (a sidecar's name, else
    its index), so two programs compare by which argument an op reads."""

    def __init__(self, module: Module, op_ids, args: dict | None = None):
        ops = module.ops
        self.module = module
        self.args = args if args is not None else {v: i for i, v in enumerate(module.entry.args)}
        top, children = [], defaultdict(list)
        op_ids = list(dict.fromkeys(op_ids))  # a helper called twice is inlined twice: its ops once
        ids = set(op_ids)
        for i in op_ids:
            op = ops[i]
            if op.name in _SKIP:
                continue
            holder = top_of(module, op) if op.parent is not None else None
            if holder in ids:  # an op of a region: it goes with the op at the top that holds it
                children[holder].append(i)
            else:
                top.append(i)
        self.order = top  # top-level ops of the block, program order
        self.size = len(top) + sum(len(c) for c in children.values())  # with regions' ops
        self.pos = {i: k for k, i in enumerate(top)}
        self.children = children
        values = module.values
        nested = module.nested
        self.sig = {}
        self.inputs = {}  # op -> the values it reads: its operands, then what its regions read from outside
        self.producers = {}  # op -> (producer op id in the block, or None), per input
        self.users = {}  # op -> ((user op id in the block, input position), ...)
        resolved = _resolved(module)
        pos = self.pos
        for i in top:
            op = ops[i]
            self.sig[i], captured = _signed(module, i)
            # a helper's argument is its call's operand, a call's result what its helper returns
            inputs = self.inputs[i] = tuple(resolved.get(v, v) for v in op.operands + captured) if resolved \
                else op.operands + captured
            # (a region's argument has a position, an op's result none)
            self.producers[i] = tuple(p if (p := values[v].producer) in pos and values[v].arg_index is None else None
                                      for v in inputs)
        self._made: dict = {}
        self.fp: dict = {}
        self.closed: dict = {}
        self.sites = defaultdict(list)  # function -> the ops of this block that call it with its arguments
        for i in top:
            if ops[i].name == "func.call" or ops[i].name.endswith(".composite"):
                for f in callees(ops[i]):
                    self.sites[f].append(i)
        reads = defaultdict(list)
        for i in top:
            for k, p in enumerate(self.producers[i]):
                if p is not None:
                    reads[p].append((i, k))
        for i in top:
            self.users[i] = tuple(reads.get(i, ()))

    def name(self, i: int) -> str:
        return self.module.ops[i].name

    def leaf(self, v: int) -> tuple:
        """What an input from outside the block is, for fingerprints: the argument it is, else its type."""
        if v in self.args:
            return ("arg", self.args[v])
        val = self.module.values[v]
        if val.producer is not None and v not in self.module.ops[val.producer].results:
            return ("region argument", val.arg_index, val.type)  # a loop body's ops read the loop's state
        if val.producer is None:
            return ("param", val.arg_index, val.type)  # a helper function's argument
        return ("in", val.type)

    def up_fingerprints(self) -> dict:
        """op -> a hash of what it computes from what (its signature, its inputs' fingerprints). Where
        every input traces back to arguments, constants and region arguments, never to another
        block's value, the op is `closed`: two closed ops of equal fingerprints compute one value."""
        fp = {}
        closed = self.closed = {}
        ops = self.module.ops
        for i in self.order:
            inputs = []
            shut = True
            for p, v in zip(self.producers[i], self.inputs[i]):
                if p is not None and p in fp:
                    inputs.append((fp[p], ops[p].results.index(v)))
                    shut = shut and closed[p]
                elif p is not None:  # made later in program order (a helper inlined after its reader)
                    inputs.append(("later", self.module.values[v].type))
                    shut = False
                else:
                    leaf = self.leaf(v)
                    inputs.append(leaf)
                    # an entry argument is one value; a helper's argument or a region's is one per call or trip
                    shut = shut and leaf[0] == "arg"
            if ops[i].name in _COMMUTATIVE:
                inputs.sort(key=repr)  # x + y and y + x: one fingerprint
            fp[i] = hash((self.sig[i], tuple(inputs)))
            closed[i] = shut
        self.fp = fp
        return fp

    def down_fingerprints(self) -> dict:
        fp = {}
        for i in reversed(self.order):
            fp[i] = hash((self.sig[i], tuple(sorted((fp.get(u, 0), k) for u, k in self.users[i]))))
        return fp

    def made(self, p: int, depth: int = 0):
        """A key for what op `p` makes when it reads nothing but constants (a constant, an iota, a
        broadcast of a constant): equal for two ops that make the same value, wherever they sit and
        however many copies a side makes; None for an op that reads anything else."""
        hit = self._made.get(p, 0)
        if hit != 0:
            return hit
        module = self.module
        op = module.ops[p]
        key = None
        splat = _splat(module, op)
        if splat is not None:
            self._made[p] = splat
            return splat
        if op.name in _SPLAT_KEEPING and op.operands and len(op.results) == 1:
            q = module.values[op.operands[0]].producer
            sub = self.made(q, depth + 1) if q is not None and depth < 8 else None
            t = module.values[op.results[0]].type
            if isinstance(sub, tuple) and sub[0] == "splat" and sub[2] == t.dtype:
                # a splat broadcast or reshaped is a splat of the new shape: the same value as one
                # the other side writes at that shape directly
                self._made[p] = key = ("splat", sub[1], t.dtype, t.shape)
                return key
        if p not in module.nested and depth < 8 and not op.name.startswith("func."):
            inputs = []
            for v in op.operands:
                q = module.values[v].producer
                sub = self.made(q, depth + 1) if q is not None and v in module.ops[q].results else None
                if sub is None:
                    break
                inputs.append((sub, module.ops[q].results.index(v)))
            else:
                key = hash((_bare(module, p), tuple(inputs)))
        self._made[p] = key
        return key

    def source(self, v: int, paired: dict) -> tuple:
        """(keys, op id) of where value `v` comes from: two values are the same when their keys meet.
        Keys are in terms both sides share: ("arg", identity) an entry argument, ("param", position,
        type) a helper function's argument, ("op", A's op id, result) the result of an op paired with
        an op of the other side (`paired`: this side's op id -> A's), ("value", key, result) a constant
        or what is made from constants alone, by value, ("new",) an op this side alone has. Data
        movement of this side alone (a reshape, a convert) is looked through, so a flattening reshape
        that one side adds reads as the value it moves (the reshape itself is reported apart, as one
        side's). A helper's argument reads as its call's operand where this block holds the one call,
        and a call's result as the helper's result (as one side's helper and the other's inlined ops
        are compared)."""
        module = self.module
        values, ops = module.values, module.ops
        resolved = _resolved(module)
        for _ in range(16):
            v = resolved.get(v, v)
            val = values[v]
            p = val.producer
            if p is None:
                if v in self.args:
                    return (("arg", self.args[v]),), None
                sites = self.sites.get(module.arg_functions.get(v), ())
                if len(sites) == 1 and val.arg_index is not None and val.arg_index < len(ops[sites[0]].operands):
                    v = ops[sites[0]].operands[val.arg_index]
                    continue
                return (("param", val.arg_index, str(val.type)),), None
            res = ops[p].results
            if v not in res:  # a region's argument (an op reading it sits in that region)
                return (("region argument", val.arg_index),), None
            op = ops[p]
            k = res.index(v)
            made = self.made(p)
            q = paired.get(p)
            keys = ((("op", q, k),) if q is not None else ()) + ((("value", made, k),) if made is not None else ())
            if self.closed.get(p):  # computed from arguments and constants alone: equal computations, one value
                keys += (("computed", self.fp[p], k),)
            if keys:
                return keys, p
            if op.name in _LOOK_THROUGH and op.operands:
                v = op.operands[0]
                continue
            return (("new",),), p
        return (("new",),), None


_SPLAT_KEEPING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.broadcast"})


def _splat(module: Module, op: Op):
    """("splat", element, dtype, shape) of a constant whose elements are all one value, else None."""
    if not op.name.endswith(".constant") or not op.attr("splat") or len(op.results) != 1:
        return None
    m = re.match(r"dense<([^<>]*)>", str(op.attr("value") or ""))
    if m is None:
        return None
    t = module.values[op.results[0]].type
    return ("splat", m.group(1), t.dtype, t.shape)


def _resolved(module: Module) -> dict:
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


def _signed(module: Module, i: int) -> tuple:
    """(signature, captured) of op `i`, its regions' print included (_region_print), derived once per
    module: every block and the whole program read the same."""
    cache = module.scratch.setdefault("op signatures", {})
    hit = cache.get(i)
    if hit is None:
        inner = module.nested.get(i, ())
        region, captured = _region_print(module, i, inner) if inner else (None, ())
        hit = cache[i] = (_signature(module, module.ops[i], region), captured)
    return hit


def _bare(module: Module, i: int) -> tuple:
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
            if op.name in _SKIP:  # a terminator ends the region (StableHLO regions hold one block)
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
        if op.name in _COMMUTATIVE:
            refs.sort(key=repr)  # x + y and y + x alike
        h = hash((region_of[c], _bare(module, c), tuple(refs)))
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


def _compatible(a: "_Side", b: "_Side", x: int, y: int) -> bool:
    """Two ops of one name that may be the same op changed: their results have the same shapes, or
    the same element types and ranks or sizes (an add of indices is not the add of activations, a
    scalar maximum not a tensor's)."""
    ta = [a.module.values[v].type for v in a.module.ops[x].results]
    tb = [b.module.values[v].type for v in b.module.ops[y].results]
    if len(ta) != len(tb):
        return False
    if [t.shape for t in ta] == [t.shape for t in tb]:
        return True  # a dtype changed
    # the same element types, and a rank or a size in common (a flattened [2,16,64] is [32,64])
    return all(x.dtype == y.dtype and (x.rank == y.rank or x.numel == y.numel) for x, y in zip(ta, tb))


@dataclass(frozen=True)
class Pairing:
    """Which ops of one aligned pair of blocks the matcher paired (before each pair is judged)."""

    a: _Side
    b: _Side
    pair_ab: dict  # op id in A -> op id in B


def match_ops(module_a: Module, ids_a, module_b: Module, ids_b, lines_a: dict | None = None,
              lines_b: dict | None = None, args_a: dict | None = None, args_b: dict | None = None) -> OpDiff:
    """The op-level diff of two blocks, given as op ids of their modules (diff.result.BlockResult's
    ops_a and ops_b, or diff.blocks.Block's ops). lines_a/lines_b (diff.source_lines): each op's
    line in its file, named in the groups. args_a/args_b (argument_identities): which argument each
    entry argument is; by default its index. Operands read from other blocks compare as this block's
    pairs alone know them: match_blocks judges a whole module's blocks against all pairs."""
    return judge(pair_ops(module_a, ids_a, module_b, ids_b, args_a, args_b), lines_a, lines_b)


def match_blocks(module_a: Module, module_b: Module, blocks, lines_a: dict | None = None,
                 lines_b: dict | None = None, args_a: dict | None = None, args_b: dict | None = None) -> tuple:
    """(op diffs, paired_a, paired_b) of every aligned pair of blocks ((ids_a, ids_b) each): each
    pair's operands judged against the pairs of all blocks, so an op reading another block's
    value reads its partner's. paired_a/paired_b: A's and B's paired op ids -> A's (ModuleChanges
    reads them)."""
    pairings = [pair_ops(module_a, ia, module_b, ib, args_a, args_b) for ia, ib in blocks]
    paired_a, paired_b = {}, {}
    for p in pairings:
        for x, y in p.pair_ab.items():
            paired_a[x] = x
            paired_b[y] = x
    return tuple(judge(p, lines_a, lines_b, paired_a, paired_b) for p in pairings), paired_a, paired_b


def pair_ops(module_a: Module, ids_a, module_b: Module, ids_b, args_a: dict | None = None,
             args_b: dict | None = None) -> Pairing:
    """The ops of two blocks paired (steps 1 to 4 of the module docstring), not yet judged."""
    a, b = _Side(module_a, ids_a, args_a), _Side(module_b, ids_b, args_b)
    pair_ab: dict = {}
    pair_ba: dict = {}

    def pair(x: int, y: int) -> None:
        pair_ab[x] = y
        pair_ba[y] = x

    # 1. identical upstream cones, sinks first, operands with them
    fa, fb = a.up_fingerprints(), b.up_fingerprints()
    free_b = defaultdict(list)
    for y in reversed(b.order):
        free_b[fb[y]].append(y)  # reversed: pop() gives program order
    for x in reversed(a.order):
        if x in pair_ab:
            continue
        cands = free_b.get(fa[x])
        while cands and cands[-1] in pair_ba:
            cands.pop()
        if not cands:
            continue
        stack = [(x, cands.pop())]
        while stack:
            x1, y1 = stack.pop()
            if x1 in pair_ab or y1 in pair_ba:
                continue
            pair(x1, y1)
            pb = b.producers[y1]
            if a.name(x1) in _COMMUTATIVE and len(pb) == 2 and pb[0] is not None and pb[1] is not None \
                    and a.producers[x1][0] is not None and fa[a.producers[x1][0]] == fb[pb[1]] \
                    and fa[a.producers[x1][0]] != fb[pb[0]]:
                pb = pb[::-1]  # x + y against y + x: each operand's cone with its twin
            for px, py in zip(a.producers[x1], pb):
                if px is not None and py is not None and px not in pair_ab and py not in pair_ba:
                    stack.append((px, py))
    # 2. identical downstream cones, among what is left
    da, db = a.down_fingerprints(), b.down_fingerprints()
    free_b = defaultdict(list)
    for y in reversed(b.order):
        if y not in pair_ba:
            free_b[db[y]].append(y)
    for x in a.order:
        if x in pair_ab:
            continue
        cands = free_b.get(da[x])
        while cands and cands[-1] in pair_ba:
            cands.pop()
        if cands:
            pair(x, cands.pop())
    # 3. neighbours of pairs, with one side's data movement looked through
    _grow(a, b, pair_ab, pair)
    # 4. what neither cone nor neighbour pairs across frameworks: the k-th unpaired op of a
    # computing kind (dot_general, exponential, reduce, ...) with the k-th of the other side, where
    # both sides have as many; then their neighbours again
    left_a, left_b = defaultdict(list), defaultdict(list)
    for x in a.order:
        if x not in pair_ab and a.name(x) not in _MOVEMENT:
            left_a[a.name(x)].append(x)
    for y in b.order:
        if y not in pair_ba and b.name(y) not in _MOVEMENT:
            left_b[b.name(y)].append(y)
    seeded = False
    for name, xs in left_a.items():
        ys = left_b.get(name, ())
        if len(xs) == len(ys) and all(_compatible(a, b, x, y) for x, y in zip(xs, ys)):
            for x, y in zip(xs, ys):
                pair(x, y)
                seeded = True
    if seeded:
        _grow(a, b, pair_ab, pair)
    return Pairing(a, b, pair_ab)


def judge(pairing: Pairing, lines_a: dict | None = None, lines_b: dict | None = None,
          paired_a: dict | None = None, paired_b: dict | None = None) -> OpDiff:
    """The op diff of a pairing: each pair matched only if the two ops compute the same thing from
    the same values (paired_a/paired_b: every paired op of each side -> A's op id; by default this
    block's pairs); what is left unpaired cut into groups."""
    a, b, pair_ab = pairing.a, pairing.b, pairing.pair_ab
    if paired_a is None:
        paired_a = {x: x for x in pair_ab}
        paired_b = {y: x for x, y in pair_ab.items()}
    return _result(a, b, pair_ab, lines_a or {}, lines_b or {}, paired_a, paired_b)


def _grow(a: _Side, b: _Side, pair_ab: dict, pair) -> None:
    """Pair the neighbours of pairs until nothing more pairs."""
    pair_ba = {y: x for x, y in pair_ab.items()}

    def add(x: int, y: int) -> None:
        pair(x, y)
        pair_ba[y] = x

    frontier = list(pair_ab.items())
    for _ in range(_MAX_ROUNDS):
        grown = []
        for x, y in frontier:
            pa, pb = a.producers[x], b.producers[y]
            if a.name(x) in _COMMUTATIVE and len(pa) == 2 == len(pb) and not _same_names(a, b, pa, pb) \
                    and _same_names(a, b, pa, pb[::-1]):
                pb = pb[::-1]  # x + y on one side, y + x on the other
            for px, py in zip(pa, pb):
                hit = _through(a, b, px, py, pair_ab, pair_ba)
                if hit:
                    add(*hit)
                    grown.append(hit)
            for ux, k in a.users[x]:
                if ux in pair_ab:
                    continue
                for uy, k2 in b.users[y]:
                    if uy not in pair_ba and a.name(ux) == b.name(uy) and (
                            k2 == k or a.name(ux) in _COMMUTATIVE) and _compatible(a, b, ux, uy):
                        add(ux, uy)
                        grown.append((ux, uy))
                        break
        if not grown:
            break
        frontier = grown


def _same_names(a: _Side, b: _Side, pa, pb) -> bool:
    return all(x is not None and y is not None and a.name(x) == b.name(y) for x, y in zip(pa, pb))


def _through(a: _Side, b: _Side, px, py, pair_ab, pair_ba):
    """The pair to make of two operands' producers, looking through data movement that only one
    side has (px a reshape where py is the dot it feeds the other side's twin of, or the reverse)."""
    for _ in range(4):
        if px is None or py is None or px in pair_ab or py in pair_ba:
            return None
        if a.name(px) == b.name(py):
            return (px, py) if _compatible(a, b, px, py) else None
        if b.name(py) in _LOOK_THROUGH and b.producers[py]:
            py = b.producers[py][0]
        elif a.name(px) in _LOOK_THROUGH and a.producers[px]:
            px = a.producers[px][0]
        else:
            return None
    return None


def _what_changed(a: _Side, b: _Side, x: int, y: int) -> tuple:
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


def _region_change(a: _Side, b: _Side, x: int, y: int) -> str:
    """What differs inside two ops' regions, in words: the ops they hold, or, where those are the
    same ops, that one of them reads or is set otherwise."""
    def names(side: _Side, i: int) -> Counter:
        return Counter(side.module.ops[c].name.split(".", 1)[-1] for c in side.module.nested.get(i, ())
                       if side.module.ops[c].name not in _SKIP)

    na, nb = names(a, x), names(b, y)
    if na != nb:
        gone = ", ".join(f"{k} -{n}" for k, n in sorted((na - nb).items()))
        new = ", ".join(f"{k} +{n}" for k, n in sorted((nb - na).items()))
        return "region ops " + "; ".join(t for t in (gone, new) if t)
    # the same ops: name the first few whose attributes or types differ, in order
    inner_a = [c for c in a.module.nested.get(x, ()) if a.module.ops[c].name not in _SKIP]
    inner_b = [c for c in b.module.nested.get(y, ()) if b.module.ops[c].name not in _SKIP]
    said = []
    for c, d in zip(inner_a, inner_b):
        sa, sb = _bare(a.module, c), _bare(b.module, d)
        if sa[0] != sb[0] or sa == sb:
            continue
        said.append(f"its region's {sa[0].split('.', 1)[-1]}: {'; '.join(_signature_changes(sa, sb))}")
        if len(said) == 3:
            break
    if said:
        return "; ".join(said)
    return f"region: the same ops ({', '.join(sorted(na)) or 'none'}), read otherwise or in other regions"


def _wiring(a: _Side, b: _Side, x: int, y: int, paired_a: dict, paired_b: dict,
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
    if a.name(x) in _COMMUTATIVE and na == 2 and not (_same(sa[0], sb[0]) and _same(sa[1], sb[1])) \
            and _same(sa[0], sb[1]) and _same(sa[1], sb[0]):
        order[0], order[1] = 1, 0  # x + y on one side, y + x on the other
    out = []
    for k in range(len(ia)):
        (ka, pa), (kb, pb) = sa[k], sb[order[k]]
        if not _same(sa[k], sb[order[k]]):
            what = f"operand {k}" if k < na else f"its region's outside value {k - na}"
            out.append(f"{what} reads {_source_words(a, ka[0], pa, lines_a)} in A, "
                       f"{_source_words(b, kb[0], pb, lines_b)} in B")
    return tuple(out)


def _same(source_a: tuple, source_b: tuple) -> bool:
    """Whether two sources (_Side.source) are one value: a key in common."""
    return any(k in source_b[0] for k in source_a[0])


def _source_words(side: _Side, key: tuple, op_id, lines: dict) -> str:
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


def _result(a: _Side, b: _Side, pair_ab: dict, lines_a: dict, lines_b: dict, paired_a: dict,
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


def _a_position(b: _Side, y: int, pair_ba: dict, a: _Side) -> float:
    """Where in A's order an only-B op sits: just after the last paired op before it in B."""
    k = b.pos[y]
    for z in reversed(b.order[:k]):
        if z in pair_ba:
            return a.pos[pair_ba[z]] + 0.5
    return -0.5


def _with_children(side: _Side, ops: list) -> tuple:
    out = []
    for i in ops:
        out.append(i)
        out.extend(side.children.get(i, ()))
    return tuple(out)


def _pieces(side: _Side, paired: dict) -> list:
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


@dataclass(frozen=True)
class OpPattern:
    """One op-level change as it repeats over blocks of one kind: "in 12 of 12 layers, norm#0's
    batch_norm_training (A) is the reduce/rsqrt math of B"."""

    phase: str
    role: str
    ordinal: int
    group: OpGroup  # the first block's instance (its op ids are that block's)
    blocks: int  # blocks of this kind that have the change
    of: int  # blocks of this kind
    first: str  # the label of the first block that has it
    layered: bool  # blocks of this kind are per layer

    def as_json(self) -> dict:
        return {"phase": self.phase, "role": self.role, "ordinal": self.ordinal, "blocks": self.blocks,
                "of": self.of, "first": self.first, "layered": self.layered, "group": self.group.as_json()}


def fold_patterns(blocks) -> tuple:
    """The op-level changes of all aligned blocks (diff.result.BlockResult), each said once for the
    blocks of one kind (phase, role, ordinal) that have it, in program order of first appearance."""
    kinds: dict = {}
    for blk in blocks:
        kinds.setdefault((blk.phase, blk.role, blk.ordinal, bool(blk.layer)), []).append(blk)
    out = []
    for (phase, role, ordinal, _), members in kinds.items():
        seen: dict = {}
        for blk in members:
            if blk.op_diff is None:
                continue
            for g in blk.op_diff.groups:
                k = g.pattern
                if k in seen:
                    if seen[k][2] != blk.label:
                        seen[k][1] += 1
                        seen[k][2] = blk.label
                else:
                    seen[k] = [g, 1, blk.label, blk.label]
        for g, n, _, first in seen.values():
            out.append(OpPattern(phase, role, ordinal, g, n, len(members), first, bool(members[0].layer)))
    return tuple(out)


def op_totals(blocks) -> dict:
    """Ops of each status over all aligned blocks (diff.result.BlockResult) that have an op-level diff."""
    diffs = [d.op_diff for d in blocks if d.op_diff is not None]
    return {s: sum(d.count(s) for d in diffs) for s in STATUSES} if diffs else {}


_CALLERS = frozenset({"func.call"})
_CALLING = (".composite", ".custom_call")  # ops that may run functions in their place (ir.model.callees)


class Program:
    """What a whole entry function computes, as fingerprints: each op hashed with its signature and the
    fingerprints of what it reads, down to entry arguments and constants, every call evaluated at its
    call site (a helper called twice is two computations). Equal for two programs that differ only in
    spelling: locations, SSA and helper names, the order of independent ops, commutative operands,
    generic or pretty form, MHLO; whatever their blocks."""

    def __init__(self, module: Module, args: dict):
        self.module = module
        self.args = args
        self.memo: dict = {}
        self.results, self.print, _ = self._run(module.entry.name, None, ())

    def _run(self, name: str, bound, stack: tuple) -> tuple:
        """(fingerprints of what function `name` returns, Counter of its ops' fingerprints, a hash of
        that Counter), its arguments bound to `bound` (None: the entry function's own arguments). A
        call counts as one fingerprint that holds its callee's whole print (a helper called a
        thousand times is evaluated once per distinct set of inputs)."""
        module = self.module
        f = module.func_by_name.get(name)
        if f is None or name in stack:  # a declaration, or recursion: its results stand for themselves
            rets = tuple(("extern", k, str(t)) for k, t in enumerate(f.results if f else ()))
            return rets, Counter(), hash(rets)
        key = (name, bound)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        ops, nested, values = module.ops, module.nested, module.values
        env: dict = {}
        for i, v in enumerate(f.args):
            env[v] = ("arg", self.args.get(v, i)) if bound is None else \
                (bound[i] if i < len(bound) else ("unbound", i, str(values[v].type)))
        count: Counter = Counter()
        inner_stack = stack + (name,)
        for op_id in f.ops:
            op = ops[op_id]
            if op.parent is not None or op.name in _SKIP:
                continue
            sig, captured = _signed(module, op_id)
            ins = [env.get(v) or ("outside", str(values[v].type)) for v in op.operands + captured]
            if op.name in _COMMUTATIVE:
                ins.sort(key=repr)
            called = ()  # what the helpers called inside its regions compute
            if op_id in nested:
                called = tuple(self._called(c, "region value", inner_stack) for c in nested[op_id]
                               if ops[c].name in _CALLERS or ops[c].name.endswith(_CALLING) and callees(ops[c]))
            fp = hash((sig, tuple(ins), called))
            targets = callees(op) if op.name in _CALLERS or op.name.endswith(_CALLING) else ()
            if targets and (op.name == "func.call" or op.name.endswith(".composite")):
                # a call is its callee's ops at this call site (the call itself is how it is written:
                # the same helper inlined by hand is the same program)
                rets, sub, _ = self._run(targets[0], tuple(ins[:len(op.operands)]), inner_stack)
                count.update(sub)  # update, not +=: += rebuilds the whole Counter each call
                if op.name != "func.call":  # a composite's name and attributes are its own
                    count[fp] += 1
                for k, r in enumerate(op.results):
                    env[r] = rets[k] if k < len(rets) else (fp, k)
                continue
            count[fp] += 1
            for k, r in enumerate(op.results):
                env[r] = (fp, k)
            if targets:  # a custom call's called computations
                count[hash(("called", self._called(op_id, "called", inner_stack)))] += 1
        out = (tuple(env.get(v) or ("outside", str(values[v].type)) for v in f.returns), count,
               hash(frozenset(count.items())))
        self.memo[key] = out
        return out

    def _called(self, op_id: int, word: str, stack: tuple) -> int:
        """A hash of what the functions an op calls compute, their arguments free (a call inside a
        region, a custom call's called computations)."""
        module = self.module
        out = []
        for callee in callees(module.ops[op_id]):
            cf = module.func_by_name.get(callee)
            free = tuple((word, i, str(module.values[v].type)) for i, v in enumerate(cf.args)) if cf else ()
            rets, _, sub = self._run(callee, free, stack)
            out.append(hash((rets, sub)))
        return hash(tuple(out))

    def _value(self, env: dict, v: int):
        hit = env.get(v)
        return hit if hit is not None else ("outside", str(self.module.values[v].type))


def interface_changes(program_a: Program, program_b: Program, args_a: dict, args_b: dict, paired_a: dict,
                      paired_b: dict, lines_a: dict | None = None, lines_b: dict | None = None) -> tuple:
    """What differs in the two entry functions' interfaces, in words: an argument one side alone
    takes or takes with another type (args_a/args_b: value id -> identity), and a result that is
    another value ('result 0 is sine (line 3) in A, cosine (line 4) in B'): one computed alike
    (the whole program's fingerprints), or the result of ops the blocks paired (match_blocks'
    paired_a/paired_b), is the same value."""
    module_a, module_b = program_a.module, program_b.module
    out = []
    ta = {args_a.get(v, i): module_a.values[v].type for i, v in enumerate(module_a.entry.args)}
    tb = {args_b.get(v, i): module_b.values[v].type for i, v in enumerate(module_b.entry.args)}
    for ident in list(ta) + [i for i in tb if i not in ta]:
        word = f"argument {ident!r}" if isinstance(ident, str) else f"argument {ident}"
        if ident not in tb:
            out.append(f"{word} ({ta[ident]}) only in A")
        elif ident not in ta:
            out.append(f"{word} ({tb[ident]}) only in B")
        elif ta[ident] != tb[ident]:
            out.append(f"{word}: {ta[ident]} in A, {tb[ident]} in B")
    ra, rb = module_a.entry.returns, module_b.entry.returns
    if len(ra) != len(rb):
        out.append(f"{len(ra)} results in A, {len(rb)} in B")
    sa, sb = _Side(module_a, (), args_a), _Side(module_b, (), args_b)
    for k, (va, vb) in enumerate(zip(ra, rb)):
        t_a, t_b = module_a.values[va].type, module_b.values[vb].type
        if t_a != t_b:
            out.append(f"result {k}: {t_a} in A, {t_b} in B")
            continue
        if program_a.results[k] == program_b.results[k]:
            continue  # computed alike
        src_a, src_b = sa.source(va, paired_a), sb.source(vb, paired_b)
        (ka, pa), (kb, pb) = src_a, src_b
        if not _same(src_a, src_b):
            out.append(f"result {k} is {_source_words(sa, ka[0], pa, lines_a or {})} in A, "
                       f"{_source_words(sb, kb[0], pb, lines_b or {})} in B")
    return tuple(out)
