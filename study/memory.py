"""docs/findings-memory.md: the study's OOM table recomputed by the TPU v6e compiler.

Rendered from the records of a sweep of study/grids/findings-memory.toml.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .page import Dates, Page, records_machine, sweep_line

# The study's names of the OOM rows that have an adapter here (the grid says which are measured, how,
# and in which order; another model or size is titled MODEL-SIZE); the others are named as not measured.
TITLES = {("vit", "base"): "ViT-B/16", ("gpt_neo", "1.3b"): "GPT-Neo 1.3B", ("llama", "8b"): "LLaMA-3.1 8B"}
MISSING: list = []
ROUTES = ("jax", "torch-torchax", "torch-torch_xla")
DTYPES = ("float32", "bfloat16")  # the study does not say which: a row is read in each the grid plans


@dataclass(frozen=True)
class Cell:
    """One plan's cell: its text, whether it fits ("fits", "oom" or None where there is no plan), the
    bytes it needs, and whether its capture had weights (parity-checked) or shapes only."""

    text: str
    state: str | None = None
    need: int = 0
    abstract: bool = True
    record: object = None  # the sweep record the cell comes from (its date and commit: page.Dates)


def _route(req) -> str:
    return "jax" if req.framework == "jax" else f"torch-{req.exporters[0]}"


def _plan(rec):
    """The record's plan (a MemoryPlan), or the cell's text where there is none."""
    from stackwars_ir.sweep.execute import NOT_RUN, OVER_MEMORY

    if rec.error == NOT_RUN:
        return "not run yet"
    if rec.result is not None and rec.result.plans:
        return rec.result.plans[0]
    if OVER_MEMORY in rec.error:  # refused before it started, or its capture was
        return OVER_MEMORY + rec.error.split(OVER_MEMORY, 1)[1]
    return f"failed: {rec.error}"


def _cell(plan, budget, abstract: bool) -> Cell:
    from stackwars_ir.common.textfmt import human_bytes

    if isinstance(plan, str):
        return Cell(plan, abstract=abstract)
    if not plan.ok:
        return Cell(f"failed: {plan.error}", abstract=abstract)
    need = plan.peak_bytes + plan.code_bytes
    weights = "" if abstract else " (weights)"
    if plan.fits(budget)[0]:
        return Cell(f"fits, {human_bytes(need)}{weights}", "fits", need, abstract)
    how = "refused by the compiler: " if plan.refused else ""
    return Cell(f"OOM, {how}needs {human_bytes(need)}{weights}", "oom", need, abstract)


def tables(report, budget) -> tuple[dict, dict, dict]:
    """The one-chip cells by (title, step, batch, dtype, route), the sliced plans by (title, chips, route)
    (and their dtype under (title, "dtype")), and how each model was captured, by title: its size,
    batches, dtypes, and per route the captures' kinds (abstract or with weights)."""
    from stackwars_ir.workload.mesh import Mesh

    cells, sliced, how = {}, {}, {}
    for rec in report.records:
        r = rec.job.request
        title = TITLES.get((r.model, r.size), f"{r.model}-{r.size}")
        if rec.job.command != "memory":
            continue
        if r.mesh:
            sliced[(title, Mesh.parse(r.mesh).devices, _route(r))] = _plan(rec)
            sliced[(title, "dtype")] = r.dtype
            continue
        cells[(title, r.step, r.batch, r.dtype, _route(r))] = replace(_cell(_plan(rec), budget, r.abstract), record=rec)
        h = how.setdefault(title, {"size": r.size, "batches": set(), "dtypes": set(), "kinds": {}})
        h["batches"].add(r.batch)
        h["dtypes"].add(r.dtype)
        h["kinds"].setdefault(_route(r), set()).add((r.abstract, r.dtype))
    for what, why in report.refused:  # "llama-8b train torch_xla": not a job, and why
        name, step, route = what.split()[:3]
        model, size = name.split("-", 1)  # a size holds no "-"; a model name may not either
        title = TITLES.get((model, size), name)
        h = how.get(title)
        for batch in sorted(h["batches"]) if h else ():
            for dtype in h["dtypes"]:
                cells.setdefault((title, step, batch, dtype, f"torch-{route}"), Cell(f"not captured: {why}"))
    return cells, sliced, how


def memory_page(report) -> str:
    """docs/findings-memory.md from a sweep's records (SweepReport), as text."""
    say = Page()
    print_page(report, say)
    return say.text()


def _captured(kinds: dict) -> str:
    """How each route's plans were captured, in words: 'jax and torch-torchax from shapes (float32,
    bfloat16); torch-torch_xla with seeded weights, parity-checked (float32)'."""
    ways: dict = {}
    for route in ROUTES:
        for weights in (False, True):
            dtypes = tuple(d for d in DTYPES if (not weights, d) in kinds.get(route, ()))
            if dtypes:
                ways.setdefault((weights, dtypes), []).append(route)
    return "; ".join(f"{' and '.join(routes)} {'with seeded weights, parity-checked against PyTorch eager' if w else 'from shapes alone (abstract: no weights, no parity)'} ({', '.join(d)})"
                     for (w, d), routes in ways.items())


def print_page(report, say: Page) -> None:
    from stackwars_ir.bench.memory import budgets
    from stackwars_ir.common.textfmt import human_bytes

    budget = budgets("v6e-1")[0]
    cells, sliced, how = tables(report, budget)
    # The versions that planned (a capture reused from before libtpu was installed has none of libtpu's).
    v = next((r.stack for r in report.records if r.ok and r.job.command == "memory"), {})
    seqs = sorted({rec.job.request.seq for rec in report.records if rec.job.request.abstract})
    say("# The study's OOM rows, recomputed by the TPU v6e compiler\n")
    say(f"Generated by `make findings-memory` (study/run/memory.py, grid "
        f"study/grids/findings-memory.toml) on {records_machine(report.records)}, no TPU: each "
        f"executable compiled for one TPU v6e chip by libtpu {v.get('libtpu')} (jax "
        f"{v.get('jax')}, torch {v.get('torch')}, torchax {v.get('torchax')}, transformers "
        f"{v.get('transformers')}), from the captures named under each model (abstract ones at seq "
        f"{', '.join(map(str, seqs))}), against v6e-1's {human_bytes(budget.bytes)} (the study's device: 32 GB of "
        f"HBM). A cell is the compiler's plan: arguments + outputs - aliased + temporaries + code; 'refused' "
        f"means the compiler would not build it and the figure is the memory it said the program requires; "
        f"'(weights)' marks a plan from a capture with weights. The study does not name its dtype, so a model "
        f"is planned in each dtype its routes can be captured in. The training step is loss, backward and "
        f"AdamW (optax), with no buffer donated. {sweep_line(report)}.\n")
    dates = Dates(r for r in report.records if r.job.command == "memory")
    if dates.column:
        say(dates.legend() + "\n")
    for title, h_ in how.items():
        batches, dtypes = sorted(h_["batches"]), [d for d in DTYPES if d in h_["dtypes"]]
        say(f"## {title}\n")
        say(f"Size {h_['size']}: {_captured(h_['kinds'])}.\n")
        extra = " record |" if dates.column else ""
        say("| step | batch | dtype | " + " | ".join(ROUTES) + " |" + extra)
        say("| --- | ---: | --- | " + " | ".join("---" for _ in ROUTES) + " |" + (" --- |" if extra else ""))
        notes: dict = {}
        for step in ("forward", "train"):
            for batch in batches:
                for dtype in dtypes:
                    got = [cells.get((title, step, batch, dtype, r), Cell("-")) for r in ROUTES]
                    if all(c.text == "-" for c in got):
                        continue  # a dtype the grid plans for this model's other step only
                    mark = f" {dates.mark(c.record for c in got)} |" if extra else ""
                    say(f"| {step} | {batch} | {dtype} | " + " | ".join(short(c, notes) for c in got) + " |" + mark)
        say()
        for text, n in notes.items():
            say(f"[{n}] {text}" + ("  " if n < len(notes) else ""))
        if notes:
            say()
        say(reading(title, cells, batches, dtypes, budget, notes))
        say()
    print_slices(cells, sliced, budget, say)
    if MISSING:
        say("## Not measured here\n")
        say(", ".join(MISSING) + ": no adapter yet, so its row is neither confirmed nor refuted by this page.")


def short(cell: Cell, notes: dict) -> str:
    """A cell as its table shows it: a plan's figure, or what stopped it in a word or two and the number
    of the note below the table that says why (each reason written once)."""
    if cell.state or cell.text in ("-", "not run yet"):
        return cell.text
    n = notes.setdefault(cell.text, len(notes) + 1)
    return f"{cell.text.split(':')[0]} [{n}]"


def print_slices(cells: dict, sliced: dict, budget, say: Page) -> None:
    """The training steps per v6e slice with FSDP, and the smallest slice each route fits on."""
    from stackwars_ir.common.textfmt import human_bytes

    plans = {k: p for k, p in sliced.items() if k[1] != "dtype"}
    if not plans:
        return
    titles = list(dict.fromkeys(t for t, _, _ in plans))
    chips_ = tuple(sorted({n for _, n, _ in plans}))
    dtypes = sorted({sliced[(t, "dtype")] for t in titles})

    say("## Training steps per v6e slice (FSDP)\n")
    say(f"The training step (batch 1, seq as above, {', '.join(dtypes)}, abstract) captured with `--mesh fsdp=N` "
        f"and compiled for N chips of a v6e slice: each chip's plan (arguments + outputs - aliased + temporaries "
        f"+ code) against one chip's {human_bytes(budget.bytes)}. FSDP as `--mesh` places it (docs/sharding.md): "
        "each parameter and its AdamW moments split along their largest dimension N divides, the batch on fsdp "
        "where N divides it (batch 1: whole). The 1-chip column is the table above.\n")
    routes = ("jax", "torch-torchax")
    say("| model | route | " + " | ".join(f"v6e-{n}" for n in (1,) + chips_) + " | smallest slice that fits |")
    say("| --- | --- | " + " | ".join("---" for _ in (1,) + chips_) + " | --- |")
    for title in titles:
        for route in routes:
            row, smallest = [], None
            one = cells.get((title, "train", 1, sliced[(title, "dtype")], route), Cell("-"))
            row.append({"fits": "fits", "oom": "OOM"}.get(one.state, one.text)
                       + (f" ({human_bytes(one.need)})" if one.state else ""))
            if one.state == "fits":
                smallest = 1
            for n in chips_:
                p = plans.get((title, n, route), "not planned")
                if isinstance(p, str) or not p.ok:
                    row.append(p if isinstance(p, str) else f"failed: {p.error}")
                    continue
                need = p.peak_bytes + p.code_bytes
                fits = p.fits(budget)[0]
                row.append(f"{'fits' if fits else 'OOM'} ({human_bytes(need)} per chip)")
                if fits and smallest is None:
                    smallest = n
            say(f"| {title} | {route} | " + " | ".join(row) + f" | {f'v6e-{smallest}' if smallest else 'none here'} |")
    say()
    for title in titles:
        needs = {(n, r): p.peak_bytes + p.code_bytes for (t, n, r), p in plans.items()
                 if t == title and not isinstance(p, str) and p.ok}
        for n in chips_:
            if (n, "jax") in needs and (n, "torch-torchax") in needs:
                a, b = needs[(n, "jax")], needs[(n, "torch-torchax")]
                say(f"- {title} on v6e-{n}: JAX needs {human_bytes(a)} per chip, torchax {human_bytes(b)} "
                    f"({(b - a) / a:+.1%}, torchax against JAX).")
    say()


def _route_line(title: str, step: str, route: str, cells: dict, batches, dtypes, budget, notes=None) -> tuple[str, set]:
    """One route's plans of one step in words ('float32: fits at batch 1, 8 (largest 29.1 GiB, 2.9 GiB
    to spare); bfloat16: ...'), and the states its dtypes reached ({'fits'}, {'oom'}, both, or none)."""
    from stackwars_ir.common.textfmt import human_bytes

    parts, states = [], set()
    for dtype in dtypes:
        got = [(b, cells.get((title, step, b, dtype, route))) for b in batches]
        planned = [(b, c) for b, c in got if c is not None and c.state]
        if not planned:
            why = next((short(c, notes) if notes is not None else c.text for _, c in got if c is not None), "not planned")
            parts.append(f"{dtype}: {why}")
            continue
        fit = [b for b, c in planned if c.state == "fits"]
        oom = [b for b, c in planned if c.state == "oom"]
        largest = max(c.need for _, c in planned if c.state == "fits") if fit else 0
        text = []
        if fit:
            text.append(f"fits at batch {', '.join(map(str, fit))} (largest {human_bytes(largest)}, "
                        f"{human_bytes(budget.bytes - largest)} to spare)")
        if oom:
            text.append(f"OOM at batch {', '.join(map(str, oom))} (needs "
                        f"{human_bytes(min(c.need for _, c in planned if c.state == 'oom'))} at least)")
        unplanned = [b for b, c in got if c is None or not c.state]
        if unplanned:
            text.append(f"not planned at batch {', '.join(map(str, unplanned))}")
        parts.append(f"{dtype}: {'; '.join(text)}")
        states |= {"fits"} if fit else set()
        states |= {"oom"} if oom else set()
        states |= {dtype + " fits"} if fit and not oom else set()
    return "; ".join(parts), states


def reading(title: str, cells: dict, batches, dtypes, budget, notes=None) -> str:
    """The generated reading of one model's table, route by route: which OOM the IR explains, in which
    dtype, and which routes the page says nothing about."""
    out = []
    for step, what in (("forward", "Forward"), ("train", "Training step")):
        verdicts = []
        for route in ROUTES:
            line, states = _route_line(title, step, route, cells, batches, dtypes, budget, notes)
            if not states:
                verdicts.append(f"  - {route}: no plan ({line}): this page says nothing of this route's "
                                f"{'inference' if step == 'forward' else 'training'} memory.")
                continue
            # The study does not name its dtype: the IR is cleared only where it fits in every one it may have run.
            if "oom" not in states and all(f"{d} fits" in states for d in DTYPES):
                why = (f"the IR {route} compiles fits in {' and '.join(DTYPES)}: an OOM of {route} on this model "
                       "comes from outside the executable (a runtime's copies, graphs held at once, the lazy "
                       "loop's own buffers)")
            elif "oom" not in states:
                fit = [d for d in DTYPES if f"{d} fits" in states]
                why = (f"fits in {', '.join(fit)} where planned; {', '.join(d for d in DTYPES if d not in fit)} "
                       f"has no plan, so the IR is cleared in {', '.join(fit)} only")
            elif "fits" in states:
                why = ("fits in one dtype or batch and not in another: whether the IR explains the study's OOM "
                       "depends on the dtype and batch it ran, which it does not state")
            else:
                why = ("OOM wherever planned, in the compiler's own plan" +
                       (": a training step holds the parameters, their gradients and AdamW's two moments, four "
                        "times the weights" if step == "train" else ""))
            verdicts.append(f"  - {route}: {line}. {why[0].upper() + why[1:]}.")
        out.append(f"- {what}:\n" + "\n".join(verdicts))
    return "\n".join(out) if out else "- No cell was computed."
