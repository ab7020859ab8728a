"""An ablation (ablate.Ablation) rendered: the "what each difference costs" table.

As text, Markdown and self-contained HTML.
"""
from __future__ import annotations

from pathlib import Path

from ..ablate import Ablation
from ..common.textfmt import table
from .escape import esc

HEADERS = ["variant", "rewritten (sites)", "ops +/-", "max |V - B| (bound)", "findings (B -> V)", "V / B steady",
           "share of B - A closed"]


def _ratio(iv) -> str:
    if iv is None:
        return "-"
    if not iv.bounded:
        return f"{iv.value:.3f}x (1 round: no interval)"
    return f"{iv.value:.3f}x [{iv.low:.3f}-{iv.high:.3f}] {iv.verdict()}"


def _share(v, gap) -> str:
    if not v.timed:
        return "-"
    if v.share is None:
        return "withheld: B - A holds 0" if gap is not None and gap.rounds > 1 else "withheld: 1 round"
    s = v.share
    if not s.bounded:
        return f"{s.value:+.0%} (1 round)"
    tail = " (indistinguishable from none)" if s.holds(0.0) else ""
    return f"{s.value:+.0%} [{s.low:+.0%} to {s.high:+.0%}]{tail}"


def _check(v) -> str:
    c = v.check
    if v.error:
        return "rewrite failed"
    if c is None:
        return "-"
    if c.error:
        return f"not compared: {c.error}"
    verdict = "ok" if c.ok else "FAILED (not timed)"
    return f"{c.max_abs:.2g} (atol {c.atol:g}, rtol {c.rtol:g}) {verdict}"


def _ops(v, top: int = 3) -> str:
    """Ops added and removed (region terminators not counted), the largest changes named."""
    added = {k.split(".")[-1]: n for k, n in v.added.items() if k != "stablehlo.return"}
    removed = {k.split(".")[-1]: n for k, n in v.removed.items()}
    if not added and not removed:
        return "none"
    named = sorted([(n, f"{k} +{n}") for k, n in added.items()] + [(n, f"{k} -{n}") for k, n in removed.items()],
                   key=lambda x: (-x[0], x[1]))
    more = f", ... ({len(named) - top} more)" if len(named) > top else ""
    return f"+{sum(added.values())} -{sum(removed.values())}: " + ", ".join(t for _, t in named[:top]) + more


def notes(abl: Ablation) -> list[str]:
    """The lines under the table: findings a variant moved that it does not aim at, the blocks a
    transplant left as they were (and why), and the rewrites that made no variant."""
    out = []
    for v in abl.variants:
        if v.findings_new:
            out.append(f"{v.name}: findings A against it has that A against B had not: {'; '.join(v.findings_new)}")
        if v.blocks_skipped:
            shown = "; ".join(v.blocks_skipped[:4]) + (f"; ... ({len(v.blocks_skipped) - 4} more)"
                                                        if len(v.blocks_skipped) > 4 else "")
            out.append(f"{v.name}: {len(v.blocks_skipped)} differing block(s) left as they were: {shown}")
        if v.kernel_s:
            changed = sorted(v.block_times, key=lambda x: -abs(x[2] - x[1]))
            shown = ", ".join(f"{label} {tb * 1e3:.3f}->{tv * 1e3:.3f}" for label, tb, tv in changed[:4])
            more = f", ... ({len(changed) - 4} more)" if len(changed) > 4 else ""
            out.append(f"{v.name}: kernel time per run (--profile, ms, B -> V): all kernels {v.kernel_s[0] * 1e3:.3f}->"
                       f"{v.kernel_s[1] * 1e3:.3f}; in the {len(changed)} block(s) it changed "
                       f"{sum(x[1] for x in changed) * 1e3:.3f}->{sum(x[2] for x in changed) * 1e3:.3f}"
                       + (f" ({shown}{more})" if shown else ""))
    for name, why in abl.skipped.items():
        out.append(f"{name}: no variant ({why})")
    return out


def _findings(v) -> str:
    """The findings the rewrites aim at, counted in A against B and A against the variant."""
    return ", ".join(f"{k} {b}->{a}" for k, (b, a) in v.findings.items()) or "none named"


def headers(abl: Ablation) -> list[str]:
    return HEADERS + ([f"{abl.target} estimate V / B"] if abl.target else [])


def _estimate(abl, v) -> str:
    if v.estimate_s is None or not abl.estimate_b:
        return "-" if v.error or v.check is None or not v.check.ok else abl.estimate_errors.get(v.path, "-")
    return f"{v.estimate_s / abl.estimate_b:.3f}x ({v.estimate_s * 1e6:,.0f} us, estimated)"


def rows(abl: Ablation) -> list[list]:
    """One row per variant: what was rewritten, ops changed, output error, time change, share of the gap
    (and, with a target, the compiler's estimate of one run over B's)."""
    out = []
    for v in abl.variants:
        if v.error:
            what = "transplant" if v.name.startswith("block-") else "rewrite"
            row = [v.name, "+".join(v.rewrites), "-", f"{what} failed: {v.error}", "-", "-", "-"]
        else:
            row = [v.name, ", ".join(f"{k} {n}" for k, n in v.sites.items()), _ops(v), _check(v),
                   _findings(v), _ratio(v.change), _share(v, abl.gap)]
        out.append(row + ([_estimate(abl, v)] if abl.target else []))
    return out


def _estimates_line(abl) -> str:
    if not abl.target:
        return ""
    if abl.estimate_a and abl.estimate_b:
        return (f"{abl.target} (the TPU compiler's estimates, compile-only, not measured): A {abl.estimate_a * 1e6:,.0f} us, "
                f"B {abl.estimate_b * 1e6:,.0f} us, B / A {abl.estimate_b / abl.estimate_a:.3f}x")
    return f"{abl.target}: no estimate ({'; '.join(f'{k}: {w}' for k, w in abl.estimate_errors.items())})"


def _machine(abl) -> str:
    m = abl.machine
    return f"{m.get('processor') or '?'}, {m.get('cpus') or '?'} cpus, Python {m.get('python') or '?'}"


def _arguments(abl) -> str:
    """Where the check's argument values came from (the variants' checks share B's)."""
    got = sorted({v.check.arguments for v in abl.variants if v.check is not None and v.check.arguments})
    return f"check's arguments: {'; '.join(got)}" if got else "check's arguments: none checked"


def _steady(xs) -> str:
    if not xs:
        return "-"
    s = sorted(xs)
    return f"{s[len(s) // 2] * 1e3:.3f} ms (median of {len(xs)} rounds)"


def ablation_text(abl: Ablation) -> str:
    """The ablation in words and a table (the CLI prints this)."""
    lines = [f"A = {abl.a}", f"B = {abl.b}", ""]
    if not abl.variants:
        lines.append("nothing to ablate: no rewrite finds a site in B, no block to transplant "
                     f"({'; '.join(f'{k}: {w}' for k, w in abl.skipped.items()) or 'no rewrites asked'})")
        return "\n".join(lines)
    lines.append(f"steady on {abl.platform}: A {_steady(abl.steady_a)}, B {_steady(abl.steady_b)}; "
                 f"B / A {_ratio(abl.gap)}")
    lines.append(f"{abl.rounds} round(s), each a fresh worker timing A, B and every checked variant in turns")
    if abl.target:
        lines.append(_estimates_line(abl))
    lines.append("")
    lines.append(table(headers(abl), rows(abl)))
    lines.extend(notes(abl))
    lines.append("")
    lines.append(_arguments(abl))
    lines.append("V / B: a variant's steady time over B's, per round, geometric mean and 95% interval across rounds; "
                 "share: (B - V) / (B - A) per round, mean and 95% interval, withheld where B / A's interval holds 1.")
    paths = [v.path for v in abl.variants if v.path]
    if paths:
        sidecars = all(Path(p).with_suffix(".json").is_file() for p in paths)
        lines.append(f"variants written: {', '.join(paths)} ({'each with a sidecar' if sidecars else 'no sidecar: B has none'}; "
                     "`stackwars-ir diff A VARIANT` shows what changed)")
    return "\n".join(lines)


def ablation_markdown(abl: Ablation) -> str:
    def cell(x) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = [f"# What each difference costs: {Path(abl.b).name} rewritten into {Path(abl.a).name}'s form", "",
             f"- A: `{abl.a}`", f"- B: `{abl.b}`",
             f"- steady on {abl.platform}: A {_steady(abl.steady_a)}, B {_steady(abl.steady_b)}; B / A {_ratio(abl.gap)}",
             f"- machine: {_machine(abl)}; {abl.rounds} round(s) of fresh workers",
             f"- {_arguments(abl)}", ""]
    if abl.target:
        lines.insert(-1, f"- {_estimates_line(abl)}")
    lines.append("| " + " | ".join(cell(h) for h in headers(abl)) + " |")
    lines.append("|" + "---|" * len(headers(abl)))
    for r in rows(abl):
        lines.append("| " + " | ".join(cell(c) for c in r) + " |")
    lines.extend(f"\n{cell(n)}" for n in notes(abl))
    return "\n".join(lines) + "\n"


def ablation_section(abl: Ablation) -> str:
    """The table as a section of a page (the diff report's, `report --ablation`)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers(abl))
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows(abl))
    return (f"<h2 id=\"ablation\">What each difference costs (ablate)</h2><p>{esc(Path(abl.b).name)} rewritten into "
            f"{esc(Path(abl.a).name)}'s form; steady on {esc(abl.platform)}: A {esc(_steady(abl.steady_a))}, "
            f"B {esc(_steady(abl.steady_b))}; B / A {esc(_ratio(abl.gap))}</p><table><tr>{head}</tr>{body}</table>")


def ablation_html(abl: Ablation, command: str | None = None) -> str:
    """A self-contained page (inline style, no script, nothing fetched)."""
    title = f"What each difference costs: {Path(abl.b).name} into {Path(abl.a).name}'s form"
    head = "".join(f"<th>{esc(h)}</th>" for h in headers(abl))
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows(abl))
    skipped = "".join(f"<li>{esc(n)}</li>" for n in notes(abl))
    return "\n".join([
        f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>",
        "<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1280px;padding:0 16px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 7px}th{background:#f4f4f4}"
        ".muted{color:#777}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>A = <code>{esc(abl.a)}</code><br>B = <code>{esc(abl.b)}</code><br>steady on {esc(abl.platform)}: "
        f"A {esc(_steady(abl.steady_a))}, B {esc(_steady(abl.steady_b))}; B / A {esc(_ratio(abl.gap))}</p>",
        f"<p>{esc(_estimates_line(abl))}</p>" if abl.target else "",
        f"<table><tr>{head}</tr>{body}</table>",
        f"<ul>{skipped}</ul>" if skipped else "",
        "<p class=\"muted\">V / B: steady time over B's per round, geometric mean and 95% interval across "
        f"{abl.rounds} round(s); share: (B - V) / (B - A), withheld where B / A's interval holds 1. "
        f"Machine: {esc(_machine(abl))}. {esc(_arguments(abl))}.</p>",
        f"<p class=\"muted\">Regenerate: <code>{esc(command or f'stackwars-ir ablate {abl.a} {abl.b}')}</code></p>",
        "</body></html>\n"])
