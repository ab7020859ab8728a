"""Terminal text renderings."""
from __future__ import annotations

import functools
import textwrap
from collections.abc import Iterable, Sequence

from ..bench import roofline
from ..bench.compare import noisy, warming
from ..bench.estimate import FLOORS_S, bounded_by_opcode, floored_serial
from ..bench.executable import Executable
from ..bench.host import Phase, layered
from ..bench.memory import (
    MAX_BATCH_NOTE, MEASURED_NOTE, NOTES, SLICE_NOTE, MemoryReport, max_batch_rows, slice_rows, table_rows,
)
from ..bench.result import BenchReport
from ..common.runstats import spread, summed_runs, unsteady
from ..common.textfmt import human_bytes, table
from ..diff.ops import STATUSES, fold_patterns, op_totals
from ..diff.result import DiffResult, counter_delta, time_gap
from ..ir.stats import ModuleStats
from ..sweep.execute import SweepReport
from .sentences import (
    HOST_UNSTEADY, cause_lines, delta_text as _delta_text, executed_lines, finding, fused_elsewhere, host_lines,
    host_unsteady, interface_lines, kernels_source, line_ranges, op_group, op_pattern, op_totals_text,
    sharding_lines, status_counts, summaries, time_side, time_source, time_terms, verdict_line,
)
from .sweep import summary_line, sweep_tables


def stats_text(s: ModuleStats, top: int = 15) -> str:
    funcs = ", ".join(f"@{n}" + ("" if v == "public" else f" ({v})") for n, v, _ in s.functions)
    lines = [
        f"== {s.source}",
        *([f"read from: {s.form}"] if s.form else []),
        f"functions: {len(s.functions)} ({funcs})" if len(funcs) < 200 else f"functions: {len(s.functions)}",
        f"ops: {s.ops_written} as written, {s.ops_inlined} with calls inlined ({s.calls} calls)",
        *([loops_line(s)] if s.loops else []),
        f"entry arguments: {s.arguments}, {_argument_size(s)}",
        *([f"no byte size known for: {', '.join(s.unsized)} (their tensors' bytes are left unknown, not guessed)"]
          if s.unsized else []),
        "",
        (table(["op", "count", "executed"], [[k, v, dict(s.by_op_executed).get(k, 0)] for k, v in s.by_op[:top]])
         if s.by_op_executed else table(["op", "count"], [[k, v] for k, v in s.by_op[:top]]))
        + (f"\n... {len(s.by_op) - top} more op kinds" if len(s.by_op) > top else ""),
        "",
        table(["dialect", "ops"], [[k, v] for k, v in s.by_dialect]),
        "",
        table(["largest tensors", "what", "bytes"], [[t, w, "unknown" if b is None and "?" not in t
                                                       else human_bytes(b)] for t, w, b in s.largest],
              right={2}),
        "",
    ]
    return "\n".join(lines)


def _argument_size(s: ModuleStats) -> str:
    """The entry arguments' bytes; 'dynamic' for a dynamic shape, 'unknown' for an element type of no known size."""
    if s.argument_bytes is None and s.unsized:
        return "unknown"
    return human_bytes(s.argument_bytes)


def loops_line(s: ModuleStats) -> str:
    """The module's loops and how many ops run per call with them: `loops: 1 (x12); ops executed per run: 6024`."""
    counts = ", ".join("x?" if t is None else f"x{t}" for t in s.loops)
    run = (f"ops executed per run: {s.ops_executed}" if s.ops_executed is not None else
           "ops executed per run: unknown (a loop's trip count is not fixed by the IR: x?)")
    return f"loops: {len(s.loops)} ({counts}); {run}"


OP_PATTERN_LINES = 24  # op-level changes listed in the default text; `diff --ops` lists every block's


def diff_text(result: DiffResult, excerpts: bool = False, ops: bool = False) -> str:
    """The diff (a diff.result.DiffResult) as terminal text: inputs, the study's three findings, the
    block table, extras."""
    from collections import Counter

    a, b = result.a, result.b
    out = [
        f"A = {a.source}  ({a.mode}, {a.ops} ops, {a.blocks} blocks{f'; read from {a.form}' if a.form else ''})",
        f"B = {b.source}  ({b.mode}, {b.ops} ops, {b.blocks} blocks{f'; read from {b.form}' if b.form else ''})",
        f"aligned {len(result.blocks)} block pairs by {result.method}"
        f"{f' ({result.pairing_note})' if result.pairing_note else ''}; unmatched: {len(result.only_a)} in A, "
        f"{len(result.only_b)} in B",
        "",
    ]
    causes = cause_lines(result)
    # A file of the user's own whose ops name no module: most often written without its locations.
    unnamed = [f"{side}: no op of {x.source} names a module path, so its blocks are cut by structure and named by "
               "role (JAX's lower(x).as_text() drops locations: as_text(debug_info=True) keeps them; an XLA dump "
               "keeps op_name metadata, compiler_ir('hlo').as_hlo_text() does not)"
               for side, x in (("A", a), ("B", b)) if x.ops and not x.coverage and x.provenance is None]
    if causes or unnamed:
        out += [f"note: {line}" for line in causes + unnamed] + [""]
    if result.summary:
        out.append("findings:")
        out += [f"  {topic:13} {text}" for topic, text in summaries(result)]
        out.append("")
    kernels = result.metrics.get("kernels")
    rows = [[d.label, d.name_a, sum(d.histogram_a.values()), sum(d.histogram_b.values())]
            + ([f"{d.metrics['kernels']['a']}/{d.metrics['kernels']['b']}"] if kernels else [])
            + [_delta_text(d.delta)] for d in result.blocks]
    out.append(table(["block", "A name", "A ops", "B ops"] + (["kernels A/B"] if kernels else [])
                     + ["ops B - A (+: more in B)"], rows, right={2, 3, 4} if kernels else {2, 3}))
    if kernels:
        out += ["", f"kernels: {kernels_source(kernels)}, traced to blocks by module path: " + "; ".join(
                    f"{side} {k['kernels']} ({k['fusions']} fusions), {k['unattributed']} not traced to a block"
                    for side, k in (("A", kernels["a"]), ("B", kernels["b"])))]
    out += time_text(result)
    details = [(d.label, finding(f, result.names)) for d in result.blocks for f in d.findings]
    if details:
        out += ["", "per block:"]
        out += [f"  {label:18} {f}" for label, f in details]
    for side, blocks in (("A", result.only_a), ("B", result.only_b)):
        if blocks:
            out += ["", f"only in {side}: " + ", ".join(f"{u.label} ({u.name.strip('()')}, {u.ops} ops)" for u in blocks)]
    out += _op_level_text(result, every_block=ops)
    if excerpts:
        for d in result.blocks:
            out += ["", f"--- {d.label}", *_side_by_side(list(d.excerpt_a), list(d.excerpt_b))]
    hist = _delta_text(counter_delta(Counter(b.histogram), Counter(a.histogram)), limit=12)
    out += ["", f"whole module, ops B - A (+: more in B, as in git diff A B): {hist or 'none'}"]
    out += interface_lines(result)
    out += executed_lines(a, b)
    placed = sharding_lines(result)
    out += ["", "shardings:", *(f"  {line}" for line in placed)] if placed else []
    out += ["", verdict_line(result)]
    return "\n".join(out)


TIME_ROWS = 12  # blocks shown by their share of the gap; the roles sum every block


def estimate_text(report: BenchReport) -> str:
    """bench --target: each file's estimated run on a TPU generation that is not here, and where the
    estimate comes from; ratios against the first row of each batch."""

    rows, first, clock, floors, groups = [], {}, "", [], []
    for batch, e in report.rows:
        if not e.ok or e.profile is None:
            rows.append([_short(e.label), batch, None, None, None, None, None, None, None, None, None, "FAILED"])
            continue
        x = e.profile.estimate
        clock = x["clock"]
        base_run, base_serial, base_floors = first.setdefault(batch, (
            e.profile.wall_s, x["serial_s"], [floored_serial(e.profile, f) for f in FLOORS_S]))
        rows.append([_short(e.label), batch, e.compile_s * 1e3 if e.compile_s else None, x["kernels"],
                     f"{x['estimated']} ({x['estimated_s'] * 1e6:,.1f})", f"{x['bounded']} ({x['bound_s'] * 1e6:,.1f})",
                     f"{x['async']} ({x['async_bound_s'] * 1e6:,.1f})", x["serial_s"] * 1e6, e.profile.wall_s * 1e6,
                     f"{e.profile.wall_s / base_run:.2f}x", f"{x['serial_s'] / base_serial:.2f}x", "ok"])
        floors.append(f"{_short(e.label)} (batch {batch}): " + "; ".join(
            f"{f * 1e6:g} us: kernels {s * 1e6:,.1f} us, {s / b:.2f}x"
            for f, s, b in zip(FLOORS_S, (floored_serial(e.profile, f) for f in FLOORS_S), base_floors)))
        top = bounded_by_opcode(e.profile)[:4]
        if top:
            groups.append(f"{_short(e.label)} (batch {batch}): " + ", ".join(
                f"{op} {n} ({s * 1e6:,.1f} us, {human_bytes(nbytes)})" for op, n, s, nbytes in top))
    target = next((e.profile.estimate["target"] for _, e in report.rows if e.profile is not None), report.backend)
    out = [f"target: {target} (compiled here by libtpu, compile-only; nothing was run)   ESTIMATES, NOT MEASUREMENTS", "",
           table(["executable", "batch", "compile ms", "kernels", "estimated (us)", "bounded (us)",
                  "async copies (us)", "kernels us", "run us", "run vs first", "kernels vs first", "status"], rows,
                 right={1, 2, 3, 7, 8, 9, 10})]
    out += ["", f"estimated: kernels whose estimated_cycles the compiler wrote, at {clock}; bounded: the rest "
                "that move data, at a memory lower bound (result written, operands read, at the HBM's bandwidth); "
                "async copies: HBM-VMEM transfers overlapping the kernels, at that bandwidth; run: the longer of "
                "the kernels' sum and the async transfers; run vs first, kernels vs first: the run, and the "
                "kernels' sum alone, against the batch's first row (the clock cancels out). Where the async "
                "copies bound both rows' runs, their ratio is near 1 by construction: the kernels' ratio is the "
                "other side of the estimate"]
    if groups:
        out += ["", "bounded kernels (no compiler estimate: a memory lower bound each), by opcode, most time first:"]
        out += [f"  {g}" for g in groups]
    if floors:
        out += ["", "sensitivity: the kernels' sum were each bounded kernel at least "
                + " or ".join(f"{f * 1e6:g} us" for f in FLOORS_S)
                + " (a floor per kernel, not measured here), and its ratio against the batch's first row:"]
        out += [f"  {f}" for f in floors]
    for _, e in report.rows:
        if not e.ok:
            out.append(f"error: {e.error}")
    return "\n".join(out)


def _short(label: str) -> str:
    return label if len(label) < 48 else "..." + label[-45:]


def time_text(result: DiffResult) -> list:
    """diff --bench: each side's profiled kernel time, where it goes by block, and each block's and
    each role's share of the gap (B - A, summed kernel medians)."""

    split = time_gap(result)
    if split is None:
        return []
    time = result.metrics["time"]
    a, b = time["a"], time["b"]

    def ms(s: float, sign: bool = False) -> str:
        return f"{s * 1e3:+.3f}" if sign else f"{s * 1e3:.3f}"

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    def interval(t: dict) -> str:
        return f"{ms(t['gap_95'][0], True)} to {ms(t['gap_95'][1], True)}" if t.get("gap_95") else "-"

    out = ["", f"time by block ({time_source(time)}, ms):"]
    for side, t in (("A", a), ("B", b)):
        out.append(f"  {side}: {time_side(t)}"
                   + (f" ({', '.join(t['unattributed'][:4])}{', ...' if len(t['unattributed']) > 4 else ''})"
                      if t["unattributed"] else "")
                   + (f"; in unmatched blocks {ms(t['unaligned_s'])}" if t["unaligned_s"] else ""))
    out.append(f"  gap B - A: kernels {ms(split.gap, True)}, " + (f"run {ms(b['wall_s'] - a['wall_s'], True)}"
               if a.get("estimate") else f"steady {ms(b['steady_s'] - a['steady_s'], True)}"))
    if time.get("verdict"):
        out.append(f"  bench's verdict: {time['verdict']}" + ("; the shares below split a gap within the noise, "
                                                             "not a finding" if time.get("within_noise") else ""))
    terms = time_terms(time, split)
    if terms:
        out += ["  " + line for line in textwrap.wrap(terms, 110)]
    if split.phases:
        out.append("  by phase: " + ", ".join(f"{p} {ms(dt, True)} ({share(split.share(dt))})" for p, dt in split.phases))
    rows = [[role, n, ms(dt, True), interval({"gap_95": split.role_interval(role)}), share(split.role_share(role, dt))]
            for role, n, dt in split.roles]
    rows.append(["(not traced, unmatched)", "", ms(split.rest, True), "", share(split.share(split.rest))])
    out += ["  " + line for line in table(["role", "blocks", "B - A", "95% interval", "share of the gap"], rows,
                                          right={1, 2, 3, 4}).splitlines()]
    host = result.metrics.get("host") or {}

    def hosted(t: dict) -> list:
        return [ms(t[f"host_{side}"]) + ("*" if host_unsteady(t, side) else "") if f"host_{side}" in t else "-"
                for side in ("a", "b")] if host else []

    rows = [[d.label, ms(t["a"]), ms(t["b"]), ms(t["b"] - t["a"], True), interval(t), share(split.block_share(d)),
             *hosted(t), _delta_text(d.delta, limit=3) or "same ops"]
            for d in split.blocks[:TIME_ROWS] for t in [d.metrics["time"]]]
    out += ["  " + line for line in table(["block", "A", "B", "B - A", "95% interval", "share"]
                                          + (["host A", "host B"] if host else []) + ["ops B - A"], rows,
                                          right={1, 2, 3, 4, 5, 6, 7} if host else {1, 2, 3, 4, 5}).splitlines()]
    if host:
        out += ["  " + line for line in host_lines(host)]
        if any(host_unsteady(d.metrics["time"], side) for d in split.blocks[:TIME_ROWS] for side in "ab"):
            out.append("  " + HOST_UNSTEADY)
    folded = fused_elsewhere(split.blocks[:TIME_ROWS])
    if folded:
        out.append("  computed in another block's kernel (that time is counted in the other block):")
        out += [f"    {label}: A {a}; B {b}" for label, a, b in folded]
    return out


def _op_level_text(result, every_block: bool) -> list:
    """The op-level diff: totals, each change folded over the layers that share it, and with
    every_block each block's groups with their lines in the files."""

    diffs = [d for d in result.blocks if d.op_diff is not None]
    if not diffs:
        return []
    out = ["", op_totals_text(op_totals(result.blocks))]
    patterns = fold_patterns(result.blocks)
    shown = patterns if every_block else patterns[:OP_PATTERN_LINES]
    out += [f"  {op_pattern(p, result.names)}" for p in shown]
    if len(shown) < len(patterns):
        out.append(f"  ... {len(patterns) - len(shown)} more (diff --ops lists every block's)")
    if every_block:
        for d in diffs:
            od = d.op_diff
            if od.identical:
                continue
            counts = status_counts({s: od.count(s) for s in STATUSES}, zeros=False)
            out += ["", f"--- {d.label}  (A {od.ops_a} ops, B {od.ops_b}: {counts})"]
            for g in od.groups:
                out.append(f"  {op_group(g, result.names)}")
                for side, names, lines in (("A", g.names_a, g.lines_a), ("B", g.names_b, g.lines_b)):
                    at = sorted({n for n in lines if n})
                    if names and at:
                        out.append(f"      {side} lines {line_ranges(at)}")
    return out


def _side_by_side(left: list, right: list, width: int = 70) -> list:
    rows = []
    for i in range(max(len(left), len(right))):
        lft = left[i] if i < len(left) else ""
        rgt = right[i] if i < len(right) else ""
        lft = lft if len(lft) <= width else lft[:width - 3] + "..."
        rows.append(f"{lft:<{width}} | {rgt}")
    return rows


def bench_text(report: BenchReport) -> str:
    """The bench as a table: one row per executable (and batch size)."""
    if any(e.profile is not None and e.profile.estimate for _, e in report.rows):
        return estimate_text(report)
    rows = []
    for batch, e in report.rows:
        t = e.timing
        ms = (lambda s: None if s is None else s * 1e3)
        rows.append([e.label if len(e.label) < 48 else "..." + e.label[-45:], batch, ms(e.compile_s),
                     ms(t.first) if t else None, ms(t.second) if t else None,
                     ms(t.third) if t and t.third is not None else None, ms(t.steady) if t else None,
                     f"{t.spread:.0%}" if t else "-", t.iterations if t else None,
                     (e.flops / t.steady / 1e9) if (t and e.flops) else None,
                     e.hlo.get("fusions") if e.hlo else None,
                     human_bytes(e.resident_bytes) if e.resident_bytes is not None else "-",
                     e.proof.summary if e.proof else "-",
                     counters_text(t.counters) if t else "-", "ok" if e.ok else "FAILED"])
    out = [f"backend: {report.backend}   machine: {report.machine.get('processor')} "
           f"({report.machine.get('cpus')} cpus)"]
    if report.peaks:
        out.append(f"measured peaks: {report.peaks['flops_per_s'] / 1e9:.1f} GFLOP/s, "
                   f"{report.peaks['bytes_per_s'] / 1e9:.1f} GB/s")
    out += ["", table(["executable", "batch", "compile ms", "first ms", "second ms", "third ms", "steady ms",
                       "spread", "iters", "GFLOP/s", "fusions", "resident", "output", "counters 1st/2nd/3rd/rest",
                       "status"], rows, right={1, 2, 3, 4, 5, 6, 8, 9, 10, 11})]
    out += ["", "output: the first run's max abs error against PyTorch eager on the CPU (same inputs; none for a file "
                "without its capture's .json, run on synthetic arguments); "
                "counters: the runtime's own and the process's page faults (memory touched for the first time), per run "
                "(rest: all later runs together); resident: the row's growth "
                "of peak resident memory (its own weights and state placed, compile, every run; CPU only)"]
    out += [f"{e.label}: {part.strip()}" for _, e in report.rows for part in (e.arguments or "").split(";")
            if part.strip().startswith("donated")]
    extra = _memory_and_roofline_rows(report)
    if extra:
        out += ["", table(["executable", "batch", "XLA plan: arguments", "outputs", "temporaries", "resident",
                           "intensity (flop/B)", "bound by", "share of bound"], extra, right=set(range(1, 9)))]
        out += ["plan: XLA's buffer assignment (memory for the full table and budgets); resident: what the row took; "
                "bound: the roofline of the measured peaks at the executable's intensity (XLA's cost analysis)"]
    out += host_text(report.rows)

    warnings = noisy(report.rows)
    if warnings:
        out += [""] + [f"warning: {w}" for w in warnings]
    notes = warming(report.rows)
    if notes:
        out += [""] + [f"note: {n}" for n in notes]
    if report.crossover:
        out += ["", f"crossover: {report.crossover}"]
    verdicts = report.verdicts
    if verdicts:
        out += [""] + [f"verdict: {v.sentence()}" for v in verdicts]
    return "\n".join(out)


def host_text(rows: Iterable[tuple[int | None, Executable]]) -> list:
    """bench --host: each native runtime's steady step by host phase (bench.host.HostPhases)."""
    phased = [(batch, e) for batch, e in rows if e.host is not None]
    if not phased:
        return []
    out = ["", f"host phases of a steady step (bench --host): the median of {phased[0][1].host.runs} more steady runs "
               "(by wall time) each; a phase of the step is the time between two of the runtime's API calls (a "
               "timer), its parts come from the runtime's own clocks where it keeps them, the last part is the "
               "phase's rest, so the parts add up to the phase and the phases to the step"]
    for batch, e in phased:
        h = e.host
        if h.device_s is not None:
            device = f"; the device executing {h.device_s * 1e3:,.3f} ms by the runtime's own clock"
        elif e.profile is not None:
            device = (f"; kernels busy {e.profile.busy_s * 1e3:,.3f} ms in its profiled runs (bench --profile, "
                      f"{e.profile.runs} runs, the profiler's run {e.profile.wall_s * 1e3:,.3f} ms)")
        else:
            device = "; no device clock outside the runtime's profiler (add --profile for its kernels' time)"
        out += ["", f"{e.label} (batch {batch}): step {h.wall_s * 1e3:,.3f} ms, {h.coverage:.0%} in named phases "
                    f"({h.by_runtime:.0%} by the runtime's own clocks){device}"]
        rows = [[("  " if p.parent else "") + p.name, p.seconds * 1e3, f"{p.seconds / h.wall_s:.0%}" if h.wall_s else "-",
                 p.source] for p in h.phases]
        rows.append(["unattributed (between the timers)", h.unattributed_s * 1e3,
                     f"{h.unattributed_s / h.wall_s:.0%}" if h.wall_s else "-", "timer"])
        out.append(table(["phase", "ms", "of step", "from"], rows, right={1, 2}))
        if h.counters:
            out.append("per step: " + ", ".join(f"{k} {v:g}" for k, v in h.counters.items()))
        out += [f"note: {n}" for n in h.notes]
        out += [f"{which} run (timed, marked as the steady ones): {runs_text(phases)}"
                for which, phases in (("first", h.first), ("second", h.second)) if phases]
        out += _profiled_text(h)
        out += _modules_text(h)
    return out


def runs_text(phases: Sequence[Phase]) -> str:
    """One run's phases in a line: each timer phase (ms) with its parts that took any time."""
    out = []
    for p in phases:
        if p.parent:
            continue
        parts = [f"{q.name} {q.seconds * 1e3:,.1f}" for q in phases if q.parent == p.name and q.seconds >= 5e-5]
        out.append(f"{p.name} {p.seconds * 1e3:,.1f} ms" + (f" ({'; '.join(parts)})" if len(parts) > 1 else ""))
    total = sum(p.seconds for p in phases if not p.parent)
    return f"{total * 1e3:,.1f} ms: " + ", ".join(out)


def _profiled_text(h) -> list:
    """The step split by the runtime's profiler, in runs of their own (torch eager, torch.compile)."""
    if not h.profiled:
        return []
    cost = h.profiled_wall_s / h.wall_s - 1 if h.wall_s else 0.0
    rows = [[p.name, p.seconds * 1e3, f"{p.seconds / h.profiled_wall_s:.0%}", p.source] for p in h.profiled]
    return [f"by the runtime's profiler ({h.runs} more runs under torch.profiler, its outermost CPU events on the "
            f"stepping thread: step {h.profiled_wall_s * 1e3:,.3f} ms under it, {cost:+.0%} against the phased runs)",
            table(["part", "ms", "of step", "from"], rows, right={1, 2})]


MODULE_ROWS = 10  # module groups shown by host time; the rest summed


def _modules_text(h) -> list:
    """The host's time by module (self time) in the forward, and in a training step's backward, a
    layer's modules summed over the layers, each with its p10-p90 spread across the runs (`*` where
    the spread exceeds the figure: it does not hold), and the hooks' cost with its interval."""
    if not h.modules:
        return []

    groups = layered(h.modules)
    total = sum(s for _, s, _, _ in groups)
    rest = groups[MODULE_ROWS:]
    shown = [(_module_name(path), s, n, runs) for path, s, n, runs in groups[:MODULE_ROWS]]
    if rest:
        shown.append((f"{len(rest)} more", sum(s for _, s, _, _ in rest), sum(n for _, _, n, _ in rest),
                      functools.reduce(summed_runs, (r for _, _, _, r in rest), ())))
    rows, flagged = [], 0
    for name, s, n, runs in shown:
        got, shaky = spread(runs), unsteady(s, runs)
        flagged += shaky
        rows.append([name,
                     f"{s * 1e3:,.3f}" + ("*" if shaky else ""),
                     f"{got[0] * 1e3:,.3f}-{got[1] * 1e3:,.3f}" if got else "-", f"{s / h.hooked_wall_s:.0%}", n])
    where = "forward and backward" if any(m.phase == "backward" for m in h.modules) else "forward"
    out = [f"host time in the {where} by module (self time: in the module, not in a child; {h.runs} more runs with "
           f"a hook on each module: step {h.hooked_wall_s * 1e3:,.3f} ms under them, {_hooks_cost(h)}; the modules "
           f"hold {total * 1e3:,.3f} ms of it; ms: the median run's, p10-p90: across the {h.runs} runs)",
           table(["module (layers summed)", "ms", "p10-p90 ms", "of step", "modules"], rows, right={1, 2, 3, 4})]
    if flagged:
        out.append(f"*: {flagged} of these figures moved more across the runs than their own size (p10-p90 spread "
                   "over the median run's): they do not hold; time more runs (--host 50) on a quiet machine")
    return out


def _hooks_cost(h) -> str:
    """The module hooks' cost against the phased runs, with its interval where both runs' totals were kept."""
    cost = h.hooks_cost()
    if cost is None:
        point = h.hooked_wall_s / h.wall_s - 1 if h.wall_s else 0.0
        return f"{point:+.0%} against the phased runs (no interval: this bench kept only the median runs)"
    point, low, high = cost
    said = f"{point:+.0%} against the phased runs (95% interval {low:+.0%} to {high:+.0%}"
    if low <= 0.0 <= high:
        return said + ": indistinguishable from no cost)"
    if high < 0:
        return said + (": the hooked runs faster; the two sets ran one after the other, and something besides the "
                       "hooks differed between them, so the hooks' cost is not told)")
    return said + ")"


def _module_name(path: str) -> str:
    """A module group as the table names it: the root module's (path "") own code in words."""
    if path == "":
        return "(the model's own forward)"
    if path == " (backward)":
        return "(the model's own backward: ops of no module's, the loss's among them)"
    return path


def _memory_and_roofline_rows(report) -> list:
    """Per StableHLO row: XLA's memory plan, the resident memory measured, and where the steady run sits
    on the roofline of this machine's measured peaks."""

    rows = []
    for batch, e in report.rows:
        if not e.ok or e.kind != "stablehlo" or not e.memory:
            continue
        m, t = e.memory, e.timing
        r = roofline(e.flops, e.bytes_accessed, t.steady, report.peaks) if (report.peaks and e.flops and t) else None
        intensity = r and r["intensity_flops_per_byte"]
        rows.append([e.label if len(e.label) < 48 else "..." + e.label[-45:], batch,
                     human_bytes(m.get("argument_bytes", 0)), human_bytes(m.get("output_bytes", 0)),
                     human_bytes(m.get("temp_bytes", 0)),
                     human_bytes(e.resident_bytes) if e.resident_bytes is not None else "-",
                     f"{intensity:.3g}" if intensity else "-", r["bound_by"] if r else "-",
                     f"{r['fraction_of_bound']:.0%}" if r and r["fraction_of_bound"] else "-"])
    return rows


def counters_text(counters: dict) -> str:
    """`compiles 1/0/0/0, executions 1/1/1/57`: each counter for the first, second, third and later runs."""
    if not counters:
        return "-"
    phases = [counters[k] for k in ("first", "second", "third", "steady") if k in counters]
    names = [k for k in phases[0] if k != "runs"]

    def num(v):
        return f"{v:.0f}" if isinstance(v, float) else str(v)

    return ", ".join(f"{k} {'/'.join(num(p.get(k, 0)) for p in phases)}" for k in names)


def stats_rich(s: ModuleStats, top: int = 15) -> None:
    """The same content as stats_text, as rich tables (used on a terminal when rich is installed)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.rule(s.source)
    console.print(f"functions: {len(s.functions)}; ops: {s.ops_written} as written, {s.ops_inlined} with calls "
                  f"inlined ({s.calls} calls); entry arguments: {s.arguments}, {human_bytes(s.argument_bytes)}"
                  + (f"; {loops_line(s)}" if s.loops else ""), markup=False, highlight=False)
    for title, headers, rows in (
            ("ops", ["op", "count"] + (["executed"] if s.by_op_executed else []),
             [[k, str(v)] + ([str(dict(s.by_op_executed).get(k, 0))] if s.by_op_executed else [])
              for k, v in s.by_op[:top]]),
            ("dialects", ["dialect", "ops"], [[k, str(v)] for k, v in s.by_dialect]),
            ("largest tensors", ["type", "what", "bytes"], [[t, w, human_bytes(b)] for t, w, b in s.largest])):
        table = Table(title=title, title_justify="left")
        for i, h in enumerate(headers):
            table.add_column(h, justify="right" if i == len(headers) - 1 else "left")
        for row in rows:
            table.add_row(*(escape_markup(c) for c in row))
        console.print(table)


def escape_markup(text: str) -> str:
    from rich.markup import escape

    return escape(str(text))


def memory_text(report: MemoryReport) -> str:
    """The memory plans as a table: one row per executable, one column per budget."""

    headers, rows = table_rows(report)
    out = [f"memory plan of {report.whose_plan}; nothing was run"
           + (" except where 'run' is measured" if any(p.measured for p in report.plans) else ""), "",
           table(headers, rows, right=set(range(1, 8))), "", NOTES]
    if any(p.measured for p in report.plans):
        out.append(MEASURED_NOTE)
    if report.max_batch:
        headers, rows = max_batch_rows(report)
        out += ["", table(headers, rows, right={3, 4, 5}), "", MAX_BATCH_NOTE]
    if report.slices:
        headers, rows = slice_rows(report)
        out += ["", table(headers, rows), "", SLICE_NOTE]
    return "\n".join(out)


def sweep_text(report: SweepReport) -> str:
    """A sweep's tables, one per command, then its summary line and what the grid could not ask for."""

    out = []
    for title, _, headers, rows in sweep_tables(report):
        out += [f"{title}:", table(headers, rows, right={3, 4}), ""]
    for what, why in report.refused:
        out.append(f"not a job: {what}: {why}")
    out.append(f"sweep {report.grid} into {report.root}: {summary_line(report)}")
    return "\n".join(out)
