"""Where a value's data was computed: followed back through the ops that only move it.

Those ops: reshapes, slices, tuples, calls, a loop's stacking.
"""
from __future__ import annotations

from collections import defaultdict

from .loops import WHILES, arg_of
from .model import Module, Op, callees

# Ops whose results are (a part of, a view of) their first operand's data. A dynamic_update_slice
# writes its update into its first operand: both are its result's origins.
_MOVES = frozenset({
    "stablehlo.reshape", "stablehlo.convert", "stablehlo.transpose", "stablehlo.broadcast_in_dim",
    "stablehlo.bitcast_convert", "stablehlo.copy", "stablehlo.slice", "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice", "stablehlo.concatenate", "stablehlo.optimization_barrier",
    "mhlo.copy", "mhlo.reshape", "mhlo.convert", "mhlo.transpose", "mhlo.broadcast_in_dim",
})
_DEPTH = 256  # moves followed from one value at most: a module's plumbing is shallow, a cycle is not


class Origins:
    """origins.of(value id) -> the ids of the ops that computed the data the value holds: through
    moves (_MOVES), a tuple's elements (get_tuple_element of a tuple, of a call returning one),
    calls (a call's result is its callee's return, a callee's argument its call sites' operand),
    and while loops (a result is the body's return and the loop's initial operand; a region's
    argument its initial operand). An argument of the entry function (a weight, an input) is its own origin,
    numbered `~value id` (negative) so that it cannot be taken for an op; a constant is an op."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.memo: dict = {}
        self.sites: dict = defaultdict(list)  # callee -> its call ops
        for op in module.ops:
            if op.name == "func.call" or op.name.endswith(".composite"):  # operands are the callee's arguments
                for callee in callees(op):
                    self.sites[callee].append(op)
        self.arg_of = arg_of(module)  # value id -> the name of the function it is an argument of
        self.returns = {}  # while op id -> its body's return operands
        self.block_arg = {}  # a while's region argument -> (while op, position)
        for loop in module.loops.values():
            if loop.body:
                ret = module.ops[loop.body[-1]]
                if ret.name.endswith("return"):
                    self.returns[loop.op] = ret.operands
            n = len(module.ops[loop.op].operands)
            self.block_arg.update({vid: (loop.op, k % n if n else 0) for k, vid in enumerate(loop.args)})

    def of(self, vid: int) -> frozenset:
        return self._walk(vid, (), 0, set())

    def _walk(self, vid: int, path: tuple, depth: int, seen: set) -> frozenset:
        key = (vid, path)
        if key in self.memo:
            return self.memo[key]
        if key in seen or depth > _DEPTH:
            return frozenset()
        seen.add(key)
        out = frozenset(self._sources(vid, path, depth, seen))
        if depth == 0 or out:  # a cut-short walk (a cycle) is not memoized empty
            self.memo[key] = out
        return out

    def _sources(self, vid: int, path: tuple, depth: int, seen: set):
        module = self.module
        v = module.values[vid]
        walk = self._walk
        if v.producer is None:  # a function's argument: its call sites' operands
            f = self.arg_of.get(vid)
            if f is None or v.arg_index is None:
                return
            if f == module.entry.name:
                yield ~vid
                return
            for site in self.sites.get(f, ()):
                if v.arg_index < len(site.operands):
                    yield from walk(site.operands[v.arg_index], path, depth + 1, seen)
            return
        op = module.ops[v.producer]
        if vid not in op.results:  # a while's region argument: its initial operand (what a later
            w, k = self.block_arg.get(vid, (None, None))  # trip reads came from the trip before: a
            if w is not None:  # scanned layer's input is the layer before's output, not its own)
                yield from walk(module.ops[w].operands[k], path, depth + 1, seen)
            return
        k = op.results.index(vid)
        name = op.name
        if name.endswith("get_tuple_element") and op.attr("index") is not None and op.operands:
            yield from walk(op.operands[0], (op.attr("index"),) + path, depth + 1, seen)
        elif name.endswith(".tuple") and path:
            if path[0] < len(op.operands):
                yield from walk(op.operands[path[0]], path[1:], depth + 1, seen)
        elif name == "func.call" or name.endswith(".composite"):
            f = module.func_by_name.get(next(iter(callees(op)), None))
            if f is None or k >= len(f.returns):
                yield op.id
                return
            yield from walk(f.returns[k], path, depth + 1, seen)
        elif name in WHILES:
            ret = self.returns.get(op.id, ())
            if k < len(ret):
                yield from walk(ret[k], path, depth + 1, seen)
            if k < len(op.operands):
                yield from walk(op.operands[k], path, depth + 1, seen)
        elif name in _MOVES and op.operands:
            if name.endswith("optimization_barrier"):
                yield from walk(op.operands[k], path, depth + 1, seen)
            elif name.endswith("concatenate"):
                for o in op.operands:
                    yield from walk(o, path, depth + 1, seen)
            else:
                yield from walk(op.operands[0], path, depth + 1, seen)
                if name.endswith("dynamic_update_slice") and len(op.operands) > 1:
                    yield from walk(op.operands[1], path, depth + 1, seen)
        else:
            yield op.id


def moves_data(op: Op) -> bool:
    """Whether an op only moves data (the ops Origins walks through): a loop's or a call's plumbing."""
    return op.name in _MOVES or op.name in WHILES or op.name == "func.call" or \
        op.name.endswith((".tuple", "get_tuple_element"))
