"""Segmentation by structure, for files without locations: anchor ops claim their nearest ops.

Anchor ops (gather from a weight table, batch_norm/rsqrt, exponential, tanh/erf/logistic,
convolution, reduce_window, dot_general) claim the ops nearest to them in the dataflow graph,
and layers are counted by attention (or, failing that, by the anchors in program order).
"""
from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Sequence

from ..ir.model import Module, Op, callees
from .block import Block, merge_same_key

_ACTIVATIONS = {"stablehlo.tanh", "stablehlo.erf", "chlo.erf", "stablehlo.logistic"}

_NORMS = {"stablehlo.batch_norm_training", "stablehlo.batch_norm_inference", "stablehlo.rsqrt"}

_RESHAPES = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert", "stablehlo.broadcast"})


def divided_by(module: Module, ops: Iterable[Op]) -> frozenset:
    """The values some divide among `ops` divides by, looked through broadcasts and reshapes."""
    out = set()
    for op in ops:
        if op.name == "stablehlo.divide" and len(op.operands) > 1:
            v = op.operands[1]
            while (p := module.values[v].producer) is not None and module.ops[p].name in _RESHAPES \
                    and module.ops[p].operands:
                out.add(v)
                v = module.ops[p].operands[0]
            out.add(v)
    return frozenset(out)


_THROUGH = _RESHAPES | {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
                        "stablehlo.sqrt", "stablehlo.rsqrt"}


def _over_last_axis(module: Module, op: Op) -> bool:
    """Whether a sqrt or rsqrt norm normalizes over the last axis (a layer or RMS norm: its variance
    a reduce of the last dimension, a few elementwise ops upstream), not over the batch."""
    return _variance_axes(module, op) == "last"


def _variance_axes(module: Module, op: Op, steps: int = 8) -> str | None:
    """"last" or "other": the axes of the reduce a few elementwise ops above `op` (a variance, for a
    norm's sqrt); None where there is none (a sqrt of a constant: the FFT's 1/sqrt(n))."""
    todo, seen = list(op.operands), set()
    for _ in range(steps):
        nxt = []
        for v in todo:
            p = module.values[v].producer
            if p is None or p in seen:
                continue
            seen.add(p)
            up = module.ops[p]
            if up.name == "stablehlo.reduce" and up.operands:
                src = module.values[up.operands[0]].producer
                if src is not None and module.ops[src].name == "stablehlo.constant":
                    return None  # a shape's product (the FFT's n), not a statistic of the data
                rank = module.values[up.operands[0]].type.rank
                return "last" if tuple(up.attr("dimensions", ()) or ()) == (rank - 1,) else "other"
            if up.name in _THROUGH:
                nxt += list(up.operands)
        todo = nxt
    return None


def anchor_kind(module: Module, op: Op, divisors: frozenset = frozenset()) -> str | None:
    """The kind of anchor `op` is in structure mode, or None. A norm is batch norm, rsqrt, or a sqrt
    of a reduce that something divides by (LayerNorm written as `(x - mean) / sqrt(var + eps)`; not
    AdamW's sqrt(v), which is divided, or has eps added before it divides; not a constant's)."""
    n = op.name
    if n in _NORMS or (n == "stablehlo.sqrt" and op.results and op.results[0] in divisors
                       and _variance_axes(module, op) is not None):
        return "norm"
    if n == "stablehlo.exponential":
        return "softmax"
    if n in _ACTIVATIONS:
        return "act"
    if n == "stablehlo.convolution":
        return "conv"
    if n == "stablehlo.reduce_window" and op.operands and module.values[op.operands[0]].type.rank == 4:
        return "pool"
    if n == "stablehlo.dot_general":
        return "dot"
    if n in ("stablehlo.gather", "func.call") and op.operands and _is_table(module, op.operands[0]):
        if n == "stablehlo.gather" or _calls_gather(module, op.attr("callee")):
            return "embed"
    return None


def _is_table(module: Module, vid: int) -> bool:
    """A float matrix passed in as an argument: an embedding table (not an index buffer)."""
    v = module.values[vid]
    return v.producer is None and v.type.rank == 2 and v.type.dtype.startswith(("f", "bf"))


def _calls_gather(module: Module, callee: str) -> bool:
    f = module.func_by_name.get(callee)
    return bool(f) and any(module.ops[i].name == "stablehlo.gather" for i in f.ops)


def by_structure(module: Module, items: list, within: bool = False, layered: bool = False) -> list[Block]:
    """Nearest-anchor clustering on the dataflow graph of the entry function's top-level ops; with
    `within` (the ops of one block: a layer, maybe a loop's body, maybe a callee's), of the ops of
    `items` whose region-holding op is not among them. `layered`: the program's layers run in a
    loop (its top level holds no attention, yet its norms are a transformer's, not batch norms)."""
    top, nested, index, parents, users = dataflow_graph(module, items, within)
    neighbours = dataflow_neighbours(top, parents, users)
    divisors = divided_by(module, top)
    kinds = {op.id: k for op in top if (k := anchor_kind(module, op, divisors))}
    by_id = {op.id: op for op in top}
    for k in [k for k, kind in kinds.items() if kind == "softmax"]:
        if not _feeds_reduce(k, users, by_id):
            kinds[k] = "act"  # an exp no reduce sums is an activation's (SiLU as x / (1 + exp(-x))), not a softmax
    owner = nearest_anchor(list(kinds), neighbours, index, _variance_chains(kinds, parents, by_id))
    layer_norms = frozenset(k for k, kind in kinds.items() if kind == "norm" and not by_id[k].name.startswith(
        "stablehlo.batch_norm") and _over_last_axis(module, by_id[k]))
    roles = _anchor_roles(top, kinds, parents, users, layered, layer_norms)
    groups: dict = defaultdict(list)
    for op in top:
        a = owner.get(op.id)
        groups[roles[a] if a is not None else ((), "other", 0)].append(op)
    blocks = []
    for key in sorted(groups, key=lambda k: min(index[o.id] for o in groups[k])):
        layer, role, ordinal = key
        where = f"layer {'.'.join(map(str, layer))} " if layer else ""
        blocks.append(Block(role, layer, ordinal, f"{where}{role} #{ordinal}".strip(),
                            with_nested(groups[key], nested, index)))
    return blocks


def dataflow_graph(module: Module, items: list, within: bool) -> tuple:
    """(top, nested, index, parents, users) of the dataflow graph structure mode clusters: the
    entry function's top-level ops or, `within` a block, the ops of `items` whose region-holding op
    is not among them; `nested`: top op id -> the region and callee ops that travel with it (`items` in
    module.inlined's order: each call site's copy of a helper travels with that call, as provenance gives
    each copy its call site's path; a helper every layer calls went wholly to the first layer's block)."""
    entry = module.entry.name
    if within:
        mine = {op.id for op, _ in items}
        top = [op for op, _ in items if op.parent is None or op.parent not in mine]
        tops = {op.id for op in top}

        def owner_of(op):
            while op.id not in tops and op.parent is not None:
                op = module.ops[op.parent]
            return op.id
    else:
        top = [op for op, _ in items if op.func == entry and op.parent is None]
        tops = {op.id for op in top}
        call_sites = _first_call_sites(module)
        site = None  # the entry's top-level op last seen: a callee's ops follow the call that runs them

        def owner_of(op):
            if op.func != entry and site is not None:  # this call site's copy of a helper
                return site
            return _owner(module, op, entry, call_sites)
    nested: dict = defaultdict(list)
    for op, path in items:
        if op.id in tops:
            site = op.id
        else:
            nested[owner_of(op)].append((op, path))
    index = {op.id: i for i, op in enumerate(top)}
    parents, users = _edges(module, top, index)
    return top, nested, index, parents, users


def dataflow_neighbours(top: Iterable[Op], parents: dict, users: dict) -> dict:
    """Each op's producers and users, the paths nearest-anchor clustering walks. An op without
    operands (a constant, an iota) and a tuple are reached but lead nowhere: the scalar zero every
    reduce starts from, an epsilon two norms share, the tuple gathering what a loop's body returns
    (torch_xla) must not carry one block's claim into another's ops."""
    walks = {op.id for op in top if op.operands and not op.name.endswith(".tuple")}
    return {k: parents.get(k, []) + users.get(k, []) if k in walks else [] for k in set(parents) | set(users)}


def with_nested(ops: list, nested: dict, index: dict) -> tuple:
    """(op, path) items of a cluster of top ops in program order, each followed by its nested ops."""
    full = []
    for o in sorted(ops, key=lambda o: index[o.id]):
        full.append((o, o.path))
        full.extend(nested.get(o.id, []))
    return tuple(full)


def loops_by_structure(module: Module, blocks: list, loops: dict) -> list:
    """Structure mode inside counted loops: the ops of each loop's body (which the top-level
    clustering leaves in the block of the while) are clustered on their own, as one layer, each
    part keyed by the loop and running once per trip; what anchors nothing stays in the block."""
    if not loops:
        return blocks
    out = []
    for b in blocks:
        inside: dict = defaultdict(list)
        rest = []
        for op, path in b.ops:
            ctx = loops.get(id(op))
            (inside[ctx] if ctx is not None else rest).append((op, path))
        if not inside:
            out.append(b)
            continue
        if rest:
            out.append(dataclasses.replace(b, ops=tuple(rest)))
        for (k, trips), ops in inside.items():  # the body is one layer: parts of the same key merge
            out += merge_same_key([dataclasses.replace(p, layer=(), name=f"loop {k} body {p.role} #{p.ordinal}",
                                                         loop=k, trips=trips)
                                    for p in by_structure(module, ops, within=True)], tuple(ops))
    return out


def scans_layers(module: Module, loops: dict) -> bool:
    """Whether a counted loop's body computes a softmax (an exponential): layers scanned in a loop."""
    return any(op.name == "stablehlo.exponential" and id(op) in loops for op, _ in module.inlined)


def _variance_chains(kinds: dict, parents: dict, by_id: dict, depth: int = 6) -> dict:
    """op -> its norm: the ops from each rsqrt back to the reduce that sums the squares it normalizes
    by (mean, epsilon, reshapes between), and the square feeding that reduce. They are the norm's
    however far from its rsqrt: nearest-anchor alone gives an RMSNorm's square and sum, five steps
    from its rsqrt, to the output projection two steps before them."""
    seeds = {}
    for a, kind in kinds.items():
        if kind != "norm" or by_id[a].name != "stablehlo.rsqrt":
            continue
        back = {a: None}
        frontier = [a]
        found = None
        for _ in range(depth):
            nxt = []
            for node in frontier:
                for p in parents.get(node, ()):
                    if p in back or p in kinds:
                        continue
                    back[p] = node
                    if by_id[p].name == "stablehlo.reduce":
                        found = found or p
                    nxt.append(p)
            if found is not None:
                break
            frontier = nxt
        if found is None:
            continue
        node = found
        while node != a:
            seeds.setdefault(node, a)
            node = back[node]
        square = [p for p in parents.get(found, ()) if p not in kinds and
                  (by_id[p].name == "stablehlo.power" or
                   by_id[p].name == "stablehlo.multiply" and len(set(by_id[p].operands)) == 1)]
        for p in square[:1]:
            seeds.setdefault(p, a)
    return seeds


def _feeds_reduce(op_id: int, users: dict, by_id: dict, depth: int = 3) -> bool:
    """Whether a reduce uses this op's result within `depth` steps (a softmax sums its exponentials)."""
    frontier, seen = [op_id], {op_id}
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for u in users.get(o, ()):
                if u in seen:
                    continue
                if by_id[u].name == "stablehlo.reduce":
                    return True
                seen.add(u)
                nxt.append(u)
        frontier = nxt
    return False


def _first_call_sites(module: Module) -> dict:
    """Function name -> the first op (in module order) that calls it: a `func.call` or a composite."""
    first: dict = {}
    for caller in module.ops:
        if caller.name == "func.call" or caller.name.endswith(".composite"):
            for callee in callees(caller):
                first.setdefault(callee, caller)
    return first


def _owner(module: Module, op: Op, entry: str, call_sites: dict) -> int:
    """The top-level op of the entry function that holds `op` (through regions and calls);
    `call_sites`: `_first_call_sites(module)`. A callee's body belongs to its first call site (where the
    items' order does not say which call site's copy an op is)."""
    while op.parent is not None:
        op = module.ops[op.parent]
    if op.func == entry:
        return op.id
    caller = call_sites.get(op.func)
    return _owner(module, caller, entry, call_sites) if caller is not None else -1


def nearest_anchor(anchors: list, neighbours: dict, index: dict, seeds: dict | None = None) -> dict:
    """Multi-source BFS: each op goes to the closest anchor (ties: the earlier anchor); `seeds`
    (op -> anchor) are ops an anchor owns from the start, as it owns itself."""
    owner = {a: a for a in anchors}
    owner.update(seeds or {})
    frontier = deque(sorted(owner, key=lambda a: index[a]))
    while frontier:
        node = frontier.popleft()
        for nxt in neighbours.get(node, ()):
            if nxt not in owner:
                owner[nxt] = owner[node]
                frontier.append(nxt)
    return owner


def _anchor_roles(top, kinds, parents: dict, users: dict, looped: bool = False,
                  layer_norms: frozenset = frozenset()) -> dict:
    """(layer, role, ordinal) of every anchor, from dataflow rather than print order.

    Layer of a softmax = the number of softmaxes upstream of it; the dot_generals next to it
    are its attention. An activation or other dot_general belongs to the MLP of the layer
    whose attention feeds it. A norm belongs to the layer of the first attention or MLP it
    feeds (pre-LN's ln_1 and ln_2 alike); one that feeds neither is the final norm. `looped`: the
    layers (their softmaxes) run in a loop, so the top level is a transformer's all the same.
    Outside a transformer a norm is a batch norm, but those in `layer_norms` (over the last axis).
    """
    order = [op for op in top if op.id in kinds]
    depth: dict = {}  # softmaxes upstream, including the op itself (ops come in SSA order)
    for op in top:
        d = max((depth.get(src, 0) for src in parents.get(op.id, ())), default=0)
        depth[op.id] = d + (1 if kinds.get(op.id) == "softmax" else 0)
    softmaxes = [op.id for op in order if kinds[op.id] == "softmax"]
    attention_of = {s: depth[s] - 1 for s in softmaxes}
    for s in softmaxes:
        for dot in _attention_dots(s, kinds, users, parents):
            attention_of.setdefault(dot, depth[s] - 1)
    periodic = {} if softmaxes or looped else repeated_layers(top, kinds, parents)
    layered = bool(softmaxes) or looped or bool(periodic)
    roles: dict = {}
    counts: Counter = Counter()
    norms = []
    for op in order:
        kind = kinds[op.id]
        if op.id in attention_of:
            roles[op.id] = ((attention_of[op.id],), "attention", 0)
        elif kind in ("act", "dot") and periodic:
            roles[op.id] = ((periodic[op.id],), "mlp", 0) if op.id in periodic else _numbered((), "mlp", counts)
        elif kind in ("act", "dot") and layered:
            roles[op.id] = ((max(depth[op.id] - 1, 0),), "mlp", 0)
        elif kind == "norm" and layered:
            norms.append(op)
        elif kind == "norm":
            roles[op.id] = _numbered((), "norm" if op.id in layer_norms else "batchnorm", counts)
        elif kind in ("act", "dot"):
            roles[op.id] = _numbered((), "mlp", counts)
        else:
            roles[op.id] = _numbered((), {"embed": "embedding"}.get(kind, kind), counts)
    for op in norms:
        fed = _first_fed(op.id, users, roles, kinds)
        roles[op.id] = _numbered(fed[0] if fed else (), "norm", counts)
    return roles


LAYER_KINDS = frozenset({"norm", "act", "dot"})  # what a layer without attention is made of (no conv: ResNet's blocks stay as they are)


def repeated_layers(top: Sequence[Op], kinds: dict, parents: dict) -> dict:
    """Layers without attention found by their repeating structure: anchor op id -> layer number.

    The anchors are ordered by their depth in the dataflow (anchors upstream), then program order;
    the longest run of at least two repeats of one pattern (norm, dot, act, ...) that holds a norm
    and covers at least half the anchors is the layers, one repeat each (torch_xla's unrolled MLP
    blocks without locations against their scan_layers loop). Nothing where any anchor is of another
    kind (a conv net's repeating blocks keep their batch norms) or no run is long enough."""
    if not kinds or set(kinds.values()) - LAYER_KINDS or "norm" not in kinds.values():
        return {}
    depth: dict = {}
    for op in top:
        d = max((depth.get(src, 0) for src in parents.get(op.id, ())), default=0)
        depth[op.id] = d + (1 if op.id in kinds else 0)
    position = {op.id: i for i, op in enumerate(top)}
    seq = sorted(kinds, key=lambda k: (depth[k], position[k]))
    s = [kinds[k] for k in seq]
    n, best = len(s), (0, 0, 0)  # (start, period, repeats)
    for p in range(2, n // 2 + 1):
        for o in range(0, min(n - 2 * p, 32) + 1):
            k = 1
            while o + (k + 1) * p <= n and s[o + k * p:o + (k + 1) * p] == s[o:o + p]:
                k += 1
            if k >= 2 and "norm" in s[o:o + p] and k * p > best[1] * best[2]:
                best = (o, p, k)
    o, p, k = best
    if not k or 2 * k * p < n:
        return {}
    return {seq[i]: (i - o) // p for i in range(o, o + k * p)}


def _first_fed(start: int, users: dict, roles: dict, kinds: dict):
    """The role of the first attention or MLP anchor downstream of `start` (breadth first)."""
    def hit(n):
        return bool(roles.get(n)) and roles[n][1] in ("attention", "mlp")

    found = next(_hits([start], users, hit, lambda n: True), None)
    return roles[found] if found is not None else None


def _numbered(layer: tuple, role: str, counts: Counter) -> tuple:
    key = (layer, role)
    n = counts[key]
    counts[key] += 1
    return (layer, role, n)


def _edges(module: Module, top, index: dict) -> tuple[dict, dict]:
    """(parents, users) of each of the `top` ops (ids in `index`), from the module's def-use index:
    the top ops producing its operands, the top ops reading its results."""
    parents: dict = defaultdict(list)
    users: dict = defaultdict(list)
    values, uses = module.values, module.uses
    for op in top:
        for vid in op.operands:
            src = values[vid].producer
            if src in index:
                parents[op.id].append(src)
        found = [u for vid in op.results for u, _ in uses[vid] if u in index]
        if found:  # program order, as the BFS ties expect (one result's uses are in it already)
            users[op.id] = found if len(op.results) == 1 else sorted(found, key=index.__getitem__)
    return parents, users


def _hits(starts, edges: dict, is_hit, passable):
    """Breadth-first from `starts` along `edges`: yield each node `is_hit` accepts, walking on only
    through nodes that are neither hits nor impassable. Lazy, so a caller may stop at the first."""
    seen, frontier = set(starts), deque(starts)
    while frontier:
        node = frontier.popleft()
        for nxt in edges.get(node, ()):
            if nxt in seen:
                continue
            seen.add(nxt)
            if is_hit(nxt):
                yield nxt
            elif passable(nxt):
                frontier.append(nxt)


def _first_dots(starts, edges: dict, kinds: dict) -> set:
    """The first dot_generals met walking `edges` (users or producers) from `starts`."""
    return set(_hits(starts, edges, lambda n: kinds.get(n) == "dot",
                     lambda n: kinds.get(n) not in ("softmax", "norm", "act", "embed")))


def _attention_dots(softmax: int, kinds: dict, users: dict, parents: dict) -> set:
    """Scores and context dot_generals around a softmax, the projections feeding them (q, k, v)
    and the one the context feeds (output projection). Directed walks only, so a mask shared
    by every layer does not pull one layer's dots into another's attention."""
    scores = _first_dots([softmax], parents, kinds)
    context = _first_dots([softmax], users, kinds)
    inputs = _first_dots(list(scores | context), parents, kinds) - scores
    output = _first_dots(list(context), users, kinds)
    return scores | context | inputs | output
