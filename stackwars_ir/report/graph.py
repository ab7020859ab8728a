"""The report's graph view: both sides' block dataflow as inline SVG, aligned blocks side by side.

Each block's op-level diff and IR go in the page as data.
"""
from __future__ import annotations

import json

from ..diff.ops import op_totals
from ..diff.result import BlockResult, DiffResult
from .escape import esc
from .sentences import line_ranges, op_group, op_totals_text

GRAPH_LIMIT = 600  # block pairs; past this the view would be a wall: the page says so and keeps the table
_ROW, _BOX_W, _BOX_H = 24, 250, 18
_XA, _XB = 150, 560  # left edges of the A and B columns


def share_differing(blk: BlockResult) -> float:
    """How much of an aligned pair differs: ops of both sides not matched, over all their ops
    (0 for the same ops; the op histogram's difference where there is no op-level diff)."""
    od = blk.op_diff
    if od is not None:
        total = od.ops_a + od.ops_b
        return 1 - 2 * od.count("matched") / total if total else 0.0
    na, nb = sum(blk.histogram_a.values()), sum(blk.histogram_b.values())
    return min(1.0, sum(abs(v) for v in blk.delta.values()) / max(na + nb, 1))


def diff_color(share: float) -> str:
    """Green (the same) through yellow to red (all different)."""
    share = max(0.0, min(1.0, share))
    stops = ((0.0, (207, 232, 207)), (0.5, (255, 224, 138)), (1.0, (239, 83, 80)))
    for (s0, c0), (s1, c1) in zip(stops, stops[1:]):
        if share <= s1:
            t = (share - s0) / (s1 - s0)
            return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(c0, c1))
    return "#ef5350"


def graph_view(result: DiffResult) -> str:
    """The section: the SVG, the panel a click fills, and the data it is filled from."""
    n = len(result.blocks)
    if n > GRAPH_LIMIT:
        return (f"<h2 id=\"graph\">Graph</h2><p>{n} aligned block pairs: too many for the graph view (limit "
                f"{GRAPH_LIMIT}); the block table below lists them all.</p>")
    if not n and not (result.only_a or result.only_b):
        return ""

    totals = op_totals(result.blocks)
    line = f"<p>{esc(op_totals_text(totals))}.</p>" if totals else ""
    return ("<h2 id=\"graph\">Graph</h2>" + line + "<p>Each row an aligned pair of blocks, "
            f"{esc(result.a.name)} left, {esc(result.b.name)} right, colored by the share of their ops that "
            "differ (green: the same; red: all different); arcs are each side's dataflow between blocks. "
            "Click a block for its op-level diff and its IR side by side.</p>"
            f"<div class=\"graphwrap\">{_svg(result)}</div>"
            "<div id=\"blockpanel\" class=\"panel\"><p class=\"muted\">Click a block above.</p></div>"
            f"<script type=\"application/json\" id=\"blockdata\">{_data(result)}</script>")


def _svg(result) -> str:
    blocks = result.blocks
    extra = [("a", u) for u in result.only_a] + [("b", u) for u in result.only_b]
    rows = len(blocks) + len(extra)
    height = 40 + rows * _ROW + 10
    width = _XB + _BOX_W + 150
    y = lambda i: 40 + i * _ROW  # noqa: E731
    parts = [f'<svg class="graph" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>block graph</title>',
             f'<text x="{_XA}" y="22" class="gh">{esc(result.a.name)}</text>',
             f'<text x="{_XB}" y="22" class="gh">{esc(result.b.name)}</text>']
    mid = _BOX_H / 2
    # Dataflow arcs: A's to the left of its column, B's to the right of its column.
    for side, edges, x0, sign in (("a", result.flow_a, _XA, -1), ("b", result.flow_b, _XB + _BOX_W, 1)):
        for i, j in edges:
            y1, y2 = y(i) + mid, y(j) + mid
            bend = x0 + sign * min(130, 8 + 3 * abs(j - i))
            parts.append(f'<path class="flow" d="M{x0} {y1:.0f} C{bend} {y1:.0f} {bend} {y2:.0f} {x0} {y2:.0f}"/>')
    for k, blk in enumerate(blocks):
        share = share_differing(blk)
        color = diff_color(share)
        yy = y(k)
        tip = f"{blk.label}: {share:.0%} of ops differ"
        parts.append(f'<g class="blk" data-i="{k}" tabindex="0"><title>{esc(tip)}</title>'
                     f'<line class="pairline" x1="{_XA + _BOX_W}" y1="{yy + mid}" x2="{_XB}" y2="{yy + mid}"/>'
                     + _box(_XA, yy, color, f"{blk.label}  {blk.name_a}")
                     + _box(_XB, yy, color, f"{blk.label}  {blk.name_b}") + "</g>")
    for m, (side, u) in enumerate(extra):
        yy = y(len(blocks) + m)
        x = _XA if side == "a" else _XB
        parts.append(f'<g class="unaligned"><title>{esc(u.label)}: no partner</title>'
                     + _box(x, yy, "#c8b3f0", f"{u.label}  {u.name} (no partner)") + "</g>")
    parts.append("</svg>")
    return "".join(parts)


def _box(x: int, y: int, color: str, text: str) -> str:
    short = text if len(text) <= 42 else text[:41] + "…"
    return (f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="3" fill="{color}"/>'
            f'<text x="{x + 5}" y="{y + 13}">{esc(short)}</text>')


def _data(result) -> str:
    """Per block: label, names, counts, op-level groups in words with their lines, IR excerpts. JSON
    in a script element: the page reads it with JSON.parse and writes it with textContent only."""

    a, b = result.names
    out = []
    for blk in result.blocks:
        od = blk.op_diff
        groups = []
        if od is not None:
            for g in od.groups:
                where = [f"{name} lines {line_ranges(x for x in lines if x)}"
                         for name, lines in ((a, g.lines_a), (b, g.lines_b)) if any(lines)]
                groups.append({"status": g.status, "text": op_group(g, result.names), "where": "; ".join(where)})
        out.append({"label": blk.label, "name_a": blk.name_a, "name_b": blk.name_b,
                    "ops_a": sum(blk.histogram_a.values()), "ops_b": sum(blk.histogram_b.values()),
                    "share": round(share_differing(blk), 4),
                    "counts": od.as_json()["counts"] if od is not None else None, "groups": groups,
                    "excerpt_a": list(blk.excerpt_a), "excerpt_b": list(blk.excerpt_b)})
    text = json.dumps({"names": list(result.names), "blocks": out}, separators=(",", ":"))
    # Inside <script>, "</" could end the element early: no markup character is left as itself
    # (JSON reads \u003c as "<").
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


STYLE = """
.graphwrap{overflow-x:auto;border:1px solid #e4e4e4;background:#fcfcfc}
svg.graph text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#222}svg.graph text.gh{font:bold 13px system-ui,sans-serif}
svg.graph path.flow{fill:none;stroke:#9aa7b8;stroke-width:.8;opacity:.7}svg.graph line.pairline{stroke:#bbb;stroke-dasharray:3 3}
svg.graph g.blk{cursor:pointer}svg.graph g.blk:hover rect,svg.graph g.blk.sel rect{stroke:#1f5fa6;stroke-width:2}
.pair>div{min-width:0}.panel{border:1px solid #ddd;padding:8px 12px;margin:8px 0;background:#fff}.panel li.changed{color:#8a6d00}
.panel li.rewritten{color:#b35900}.panel li.only_a,.panel li.only_b{color:#b71c1c}
"""

SCRIPT = """
(function(){
  var node = document.getElementById('blockdata');
  if (!node) return;
  var data = JSON.parse(node.textContent), panel = document.getElementById('blockpanel');
  function el(tag, text, cls){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function pre(lines){ var p = el('pre'); p.textContent = lines.length ? lines.join('\\n') : '(no excerpt kept for this block)'; return p; }
  function show(i){
    var b = data.blocks[i], a = data.names[0], z = data.names[1];
    document.querySelectorAll('svg.graph g.blk.sel').forEach(function(g){ g.classList.remove('sel'); });
    var g = document.querySelector('svg.graph g.blk[data-i="' + i + '"]'); if (g) g.classList.add('sel');
    panel.textContent = '';
    panel.appendChild(el('h3', b.label));
    panel.appendChild(el('p', a + ': ' + b.name_a + ' (' + b.ops_a + ' ops); ' + z + ': ' + b.name_b + ' (' + b.ops_b + ' ops); ' + Math.round(100 * b.share) + '% of ops differ'));
    if (b.counts) {
      panel.appendChild(el('p', Object.keys(b.counts).map(function(k){ return k.replace('_', ' ') + ' ' + b.counts[k]; }).join(', '), 'muted'));
      var ul = el('ul');
      b.groups.forEach(function(gr){
        ul.appendChild(el('li', gr.text + (gr.where ? '  [' + gr.where + ']' : ''), gr.status));
      });
      if (!b.groups.length) ul.appendChild(el('li', 'every op matched'));
      panel.appendChild(ul);
    }
    var pair = el('div', undefined, 'pair'), left = el('div'), right = el('div');
    left.appendChild(el('b', a)); left.appendChild(pre(b.excerpt_a));
    right.appendChild(el('b', z)); right.appendChild(pre(b.excerpt_b));
    pair.appendChild(left); pair.appendChild(right); panel.appendChild(pair);
    document.body.dataset.shown = b.label;
  }
  document.querySelectorAll('svg.graph g.blk').forEach(function(g){
    g.addEventListener('click', function(){ show(Number(g.dataset.i)); });
    g.addEventListener('keydown', function(e){ if (e.key === 'Enter') show(Number(g.dataset.i)); });
  });
  document.body.dataset.graphBlocks = String(data.blocks.length);
})();
"""
