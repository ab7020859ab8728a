"""docs/findings-programs.md: what scanning and rematerializing the layers cost or save, by framework.

Rendered from the records of a sweep of study/grids/findings-programs.toml.
"""
from __future__ import annotations

from pathlib import Path

from .page import Page

PROGRAMS = (("unrolled", False, False), ("remat", False, True), ("scan", True, False), ("scan + remat", True, True))


def _ops(path: Path) -> tuple[int, int]:
    """Static and executed op counts of a capture (the loop's body counted once, then once per trip)."""
    from stackwars_ir.ir import load_one
    from stackwars_ir.ir.stats import module_stats

    s = module_stats(load_one(path))
    return s.ops_inlined, s.ops_executed


def _seconds(path: Path, stage: str) -> float:
    import json

    return json.loads(path.with_suffix(".json").read_text())["run"]["seconds"].get(stage, float("nan"))


def tpu_part(res, facts: dict, dates=None) -> list[str]:
    """The 8B table (a row per program) with, where the records were made on more than one day or by more
    than one commit (page.Dates), each row's record."""
    lines = _tpu_rows(res, facts)
    return _dated(lines, [res.get(("memory", _size(res), "train", "jax", scan, remat)) for _, scan, remat in PROGRAMS],
                  dates)


def _size(res) -> str:
    return next((r.job.request.size for r in res.report.records if r.job.command == "memory"), "8b")


def _dated(lines: list, records: list, dates) -> list:
    """A table's lines with a `record` column (each row's records' marks) where `dates` asks for one;
    `records` holds each row's record (or list of them), in the rows' order."""
    if dates is None or not dates.column:
        return lines
    head = [lines[0] + " record |", lines[1] + " --- |"]
    return head + [line + f" {dates.mark(r if isinstance(r, list) else [r])} |" for line, r in zip(lines[2:], records)]


def _tpu_rows(res, facts: dict) -> list[str]:
    from stackwars_ir.bench.memory import budgets
    from stackwars_ir.common.textfmt import human_bytes

    budget = budgets("v6e-1")[0]
    size = _size(res)
    lines = ["| program | lower (s) | ops static / executed | compile (s) | code | arguments | temporaries | "
             "peak + code (refused: required) | on v6e-1 |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, scan, remat in PROGRAMS:
        rec = res.get(("memory", size, "train", "jax", scan, remat))
        path = res.capture(rec) if rec is not None else None
        if rec is None or rec.result is None or not rec.result.plans or path is None:
            lines.append(f"| {name} | | | | | | | | {'not run yet' if rec is None else 'failed: ' + rec.error} |")
            continue
        (plan,) = rec.result.plans
        static, executed = _ops(path)
        lower = _seconds(path, "jax.jit lower")
        facts[name] = {"lower": lower, "static": static, "executed": executed, "compile": plan.compile_s,
                       "bytes": plan.peak_bytes + (0 if plan.refused else plan.code_bytes) if plan.ok else None}
        if not plan.ok:
            lines.append(f"| {name} | {lower:.1f} | {static} / {executed} | | | | | | failed: {plan.error} |")
            continue
        if plan.refused:  # the compiler would not build it: what it said the program requires
            lines.append(f"| {name} | {lower:.1f} | {static} / {executed} | {plan.compile_s:.1f} | - | - | - | "
                         f"{human_bytes(plan.peak_bytes)} | refused: OOM |")
            continue
        total = plan.peak_bytes + plan.code_bytes
        verdict = "fits" if plan.fits(budget)[0] else "OOM"
        lines.append(f"| {name} | {lower:.1f} | {static} / {executed} | {plan.compile_s:.1f} | "
                     f"{human_bytes(plan.code_bytes)} | {human_bytes(plan.argument_bytes)} | "
                     f"{human_bytes(plan.temp_bytes)} | {human_bytes(total)} | {verdict} |")
    return lines


def _tpu_findings(f: dict) -> list[str]:
    """What the 8B table says, in sentences computed from it."""
    from stackwars_ir.common.textfmt import human_bytes

    u, sc, re_, both = (f.get(k) for k in ("unrolled", "scan", "remat", "scan + remat"))
    out = []
    if u and sc and u["compile"] and sc["compile"]:
        out.append(f"- Scanning the 32 layers lowers the step in {sc['lower']:.1f} s against {u['lower']:.1f} s and "
                   f"compiles it in {sc['compile']:.1f} s against {u['compile']:.1f} s (one lowering and one compile "
                   f"each, beside the sweep's other untimed jobs: figures, not a timed finding), from "
                   f"{sc['static']} ops written against "
                   f"{u['static']}; the loop executes {sc['executed']} ops per step "
                   f"({sc['executed'] / u['executed']:.2f}x the unrolled program's).")
    if u and sc and u["bytes"] and sc["bytes"]:
        more = sc["bytes"] - u["bytes"]
        out.append(f"- The scanned step needs {human_bytes(sc['bytes'])} against {human_bytes(u['bytes'])} unrolled "
                   f"({'+' if more >= 0 else '-'}{human_bytes(abs(more))}): with the parameters one argument per "
                   "tensor, the program stacks every layer's weights (and unstacks their gradients) inside itself, "
                   "a copy of the layers' parameters; a state kept stacked, as MaxText's, would not need it (not "
                   "measured here).")
    if u and re_ and u["bytes"] and re_["bytes"]:
        out.append(f"- Remat changes the unrolled step's memory from {human_bytes(u['bytes'])} to "
                   f"{human_bytes(re_['bytes'])}: at batch 1 the activations are small beside parameters, "
                   "gradients and AdamW's two moments, so recomputing them saves next to nothing here.")
    if sc and both and sc["bytes"] and both["bytes"]:
        out.append(f"- Scan with remat: {human_bytes(both['bytes'])} against scan alone's {human_bytes(sc['bytes'])}.")
    return out


def cpu_part(res, size: str, facts: dict | None = None, dates=None) -> list[str]:
    """The CPU table of one size, each figure the median over the grid's rounds (each round the bench
    again in a fresh worker); `facts` gets (step, program, route) -> each round's compile and steady
    seconds by round, for the ratios across rounds."""
    from statistics import median

    lines = ["| step | program | route | capture (s) | ops static / executed | compile (s) | first run (ms) | "
             "steady (ms) | rounds |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows_of: list = []  # each row's records, for its record column
    for step in ("forward", "train"):
        for name, scan, remat in PROGRAMS:
            for route in ("jax", "torch_xla"):
                recs = res.rounds(("bench", size, step, route, scan, remat))
                if not recs:
                    continue  # not in the grid (remat is a training step's)
                rec = recs[0]
                rows_of.append(recs)
                path = res.capture(rec)
                label = "JAX" if route == "jax" else "torch_xla"
                if path is None:
                    lines.append(f"| {step} | {name} | {label} | | | failed: {rec.error} | | | |")
                    continue
                stage = "jax.jit lower" if route == "jax" else \
                    next(k for k in ("torch_xla training loop (3 steps)", "torch_xla lazy forward (scan_layers)",
                                     "torch_xla to StableHLO") if k in _stages(path))
                static, executed = _ops(path)
                rows = {r.job.round: r.bench_rows()[0] for r in recs if r.bench_rows()}
                ok = {k: e for k, e in rows.items() if e.ok}
                if not ok:
                    why = next((e.error for e in rows.values()), None) or rec.error
                    lines.append(f"| {step} | {name} | {label} | | {static} / {executed} | failed: {why} | | | "
                                 f"{len(recs)} |")
                    continue
                compiles = {k: e.compile_s for k, e in ok.items()}
                steadies = {k: e.timing.steady for k, e in ok.items()}
                failed = f" ({len(recs) - len(ok)} failed)" if len(ok) < len(recs) else ""
                lines.append(f"| {step} | {name} | {label} | {_seconds(path, stage):.2f} | {static} / {executed} | "
                             f"{median(compiles.values()):.2f} | {median(e.timing.first for e in ok.values()) * 1e3:.2f} | "
                             f"{median(steadies.values()) * 1e3:.3f} | {len(ok)}{failed} |")
                if facts is not None:
                    facts[(step, name, label)] = {"compile": compiles, "steady": steadies, "static": static}
    return _dated(lines, rows_of, dates)


def _per_round(x: dict, y: dict) -> list[float]:
    """x / y in each round both hold."""
    return [x[k] / y[k] for k in sorted(set(x) & set(y)) if y[k]]


def _cpu_findings(f: dict) -> list[str]:
    """What the 1B table says, in sentences computed from it: each ratio across the rounds."""
    from statistics import median

    from stackwars_ir.report.sweep import across_rounds

    out = []
    for label in ("JAX", "torch_xla"):
        u, sc = f.get(("forward", "unrolled", label)), f.get(("forward", "scan", label))
        if not (u and sc):
            continue
        out.append(f"- {label}: scanning the 16 layers compiles the forward in {median(sc['compile'].values()):.1f} s "
                   f"against {median(u['compile'].values()):.1f} s unrolled (unrolled / scanned: "
                   f"{across_rounds(_per_round(u['compile'], sc['compile']))}), from {sc['static']} ops written "
                   f"against {u['static']}; a run takes {median(sc['steady'].values()) * 1e3:.0f} ms against "
                   f"{median(u['steady'].values()) * 1e3:.0f} ms (scanned / unrolled: "
                   f"{across_rounds(_per_round(sc['steady'], u['steady']))}).")
    j, t = f.get(("forward", "scan", "JAX")), f.get(("forward", "scan", "torch_xla"))
    if j and t:
        out.append(f"- Scanned, on the same runtime, torch_xla's program against JAX's: a run "
                   f"{across_rounds(_per_round(t['steady'], j['steady']))}; its compile "
                   f"{across_rounds(_per_round(t['compile'], j['compile']))}.")
    return out


class Records:
    """The sweep's records by (command, size, step, route, scan_layers, remat), each key's rounds in
    order, and the capture each read."""

    def __init__(self, report):
        from stackwars_ir.sweep.job_types import route_of

        self.report, self.root, self.by, self.files = report, Path(report.root), {}, {}
        for rec in report.records:
            r = rec.job.request
            if rec.job.command == "capture":
                self.files[(r.model, r.size, r.step, route_of(r), r.scan_layers, r.remat)] = rec
            else:
                self.by.setdefault((rec.job.command, r.size, r.step, route_of(r), r.scan_layers, r.remat),
                                   []).append(rec)
        for recs in self.by.values():
            recs.sort(key=lambda rec: rec.job.round)

    def get(self, key):
        """The (first round's) record of (command, size, step, route, scan, remat), or None where the grid
        has none."""
        recs = self.by.get(key)
        return recs[0] if recs else None

    def rounds(self, key) -> list:
        """Every round's record of the key, in order (one for a job without rounds); [] where none."""
        return list(self.by.get(key, ()))

    def capture(self, rec) -> Path | None:
        """The capture file the job of REC read, or None where its capture failed."""
        from stackwars_ir.sweep.job_types import route_of

        r = rec.job.request
        cap = self.files.get((r.model, r.size, r.step, route_of(r), r.scan_layers, r.remat))
        return self.root / cap.result.file if cap is not None and cap.ok else None


def _weight_bytes(size: str) -> int:
    """LLaMA's float32 parameter bytes at `size`, counted on a model built without memory (meta device)."""
    import torch
    from transformers import LlamaModel

    from stackwars_ir.models import llama

    with torch.device("meta"):
        model = LlamaModel(llama.config(size))
    return 4 * sum(p.numel() for p in model.parameters())


def _stages(path: Path) -> dict:
    import json

    return json.loads(path.with_suffix(".json").read_text())["run"]["seconds"]


def programs_page(res: Records) -> str:
    """docs/findings-programs.md from a sweep's records (read as Records), as text."""
    say = Page()
    print_page(res, say)
    return say.text()


def print_page(res: Records, say: Page) -> None:
    from stackwars_ir.common.textfmt import human_bytes

    v = next((r.stack for r in res.report.records if r.job.command == "memory" and r.ok), None) or \
        next((r.stack for r in res.report.records), {})
    seq = next((r.job.request.seq for r in res.report.records if r.job.command == "memory"), "-")
    from .page import Dates, records_machine, sweep_line

    dates = Dates(r for r in res.report.records if r.job.command != "capture")
    facts: dict = {}
    tpu = tpu_part(res, facts, dates)
    cpu = cpu_part(res, "tiny", dates=dates)
    big: dict = {}
    cpu_1b = cpu_part(res, "1b", big, dates)
    say("# Scanned and rematerialized layers: what they cost or save\n")
    say(f"Generated by `make findings-programs` (study/run/programs.py: a sweep of "
        f"study/grids/findings-programs.toml, then this page from its records) on "
        f"{records_machine(res.report.records)}, no TPU and no GPU "
        f"(jax {v.get('jax')}, torch {v.get('torch')}, torch_xla {v.get('torch_xla')}, libtpu "
        f"{v.get('libtpu') or 'not installed'}). The programs are `capture --scan-layers` and `--remat` "
        f"(docs/capture.md): JAX's `lax.scan` and `jax.checkpoint` per layer, torch_xla's `scan_layers` and "
        f"checkpoint per layer; parameters stay one argument per tensor, stacked inside the program. "
        f"{sweep_line(res.report)}.\n")
    if dates.column:
        say(dates.legend() + "\n")
    say(f"## LLaMA-3.1-8B training step on one TPU v6e chip (JAX, bfloat16, batch 1, seq {seq})\n")
    say("Abstract captures (shapes only, no parity), compiled by libtpu for one v6e chip without a TPU; the "
        "plan is XLA's buffer assignment: arguments + outputs - aliased + temporaries, plus generated code, "
        "against v6e-1's 32 GiB. torch_xla needs weights for a capture and torchax cannot take these options "
        "(docs/capture.md), so this part is JAX's alone.\n")
    say("\n".join(tpu) + "\n")
    say("\n".join(_tpu_findings(facts)) + "\n")
    say("## LLaMA tiny on XLA CPU (jaxlib), JAX and torch_xla\n")
    say("Captures with seeded weights, parity-checked against PyTorch eager, each compiled and run by "
        "jaxlib's XLA CPU (`bench`): the IR's own cost, one runtime. Each figure is the median over the "
        "rounds (the same bench again in a fresh worker, round by round; `rounds` in the grid), and each ratio "
        "below is taken per round with its 95% interval across the rounds. At tiny size (2 layers) a loop "
        "cannot save much compile time; its plumbing shows.\n")
    say("\n".join(cpu) + "\n")
    if len(cpu_1b) > 2:
        say("## LLaMA-3.2-1B forward on XLA CPU (jaxlib), JAX and torch_xla (batch 1, seq 128)\n")
        weights = _weight_bytes("1b")
        say(f"The same, at a published size whose float32 weights ({human_bytes(weights)}) fit this machine: "
            f"16 layers, unrolled and scanned. Its training step's state (weights, gradients and AdamW's two "
            f"moments: {human_bytes(4 * weights)}) and LLaMA-3.1-8B's weights ({human_bytes(_weight_bytes('8b'))}) "
            "do not, so the CPU table stops here.\n")
        say("\n".join(cpu_1b) + "\n")
        say("\n".join(_cpu_findings(big)) + "\n")

