"""docs/findings-host.md: the study's table predicted for its TPU v6e from host phases and estimates.

The host phases and the v6e estimates are the records `make findings-host` makes.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from .page import machine_line, machine_text

WORKLOADS = ("gemm", "ffn", "mha", "gpt2", "bert", "resnet50")
TARGET = "tpu-v6e"
NAMES = {"gemm": "GEMM", "ffn": "FFN", "mha": "MHA", "gpt2": "GPT-2 small", "bert": "BERT-base",
         "resnet50": "ResNet-50"}


# What a PyTorch user can run instead of torch_xla's lazy tensors (issue 54, item 7), timed beside it and
# jax.jit with their host phases: the study's models, forward (the routes time forwards only for now).
ROUTES_OF = ("gpt2", "bert", "resnet50")
ROUTE_BASELINES = "jax,torch_xla,torch_xla_dynamo,torchax"
ROUTE_KINDS = (("jax.jit", "jax.jit"), ("torch_xla lazy", "torch_xla lazy"),
               ("torch_xla through dynamo", "torch_xla dynamo"), ("torchax's jitted call", "torchax jit"))


def route_tables(workloads, results: Path, level: str = "##") -> list[str]:
    """What a PyTorch user can do about it: each PyTorch runtime's host work per steady step here against
    jax.jit's and torch_xla lazy's (one bench of the four, interleaved in one job), and its steady step
    predicted for the target on the device estimate of torch_xla's capture (the routes' StableHLO lies
    within about 1.1x of each other on the target's cost model: docs/findings.md section 11)."""
    from stackwars_ir.bench.predict import HOST_FACTOR, host_seconds
    from stackwars_ir.bench.run import BenchReport

    lo, hi = HOST_FACTOR
    out = [f"{level} What a PyTorch user can do about it: other PyTorch routes' host work per step", "",
           "Each workload's forward timed once more with the two other runtimes a PyTorch user can pick (torch_xla "
           "through dynamo, `torch.compile(backend=\"openxla\")`; torchax's jitted call, jax.jit of "
           "`torchax.extract_jax`'s function) beside jax.jit and torch_xla's lazy tensors, each with its host "
           f"phases (`bench W --size base --baselines {ROUTE_BASELINES} --host`). Host work is each steady step's "
           f"phases less what the runtime's own clocks put on the device or the compiler; the {TARGET} step is "
           f"predicted as above (host factor {lo:g}-{hi:g}x, overlapped to serial) on the estimate of torch_xla's "
           "capture for every PyTorch route.", "",
           "| workload | runtime | steady here ms | host work per step here ms | host work / jax.jit's (one job) | "
           f"predicted {TARGET} steady ms | study's PyTorch steady ms |",
           "|---|---|---:|---:|---:|---:|---:|"]
    from .table import STUDY

    rows_shown = 0
    for w in workloads:
        try:
            bench = BenchReport.from_json(json.loads((results / f"{w}-routes.json").read_text()))
            v6e = BenchReport.from_json(json.loads((results / f"{w}-{TARGET}.json").read_text()))
        except (OSError, ValueError, KeyError):
            continue
        est = next((e for _, e in v6e.rows if e.label.endswith("/torch-torch_xla.mlir") and e.ok and e.profile), None)
        rows = {kind: next((e for _, e in bench.rows if e.kind == kind), None) for _, kind in ROUTE_KINDS}
        base = rows["jax.jit"]
        base_host = host_seconds(base.host.phases)[0] if base is not None and base.ok and base.host else None
        for name, kind in ROUTE_KINDS:
            e = rows[kind]
            if e is None:
                continue
            if not e.ok or not e.host:
                out.append(f"| {NAMES.get(w, w)} | {name} | failed: {' '.join((e.error or 'no host phases').split())[:160]} "
                           "| | | | |")
                continue
            h = host_seconds(e.host.phases)[0]
            device = est.profile.wall_s if est is not None and kind != "jax.jit" else None
            pred = f"{ms(max(h * lo, device))}-{ms(h * hi + device)}" if device is not None else "-"
            study = STUDY.get((w, "pytorch"))
            out.append(f"| {NAMES.get(w, w)} | {name} | {ms(e.timing.steady)} | {ms(h)} | "
                       f"{h / base_host:.1f}x | {pred} | {ms(study[2] / 1e3) if study and kind != 'jax.jit' else '-'} |"
                       if base_host else
                       f"| {NAMES.get(w, w)} | {name} | {ms(e.timing.steady)} | {ms(h)} | - | {pred} | - |")
            rows_shown += 1
    if not rows_shown:
        return out[:2] + ["Not measured yet: `make findings-host` times them (records `W-routes.json`).", ""]
    return out + ["", "One job per workload, each figure its median steady run's: the ratios carry no interval "
                  "across repeated jobs yet, so none of them is a finding; they say where to look next (in this "
                  "job, the lazy tensors' host work per step is the largest of the PyTorch routes on every "
                  "workload).", ""]


def cells_of(workload: str, results: Path):
    """The predicted cells of WORKLOAD from its two records, or why there are none."""
    from stackwars_ir.bench.predict import predict, predict_unsynced
    from stackwars_ir.bench.run import BenchReport

    try:
        bench = BenchReport.from_json(json.loads((results / f"{workload}-bench.json").read_text()))
        v6e = BenchReport.from_json(json.loads((results / f"{workload}-{TARGET}.json").read_text()))
    except (OSError, ValueError, KeyError) as e:
        return None, f"no record ({type(e).__name__})"
    out, why = [], []
    for framework, native, stem in (("jax", "jax.jit", "jax.mlir"), ("pytorch", "torch_xla lazy", "torch-torch_xla.mlir")):
        row = next((e for _, e in bench.rows if e.kind == native and e.ok and e.host), None)
        est = next((e for _, e in v6e.rows if e.label.endswith("/" + stem) and e.ok and e.profile), None)
        if row is None or est is None:
            why.append(f"{framework}: {'no host phases' if row is None else 'no ' + TARGET + ' estimate'}")
            continue
        counters = row.timing.counters if row.timing else {}
        compiles = {run: min(1, (counters.get(run) or {}).get("compiles", 0)) for run in ("first", "second")}
        out += predict(workload, framework, row.host, est.profile.wall_s, est.compile_s or 0.0, compiles)
        if framework == "pytorch":
            out += predict_unsynced(workload, row.host)
        out_counts = {run: (counters.get(run) or {}).get("compiles", 0) for run in ("first", "second")}
        why.append(f"{framework}: graphs compiled here in the first and second runs {out_counts['first']}, "
                   f"{out_counts['second']}; {TARGET} run estimate {est.profile.wall_s * 1e3:,.3f} ms, its compile "
                   f"here {est.compile_s:,.1f} s; steady here {row.timing.steady * 1e3:,.1f} ms")
    return out, "; ".join(why)


def ms(s: float) -> str:
    return f"{s * 1e3:,.3f}" if s < 0.01 else f"{s * 1e3:,.1f}"


MADE = "made.json"  # beside the records: each one's day and commit (study/run/host.py writes it)


def record_files(results: Path) -> list[Path]:
    """The bench records in RESULTS (W-bench.json, W-tpu-v6e.json, W-routes.json), not their index."""
    return sorted(p for p in results.glob("*.json") if p.name != MADE)


def made_on(results: Path) -> str:
    """The machine the records in RESULTS were measured on (each bench record's own `machine`), not the
    one rendering them; every kind named if they differ; this machine's where none says."""
    kinds = []
    for p in record_files(results):
        try:
            m = json.loads(p.read_text()).get("machine") or {}
        except (OSError, ValueError):
            continue
        if m.get("processor"):
            kinds += [machine_text(m)] if machine_text(m) not in kinds else []
    if not kinds:
        return machine_line()
    return kinds[0] if len(kinds) == 1 else "more than one kind of machine: " + "; ".join(kinds)


def record_dates(results: Path) -> list[str]:
    """The days (and commits) the bench records in RESULTS were made on: each record's entry in the
    folder's made.json (study/run/host.py writes it), its file's date where it has none."""
    try:
        made = json.loads((results / MADE).read_text())
    except (OSError, ValueError):
        made = {}
    seen = set()
    for p in record_files(results):
        entry = made.get(p.name) or {}
        day = entry.get("date") or datetime.date.fromtimestamp(p.stat().st_mtime).isoformat()
        seen.add(f"{day} (commit {entry['commit']})" if entry.get("commit") else f"{day} (file date)")
    return sorted(seen)


def host_page(workloads, results: Path, protocols: list[str] = ()) -> str:
    """docs/findings-host.md from the records in RESULTS (each record's day and commit from the folder's
    index), the same text whenever, wherever and by whichever commit it is rendered:
    the study's timing protocols measured (PROTOCOLS: report.findings.protocols.protocols_section's
    lines), then the previous prediction of the study's table from one bench job per workload."""
    from stackwars_ir.bench.predict import HOST_FACTOR

    dates = record_dates(results)
    lo, hi = HOST_FACTOR
    out = ["# The study's table: its timing protocols measured, and its cells predicted for its device", "",
           "Generated by `make findings-host` (study/run/host.py). Nothing is "
           "recomputed on --render; every number is a measurement here or a prediction for a TPU v6e from one; "
           "none was run on a TPU.", ""]
    if protocols:
        out += list(protocols) + [""]
    out += ["## The previous prediction: one bench job per workload", "",
           f"Records made on **{made_on(results)}**, {', '.join(dates) or 'never'} (each workload's record, kept "
           "in benchmarks/records/host): one `bench --host` job per workload, host "
           "phases timed beside the device's run on the same cores, with no interval. Kept so that the swing "
           "between regenerations can be seen; the protocols above replace it as the page's measurement.", "",
           "### How a cell is predicted", "",
           "- **Host work** is measured here: each native runtime's steady step, first and second runs, split into "
           "phases by `bench --host` (torch_xla lazy: the Python forward that traces the lazy graph and its sync; "
           "jax.jit: its call), less what the runtime's own clocks put on the device (ExecuteTime) or the "
           "compiler (CompileTime, jax's backend compile).",
           f"- **The host factor** (an assumption, not measured): a TPU host does this machine's host work in "
           f"{lo:g} to {hi:g} times its time here.",
           f"- **The device's run** is the {TARGET} compiler's estimate of the captured StableHLO (the JAX capture "
           "for jax.jit, torch_xla's for PyTorch; `bench --target`: kernels' cycles where the compiler wrote them, "
           "memory lower bounds where not, the longer of the kernels and the async copies).",
           f"- **A compile** is libtpu's compile of that capture for the {TARGET}, timed on this host (compile-only, "
           "libtpu's start-up outside the clock), scaled by the host factor; counted once for a run in which the "
           "runtime compiled here.",
           "- On this CPU client a small program may run inside jax's call (PJRT's CPU client runs cheap "
           "executables inline): for the basic operations the dispatch measured here may hold some of the "
           "device's work.",
           "- **Steady state**: from overlapped (the host prepares step N+1 while the device runs step N: the longer "
           "of the two) to serial (each step waits for its result: the sum). **First and second runs**: serial.",
           "- A cell's range spans both; the study's cell is *within 2x* when it lies between half the low end "
           "and twice the high end.",
           "- **pytorch, not synced**: the same PyTorch row had the study timed torch_xla's Python step without "
           "its sync (the lazy graph traced, never compiled nor run): each run's tracing alone, scaled. A "
           "protocol tested against the study's cells, not a claim about how the study timed.", ""]
    return "\n".join(out + cell_tables(workloads, results, level="###") + [""] +
                     route_tables([w for w in workloads if w in ROUTES_OF], results, level="###")) + "\n"


def cell_tables(workloads, results: Path, level: str = "##") -> list[str]:
    """Each workload's table of predicted cells, then the summary: the cells within 2x and by how much
    the others miss (docs/findings-host.md, and docs/findings.md's section on the study's table)."""
    from .table import factor_needed, study_s, within
    from stackwars_ir.bench.predict import HOST_FACTOR

    out, total, inside = [], 0, 0
    misses = []
    for w in workloads:
        cells, why = cells_of(w, results)
        out += [f"{level} {NAMES.get(w, w)} (`{w}`, base)", ""]
        if not cells:
            out += [f"Not predicted: {why}.", ""]
            continue
        out += ["| framework | run | study ms | predicted ms | within 2x | parts (ms: host here, device estimated) |",
                "|---|---|---:|---:|---|---|"]
        for c in cells:
            s = study_s(c)
            ok = within(c)
            total += ok is not None
            inside += bool(ok)
            if ok is False:
                far = s / c.high_s if s > c.high_s else c.low_s / s
                compile_s = next((v for x in cells if x.framework == c.framework and x.run == "first"
                                  for n, v in x.parts if n.startswith("compile for the target")), None)
                hint = ""
                if s > c.high_s and compile_s and compile_s * HOST_FACTOR[0] / 2 <= s <= compile_s * HOST_FACTOR[1] * 2:
                    hint = (f": of the order of a compile for the target ({ms(compile_s)} ms here), which this run of "
                           "the prediction does not hold (the runtime compiled nothing in it here)")
                need = factor_needed(c)
                fails = ("; no host factor reaches it: the device's estimate alone is above it" if need is None else
                         f"; the host factor it takes: {need:,.0f}" if need >= 10 else
                         f"; the host factor it takes: {need:.2g}")
                fails += f" (assumed {HOST_FACTOR[0]:g}-{HOST_FACTOR[1]:g})" * (need is not None)
                misses.append(f"{NAMES.get(w, w)} {c.framework} {c.run}: study {ms(s)} ms, predicted "
                              f"{ms(c.low_s)}-{ms(c.high_s)} ms ({far:,.1f}x {'above' if s > c.high_s else 'below'})"
                              + fails + hint)
            parts = "; ".join(f"{n} {ms(v)}" for n, v in c.parts)
            out.append(f"| {c.framework} | {c.run} | {ms(s) if s is not None else '-'} | {ms(c.low_s)}-{ms(c.high_s)} "
                       f"| {'yes' if ok else 'no' if ok is False else '-'} | {parts} |")
        out += ["", f"Inputs: {why}.", ""]
    out += [f"{level} Summary", "", f"{inside} of {total} predicted cells lie within 2x of the study's (each of the "
            "study's PyTorch cells is predicted twice: synced and not synced)."]
    if misses:
        out += ["", "The cells outside it, and by how much. For each, the assumption that fails if every measured "
                "and estimated input holds is the host factor: the factor it would take (the study's host doing this "
                "machine's host work, compiles included, in that many times its time here, each step serial) is "
                "printed beside the assumed range. A factor far outside it points past the host's speed to what the "
                "prediction leaves out: the study's timing protocol, its batch and sequence sizes, a compile the "
                "runtime did there and not here:", ""]
        out += [f"- {m}" for m in misses]
    return out
