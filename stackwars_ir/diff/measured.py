"""Measured kernels, times and host time joined to a diff's blocks: each block's share, its interval."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..common.runstats import part_gaps, spread, summed_runs
from ..ir.scopes import CALL_WORDS, LOOP_WORDS
from .analysis import DiffReport, source
from .block import Block
from .result import DiffResult


def kernel_blocks(report: DiffReport, side: str) -> Callable[[Any], str | None]:
    """The function that traces a kernel (anything with a module `path` and a `phase`: bench.kernels'
    Kernel, bench.profile's KernelTime) to the label of side `side`'s block whose ops carry its module
    path, or the longest prefix of it, in its phase; a layer's block before a shared one; in a
    training step, a kernel without a path to the block holding most of its phase's path-less ops
    (the update's to the optimizer, the loss's to its block); None for one that no block claims."""
    by_path: dict = {}
    # A shared block's ops carry the path of the layer that built them (torch_xla's mask: h.0.attn),
    # and a kernel's metadata names no more than that path: the layer's own block claims it.
    blocks = sorted(getattr(report, side).segmentation.blocks, key=lambda b: b.role == "shared")
    for blk in blocks:
        for op, path in blk.ops:
            if path:
                by_path.setdefault((path, op.phase), blk.label)
    # In a training step, ops without a module path are the update's (no phase either) and the loss's
    # (the LM head, log-softmax, the loss itself; forward and backward), and so are the kernels XLA
    # makes of them: such a kernel goes to the block holding most of its phase's path-less ops
    # (GPT-2: optimizer#0, other#0 and other#0 (backward), on every side).
    pathless: dict = {}
    if any(b.phase == "update" for b in blocks):
        for blk in blocks:
            for op, path in blk.ops:
                if not path:
                    counts = pathless.setdefault(op.phase, {})
                    counts[blk.label] = counts.get(blk.label, 0) + 1
    owner = {phase: max(counts, key=counts.get) for phase, counts in pathless.items()}

    def longest(p: str, phase: str) -> str | None:
        label = None
        while p and label is None:
            label = by_path.get((p, phase))
            p = p.rsplit(".", 1)[0] if "." in p else ""
        return label

    def block_of(k) -> str | None:
        # A loop body's kernel carries the loop's scopes before the module path (XLA keeps JAX's
        # `while/body/closed_call/layers/mlp`) where the body's ops name the module alone: the module
        # path first, then the loop's plumbing (`while.body`: the body's own block).
        label = longest(unlooped(k.path), k.phase) if k.path != unlooped(k.path) else None
        label = label or longest(k.path, k.phase)
        return owner.get(k.phase) if label is None and not k.path else label

    return block_of


def trip_share(b: Block) -> float:
    """The share of its block's time a paired block carries: one trip's for a scanned block's copy for
    one layer, the whole otherwise."""
    return 1 / b.trips if b.trips and b.loop < 0 else 1.0


def unlooped(path: str) -> str:
    """A module path without the scopes JAX gives a loop (`while.body.closed_call.layers.mlp` -> `layers.mlp`)."""

    return ".".join(w for w in path.split(".") if w not in LOOP_WORDS and w not in CALL_WORDS)


def with_kernels(report: DiffReport, result: DiffResult, kernels_a: Any, kernels_b: Any) -> DiffResult:
    """The result with, per aligned block, how many kernels each side compiled to (bench.kernels,
    each traced to a block by kernel_blocks); the kernels no block claims are counted as
    unattributed."""
    from dataclasses import replace

    counts, totals, moved = {}, {}, {}
    for side, ks in (("a", kernels_a), ("b", kernels_b)):
        block_of, per, unattributed, collectives = kernel_blocks(report, side), {}, 0, {}
        for k in ks.kernels:
            label = block_of(k)
            if k.collective:  # what the SPMD partitioner inserted: kind -> [count, bytes per device]
                c = collectives.setdefault(label, {}).setdefault(k.collective, [0, 0])
                c[0], c[1] = c[0] + 1, c[1] + k.bytes
            if label is None:
                unattributed += 1
                continue
            n, f, names = per.get(label, (0, 0, ()))
            per[label] = (n + 1, f + (k.opcode == "fusion"), names + (k.name,))
        counts[side], moved[side] = per, collectives
        totals[side] = {"backend": ks.backend, "kernels": len(ks.kernels),
                        "fusions": sum(k.opcode == "fusion" for k in ks.kernels), "unattributed": unattributed,
                        "collectives": _summed(collectives.values()),
                        "collectives_unattributed": collectives.get(None, {})}
    blocks = []
    for blk, d in zip(result.blocks, report.blocks):
        # A scanned block paired layer by layer: each layer's row shows the body's kernels (compiled
        # once, run once per trip).
        (na, fa, ka), (nb, fb, kb) = counts["a"].get(source(d.a), (0, 0, ())), counts["b"].get(source(d.b), (0, 0, ()))
        # XLA names a fusion after the ops it fused (`dot_add_fusion`): the names say what went in.
        metrics = dict(blk.metrics, kernels={"a": na, "b": nb, "fusions_a": fa, "fusions_b": fb,
                                             "names_a": list(ka), "names_b": list(kb)})
        ca, cb = moved["a"].get(d.a.label, {}), moved["b"].get(d.b.label, {})
        if ca or cb:
            metrics["collectives"] = {"a": ca, "b": cb}
        blocks.append(replace(blk, metrics=metrics))
    return replace(result, blocks=tuple(blocks), metrics=dict(result.metrics, kernels=totals))


def _summed(per_block) -> dict:
    """kind -> [count, bytes] summed over blocks."""
    out: dict = {}
    for kinds in per_block:
        for kind, (n, size) in kinds.items():
            c = out.setdefault(kind, [0, 0])
            c[0], c[1] = c[0] + n, c[1] + size
    return dict(sorted(out.items()))


def with_times(report: DiffReport, result: DiffResult, profile_a: Any, profile_b: Any) -> DiffResult:
    """The result with, per aligned block, each side's profiled kernel time (bench.profile.Profile:
    each kernel's median seconds per run, traced to a block by kernel_blocks), how many of its kernels
    ran and the three longest, and per side the
    totals: summed kernel time, the time traced to no block (with the kernels that carry it), the
    unprofiled steady time and the profiled run's wall time outside every kernel."""
    from dataclasses import replace

    per, totals, kernels, folded, series = {}, {}, {}, {}, {}
    aligned = {"a": {source(d.a) for d in report.blocks}, "b": {source(d.b) for d in report.blocks}}
    for side, prof in (("a", profile_a), ("b", profile_b)):
        block_of, times, loose, ran, into = kernel_blocks(report, side), {}, [], {}, {}
        runs = prof.run_totals
        by_run: dict = {}  # block label -> its kernel time in each profiled run
        for k in prof.kernels:
            label = block_of(k)
            if label is None:
                loose.append((k.name, k.seconds))
            else:
                times[label] = times.get(label, 0.0) + k.seconds
                if runs:
                    by_run[label] = [x + y for x, y in zip(by_run.get(label, [0.0] * len(runs)), k.per_run)]
                if k.calls:
                    ran.setdefault(label, []).append((k.label, k.seconds))
            for other in dict.fromkeys(block_of(replace(k, path=p)) for p in k.spans):
                if other is not None and other != label and k.calls:
                    into.setdefault(other, []).append([k.label, label or "no block"])
        per[side] = times
        kernels[side] = ran
        folded[side] = into
        series[side] = (runs, by_run, prof.rounds)
        untraced = sum(s for _, s in prof.untraced)
        totals[side] = {"steady_s": prof.steady_s, "wall_s": prof.wall_s, "kernel_s": prof.kernel_s,
                        "busy_s": prof.busy_s, "outside_kernels_s": prof.outside_s, "overhead": prof.overhead,
                        "runs": prof.runs, "kernels_sum_s": prof.kernels_sum_s,
                        "unattributed_s": sum(s for _, s in loose) + untraced,
                        "unaligned_s": sum(t for label, t in times.items() if label not in aligned[side]),
                        "unattributed": [n for n, s in sorted(loose, key=lambda x: -x[1])]
                        + [n for n, _ in prof.untraced], **({"estimate": prof.estimate} if prof.estimate else {})}
    def ran(side: str, b) -> dict:
        """The kernels that ran in the block, its longest three, and the other blocks' kernels that
        also compute some of its ops (their time counted in those blocks: `elsewhere`)."""
        ks = sorted(kernels[side].get(source(b), ()), key=lambda x: -x[1])
        return {f"kernels_{side}": len(ks), f"top_{side}": [[n, t * trip_share(b)] for n, t in ks[:3]],
                f"elsewhere_{side}": folded[side].get(source(b), [])}

    def seconds(side: str, b) -> float:
        """A block's time; a scanned block paired layer by layer: one trip's share."""
        return per[side].get(source(b), 0.0) * trip_share(b)

    gaps = _gaps(report, series, [blk.role for blk in result.blocks])
    if None in gaps:
        totals["gap_95"] = list(gaps[None][1:])
        totals["in_turns"] = profile_a.in_turns_with(profile_b)
        totals["rounds"] = len(profile_a.rounds) if profile_a.rounds and profile_a.rounds == profile_b.rounds else 1
        totals["roles_95"] = {k[1]: list(v[1:]) for k, v in gaps.items() if isinstance(k, tuple) and len(k) == 3}

    def interval(d) -> dict:
        """The block's gap B - A with its 95% interval over the profiled runs (both sides' runs kept)."""
        key = (source(d.a), source(d.b))
        if key not in gaps:
            return {}
        _, low, high = gaps[key]
        return {"gap_95": [low * trip_share(d.a), high * trip_share(d.a)]}

    blocks = [replace(blk, metrics=dict(blk.metrics, time={"a": seconds("a", d.a), "b": seconds("b", d.b),
                                                           **ran("a", d.a), **ran("b", d.b), **interval(d)}))
              for blk, d in zip(result.blocks, report.blocks)]
    return replace(result, blocks=tuple(blocks), metrics=dict(result.metrics, time=totals))


def with_host(report: DiffReport, result: DiffResult, host_a: tuple[str, Any] | None,
              host_b: tuple[str, Any] | None) -> DiffResult:
    """The result with, per aligned block, the host's time in it on each side: (label, bench.host.
    HostPhases) of the native runtime a user of that side's route runs (or None), its modules' self
    times traced to blocks by module path as kernels are (kernel_blocks); per side the step's wall
    time, the host time traced to no block, and what the runtime's own phases say (metrics "host")."""
    from dataclasses import replace

    per, totals, runs = {}, {}, {}
    for side, given in (("a", host_a), ("b", host_b)):
        if given is None:
            continue
        label, host = given
        totals[side] = {"label": label, "wall_s": host.wall_s, "hooked_wall_s": host.hooked_wall_s,
                        "in_modules_s": sum(m.seconds for m in host.modules), "untraced_s": 0.0, "unaligned_s": 0.0,
                        "phases": [[p.name, p.seconds] for p in host.phases if not p.parent],
                        "device_s": host.device_s}
        if not host.modules:  # a compiled call (jax.jit): no module of it runs on the host in the step
            continue
        block_of, times, loose = kernel_blocks(report, side), {}, 0.0
        for m in host.modules:
            block = block_of(m)
            if block is None:
                loose += m.seconds
            else:
                times[block] = times.get(block, 0.0) + m.seconds
                runs[side, block] = summed_runs(runs.get((side, block), ()), m.per_run)
        per[side] = times
        aligned = {source(getattr(d, side)) for d in report.blocks}
        totals[side].update(untraced_s=loose, unaligned_s=sum(t for label, t in times.items() if label not in aligned))
    def spread_of(side, d) -> dict:
        got = spread(runs.get((side, source(getattr(d, side))), ()))
        share = trip_share(getattr(d, side))
        return {f"host_{side}_p10_p90": [got[0] * share, got[1] * share]} if got else {}

    blocks = [replace(blk, metrics=dict(blk.metrics, time=dict(blk.metrics.get("time") or {}, **{
        f"host_{side}": per[side].get(source(getattr(d, side)), 0.0) * trip_share(getattr(d, side))
        for side in per}, **{k: v for side in per for k, v in spread_of(side, d).items()})))
        for blk, d in zip(result.blocks, report.blocks)]
    return replace(result, blocks=tuple(blocks), metrics=dict(result.metrics, host=totals))


def _gaps(report: DiffReport, series: dict, roles: list) -> dict:
    """{(A's block label, B's): (gap, low, high)}, {("role", ROLE, None): the same of the role's blocks
    summed run by run} and {None: the kernel total's}: each aligned pair's B - A in the median runs
    with its bootstrap interval (runstats.part_gaps); empty where a side's profile kept no per-run
    times (an estimate, or a file written before they were kept). `roles`: each aligned block's role.
    A role's many small blocks that differ the same way (GPT-2 base's 25 LayerNorms, each a few
    hundredths of a millisecond) are told apart from the noise together where one block alone is not."""

    (runs_a, by_a, rounds_a), (runs_b, by_b, rounds_b) = series["a"], series["b"]
    if not runs_a or not runs_b:
        return {}
    pairs = list(dict.fromkeys((source(d.a), source(d.b)) for d in report.blocks))
    zero_a, zero_b = [0.0] * len(runs_a), [0.0] * len(runs_b)
    parts_a = {p: by_a.get(p[0], zero_a) for p in pairs}
    parts_b = {p: by_b.get(p[1], zero_b) for p in pairs}
    for d, role in zip(report.blocks, roles):  # a role's blocks, each at its share (trip_share) as in the table
        key = ("role", role, None)
        for block, by, parts, zero in ((d.a, by_a, parts_a, zero_a), (d.b, by_b, parts_b, zero_b)):
            share = trip_share(block)
            parts[key] = [x + y * share for x, y in zip(parts.get(key, zero), by.get(source(block), zero))]
    # Across rounds where both sides were profiled in the same rounds (bench --rounds: each a fresh worker)
    return part_gaps(runs_a, parts_a, runs_b, parts_b, rounds=rounds_a if rounds_a == rounds_b else ())
