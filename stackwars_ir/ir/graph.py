"""The op graph: a networkx MultiDiGraph of ops with def-use edges carrying shape and dtype."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .pool import no_gc
from .model import Module

if TYPE_CHECKING:
    import networkx as nx


def op_graph(module: Module, func: str | None = None) -> nx.MultiDiGraph:
    """Nodes: ("op", id) for each op of `func` (default: the entry function, regions included),
    ("arg", i) for its arguments and ("result", i) for what it returns. An edge runs from a
    value's producer to each user, keyed by operand position, with `shape`, `dtype` and `value`.

    The graph's dicts are filled directly and handed to networkx in one assignment, as its
    `_adj`/`_pred` descriptors provide for: 2.5x faster than add_edges_from on 100,000s of
    edges, and the same graph (tests/test_ir.py compares it with one built edge by edge).
    """
    with no_gc():  # 100,000s of long-lived dicts: the cyclic GC would rescan them repeatedly
        return _op_graph(module, func)


def _op_graph(module: Module, func: str | None):
    import networkx as nx

    f = module.func_by_name[func] if func else module.entry
    values, ops = module.values, module.ops
    # Its own value -> node map, not Value.producer: a region's block arguments name the region's op as
    # their producer there, and have no producer in this graph.
    nodes, source = {}, {}
    for i, vid in enumerate(f.args):
        v = values[vid]
        nodes[("arg", i)] = {"kind": "arg", "name": v.name, "shape": v.type.shape, "dtype": v.type.dtype}
        source[vid] = ("arg", i)
    for op_id in f.ops:
        op = ops[op_id]
        node = ("op", op_id)
        nodes[node] = {"kind": "op", "name": op.name, "path": op.path, "parent": op.parent}
        for vid in op.results:
            source[vid] = node
    for i in range(len(f.returns)):
        nodes[("result", i)] = {"kind": "result"}
    succ = {n: {} for n in nodes}
    pred = {n: {} for n in nodes}
    uses = [(("op", op_id), enumerate(ops[op_id].operands)) for op_id in f.ops]
    uses += [(("result", i), ((i, vid),)) for i, vid in enumerate(f.returns)]  # keyed by position
    get = source.get
    for dst, operands in uses:
        for pos, vid in operands:
            src = get(vid)
            if src is None:  # a region's block argument: no producer in this graph
                continue
            t = values[vid].type
            keyed = succ[src].get(dst)
            if keyed is None:
                keyed = succ[src][dst] = pred[dst][src] = {}
            keyed[pos] = {"value": vid, "shape": t.shape, "dtype": t.dtype}
    g = nx.MultiDiGraph(module=module.source, func=f.name)
    g._node, g._adj, g._pred = nodes, succ, pred  # _adj's descriptor sets _succ too
    return g
