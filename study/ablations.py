"""docs/findings-ablations.md: the study's three IR claims, each with what rewriting it changed.

Rendered from ablate.Ablation records.
"""
from __future__ import annotations

import json
from pathlib import Path

from .host import made_on, record_dates

PAIRS = (("gpt2", "forward"), ("gpt2", "train"), ("bert", "forward"), ("bert", "train"))
NAMES = {"gpt2": "GPT-2", "bert": "BERT"}
# The study's claims about the IR (seed 001), and the rewrite that removes each difference.
CLAIMS = (
    ("norm", "LayerNorm", "torch_xla lowers LayerNorm through `batch_norm_training` (and its backward through "
     "`batch_norm_grad`) where JAX spells it out with reduces and rsqrt"),
    ("flatten", "Flattening", "torch_xla flattens batch and sequence into one dimension before the matmuls "
     "(`dot_general` at rank 2) where JAX multiplies at rank 3"),
    ("embedding", "Embeddings", "torch_xla looks embeddings up through a constant position table and ids "
     "converted to ui32, where JAX builds positions with `iota` and reads ids as `jnp.take` does"),
)


def record_name(model: str, step: str) -> str:
    return f"{model}-{step}.json"


def load(results: Path) -> dict:
    """{(model, step): Ablation} of the records in RESULTS (study/run/ablations.py writes them)."""
    from stackwars_ir.ablate import Ablation

    out = {}
    for model, step in PAIRS:
        p = Path(results) / record_name(model, step)
        try:
            out[(model, step)] = Ablation.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError):
            continue
    return out


def _ratio(iv, name: str = "V/B") -> str:
    """A ratio across rounds in the words page_claims reads: its verdict, then the ratio and its interval."""
    if iv is None:
        return "not timed"
    if not iv.bounded:
        return f"{iv.value:.3f} ({iv.rounds} round: no interval)"
    return f"{iv.verdict()} ({name} {iv.value:.3f}, 95% interval {iv.low:.3f}-{iv.high:.3f})"


def _share(v) -> str:
    if v.share is None:
        return "withheld (B / A holds 1)" if v.timed else "-"
    s = v.share
    return f"{s.value:+.0%} (95% interval {s.low:+.0%} to {s.high:+.0%})"


def _estimate(abl, v) -> str:
    """The compiler's estimate of one run of the variant over B's (a v6e, compile-only), or why none."""
    if not abl.target:
        return "not estimated (no libtpu where the record was made)"
    if v.estimate_s is None or not abl.estimate_b:
        return "no estimate"
    return f"{v.estimate_s / abl.estimate_b:.3f} (estimated, not measured)"


def _ms(xs) -> str:
    s = sorted(xs)
    return f"{s[len(s) // 2] * 1e3:,.1f}" if s else "-"


def _variant(abl, name: str):
    return next((v for v in abl.variants if v.name == name), None)


def claim_sentence(label: str, rows: list, estimates: list = ()) -> str:
    """One claim's verdict over its measured (model, step) rows, (where, Variant) pairs, and the
    TPU compiler's estimates of the variant over B where the records carry them."""
    return _measured(label, rows) + (
        f" On a TPU v6e the compiler estimates the variant at {min(estimates):.3f} to {max(estimates):.3f} of "
        f"torch_xla's run across the {len(estimates)} programs (estimates, not measured)." if estimates else "")


def _measured(label: str, rows: list) -> str:
    timed = [(w, v) for w, v in rows if v is not None and v.change is not None and v.change.rounds >= 2]
    failed = [w for w, v in rows if v is not None and (v.error or (v.check is not None and not v.check.ok))]
    if not timed:
        return f"**{label}**: no variant timed across rounds" + (f" (failed: {', '.join(failed)})" if failed else "") + "."
    moved = [(w, v) for w, v in timed if not v.change.holds(1.0)]
    if not moved:
        return (f"**{label}**: rewriting it into JAX's form left torch_xla's steady time indistinguishable from no "
                f"change in all {len(timed)} programs measured ({', '.join(w for w, _ in timed)}) on XLA:CPU: this "
                "difference has no cost this machine can measure at these sizes.")
    parts = [f"{w}: {_ratio(v.change)}" for w, v in moved]
    rest = len(timed) - len(moved)
    slower = [w for w, v in moved if v.change.low > 1]
    verdict = ("JAX's form was the slower one wherever it moved, the opposite of what the study's claim predicts"
               if len(slower) == len(moved) else
               "removing the difference made torch_xla faster wherever it moved, as the study's claim predicts"
               if not slower else "the direction differs between programs")
    return (f"**{label}**: rewriting it changed torch_xla's steady time in {len(moved)} of {len(timed)} programs "
            f"({'; '.join(parts)})" + (f"; indistinguishable in the other {rest}" if rest else "") + f": {verdict}.")


def _claims(records: dict) -> list:
    """Each claim's verdict sentence over the records."""
    out = []
    for name, label, _ in CLAIMS:
        rows = [(f"{NAMES[m]} {s}", _variant(abl, name)) for (m, s), abl in records.items()]
        estimates = [v.estimate_s / abl.estimate_b for (_, v), abl in zip(rows, records.values())
                     if v is not None and v.estimate_s and abl.estimate_b]
        out.append(claim_sentence(label, rows, estimates))
    return out


def ablations_summary(results: Path) -> list[str]:
    """docs/findings.md's section 13: each claim's verdict, from the records in RESULTS."""
    records = load(results)
    if not records:
        return ["No ablation records: `make findings-ablations` measures them (docs/findings-ablations.md)."]
    out = [f"From `make findings-ablations`' records ({', '.join(f'{NAMES[m]} {s}' for m, s in records)}; made on "
           f"{made_on(Path(results))}, {', '.join(record_dates(Path(results))) or 'never'}): each torch_xla capture "
           "rewritten into JAX's form one difference at a time (`stackwars-ir ablate`), checked against its "
           "outputs and timed beside it on XLA:CPU in 3 rounds of fresh workers. The tables are in "
           "docs/findings-ablations.md.", ""]
    for sentence in _claims(records):
        out += [f"- {sentence}"]
    return out


def ablations_page(results: Path) -> str:
    """The page from the records in RESULTS (each record's day and commit from the folder's index), the
    same text whenever and by whichever commit it is rendered."""
    records = load(results)
    out = ["# What the study's IR differences cost, measured by removing them", "",
           f"Generated by `make findings-ablations` (study/run/ablations.py) from the "
           f"records in benchmarks/records/ablations, made on **{made_on(Path(results))}**, "
           f"{', '.join(record_dates(Path(results))) or 'never'}. Each record is one `stackwars-ir ablate` of a "
           "torch_xla capture (B) against JAX's capture (A) of the same model, weights and inputs, at base size "
           "(batch 2, sequence 64): B rewritten into A's form one difference at a time (docs/ablate.md), each "
           "variant checked against B's outputs, then A, B and the variants timed on XLA:CPU, their steady runs "
           "in turns, in 3 rounds of fresh workers. Nothing is recomputed on --render.", ""]
    if not records:
        return "\n".join(out + ["No records yet: run `make findings-ablations`.", ""]) + "\n"
    out += ["## The gap being explained", "",
            "| program | JAX steady ms | torch_xla steady ms | torch_xla / JAX | v6e estimate, torch_xla / JAX |",
            "|---|---|---|---|---|"]
    for (model, step), abl in records.items():
        est = f"{abl.estimate_b / abl.estimate_a:.3f} (estimated, not measured)" if abl.estimate_a and abl.estimate_b \
            else "not estimated"
        out.append(f"| {NAMES[model]} {step} | {_ms(abl.steady_a)} | {_ms(abl.steady_b)} | {_ratio(abl.gap, 'B/A')} | "
                   f"{est} |")
    out += ["", "Steady ms: the median over the rounds of each round's median steady run. Where torch_xla is the "
            "faster (B / A below 1), a variant that closes the gap makes it slower: the share is still (B - V) / "
            "(B - A), the part of the difference from JAX the rewrite removes.", "", "## The claims", ""]
    for name, label, words in CLAIMS:
        rows = [(f"{NAMES[m]} {s}", _variant(abl, name)) for (m, s), abl in records.items()]
        estimates = [v.estimate_s / abl.estimate_b for (_, v), abl in zip(rows, records.values())
                     if v is not None and v.estimate_s and abl.estimate_b]
        out += [f"### {label}", "", f"The study's difference: {words}.", "", claim_sentence(label, rows, estimates), "",
                "| program | sites rewritten | findings (B -> variant) | max abs V - B (bound) | variant / torch_xla "
                "steady | share of the gap closed | v6e estimate, variant / torch_xla |", "|---|---|---|---|---|---|---|"]
        for (m, s), abl in records.items():
            v = _variant(abl, name)
            if v is None:
                why = abl.skipped.get(name, "not asked")
                out.append(f"| {NAMES[m]} {s} | none: {why} | - | - | - | - | - |")
                continue
            if v.error:
                out.append(f"| {NAMES[m]} {s} | rewrite failed: {v.error} | - | - | - | - | - |")
                continue
            c = v.check
            check = "-" if c is None else (f"not compared: {c.error}" if c.error else
                                          f"{c.max_abs:.2g} (atol {c.atol:g}, rtol {c.rtol:g}) "
                                          f"{'ok' if c.ok else 'FAILED, not timed'}")
            found = ", ".join(f"{k} {b}->{a}" for k, (b, a) in v.findings.items()) or "none named"
            out.append(f"| {NAMES[m]} {s} | {sum(v.sites.values())} | {found} | {check} | {_ratio(v.change)} | "
                       f"{_share(v)} | {_estimate(abl, v)} |")
        out.append("")
    out += ["### All three at once", "", "| program | variant / torch_xla steady | share of the gap closed |",
            "|---|---|---|"]
    for (m, s), abl in records.items():
        v = _variant(abl, "all")
        out.append(f"| {NAMES[m]} {s} | {_ratio(v.change) if v else '-'} | {_share(v) if v else '-'} |")
    out += ["", "## What this page does not show", "",
            "- **The study's device.** Every time here is XLA:CPU on this machine; the v6e columns are the TPU "
            "compiler's estimates of one run (compile-only, `ablate --target tpu-v6e`), never measured on a TPU, "
            "and have no interval.",
            "- **What a rewrite cannot reach.** The flatten rewrite leaves products flattened before a transpose "
            "(the backward's attention) and keeps the flattening reshapes themselves beside the products; the "
            "findings column counts what is left. The embedding rewrite keeps JAX's `@_take`/`@_where` call "
            "boundaries out (XLA inlines calls before it optimizes).",
            "- **Host work.** These are compiled executables timed alone; the study's host-side gap is measured in "
            "docs/findings-host.md.", ""]
    return "\n".join(out) + "\n"
