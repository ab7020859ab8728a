"""One block's ops as the op matcher reads them: signatures, producers, users, fingerprints, sources."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..ir.model import Module, callees
from .block import top_of
from .signature import COMMUTATIVE, TERMINATORS, bare_signature, op_signature, resolved_values, splat_key

# Ops that only move data around: one side may have them where the other has none.
LOOK_THROUGH = frozenset({"stablehlo.reshape", "stablehlo.transpose", "stablehlo.convert",
                          "stablehlo.broadcast_in_dim"})
_SPLAT_KEEPING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.broadcast"})


class Side:
    """One block's ops with what the matcher reads: signatures, in-block producers and users, and where
    each operand comes from. `args`: entry argument value id -> its identity (a sidecar's name, else
    its index), so two programs compare by which argument an op reads."""

    def __init__(self, module: Module, op_ids: Iterable[int], args: dict | None = None) -> None:
        ops = module.ops
        self.module = module
        self.args = args if args is not None else {v: i for i, v in enumerate(module.entry.args)}
        top, children = [], defaultdict(list)
        op_ids = list(dict.fromkeys(op_ids))  # a helper called twice is inlined twice: its ops once
        ids = set(op_ids)
        for i in op_ids:
            op = ops[i]
            if op.name in TERMINATORS:
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
        self.sig = {}
        self.inputs = {}  # op -> the values it reads: its operands, then what its regions read from outside
        self.producers = {}  # op -> (producer op id in the block, or None), per input
        self.users = {}  # op -> ((user op id in the block, input position), ...)
        resolved = resolved_values(module)
        pos = self.pos
        for i in top:
            op = ops[i]
            self.sig[i], captured = op_signature(module, i)
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
            if ops[i].name in COMMUTATIVE:
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

    def made(self, p: int, depth: int = 0) -> tuple | int | None:
        """A key for what op `p` makes when it reads nothing but constants (a constant, an iota, a
        broadcast of a constant): equal for two ops that make the same value, wherever they sit and
        however many copies a side makes; None for an op that reads anything else."""
        hit = self._made.get(p, 0)
        if hit != 0:
            return hit
        module = self.module
        op = module.ops[p]
        key = None
        splat = splat_key(module, op)
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
                key = hash((bare_signature(module, p), tuple(inputs)))
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
        resolved = resolved_values(module)
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
            if op.name in LOOK_THROUGH and op.operands:
                v = op.operands[0]
                continue
            return (("new",),), p
        return (("new",),), None


def compatible(a: "Side", b: "Side", x: int, y: int) -> bool:
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
