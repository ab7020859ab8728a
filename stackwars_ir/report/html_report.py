"""The self-contained HTML report: charts, heat map, alignment, IR side by side, timings, provenance.

Everything is inline (styles, the few lines of script, SVG charts); nothing is fetched when the
page is viewed. Every string that came from an IR file goes through escape.esc.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..ablate import Ablation
from ..bench import roofline
from ..bench.memory import MemoryReport
from ..bench.result import BenchReport
from ..common.routes import SHOWN_VERSIONS
from ..common.textfmt import human_bytes
from ..diff.result import DiffResult, first_of_each_role, time_gap
from . import graph
from .ablation import ablation_section
from .charts import grouped_bars, heat, stacked_bars, waterfall
from .escape import esc, highlight
from .markdown import excerpt_lines
from .sentences import (
    cause_lines, executed_lines, finding, fused_elsewhere, host_lines, interface_lines, kernels_source,
    sharding_lines, summaries, time_side, time_source, time_terms,
)
from .text import TIME_ROWS

TOP_OPS = 30
HEAT_OPS = 12

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;vertical-align:top}
th{background:#f4f4f4;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}
pre{background:#fafafa;border:1px solid #e4e4e4;padding:8px;overflow-x:auto;font-size:11.5px;margin:4px 0}
.v{color:#7a3e9d}.s{color:#b35900}.o{color:#1f5fa6;font-weight:600}.t{color:#2e7d32}
.muted{color:#777}button{margin:4px 6px 4px 0}.hidden{display:none}
.heat td{text-align:center;min-width:34px;font-size:11px}
"""

_SCRIPT = """
(function(){
  var errors = [];
  window.addEventListener('error', function(e){ errors.push(String(e.message)); document.body.dataset.errors = errors.join(' | '); });
  document.querySelectorAll('button[data-scale]').forEach(function(b){
    b.addEventListener('click', function(){
      var log = b.dataset.scale === 'log';
      document.getElementById('hist-linear').classList.toggle('hidden', log);
      document.getElementById('hist-log').classList.toggle('hidden', !log);
    });
  });
  document.body.dataset.rendered = String(document.querySelectorAll('svg.chart rect.bar').length);
})();
"""


def diff_html(result: DiffResult, bench: BenchReport | None = None, command: str | None = None,
              memory: MemoryReport | None = None, ablation: Ablation | None = None) -> str:
    """The self-contained HTML report of a diff (a diff.result.DiffResult), with the bench.run.BenchReport
    and bench.memory.MemoryReport that measured its files; `command` is the full command that
    regenerates it."""
    a, b = result.a, result.b
    title = f"StableHLO diff: {a.name} vs {b.name}"
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>",
             f"<meta name=\"viewport\" content=\"width=device-width\"><style>{_STYLE}{graph.STYLE}</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             _inputs(result), _findings(result), _histogram(result), graph.graph_view(result), _heatmap(result),
             _time_by_block(result), _blocks(result), _excerpts(result)]
    if bench:
        parts.append(_timings(bench))
    if memory:
        parts.append(_memory(memory))
    if ablation:
        parts.append(ablation_section(ablation))
    command = command or f"stackwars-ir report {a.source} {b.source} --html report.html"
    parts.append(f"<p class=\"muted\">Written by stackwars-ir. Regenerate: <code>{esc(command)}</code></p>")
    parts.append(f"<script>{_SCRIPT}{graph.SCRIPT}</script></body></html>\n")
    return "\n".join(parts)


def _inputs(result) -> str:
    rows = []
    for side in (result.a, result.b):
        p = side.provenance
        if p:
            v = p.get("versions", {})
            shapes = ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in p.get("inputs", []))
            prov = (f"{p.get('model')}-{p.get('size')} via {p.get('exporter')}; inputs {shapes}; "
                    f"{', '.join(f'{k} {v.get(k)}' for k in SHOWN_VERSIONS)}; host {p.get('host')}")
        else:
            prov = side.provenance_note if side.provenance_note.startswith("sidecar ignored") else "-"
        rows.append(f"<tr><td>{esc(side.name)}</td><td><code>{esc(side.source)}</code></td>"
                    f"<td>{esc(side.mode)}</td><td class=n>{side.coverage:.0%}</td>"
                    f"<td class=n>{side.ops}</td><td class=n>{side.blocks}</td>"
                    f"<td>{esc(prov)}</td></tr>")
    return ("<h2 id=\"inputs\">Inputs</h2><table><tr><th>side</th><th>file</th><th>segmented by</th>"
            "<th>ops with a location</th><th>ops</th><th>blocks</th><th>provenance</th></tr>" + "".join(rows)
            + f"</table><p>{len(result.blocks)} block pairs aligned by {esc(result.method)}"
            + (f" ({esc(result.pairing_note)})" if result.pairing_note else "") + "; unmatched: "
            f"{len(result.only_a)} in {esc(result.a.name)}, {len(result.only_b)} in {esc(result.b.name)}.</p>"
            + "".join(f"<p class=muted>Note: {esc(line)}</p>" for line in cause_lines(result)))


def _findings(result) -> str:
    if not result.summary:
        return ""
    rows = "".join(f"<tr><th>{esc(t)}</th><td>{esc(s)}</td></tr>" for t, s in summaries(result))
    return f"<h2 id=\"findings\">Findings</h2><table>{rows}</table>"


def _histogram(result) -> str:
    ha, hb = Counter(result.a.histogram), Counter(result.b.histogram)
    ops = sorted(set(ha) | set(hb), key=lambda k: (-(ha[k] + hb[k]), k))[:TOP_OPS]
    series = [(result.a.name, [ha[o] for o in ops]), (result.b.name, [hb[o] for o in ops])]
    cats = [o.split(".", 1)[-1] if o.startswith("stablehlo.") else o for o in ops]
    linear = grouped_bars(cats, series, title="op histogram (linear)")
    log = grouped_bars(cats, series, log=True, title="op histogram (log scale)")
    more = len(set(ha) | set(hb)) - len(ops)

    loops = "".join(f"<p>{esc(line)}</p>" for line in executed_lines(result.a, result.b) + interface_lines(result)
                    + sharding_lines(result))
    return (f"<h2 id=\"histogram\">Op histogram</h2>{loops}<p>Calls inlined; stablehlo. prefix dropped."
            + (f" {more} rarer op kinds not shown." if more > 0 else "")
            + "</p><button data-scale=\"linear\">linear</button><button data-scale=\"log\">log scale</button>"
            f"<div id=\"hist-linear\">{linear}</div><div id=\"hist-log\" class=\"hidden\">{log}</div>")


def _heatmap(result) -> str:
    total = Counter()
    hists = [(d, d.histogram_a, d.histogram_b) for d in result.blocks]
    for _, x, y in hists:
        total += x + y
    ops = [o for o, _ in total.most_common(HEAT_OPS)]
    vmax = max((max(x[o], y[o]) for _, x, y in hists for o in ops), default=1)
    head = "".join(f"<th>{esc(o.split('.', 1)[-1])}</th>" for o in ops)
    rows = []
    for d, hx, hy in hists:
        cells = []
        for o in ops:
            x, y = hx[o], hy[o]
            cells.append(f"<td style=\"background:linear-gradient(90deg,{heat(x, vmax)} 50%,{heat(y, vmax)} 50%)\" "
                         f"title=\"{esc(result.a.name)} {x} / {esc(result.b.name)} {y}\">{x}/{y}</td>")
        rows.append(f"<tr><th>{esc(d.label)}</th>{''.join(cells)}</tr>")
    return (f"<h2 id=\"heatmap\">Op counts per block</h2><p>Each cell: {esc(result.a.name)} / "
            f"{esc(result.b.name)}; left and right halves shaded by count.</p>"
            f"<table class=\"heat\"><tr><th>block</th>{head}</tr>{''.join(rows)}</table>")


def _excerpted(result) -> list:
    """The blocks whose IR the page shows side by side: the first of each role (not `other`)."""

    return [result.blocks[i] for i in first_of_each_role(d.role for d in result.blocks)]


def _anchor(label: str) -> str:
    return "ir-" + "".join(c if c.isalnum() else "-" for c in label)


def _blocks(result) -> str:
    linked = {d.label for d in _excerpted(result)}
    rows = []
    for d in result.blocks:
        findings = "<br>".join(esc(finding(f, result.names)) for f in d.findings)
        if not findings:
            findings = "-" if d.delta else "<span class=muted>same op histogram</span>"
        k = d.metrics.get("kernels")
        kern = (f"<td class=n title=\"{esc(', '.join(k.get('names_a', [])))} | "
                f"{esc(', '.join(k.get('names_b', [])))}\">{k['a']} / {k['b']}</td>") if k else ""
        label = (f"<a href=\"#{_anchor(d.label)}\">{esc(d.label)}</a>" if d.label in linked else esc(d.label))
        rows.append(f"<tr><td>{label}</td><td><code>{esc(d.name_a)}</code></td><td><code>{esc(d.name_b)}</code>"
                    f"</td><td class=n>{sum(d.histogram_a.values())}</td>"
                    f"<td class=n>{sum(d.histogram_b.values())}</td>{kern}<td>{findings}</td></tr>")
    extra = ""
    for name, blocks in ((result.a.name, result.only_a), (result.b.name, result.only_b)):
        if blocks:
            extra += (f"<p>Only in {esc(name)}: " + ", ".join(f"<code>{esc(x.label)}</code> ({esc(x.name)})"
                                                               for x in blocks) + "</p>")
    kernels = result.metrics.get("kernels")
    note = ""
    if kernels:
        note = ("<p>Kernels: " + esc(kernels_source(kernels)) + ", traced to blocks by module path; " + "; ".join(f"{esc(n)} {k['kernels']} ({k['fusions']} fusions, {k['unattributed']} "
                                               "not traced)" for n, k in ((result.a.name, kernels["a"]),
                                                                         (result.b.name, kernels["b"]))) + ".</p>")
    return ("<h2 id=\"blocks\">Block alignment</h2>" + note + "<table><tr><th>block</th><th>" + esc(result.a.name)
            + "</th><th>" + esc(result.b.name) + "</th><th>ops</th><th>ops</th>"
            + ("<th>kernels</th>" if kernels else "") + "<th>findings</th></tr>"
            + "".join(rows) + "</table>" + extra)


def _excerpts(result) -> str:
    out = []
    for d in _excerpted(result):
        left = "\n".join(highlight(x) for x in excerpt_lines(d.excerpt_a, len(d.ops_a), 30))
        right = "\n".join(highlight(x) for x in excerpt_lines(d.excerpt_b, len(d.ops_b), 30))
        out.append(f"<h3 id=\"{_anchor(d.label)}\">{esc(d.label)}</h3><div class=\"pair\"><div><b>{esc(result.a.name)}</b> "
                   f"<code>{esc(d.name_a)}</code><pre>{left}</pre></div><div><b>{esc(result.b.name)}</b> "
                   f"<code>{esc(d.name_b)}</code><pre>{right}</pre></div></div>")
    return ("<h2 id=\"excerpts\">IR side by side</h2><p>The first block of each kind, as each file writes it "
            "(its own value names, attributes and line numbers; locations dropped).</p>" + "".join(out))


def _time_by_block(result) -> str:
    """diff --bench / report --bench of a profiled bench: the gap by role and by block, bars side by side."""

    split = time_gap(result)
    if split is None:
        return ""
    time, names = result.metrics["time"], (result.a.name, result.b.name)

    def ms(s: float, sign: bool = False) -> str:
        return esc(f"{s * 1e3:+.3f}" if sign else f"{s * 1e3:.3f}")

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    sides = "".join(f"<li><b>{esc(n)}</b>: {esc(time_side(t))} (ms)</li>" for n, t in zip(names, (time["a"], time["b"])))
    verdict = (f"<p>Bench's verdict: {esc(time['verdict'])}"
               + ("; <b>the shares split a gap within the noise, not a finding</b>" if time.get("within_noise") else "")
               + ".</p>") if time.get("verdict") else ""
    terms = time_terms(time, split)
    verdict += f"<p>{esc(terms)}</p>" if terms else ""
    verdict += ("<p>By phase: " + ", ".join(f"{esc(p)} {ms(dt, True)} ms ({share(split.share(dt))})"
                                            for p, dt in split.phases) + ".</p>") if split.phases else ""
    def spread(low_high: tuple) -> str:
        return f"{ms(low_high[0], True)} to {ms(low_high[1], True)}" if low_high else "-"

    roles = "".join(f"<tr><td>{esc(r)}</td><td class=n>{n}</td><td class=n>{ms(dt, True)}</td>"
                    f"<td class=n>{spread(split.role_interval(r))}</td>"
                    f"<td class=n>{share(split.role_share(r, dt))}</td></tr>" for r, n, dt in split.roles)
    roles += (f"<tr><td>(not traced, unmatched)</td><td></td><td class=n>{ms(split.rest, True)}</td><td></td>"
              f"<td class=n>{share(split.share(split.rest))}</td></tr>")
    top = split.blocks[:TIME_ROWS]
    folded = "".join(f"<li>{esc(label)}: A {esc(a)}; B {esc(b)}</li>" for label, a, b in fused_elsewhere(top))
    folded = (f"<p>Computed in another block's kernel (that time is counted in the other block):</p><ul>{folded}</ul>"
              if folded else "")
    chart = grouped_bars([d.label for d in top], [(n, [d.metrics["time"][s] * 1e3 for d in top])
                                                  for n, s in zip(names, ("a", "b"))],
                         unit=" ms", title="kernel time per block (ms per run), largest share of the gap first")
    # The gap as a waterfall: A's kernel time, each role's difference, what no aligned block holds, B's.
    chart += waterfall((names[0], time["a"]["kernels_sum_s"] * 1e3),
                       [(role, dt * 1e3) for role, _, dt in split.roles]
                       + [("(not traced, unmatched)", split.rest * 1e3)],
                       (names[1], time["b"]["kernels_sum_s"] * 1e3), unit=" ms",
                       title="the kernel-time gap, role by role (ms per run)")
    return (f"<h2 id=\"time\">Time by block</h2><p>Kernel time per run ({esc(time_source(time))}), traced to "
            f"blocks as the kernel counts are. Gap {esc(names[1])} - {esc(names[0])}: "
            f"{ms(split.gap, True)} ms of kernel time.</p><ul>{sides}</ul>{verdict}{chart}"
            "<table><tr><th>role</th><th>blocks</th><th>B - A ms</th><th>95% interval ms</th><th>share of the gap</th></tr>"
            f"{roles}</table>{folded}{_host_by_block(result, top, names)}")


def _host_by_block(result, top, names) -> str:
    """diff --bench of a bench --host: per block, the host's time (the native runtime's modules) stacked
    on the device's kernel time, each side its own bar, and each side's phases."""

    host = result.metrics.get("host") or {}
    if not host:
        return ""
    labels, device, hosted = [], [], []
    for d in top:
        t = d.metrics["time"]
        for side, name in zip(("a", "b"), names):
            labels.append(f"{d.label} ({name})")
            device.append(t[side] * 1e3)
            hosted.append(t.get(f"host_{side}", 0.0) * 1e3)
    chart = stacked_bars(labels, [("device: kernels", device), ("host: its modules' forward", hosted)],
                         fmt=lambda v: f"{v:,.3f} ms", title="host and device time per block (ms per run)")
    lines = "".join(f"<li>{esc(line)}</li>" for line in host_lines(host))
    return f"<h3>Host and device by block</h3>{chart}<ul>{lines}</ul>"


def _timings(bench) -> str:
    """A bench.run.BenchReport: latency per run charted, its table, and a batch sweep."""
    rows = [(b, e) for b, e in bench.rows if e.ok and e.timing]
    if not rows:
        return "<h2 id=\"timings\">Timings</h2><p>No successful timing in the bench file.</p>"
    labels = [e.name + (f" (batch {b})" if b is not None else "") for b, e in rows]
    series = [(name, [getattr(e.timing, key) * 1e3 for _, e in rows]) for name, key in
              (("first run", "first"), ("second run", "second"), ("steady state", "steady"))]
    chart = grouped_bars(labels, series, log=True, unit=" ms", title="latency per run (ms, log scale)")
    m = bench.machine
    table = "".join(_timing_row(lbl, e, bench.peaks) for lbl, (_, e) in zip(labels, rows))
    return (f"<h2 id=\"timings\">Timings</h2><p>{esc(bench.backend)} backend on {esc(m.get('processor'))} "
            f"({esc(m.get('cpus'))} cpus). Log scale: first runs include compilation.</p>{chart}"
            "<table><tr><th>executable</th><th>compile ms</th><th>first ms</th><th>second ms</th><th>steady ms</th>"
            f"<th>spread</th><th>GFLOP/s</th><th>roofline</th><th>XLA memory plan</th><th>resident</th></tr>"
            f"{table}</table>{_sweep(rows)}"
            + (f"<p>Crossover: {esc(bench.crossover)}</p>" if bench.crossover else ""))


def _timing_row(label: str, e, peaks: dict) -> str:
    t = e.timing
    return (f"<tr><td>{esc(label)}</td><td class=n>{_ms(e.compile_s)}</td><td class=n>{_ms(t.first)}</td>"
            f"<td class=n>{_ms(t.second)}</td><td class=n>{_ms(t.steady)}</td>"
            f"<td class=n>{round(t.spread, 4):.0%}</td><td class=n>{_gf(e.flops / t.steady if e.flops else None)}</td>"
            f"<td>{esc(_roofline(e, peaks))}</td><td class=n>{esc(_plan(e))}</td>"
            f"<td class=n>{esc(_resident(e))}</td></tr>")


def _sweep(rows) -> str:
    rows = [(b, e) for b, e in rows if b is not None]
    batches = sorted({b for b, _ in rows})
    if len(batches) < 2:
        return ""
    series = []
    for n in sorted({e.name for _, e in rows}):
        by = {b: e.timing.steady * 1e3 for b, e in rows if e.name == n}
        series.append((n, [by.get(b) for b in batches]))
    return "<h3>Batch sweep: steady state (ms)</h3>" + grouped_bars([f"batch {b}" for b in batches], series,
                                                                     unit=" ms", title="steady state per batch")


def _roofline(e, peaks: dict) -> str:
    if not (e.flops and peaks):
        return "-"
    r = roofline(e.flops, e.bytes_accessed, e.timing.steady, peaks)
    return f"{r['fraction_of_bound']:.0%} of the {r['bound_by']} bound" if r["fraction_of_bound"] else "-"


def _plan(e) -> str:
    m = e.memory
    if not m:
        return "-"
    return human_bytes(m.get("argument_bytes", 0) + m.get("output_bytes", 0) + m.get("temp_bytes", 0))


def _resident(e) -> str:
    return "-" if e.resident_bytes is None else human_bytes(e.resident_bytes)


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.3g}"


def _gf(x) -> str:
    return "-" if not x else f"{x / 1e9:.3g}"


def _memory(memory) -> str:
    """A bench.memory.MemoryReport: its table and a stacked bar per executable against the budgets."""

    plans, budgets = [p for p in memory.plans if p.ok], memory.budgets
    labels = [Path(p.label).name + (f" (batch {p.batch})" if p.batch is not None else "") for p in plans]

    def parts(p) -> list:
        if p.refused:  # no plan: what the compiler said it needs, in one segment
            return [0, 0, p.refused["required_bytes"], 0]
        return [p.argument_bytes, p.output_bytes - p.alias_bytes, p.temp_bytes, p.code_bytes]

    names = ("arguments", "outputs not aliased", "temporaries (or refused: required)", "code")
    chart = stacked_bars(labels, [(n, [parts(p)[k] for p in plans]) for k, n in enumerate(names)],
                         marks=[(b.name, b.bytes) for b in budgets], fmt=human_bytes,
                         title="planned memory per executable")
    host = any(p.host_bytes for p in plans)  # offloaded to host memory: apart from the device peak
    head = "".join(f"<th>{esc(h)}</th>" for h in ("executable", "arguments", "outputs", "aliased", "temporaries",
                                                  "code", "peak", *(("host (offloaded)",) if host else ()),
                                                  *(f"{b.name} ({human_bytes(b.bytes)})" for b in budgets)))
    rows = []
    for lbl, p in zip(labels, plans):
        fits = [("fits, " + human_bytes(room) + " free") if ok else ("OOM, needs " + human_bytes(-room) + " more")
                for ok, room in (p.fits(b) for b in budgets)]
        nums = ["-"] * 5 if p.refused else [human_bytes(x) for x in (p.argument_bytes, p.output_bytes, p.alias_bytes,
                                                                     p.temp_bytes, p.code_bytes)]
        peak = human_bytes(p.peak_bytes) + (" (refused)" if p.refused else "")
        extra = ((human_bytes(p.host_bytes) if p.host_bytes else "-"),) if host else ()
        rows.append(f"<tr><td>{esc(lbl)}</td>" + "".join(f"<td class=n>{esc(x)}</td>" for x in (*nums, peak, *extra))
                    + "".join(f"<td>{esc(x)}</td>" for x in fits) + "</tr>")
    note = "".join(f"<p class=muted>Not planned: {esc(p.error)}</p>" for p in memory.failed)
    return (f"<h2 id=\"memory\">Memory</h2><p>Plan of {esc(memory.whose_plan)}: "
            "nothing was run. Dashed lines: the budgets.</p>" + chart
            + f"<table><tr>{head}</tr>{''.join(rows)}</table>{note}")
