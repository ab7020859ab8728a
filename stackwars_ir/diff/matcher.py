"""The op matcher: two aligned blocks' ops paired, then judged matched, changed, rewritten, one side's.

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

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..ir.model import Module
from .describe import op_diff
from .ops import OpDiff
from .side import LOOK_THROUGH, Side, compatible
from .signature import COMMUTATIVE

# Ops too common, or too exporter-specific, to pair by their rank among ops of their name.
_MOVEMENT = LOOK_THROUGH | {"stablehlo.constant", "stablehlo.iota", "func.call", "stablehlo.slice",
                            "stablehlo.concatenate", "stablehlo.select", "stablehlo.compare"}
_MAX_ROUNDS = 50  # neighbour propagation reaches its fixpoint in a few rounds; a bound all the same


@dataclass(frozen=True)
class Pairing:
    """Which ops of one aligned pair of blocks the matcher paired (before each pair is judged)."""

    a: Side
    b: Side
    pair_ab: dict  # op id in A -> op id in B


def match_ops(module_a: Module, ids_a: Iterable[int], module_b: Module, ids_b: Iterable[int],
              lines_a: dict | None = None, lines_b: dict | None = None, args_a: dict | None = None,
              args_b: dict | None = None) -> OpDiff:
    """The op-level diff of two blocks, given as op ids of their modules (diff.result.BlockResult's
    ops_a and ops_b, or diff.block.Block's ops). lines_a/lines_b (diff.source_lines): each op's
    line in its file, named in the groups. args_a/args_b (argument_identities): which argument each
    entry argument is; by default its index. Operands read from other blocks compare as this block's
    pairs alone know them: match_blocks judges a whole module's blocks against all pairs."""
    return judge(pair_ops(module_a, ids_a, module_b, ids_b, args_a, args_b), lines_a, lines_b)


def match_blocks(module_a: Module, module_b: Module, blocks: Iterable[tuple[Iterable[int], Iterable[int]]],
                 lines_a: dict | None = None, lines_b: dict | None = None, args_a: dict | None = None,
                 args_b: dict | None = None, meanwhile: Callable[[], object] | None = None) -> tuple:
    """(op diffs, paired_a, paired_b) of every aligned pair of blocks ((ids_a, ids_b) each): each
    pair's operands judged against the pairs of all blocks, so an op reading another block's
    value reads its partner's. paired_a/paired_b: A's and B's paired op ids -> A's (ModuleChanges
    reads them). A diff of FORK_OPS ops or more is matched by two processes (fork_ops).
    `meanwhile`: other work of the caller's, called once in this process before its own pairing (while
    a forked child pairs its share)."""
    blocks = [(tuple(ia), tuple(ib)) for ia, ib in blocks]
    if sum(len(ia) + len(ib) for ia, ib in blocks) >= fork_ops() and _may_fork():
        # meanwhile() is the parent's first step there: called, whether or not the child then fails
        got = _match_in_two(module_a, module_b, blocks, lines_a, lines_b, args_a, args_b,
                            meanwhile or (lambda: None), CHILD_SHARE if meanwhile is not None else 0.5)
        if got is not None:
            return got
    elif meanwhile is not None:
        meanwhile()
    pairings = [pair_ops(module_a, ia, module_b, ib, args_a, args_b) for ia, ib in blocks]
    paired_a, paired_b = _paired([p.pair_ab for p in pairings])
    return tuple(judge(p, lines_a, lines_b, paired_a, paired_b) for p in pairings), paired_a, paired_b


def _paired(pairs: list) -> tuple[dict, dict]:
    """(paired_a, paired_b) of each block's pairs (A's op id -> B's), in block order."""
    paired_a, paired_b = {}, {}
    for pair_ab in pairs:
        for x, y in pair_ab.items():
            paired_a[x] = x
            paired_b[y] = x
    return paired_a, paired_b


# A diff of this many ops (both sides' blocks together) or more is matched in two processes on Linux:
# a child forked with both modules takes its share of the block pairs. Each pair's pairing reads
# only its two blocks, and each judgement the pairs of all blocks, which the two exchange in between,
# so the result is the one process's. On 2 cores, the ~110k-op pair of benchmarks/diff_speed.py: pairing,
# judging and the whole-program fingerprints 5.9 s -> 3.4-5.4 s (docs/benchmarks.md, "Diff").
# STACKWARS_IR_FORK_OPS sets it (0: never).
FORK_OPS = 40_000
FORK_OPS_ENV = "STACKWARS_IR_FORK_OPS"
# The child's share of the ops when the parent has other work meanwhile (diff's whole-program
# fingerprints, about a third of the matching's time): balanced on that ~110k-op pair.
CHILD_SHARE = 0.65


def fork_ops() -> float:
    """The size from which match_blocks forks (FORK_OPS, or STACKWARS_IR_FORK_OPS; 0 or less: never)."""
    import os

    try:
        n = int(os.environ.get(FORK_OPS_ENV, FORK_OPS))
    except ValueError:
        return FORK_OPS
    return n if n > 0 else float("inf")


def _may_fork() -> bool:
    """Linux, two cores or more, this process's one Python thread, and no framework with a runtime of
    its own loaded (JAX, PyTorch, TensorFlow, Ray: their native threads may hold a lock a forked child
    would wait on forever; JAX warns so). numpy's BLAS threads are fork-safe (pthread_atfork)."""
    import os
    import sys
    import threading

    return sys.platform == "linux" and (os.cpu_count() or 1) >= 2 and threading.active_count() == 1 and \
        not any(m in sys.modules for m in ("jax", "torch", "tensorflow", "ray"))


def _match_in_two(module_a, module_b, blocks: list, lines_a, lines_b, args_a, args_b, meanwhile: Callable[[], None],
                  share: float) -> tuple | None:
    """match_blocks with the last `share` of `blocks` (by ops) in a forked child, `meanwhile()` called
    here before this process's own pairing; None when the child fails (the caller then matches them
    all itself)."""
    import os
    import pickle

    total, cut, acc = sum(len(ia) + len(ib) for ia, ib in blocks), 0, 0
    while cut < len(blocks) and acc < total * (1 - share):
        acc += len(blocks[cut][0]) + len(blocks[cut][1])
        cut += 1
    up_r, up_w = os.pipe()  # child -> parent: its pairs, then its op diffs
    down_r, down_w = os.pipe()  # parent -> child: the parent's pairs
    pid = os.fork()
    if pid == 0:  # the child: nothing of the parent's (its output, its workers) is touched
        code = 1
        try:
            os.close(up_r)
            os.close(down_w)
            with os.fdopen(up_w, "wb") as up, os.fdopen(down_r, "rb") as down:
                mine = [pair_ops(module_a, ia, module_b, ib, args_a, args_b) for ia, ib in blocks[cut:]]
                pickle.dump([p.pair_ab for p in mine], up, protocol=pickle.HIGHEST_PROTOCOL)
                up.flush()
                paired_a, paired_b = _paired(pickle.load(down) + [p.pair_ab for p in mine])
                pickle.dump([judge(p, lines_a, lines_b, paired_a, paired_b) for p in mine], up,
                            protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(up_w)
    os.close(down_r)
    up, down = os.fdopen(up_r, "rb"), os.fdopen(down_w, "wb")
    try:
        meanwhile()
        mine = [pair_ops(module_a, ia, module_b, ib, args_a, args_b) for ia, ib in blocks[:cut]]
        try:
            theirs = pickle.load(up)
            pickle.dump([p.pair_ab for p in mine], down, protocol=pickle.HIGHEST_PROTOCOL)
            down.close()
        except (EOFError, OSError, pickle.UnpicklingError):
            return None
        paired_a, paired_b = _paired([p.pair_ab for p in mine] + theirs)
        diffs = [judge(p, lines_a, lines_b, paired_a, paired_b) for p in mine]
        try:
            diffs += pickle.load(up)
        except (EOFError, OSError, pickle.UnpicklingError):
            return None
        return tuple(diffs), paired_a, paired_b
    finally:
        up.close()
        if not down.closed:
            down.close()
        os.waitpid(pid, 0)


def pair_ops(module_a: Module, ids_a: Iterable[int], module_b: Module, ids_b: Iterable[int],
             args_a: dict | None = None, args_b: dict | None = None) -> Pairing:
    """The ops of two blocks paired (steps 1 to 4 of the module docstring), not yet judged."""
    a, b = Side(module_a, ids_a, args_a), Side(module_b, ids_b, args_b)
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
            if a.name(x1) in COMMUTATIVE and len(pb) == 2 and pb[0] is not None and pb[1] is not None \
                    and a.producers[x1][0] is not None and fa[a.producers[x1][0]] == fb[pb[1]] \
                    and fa[a.producers[x1][0]] != fb[pb[0]]:
                pb = pb[::-1]  # x + y against y + x: each operand's cone with its twin
            for px, py in zip(a.producers[x1], pb):
                if px is not None and py is not None and px not in pair_ab and py not in pair_ba:
                    stack.append((px, py))
    if len(pair_ab) in (len(a.order), len(b.order)):
        return Pairing(a, b, pair_ab)  # one side wholly paired: nothing is left to pair (an unchanged block)
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
        if len(xs) == len(ys) and all(compatible(a, b, x, y) for x, y in zip(xs, ys)):
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
    return op_diff(a, b, pair_ab, lines_a or {}, lines_b or {}, paired_a, paired_b)


def _grow(a: Side, b: Side, pair_ab: dict, pair) -> None:
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
            if a.name(x) in COMMUTATIVE and len(pa) == 2 == len(pb) and not _same_names(a, b, pa, pb) \
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
                            k2 == k or a.name(ux) in COMMUTATIVE) and compatible(a, b, ux, uy):
                        add(ux, uy)
                        grown.append((ux, uy))
                        break
        if not grown:
            break
        frontier = grown


def _same_names(a: Side, b: Side, pa, pb) -> bool:
    return all(x is not None and y is not None and a.name(x) == b.name(y) for x, y in zip(pa, pb))


def _through(a: Side, b: Side, px, py, pair_ab, pair_ba):
    """The pair to make of two operands' producers, looking through data movement that only one
    side has (px a reshape where py is the dot it feeds the other side's twin of, or the reverse)."""
    for _ in range(4):
        if px is None or py is None or px in pair_ab or py in pair_ba:
            return None
        if a.name(px) == b.name(py):
            return (px, py) if compatible(a, b, px, py) else None
        if b.name(py) in LOOK_THROUGH and b.producers[py]:
            py = b.producers[py][0]
        elif a.name(px) in LOOK_THROUGH and a.producers[px]:
            px = a.producers[px][0]
        else:
            return None
    return None
