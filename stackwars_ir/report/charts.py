"""Inline SVG charts: grouped and stacked bars, a waterfall, and a heat-map colour scale.

No library, nothing fetched.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .escape import esc

COLORS = ("#3b6fb6", "#e07b39", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2")


def grouped_bars(categories: list[str], series: list[tuple[str, list[float]]], *, log: bool = False,
                 unit: str = "", width: int = 900, bar_h: int = 9, title: str = "") -> str:
    """Horizontal grouped bars: one group per category, one bar per series."""
    n = max(len(series), 1)
    label_w, top = 230, 28
    group_h = bar_h * n + 6
    height = top + group_h * len(categories) + 24
    values = [v for _, vs in series for v in vs if v is not None]
    vmax = max(values, default=1) or 1

    def scale(v: float) -> float:
        if v is None or v <= 0:
            return 0.0
        if log:
            return (width - label_w - 80) * math.log10(1 + v) / math.log10(1 + vmax)
        return (width - label_w - 80) * v / vmax

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>']
    for k, (name, _) in enumerate(series):
        x = label_w + k * 170
        parts.append(f'<rect x="{x}" y="6" width="12" height="12" fill="{COLORS[k % len(COLORS)]}"/>'
                     f'<text x="{x + 16}" y="16" font-size="12">{esc(name)}</text>')
    for i, cat in enumerate(categories):
        y0 = top + i * group_h
        parts.append(f'<text x="{label_w - 6}" y="{y0 + group_h / 2 + 3}" font-size="11" text-anchor="end">'
                     f'{esc(cat)}</text>')
        for k, (name, vs) in enumerate(series):
            v = vs[i]
            w = scale(v)
            y = y0 + k * bar_h
            parts.append(f'<rect class="bar" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" '
                         f'fill="{COLORS[k % len(COLORS)]}"><title>{esc(name)}: {esc(_fmt(v))}{esc(unit)}</title></rect>')
            parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 2}" font-size="9">{esc(_fmt(v))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def stacked_bars(categories: list[str], segments: list[tuple[str, list[float]]], *,
                 marks: Sequence[tuple[str, float]] = (), fmt: Callable[[float], str] | None = None,
                 width: int = 900, bar_h: int = 16, title: str = "") -> str:
    """Horizontal stacked bars: one bar per category, one segment per series (values >= 0); `marks`
    are (name, value) vertical lines across all bars (budgets); `fmt` writes a value for the labels."""
    fmt = fmt or _fmt
    label_w, top, gap = 230, 28, 6
    height = top + (bar_h + gap) * len(categories) + (16 * len(marks)) + 12
    totals = [sum(v or 0 for _, vs in segments for v in [vs[i]]) for i in range(len(categories))]
    vmax = max([*totals, *(v for _, v in marks)], default=1) or 1
    span = width - label_w - 90

    def x(v: float) -> float:
        return label_w + span * max(v or 0, 0) / vmax

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>']
    lx = label_w
    for k, (name, _) in enumerate(segments):
        parts.append(f'<rect x="{lx}" y="6" width="12" height="12" fill="{COLORS[k % len(COLORS)]}"/>'
                     f'<text x="{lx + 16}" y="16" font-size="12">{esc(name)}</text>')
        lx += 36 + 7 * len(name)  # about 7 px a character at 12 px
    for i, cat in enumerate(categories):
        y = top + i * (bar_h + gap)
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_h - 4}" font-size="11" text-anchor="end">{esc(cat)}</text>')
        start = 0.0
        for k, (name, vs) in enumerate(segments):
            v = vs[i] or 0
            if v > 0:
                parts.append(f'<rect class="bar" x="{x(start):.1f}" y="{y}" width="{x(start + v) - x(start):.1f}" '
                             f'height="{bar_h}" fill="{COLORS[k % len(COLORS)]}"><title>{esc(cat)}: {esc(name)} '
                             f'{esc(fmt(v))}</title></rect>')
            start += v
        parts.append(f'<text x="{x(start) + 4:.1f}" y="{y + bar_h - 4}" font-size="10">{esc(fmt(start))}</text>')
    bottom = top + (bar_h + gap) * len(categories)
    for j, (name, v) in enumerate(marks):
        parts.append(f'<line x1="{x(v):.1f}" y1="{top - 4}" x2="{x(v):.1f}" y2="{bottom}" stroke="#c0392b" '
                     f'stroke-dasharray="4 3"/><text x="{x(v):.1f}" y="{bottom + 12 + 16 * j}" font-size="10" '
                     f'text-anchor="middle" fill="#c0392b">{esc(name)} {esc(fmt(v))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def waterfall(start: tuple[str, float], steps: list[tuple[str, float]], end: tuple[str, float], *, unit: str = "",
              width: int = 900, bar_h: int = 14, title: str = "") -> str:
    """A horizontal waterfall: the `start` total as a bar, each step (a signed change) as a bar floating
    from where the running total stood (red up, green down), the `end` total as a bar; the steps
    add up from start to end."""
    label_w, top, gap = 230, 10, 4
    rows = [start, *steps, end]
    height = top + (bar_h + gap) * len(rows) + 10
    running, spans = start[1], [(0.0, start[1])]
    for _, dv in steps:
        spans.append((running, running + dv))
        running += dv
    spans.append((0.0, end[1]))
    vmax = max((max(a, b) for a, b in spans), default=1) or 1
    span = width - label_w - 110

    def x(v: float) -> float:
        return label_w + span * max(v, 0) / vmax

    parts = [f'<svg class="chart waterfall" role="img" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>']
    for i, ((name, v), (a, b)) in enumerate(zip(rows, spans)):
        y = top + i * (bar_h + gap)
        total = i in (0, len(rows) - 1)
        color = COLORS[0] if total else ("#c0392b" if b >= a else "#2e8b57")
        lo, hi = min(a, b), max(a, b)
        text = _fmt(v) if total else f"{'+' if v >= 0 else ''}{_fmt(v)}"
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_h - 3}" font-size="11" text-anchor="end">{esc(name)}</text>'
                     f'<rect class="step" x="{x(lo):.1f}" y="{y}" width="{max(x(hi) - x(lo), 1):.1f}" height="{bar_h}" '
                     f'fill="{color}"><title>{esc(name)}: {esc(text)}{esc(unit)}</title></rect>'
                     f'<text x="{x(hi) + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{esc(text)}{esc(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def heat(value: int, vmax: int) -> str:
    """Background colour for a heat-map cell (white to blue)."""
    if not value or not vmax:
        return "#ffffff"
    t = math.log1p(value) / math.log1p(vmax)
    r, g, b = (int(255 - t * (255 - c)) for c in (59, 111, 182))
    return f"#{r:02x}{g:02x}{b:02x}"


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.3g}"
    return f"{int(v)}"
