"""The op graph: a networkx MultiDiGraph of ops with def-use edges carrying shape and dtype."""
from __future__ import annotations

from .model import Module


def op_graph(module: Module, func: str | None = None):
    """Nodes: ("op", id) for each op of `func` (default: the entry function, regions included),
    ("arg", i) for its arguments and ("result", i) for what it returns. An edge runs from a
    value's producer to each user, keyed by operand position, with `shape`, `dtype` and `value`.
    """
    import networkx as nx

    f = module.func_by_name[func] if func else module.entry
    g = nx.MultiDiGraph(module=module.source, func=f.name)
    source, nodes, edges = {}, [], []
    for i, vid in enumerate(f.args):
        v = module.values[vid]
        nodes.append((("arg", i), {"kind": "arg", "name": v.name, "shape": v.type.shape, "dtype": v.type.dtype}))
        source[vid] = ("arg", i)
    for op_id in f.ops:
        op = module.ops[op_id]
        nodes.append((("op", op_id), {"kind": "op", "name": op.name, "path": op.path, "parent": op.parent}))
        for vid in op.results:
            source[vid] = ("op", op_id)
    for op_id in f.ops:
        for pos, vid in enumerate(module.ops[op_id].operands):
            _edge(edges, module, source, vid, ("op", op_id), pos)
    for i, vid in enumerate(f.returns):
        nodes.append((("result", i), {"kind": "result"}))
        _edge(edges, module, source, vid, ("result", i), i)
    g.add_nodes_from(nodes)  # in bulk: several times faster than one call per node
    g.add_edges_from(edges)
    return g


def _edge(edges: list, module: Module, source: dict, vid: int, dst, pos: int) -> None:
    src = source.get(vid)
    if src is None:  # a region's block argument: no producer in this graph
        return
    t = module.values[vid].type
    edges.append((src, dst, pos, {"value": vid, "shape": t.shape, "dtype": t.dtype}))
