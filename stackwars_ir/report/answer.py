"""bench.answer.Answer rendered: one paragraph (text, Markdown, HTML) on why B's step differs from A's.

Each clause carries its number, interval and source.
"""
from __future__ import annotations

import math

from ..bench.answer import Answer
from .escape import esc


def _ms(s: float, sign: bool = False) -> str:
    v = s * 1e3
    digits = 3 if abs(v) < 1 else 2 if abs(v) < 10 else 1
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _bounds(p) -> str:
    if math.isinf(p.low_s) or math.isinf(p.high_s):
        return "none"
    return f"{_ms(p.low_s, True)} to {_ms(p.high_s, True)}"


def _interval(p) -> str:
    return f"95% interval {_bounds(p)} ms"


def _share(p, step) -> str:
    """`p`'s gap as a share of the step's gap, where the step's gap is not within noise."""
    if step.within_noise or not step.gap_s:
        return ""
    return f", {p.gap_s / step.gap_s:.0%} of the gap"


def sentences(ans: Answer) -> list[str]:
    """The answer's clauses, in order: the step, the program, the host, the rest, what is missing, the source."""
    step = ans.step
    if ans.low <= 1 <= ans.high:
        head = (f"{ans.b} and {ans.a} are indistinguishable per steady step ({ans.b}/{ans.a} {ans.ratio:.2f}, 95% "
                f"interval {ans.low:.2f}-{ans.high:.2f} spans 1; {_ms(step.b_s)} against {_ms(step.a_s)} ms)")
    else:
        head = (f"{ans.b} took {ans.ratio:.2f}x {ans.a}'s steady step (95% interval {ans.low:.2f}-{ans.high:.2f}): "
                f"{_ms(step.b_s)} against {_ms(step.a_s)} ms, a gap of {_ms(step.gap_s, True)} ms ({_interval(step)})")
    if ans.rounds > 1 and ans.per_round:
        head += "; per round " + ", ".join(f"{r['step_b_s'] / r['step_a_s']:.2f}x" for r in ans.per_round)
    out = [head + "."]
    if ans.program is not None:
        p = ans.program
        said = "explain none of it measurably" if p.within_noise else f"explain {_ms(p.gap_s, True)} ms"
        out.append(f"The compiled programs {said} ({_interval(p)}{_share(p, step) if not p.within_noise else ''}): "
                   f"on one XLA runtime {ans.programs[1]}.mlir ran {_ms(p.b_s)} ms and {ans.programs[0]}.mlir "
                   f"{_ms(p.a_s)} ms.")
    if ans.host is not None:
        h = ans.host
        said = "explains none of it measurably" if h.within_noise else f"explains {_ms(h.gap_s, True)} ms"
        phases = "; ".join(f"{name} {_ms(s)} ms" for name, s in ans.host_phases)
        out.append(f"The host's work per step {said} ({_interval(h)}{_share(h, step) if not h.within_noise else ''}): "
                   f"{_ms(h.b_s)} against {_ms(h.a_s)} ms ({phases}).")
    if ans.rest is not None:
        r = ans.rest
        if r.within_noise:
            out.append(f"Nothing measurable is left ({_interval(r)}).")
        elif r.gap_s > 0:
            out.append(f"Left unexplained: {_ms(r.gap_s, True)} ms ({_interval(r)}{_share(r, step)}): the runtimes' "
                       "wait on the device beyond running the same program, and whatever the phased runs (host) and "
                       "the steady runs (step), measured apart, differ by.")
        else:
            out.append(f"The parts add up to {_ms(-r.gap_s)} ms more than the gap ({_interval(r)}): the host's phases "
                       "were measured in phased runs of their own, the step in the steady runs, and they differ by "
                       "that much.")
    for m in ans.missing:
        out.append(f"Not measured: {m}.")
    rounds = (f"{ans.rounds} rounds, each a bench in fresh workers, intervals across rounds" if ans.rounds > 1 else
              "one round, intervals over its runs only: give several bench files, or a model with --rounds 3")
    out.append(f"Source: {ans.source or 'bench --host'} ({rounds}; {ans.machine or 'this machine'}). "
               "Which IR difference costs what: stackwars-ir ablate A.mlir B.mlir.")
    return out


def answer_text(ans: Answer) -> str:
    """The answer as one paragraph of plain text."""
    return " ".join(sentences(ans))


def answer_markdown(ans: Answer) -> str:
    """The answer as a Markdown paragraph and a table of its parts."""
    rows = ["| part | A (ms) | B (ms) | B - A (ms) | 95% interval (ms) |", "| --- | ---: | ---: | ---: | --- |"]
    for p in (ans.step, ans.program, ans.host, ans.rest):
        if p is not None:
            a = "-" if p.a_s is None else _ms(p.a_s)
            b = "-" if p.b_s is None else _ms(p.b_s)
            rows.append(f"| {p.name} | {a} | {b} | {_ms(p.gap_s, True)} | {_bounds(p)} |")
    return f"## Why {ans.b} differs from {ans.a}\n\n{answer_text(ans)}\n\n" + "\n".join(rows) + "\n"


def answer_section(ans: Answer) -> str:
    """The answer as an HTML section: the paragraph, then the parts."""
    rows = "".join(f"<tr><td>{esc(p.name)}</td><td class=n>{'-' if p.a_s is None else _ms(p.a_s)}</td>"
                   f"<td class=n>{'-' if p.b_s is None else _ms(p.b_s)}</td><td class=n>{_ms(p.gap_s, True)}</td>"
                   f"<td>{esc(_bounds(p))}</td></tr>"
                   for p in (ans.step, ans.program, ans.host, ans.rest) if p is not None)
    return (f"<h2 id=\"why\">Why {esc(ans.b)} differs from {esc(ans.a)}</h2><p>{esc(answer_text(ans))}</p>"
            "<table><tr><th>part</th><th>A (ms)</th><th>B (ms)</th><th>B - A (ms)</th><th>95% interval (ms)</th></tr>"
            f"{rows}</table>")


def answer_html(ans: Answer, command: str | None = None) -> str:
    """A self-contained page (inline style, no script, nothing fetched) holding answer_section."""
    title = f"Why {ans.b} differs from {ans.a}"
    return "\n".join([
        f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>",
        "<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;padding:0 16px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 7px}th{background:#f4f4f4}"
        "td.n{text-align:right}.muted{color:#777}</style></head><body>",
        answer_section(ans),
        f"<p class=\"muted\">Regenerate: <code>{esc(command or 'stackwars-ir why ...')}</code></p>",
        "</body></html>\n"])
