"""Sentences: the diff's finding and summary records worded for people (every rendering uses these)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..common.textfmt import human_bytes
from ..diff.findings import Finding
from ..diff.ops import OpGroup, OpPattern, op_totals
from ..diff.result import BlockResult, DiffResult, SideResult, Summary, TimeGap, counter_delta


def shape_text(t: str) -> str:
    """ "2x16x64xf32" -> "[2,16,64]" (the study's notation)."""
    return "[" + ",".join(t.split("x")[:-1]) + "]"


def _counts(c: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(c.items()))


def finding(f: Finding, names: tuple[str, str]) -> str:
    """One block finding (diff.findings.Finding) as a sentence, the sides called by `names`."""
    a, b = names
    x, y = (a, b) if f.side == "a" else (b, a)
    n = f.numbers
    if f.kind == "high_level":
        spelled = ", ".join(f"{k.split('.', 1)[1]} x{v}" for k, v in n.get("spelled_out", {}).items())
        return f"{x} uses {n['op']} x{n['count']}; {y} does not" + (f" and spells it out ({spelled})" if spelled else "")
    if f.kind == "calls":
        return f"calls: {a} {_counts(n['a']) or 'none'}; {b} {_counts(n['b']) or 'none'}"
    if f.kind == "custom_calls":
        return f"custom_call targets: {a} {_counts(n['a']) or 'none'}; {b} {_counts(n['b']) or 'none'}"
    if f.kind == "indices":
        return f"{x} builds indices with iota; {y} materializes a constant index table"
    if f.kind == "flattening":
        return (f"{x} flattens {shape_text(n['from'])} -> {shape_text(n['to'])} before {n['flattened']} of "
                f"{n['dots']} dot_general; {y} keeps rank-{'/'.join(map(str, n['kept_ranks']))} operands")
    if f.kind == "converts":
        return f"dtype conversions: {a} {_counts(n['a']) or 'none'}; {b} {_counts(n['b']) or 'none'}"
    if f.kind == "remat":
        return f"forward ops recomputed in the backward (remat): {a} {n['a']}; {b} {n['b']}"
    if f.kind == "variance":
        return f"{a} computes the {n['a']}; {b} the {n['b']}"
    return f"{f.kind}: {n}"  # a kind from a newer format: its data, unworded


def summary(s: Summary, names: tuple[str, str]) -> str:
    """One of the study's questions answered (diff.Summary) as a sentence."""
    a, b = names
    n = s.numbers
    if s.topic == "normalization":
        def top(pairs) -> str:
            return ", ".join(f"{k} x{v}" for k, v in pairs)
        return f"{n['blocks']} norm blocks: {a} {top(n['a'])}; {b} {top(n['b'])}"
    if s.topic == "flattening":
        def flat(x: dict) -> str:
            example = f" ({shape_text(x['example'][0])} -> {shape_text(x['example'][1])})" if x["example"] else ""
            return f"{x['flattened']} of {x['dots']} dot_general take a flattened input{example}"
        return f"{a}: {flat(n['a'])}; {b}: {flat(n['b'])}"
    if s.topic == "embedding":
        def how(x: dict) -> str:
            parts = ["iota positions" if x["iota"] else ("constant index table" if x["constant_tables"]
                                                          else "no index op")]
            if x["calls"]:
                parts.append("lookup via " + ", ".join(x["calls"]))
            if x["gathers"]:
                parts.append(f"gather x{x['gathers']}")
            if x["converts"]:
                parts.append("converts " + ", ".join(x["converts"]))
            return "; ".join(parts)
        return f"{a}: {how(n['a'])} | {b}: {how(n['b'])}"
    if s.topic == "training":
        def side(x: dict) -> str:
            t = x["parameter_transposes"]
            again = _counts(x["backward_transcendentals"]) or "none"
            dots = _counts(x["backward_dot_types"]) or "none"
            return (f"optimizer {x['optimizer_ops']} ops; parameters transposed {t['forward']} in the forward, "
                    f"{t['backward']} in the backward; transcendental ops in the backward: {again}; its dot_generals "
                    f"produce {dots}")
        return f"{a}: {side(n['a'])} | {b}: {side(n['b'])}"
    return f"{s.topic}: {n}"


def summaries(result: DiffResult) -> list[tuple[str, str]]:
    """(topic, sentence) for each of the study's questions a diff result answers."""
    names = (result.a.name, result.b.name)
    return [(s.topic, summary(s, names)) for s in result.summary]


def op_names(names: Iterable[str]) -> str:
    """("stablehlo.reduce", "stablehlo.reduce", "stablehlo.rsqrt") -> "reduce x2, rsqrt"."""
    from collections import Counter

    c = Counter(n.split(".", 1)[-1] for n in names)
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def op_group(g: OpGroup, names: tuple[str, str]) -> str:
    """One op-level group (diff.ops.OpGroup) as a phrase."""
    a, b = names
    if g.status == "changed":
        return f"changed {op_names(g.names_a)}: {'; '.join(g.what) or 'operands differ'}"
    if g.status == "rewritten":
        return f"rewritten: {a} {op_names(g.names_a)} = {b} {op_names(g.names_b)}"
    if g.status == "only_a":
        return f"only in {a}: {op_names(g.names_a)}"
    return f"only in {b}: {op_names(g.names_b)}"


def op_pattern(p: OpPattern, names: tuple[str, str]) -> str:
    """An op-level change folded over blocks (diff.ops.OpPattern) as a line."""
    where = f"{p.role}#{p.ordinal}" + (f" ({p.phase})" if p.phase in ("backward", "update") else "")
    count = f"in {p.blocks} of {p.of} layers" if p.layered else \
        (f"in {p.blocks} of {p.of} blocks" if p.of > 1 else "")
    return f"{where}{', ' + count if count else ''}: {op_group(p.group, names)}"


def status_counts(counts: dict, zeros: bool = True) -> str:
    """{"matched": 3, "only_a": 1} -> "matched 3, only a 1" (op-level counts by status)."""
    return ", ".join(f"{s.replace('_', ' ')} {n}" for s, n in counts.items() if zeros or n)


def op_totals_text(totals: dict) -> str:
    """diff.ops.op_totals as a line."""
    return "op level (ops of A; only B: ops of B): " + status_counts(totals)


def line_ranges(numbers: Iterable[int]) -> str:
    """[3, 4, 5, 9] -> "3-5, 9"."""
    numbers = sorted(set(numbers))
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)


def time_source(time: dict) -> str:
    """Where a diff's per-block times come from: profiled runs, or a TPU compiler's estimates."""
    a, b = time["a"], time["b"]
    if a.get("estimate") or b.get("estimate"):
        targets = sorted({t["estimate"]["target"] for t in (a, b) if t.get("estimate")})
        return f"bench --target: ESTIMATES for the {' and '.join(targets)}, not measurements"
    if time.get("device_profiles"):
        return (f"diff --bench-profile: device profiles taken outside stackwars-ir, each side's kernels in its "
                f"median step by kernel total, of {a['runs']} and {b['runs']} steps; the steady figures are the "
                f"profiled steps' own (no unprofiled runs). A: {time['device_profiles'][0]}. "
                f"B: {time['device_profiles'][1]}")
    rounds = time.get("rounds", 1)
    if rounds > 1:
        return (f"bench --profile --rounds {rounds}: each side's kernels in each round's median run by kernel "
                f"total, the mean over {rounds} rounds (each a fresh worker) of {a['runs'] // rounds} profiled runs a side"
                + (", taken in turns" if time.get("in_turns") else ""))
    return (f"bench --profile: each side's kernels in its median run by kernel total, of {a['runs']} and "
            f"{b['runs']} profiled runs" + (", taken in turns" if time.get("in_turns") else ""))


def time_terms(time: dict, split: TimeGap) -> str:
    """What a diff's time-by-block numbers are and what their shares may claim (diff --bench)."""
    a, b = time["a"], time["b"]
    if a.get("estimate") or b.get("estimate"):
        return ""
    rounds = time.get("rounds", 1)
    out = ("Blocks, unmatched blocks and kernels traced to no block add up to each side's kernel total "
           + ("exactly (both sides' median run)." if rounds == 1 else
              f"exactly (both sides' median run in each round, averaged over {rounds} rounds)."))
    if split.interval:
        low, high = split.interval
        over = ("over the profiled runs" if rounds == 1 else
                f"across {rounds} rounds (each a fresh worker; the t-interval of the rounds' gaps)")
        out += (f" The kernel gap's 95% interval {over}: {low * 1e3:+.3f} to {high * 1e3:+.3f} ms"
                + ("; it holds zero, so no share of it is a finding." if split.within_noise else "."))
        out += (" A block's share is withheld (-) where its own interval holds zero, a role's where its blocks' "
                "summed gap's does.")
        kept = sum(1 for role, _, _ in split.roles if split.role_interval(role))
        sure = [f"{role} ({low * 1e3:+.3f} to {high * 1e3:+.3f} ms)" for role, _, low, high in split.sure_roles()]
        if kept:
            out += (f" By role, {len(sure)} of {kept} summed gaps exclude zero" + (f": {', '.join(sure)}." if sure else "."))
        gaps = [d.metrics["time"]["gap_95"] for d in split.blocks if d.metrics["time"].get("gap_95")]
        sure = sum(1 for low, high in gaps if not low <= 0.0 <= high)
        if gaps:
            out += f" {sure} of {len(gaps)} blocks' intervals exclude zero."
            if rounds > 1 and len(gaps) >= 20:
                out += (f" At 95% each, about {0.05 * len(gaps):.0f} of {len(gaps)} would exclude zero by chance alone: "
                        "a single block's is a lead to rerun, not a finding.")
            if rounds == 1:
                out += (" Over one worker's runs, these intervals miss what a fresh worker shifts (docs/benchmarks.md): "
                        "`bench --profile --rounds 3` gives them across workers.")
            if time.get("in_turns"):
                out += (" The two sides were profiled in turns in one trace (A, B, B, A, ...), so a drift of the "
                        "machine moves both alike.")
            else:
                out += (" The two sides were profiled one after the other, so a drift of the machine between them "
                        "moves blocks that differ by nothing (3% flagged about 2 of 64 blocks in simulated "
                        "profiles: docs/benchmarks.md): a single block's is a lead to rerun, not a finding; "
                        "`bench A B --profile` on XLA:CPU profiles them in turns.")
    if (a["kernel_s"] > a["steady_s"] or b["kernel_s"] > b["steady_s"]) and a["steady_s"] and b["steady_s"]:
        out += (" Kernels run at once on several threads here, so a side's kernel total exceeds its run's wall "
                "time: the split is of kernel time, not of the wall clock.")
    steady = b["steady_s"] - a["steady_s"]
    # Signs compared only where both gaps are findings: bench's steady verdict not a tie, and the kernel
    # gap's interval excluding zero (a gap within the noise has no sign to differ in: issue 75).
    if a["steady_s"] and b["steady_s"] and split.gap * steady < 0 and time.get("within_noise") is False \
            and split.interval and not split.within_noise:
        out += (f" The kernel gap ({split.gap * 1e3:+.3f} ms) and the steady-state gap ({steady * 1e3:+.3f} ms) "
                "differ in sign: the kernels do not explain the wall-clock difference.")
    shares = [split.block_share(d) for d in split.blocks]
    if any(x is not None and abs(x) > 1 for x in shares):
        out += (" Shares over 100% (or below 0) mean blocks differ both ways: some are faster in B, some "
                "slower, and their differences cancel in the total.")
    return out


def time_side(t: dict) -> str:
    """One side's totals of a diff's per-block times (diff.with_times), in ms."""
    def ms(s: float) -> str:
        return f"{s * 1e3:.3f}"

    x = t.get("estimate")
    if x:
        return (f"estimated run {ms(t['wall_s'])} (kernels {ms(x['serial_s'])}: the compiler's cycles on "
                f"{x['estimated']} of {x['kernels']} kernels at {x['clock']}, memory lower bounds on {x['bounded']}; "
                f"{x['async']} async copies {ms(x['async_bound_s'])}, overlapping them); not traced to a block "
                f"{ms(t['unattributed_s'])}")
    return (f"steady {ms(t['steady_s'])}; kernels {ms(t['kernels_sum_s'])} (in a profiled run of {ms(t['wall_s'])}: "
            f"kernels busy {ms(t['busy_s'])}, outside kernels {ms(t['outside_kernels_s'])}, profiler "
            f"{t['overhead']:.2f}x); not traced to a block {ms(t['unattributed_s'])}")


def loops_of(side: SideResult) -> str:
    """A side's loops for people: `1 loop (x3)`, `no loop`, `2 loops (x5, x?)`."""
    if not side.loops:
        return "no loop"
    counts = ", ".join("x?" if t is None else f"x{t}" for t in side.loops)
    return f"{len(side.loops)} loop{'s' if len(side.loops) > 1 else ''} ({counts})"


def executed_lines(a: SideResult, b: SideResult) -> list:
    """With a loop on either side (diff.result.SideResult a and b): each side's loops, and the op
    difference as the ops run (each op counted once per trip of the loops around it), beside the
    static one; [] without loops."""
    from collections import Counter

    if not (a.loops or b.loops):
        return []
    out = [f"loops: A {loops_of(a)}; B {loops_of(b)}"]
    if (a.loops and a.executed is None) or (b.loops and b.executed is None):
        return out + ["executed ops: unknown (a loop's trip count is not fixed by the IR)"]
    ea, eb = Counter(a.executed or a.histogram), Counter(b.executed or b.histogram)
    words = delta_text(counter_delta(eb, ea), limit=12)
    return out + [f"executed per run: A {sum(ea.values())} ops, B {sum(eb.values())}; ops B - A: {words or 'none'}"]


SHARDING_LINES = 12  # arguments listed; the count says how many more


INTERFACE_LINES = 12


def verdict_line(result: DiffResult) -> str:
    """The diff's answer in one line, as its exit code gives it: the same program, or what differs."""
    if result.same_program and not result.differs:
        cut = any(not d.op_diff.identical for d in result.blocks if d.op_diff is not None) or result.only_a \
            or result.only_b
        if not cut:
            return "verdict: the same program (exit 0)"
        how = (f"the blocks above are cut by {result.a.mode} in A, {result.b.mode} in B" if result.a.mode != result.b.mode
               else "what the blocks above show is where the two spellings (a helper inlined, ops in another order) "
                    "fall into blocks")
        return f"verdict: the same program (exit 0); only its spelling differs: {how}"
    if not result.differs:
        return "verdict: nothing differs (exit 0)"

    totals = op_totals(result.blocks)
    parts = [f"{totals[k]} op{'s' if totals[k] != 1 else ''} {w}" for k, w in (
        ("changed", "changed"), ("rewritten", "rewritten"), ("only_a", "only in A"), ("only_b", "only in B"))
        if totals.get(k)]
    parts += [f"{len(result.interface)} in the entry function's interface"] if result.interface else []
    parts += ["blocks on one side only"] if result.only_a or result.only_b else []
    parts += ["argument shardings"] if result.sharding_changes else []
    return "verdict: the programs differ (exit 1)" + (": " + ", ".join(parts) if parts else "")


def interface_lines(result: DiffResult) -> list:
    """What differs in the two entry functions' interfaces (an argument one side alone takes or
    types otherwise, a result that is another value), a line each; [] when nothing does."""
    changes = list(getattr(result, "interface", ()))
    out = [f"entry function: {c}" for c in changes[:INTERFACE_LINES]]
    if len(changes) > INTERFACE_LINES:
        out.append(f"entry function: ... {len(changes) - INTERFACE_LINES} more (diff --json lists every one)")
    return out


def sharding_lines(result: DiffResult) -> list:
    """With a sharded side: the devices each side is sharded over, and every argument the two split
    differently (its split in A and in B); [] when neither is sharded."""
    a, b = result.a, result.b
    if not (a.shardings or b.shardings):
        return []
    changes = result.sharding_changes
    out = [f"sharded over: A {a.devices} device{'s' if a.devices > 1 else ''}, B {b.devices}; arguments split "
           f"differently: {len(changes)} of {max(len(a.shardings), len(b.shardings))}"]
    out += [f"{c.name} {'x'.join(map(str, c.shape)) or 'scalar'}: A {c.a}, B {c.b}" for c in changes[:SHARDING_LINES]]
    if len(changes) > SHARDING_LINES:
        out.append(f"... {len(changes) - SHARDING_LINES} more (diff --json lists every one)")
    return out + collective_lines(result)


def collective_lines(result: DiffResult) -> list:
    """With --kernels on a sharded side: the collectives XLA's SPMD partitioner inserted, each side's
    total and per block (kind x count, bytes per device); [] without them."""

    totals = result.metrics.get("kernels") or {}
    if not any((totals.get(side) or {}).get("collectives") for side in ("a", "b")):
        return []

    def kinds(moved: dict) -> str:
        return ", ".join(f"{k} x{n} ({human_bytes(size)})" for k, (n, size) in sorted(moved.items())) or "none"

    out = [f"collectives per device ({totals['a'].get('backend')}): A {kinds(totals['a'].get('collectives', {}))}; "
           f"B {kinds(totals['b'].get('collectives', {}))}"]
    for d in result.blocks:
        moved = d.metrics.get("collectives")
        if moved:
            out.append(f"{d.label}: A {kinds(moved['a'])}; B {kinds(moved['b'])}")
    return out


def delta_text(delta: Mapping[str, int], limit: int = 4) -> str:
    """An op-count difference, largest first: `constant +3, add -1, ... (2 more)`."""
    items = sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    short = [k.split(".", 1)[-1] for k, _ in items]
    # the dialect where two dialects' ops of one name both change (mhlo.add -1, stablehlo.add +1)
    text = ", ".join(f"{k if short.count(s) > 1 else s} {v:+d}" for (k, v), s in zip(items[:limit], short))
    return text + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def fused_elsewhere(blocks: Iterable[BlockResult]) -> list:
    """(label, A's words, B's words) for each block some of whose ops run inside another block's
    kernels on one side but not alike on the other (diff.with_times' `elsewhere`): a residual add
    folded into the next norm's kernel leaves its block cheaper without its ops changing."""
    out = []
    for d in blocks:
        t = d.metrics.get("time") or {}
        a, b = t.get("elsewhere_a") or [], t.get("elsewhere_b") or []
        if sorted(o for _, o in a) == sorted(o for _, o in b):
            continue

        def words(pairs) -> str:
            if not pairs:
                return "in its own kernels"
            shown = ", ".join(f"{k if len(k) <= 48 else k[:24] + '...' + k[-12:]} ({o})" for k, o in pairs[:3])
            return f"also in {shown}" + (f" and {len(pairs) - 3} more" if len(pairs) > 3 else "")

        out.append((d.label, words(a), words(b)))
    return out


def cause_lines(result: DiffResult) -> list[str]:
    """What the diff mixes or lacks, said before its findings: two captures of one framework made by
    different routes (the route's changes sit beside the program's), one side sharded and the other
    not (the collectives XLA inserts are not in StableHLO: --kernels lists them), and a side without
    its sidecar (what it no longer says)."""
    out = []
    pa, pb = result.a.provenance or {}, result.b.provenance or {}
    if pa.get("route") and pb.get("route") and pa["route"] != pb["route"] and pa.get("framework") == pb.get("framework"):
        out.append(f"different routes: {result.a.name} by {pa['route']}; {result.b.name} by {pb['route']}: "
                   "what differs below is the route's change and the program's together")
    if (result.a.devices > 1) != (result.b.devices > 1):
        sharded, plain = (result.a, result.b) if result.a.devices > 1 else (result.b, result.a)
        out.append(f"{sharded.name} is sharded over {sharded.devices} devices, {plain.name} runs on one: the "
                   "collectives XLA's SPMD partitioner inserts are not in StableHLO; diff --kernels lists them by block")
    for side in (result.a, result.b):
        if side.provenance is None and side.provenance_note == "no sidecar":
            out.append(f"{side.name}: no sidecar beside {side.source}: its arguments go unnamed, its model, "
                       "versions and parity are unknown, its roles are the other side's, and bench runs it on "
                       "synthetic arguments (copy the .json with the .mlir)")
    return out


HOST_UNSTEADY = ("*: the block's host time moved more across the bench's runs than its own size (p10-p90 spread "
                 "over the median run's figure): it does not hold; bench --host 50 on a quiet machine")


def host_unsteady(time: dict, side: str) -> bool:
    """Whether a block's host time on `side` (diff --bench's time metrics) spread across its runs by
    more than its own figure (runstats.unsteady)."""
    got = time.get(f"host_{side}_p10_p90")
    return bool(got) and got[1] - got[0] > time.get(f"host_{side}", 0.0)


def host_lines(host: dict) -> list:
    """diff --bench with a bench --host: what the host columns are and, per side, the native runtime's
    step by its phases (bench.host), or why a side has none."""
    out = ["host A, host B: the host's time in the block's modules (their self time: in a training step's backward "
           "blocks, the autograd nodes their forward made; bench --host, the native runtime a user of that side's "
           "route runs), beside the device's kernel time"]
    for side in ("a", "b"):
        h = host.get(side)
        if h is None:
            out.append(f"{side.upper()}: no native runtime of this route was phased in the bench (bench MODEL --host "
                       "times jax.jit and torch_xla lazy)")
            continue
        phases = ", ".join(f"{name} {s * 1e3:,.3f}" for name, s in h["phases"])
        device = f"; device {h['device_s'] * 1e3:,.3f} by its own clock" if h.get("device_s") is not None else ""
        modules = (f"; in modules {h['in_modules_s'] * 1e3:,.3f} of a {h['hooked_wall_s'] * 1e3:,.3f} step under "
                   f"the hooks, {h['untraced_s'] * 1e3:,.3f} in no block (the model's own code between its modules), "
                   f"{h.get('unaligned_s', 0.0) * 1e3:,.3f} in unmatched blocks" if h.get("hooked_wall_s") else
                   "; no PyTorch modules run on the host in its step (a compiled call)")
        out.append(f"{side.upper()}: {h['label']}: step {h['wall_s'] * 1e3:,.3f} ms: {phases}{device}{modules}")
    return out


def kernels_source(kernels: dict) -> str:
    """Whose compile each side's kernels are (diff --kernels): one XLA backend for both, or each side's
    (a module XLA optimized elsewhere read as dumped beside one compiled here)."""
    a, b = kernels["a"]["backend"], kernels["b"]["backend"]
    return f"what XLA ({a}) compiled each side to" if a == b else \
        f"what XLA compiled each side to (A: {a}; B: {b})"
