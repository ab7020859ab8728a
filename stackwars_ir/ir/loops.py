"""Counted loops: each `while` whose trip count the IR fixes, and how often each op runs.

Such loops are JAX's scan and fori_loop, and torch_xla's scan.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .model import Module

WHILES = frozenset({"stablehlo.while", "mhlo.while"})
_RETURNS = frozenset({"stablehlo.return", "mhlo.return"})
_CONTINUE = {"LT": lambda i, n: i < n, "LE": lambda i, n: i <= n, "GT": lambda i, n: i > n,
             "GE": lambda i, n: i >= n, "NE": lambda i, n: i != n}
_MAX_TRIPS = 1 << 40


class Loop(NamedTuple):
    """A while op and what its regions say: `trips` is its trip count when the condition compares a
    counter (an operand that starts at a constant and that the body steps by a constant) against a
    constant, else None; `counter` is that operand's position; `cond` and `body` its regions' op ids;
    `args` its regions' argument value ids, the condition's then the body's (one per operand each)."""

    op: int
    trips: int | None
    counter: int | None
    cond: tuple
    body: tuple
    args: tuple = ()

    @property
    def counted(self) -> bool:
        return self.trips is not None


def loops_of(module: Module) -> dict:
    """while op id -> Loop, for every while of the module."""
    inside: dict = {}
    for op in module.ops:
        if op.parent is not None and module.ops[op.parent].name in WHILES:
            inside.setdefault(op.parent, []).append(op.id)
    args: dict = {}  # while op id -> its regions' block arguments, cond's then body's (values it
    for v in module.values:  # "produces" that are not its results)
        if v.producer is not None and module.ops[v.producer].name in WHILES and \
                v.id not in module.ops[v.producer].results:
            args.setdefault(v.producer, []).append(v.id)
    out = {}
    for op in module.ops:
        if op.name not in WHILES:
            continue
        ids = inside.get(op.id, [])
        end = next((k for k, i in enumerate(ids) if module.ops[i].name in _RETURNS), len(ids) - 1)
        cond, body = tuple(ids[:end + 1]), tuple(ids[end + 1:])
        n = len(op.operands)
        block = args.get(op.id, [])
        trips, counter = _count(module, op, cond, body, block[:n], block[n:2 * n]) if len(block) == 2 * n \
            else (None, None)
        out[op.id] = Loop(op.id, trips, counter, cond, body, tuple(block))
    return out


def _count(module, op, cond: tuple, body: tuple, cond_args: list, body_args: list) -> tuple:
    """(trips, counter position) of a while, or (None, None) when its condition is not a counter
    against a constant bound."""
    ops, values = module.ops, module.values
    ret = ops[cond[-1]] if cond and ops[cond[-1]].name in _RETURNS else None
    if ret is None or len(ret.operands) != 1:
        return None, None
    cmp = _producer(module, ret.operands[0])
    if cmp is None or not cmp.name.endswith(".compare") or len(cmp.operands) != 2:
        return None, None
    direction = cmp.attr("comparison_direction")
    direction = str(direction).rsplit(" ", 1)[-1].rstrip(">") if direction is not None else None
    lhs, rhs = cmp.operands
    if lhs in cond_args and _const(module, rhs) is not None:
        k, bound = cond_args.index(lhs), _const(module, rhs)
    elif rhs in cond_args and _const(module, lhs) is not None:  # n > i: i < n
        k, bound = cond_args.index(rhs), _const(module, lhs)
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
    else:
        return None, None
    start = _const(module, op.operands[k])
    step = _step(module, body, body_args[k], k)
    test = _CONTINUE.get(direction)
    if start is None or not step or test is None:
        return None, None
    if not test(start, bound):
        return 0, k
    if test(start + step * _MAX_TRIPS, bound):  # never ends, or not in any loop we could run
        return None, None
    trips = max(0, -(-(bound - start) // step)) if direction in ("LT", "GT", "NE") else (bound - start) // step + 1
    return (trips, k) if trips >= 0 and not test(start + step * trips, bound) else (None, None)


def _step(module, body: tuple, arg: int, k: int) -> int | None:
    """The constant the body adds to its k-th argument to make its k-th result."""
    ops = module.ops
    ret = ops[body[-1]] if body and ops[body[-1]].name in _RETURNS else None
    if ret is None or len(ret.operands) <= k:
        return None
    add = _producer(module, ret.operands[k])
    if add is None or len(add.operands) != 2:
        return None
    a, b = add.operands
    other = b if a == arg else a if b == arg else None
    if other is None:
        return None
    c = _const(module, other)
    if c is None:
        return None
    return c if add.name.endswith(".add") else -c if add.name.endswith(".subtract") and other == b else None


def _producer(module, vid: int):
    """The op whose result `vid` is (None for an argument, a region's included)."""
    v = module.values[vid]
    if v.producer is None or v.arg_index is not None or vid not in module.ops[v.producer].results:
        return None
    return module.ops[v.producer]


def _const(module, vid: int, depth: int = 0) -> int | None:
    """The value of a scalar integer constant (through converts, and through a function's argument
    that every call passes the same constant: torch_xla's scan takes its counter's start as one)."""
    v = module.values[vid]
    if v.producer is None and v.arg_index is not None and depth < 4:
        f = arg_of(module).get(vid)
        sites = [op for op in module.ops if op.name == "func.call" and op.attr("callee") == f] if f else []
        got = {_const(module, op.operands[v.arg_index], depth + 1) for op in sites if len(op.operands) > v.arg_index}
        return got.pop() if len(got) == 1 and sites else None
    op = _producer(module, vid)
    while op is not None and op.name.endswith(".convert") and len(op.operands) == 1:
        op = _producer(module, op.operands[0])
    if op is None or not op.name.endswith(".constant"):
        return None
    return op.attr("int")


def arg_of(module: Module) -> dict:
    """value id -> the function it is an entry argument of."""
    return {vid: f.name for f in module.funcs for vid in f.args}


def executions(module: Module) -> tuple:
    """How often each item of `module.inlined` runs per call of the entry function: the product of
    the trip counts of the loops around it (its own function's, and its call sites'); a loop's
    condition runs once more than its body. None where a loop around it has no trip count the IR
    fixes (a data-dependent while)."""
    loops = module.loops
    ops = module.ops
    region: dict = {}  # op id -> (while op id, in its condition)
    for loop in loops.values():
        region.update({i: (loop.op, True) for i in loop.cond})
        region.update({i: (loop.op, False) for i in loop.body})
    factor: dict = {}

    def own(op) -> int | None:  # the product of the loops around `op` within its function
        hit = factor.get(op.id, 0)
        if hit != 0:
            return hit
        f, at = 1, op
        while at.parent is not None:
            where = region.get(at.id)
            if where is not None:
                trips = loops[where[0]].trips
                if trips is None:
                    f = None
                    break
                f *= trips + (1 if where[1] else 0)
            at = ops[at.parent]
        factor[op.id] = f
        return f

    return _through_calls(module, own, lambda site, f: None if site is None or f is None else site * f, 1)


def loop_context(module: Module) -> tuple:
    """For each item of `module.inlined`, (k, trips) of the innermost counted loop whose body runs
    it (directly, or through the call it sits under), k numbering the module's counted loops in
    program order and trips the product of the trip counts of the counted loops around it (a scan
    of 4 groups over a scan of 8 layers: 32, each trip of the inner body a layer); None outside every
    counted loop body (a loop's condition included)."""
    loops = module.loops
    ops = module.ops
    numbered = {op.id: k for k, op in enumerate(o for o, _ in module.inlined
                                                if o.id in loops and loops[o.id].counted)}
    body = {i: loop.op for loop in loops.values() if loop.counted for i in loop.body}
    own: dict = {}

    def innermost(op):
        if op.id not in own:
            at, hit = op, None
            while at.parent is not None:
                w = body.get(at.id)
                if w is not None and w in numbered:
                    hit = (numbered[w], loops[w].trips) if hit is None else (hit[0], hit[1] * loops[w].trips)
                at = ops[at.parent]
            own[op.id] = hit
        return own[op.id]

    def combine(site, hit):
        return (hit[0], hit[1] * site[1]) if hit and site else hit or site

    return _through_calls(module, innermost, combine, None)


def _through_calls(module, own, combine, top) -> tuple:
    """For each item of `module.inlined`, combine(its call site's value, own(op)): `own` says what the
    op's own function gives it (the loops around it there), the call site's value what the calls it
    sits under give it (`top` for the entry function's ops), as `inlined` expands calls depth-first."""
    out, sites = [], []
    for (op, _), d in zip(module.inlined, module.inlined_depths):
        del sites[d:]
        value = combine(sites[-1] if sites else top, own(op))
        out.append(value)
        if op.name == "func.call":
            sites.append(value)
    return tuple(out)
