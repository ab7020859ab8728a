"""The main findings page (docs/findings.md): each claim of the Stack Wars study, from sweep records.

The sweep is of study/grids/findings.toml.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackwars_ir.bench.compare import WARMING
from .page import Page, records_day, records_machine, rounds_ratio_cell, shown, sweep_line

TPU = "tpu-v6e"
MODELS = ("gpt2", "bert", "resnet50")
EXPORTERS = ("torch_xla", "torchax")


NATIVE = ("jax.jit", "torch eager", "torch.compile", "torch_xla lazy")


def backend_line(backend: str) -> str:
    """The XLA backend and the versions that ran it (a GPU page may run another jax than the lock's)."""
    import jax

    from stackwars_ir.common.runtime import runtime

    rt = runtime(backend)
    if backend == "cpu":
        return f"XLA CPU backend (jax {jax.__version__})"
    import torch

    return (f"XLA {rt.platform.upper()} backend on {rt.device.device_kind} (jax {jax.__version__}, "
            f"{rt.client.platform_version}; torch {torch.__version__})")


def counters_text(c) -> str:
    from stackwars_ir.report.text import counters_text as text

    return text(c)


def op_delta(report) -> str:
    from stackwars_ir.diff import counter_delta

    if isinstance(report, str):
        return f"failed: {cell(report)}"
    d = counter_delta(report.b.histogram, report.a.histogram)  # PyTorch - JAX: + is more in PyTorch
    return ", ".join(f"{k.split('.', 1)[-1]} {v:+d}" for k, v in sorted(d.items(), key=lambda kv: (-abs(kv[1]), kv[0]))) \
        or "none"


def ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.3g}"


TRAIN_MODELS = ("gpt2", "bert")


def steady_after(t) -> str:
    """After how many runs (training steps) a row runs within 1.5x of its steady state."""
    for n, secs in ((1, t.second), (2, t.third)):
        if secs is not None and secs <= 1.5 * t.steady:
            return str(n)
    return "more than 2"


def mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f}"


def said(r, key: str) -> str:
    """The diff's summary sentence on KEY (normalization, flattening, embedding), a cell; a failed diff's error."""
    from stackwars_ir.report.sentences import summaries

    return f"failed: {cell(r)}" if isinstance(r, str) else cell(dict(summaries(r)).get(key, "-"))


def cell(text: str) -> str:
    """A table cell: the sentences separate the two sides with " | ", which would end the cell."""
    return str(text).replace("|", "\\|")


def training(a: "Sources", say: Page) -> dict:
    """Section 9: whole training steps (capture --step train), the study's steady-state claim."""
    from stackwars_ir.common.files import read_sidecar

    say("\n## 9. Training steps: steady after one step or two? (the study: JAX after one, PyTorch after two, "
        "\"because PyTorch creates optimizer state lazily during the first step\")\n")
    say(f"One training step (loss, backward, AdamW lr 1e-3 on every parameter) of {', '.join(TRAIN_MODELS)} at "
        f"`{a.size}` size, {a.res.shape('gpt2', text=False)} (`bench MODEL --step train`). GPT-2's loss is next-token "
        "cross-entropy through the tied embedding, BERT's the mean squared error of its output against a "
        "seeded target. The StableHLO rows are the captured second step, run from eager's state after "
        "step 1 (each run computes the same step: there is no loop around them). The native rows run "
        "the user's own loop from the seeded weights and a fresh optimizer: run 1 is step 1, run 2 step 2, "
        "run 3 step 3; their proof is step 1's loss against PyTorch eager's. jax.jit's loop runs twice: as "
        "captured (each step returns new parameters and AdamW moments beside the old) and with both donated "
        "(`jax_donate`: XLA writes the step's results into the buffers it was given, as JAX's docs advise "
        "for a training loop). `steady after` is the first step "
        "after which a step takes at most 1.5x the steady state. `memory` is XLA's memory analysis of the "
        "executable (arguments + outputs + temporaries, MiB).\n")
    say("| model | executable | compile ms | step 1 ms | step 2 ms | step 3 ms | steady ms | spread | steady after "
        "| output | counters (steps 1/2/3/rest) | memory MiB |")
    say("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    lazy, natives, reps = {}, [], {}
    for model in TRAIN_MODELS:
        rep = a.res.bench(model, "train")
        if rep is None:
            continue
        if isinstance(rep, str):
            say(f"| {model} | - | failed: {cell(rep)} | | | | | | | | | |")
            continue
        reps[model] = rep
        merged = a.res.bench_merged(model, "train")
        for (_, e), (_, e_merged) in zip(rep.rows, merged.rows):
            if not e.ok:
                say(f"| {model} | {e.name} | failed: {e.error} | | | | | | | | | |")
                continue
            t, m = e.timing, e.memory
            total = sum(m.get(k, 0) for k in ("argument_bytes", "output_bytes", "temp_bytes")) if m else None
            say(f"| {model} | {e.name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | {ms(t.third)} | "
                f"{ms(t.steady)} | {t.spread:.0%} | {steady_after(t)} | {e.proof.summary if e.proof else '-'} | "
                f"{counters_text(t.counters)} | {mib(total)} |")
            if e.kind != "stablehlo":
                natives.append((model, e_merged, merged.rows, a.res.bench_rounds(model, "train")))
        path = a.res.path(model, "train", "torch-torch_xla")
        side = read_sidecar(path) if path else None
        lazy[model] = side.data["train"]["torch_xla_steps"] if side else []
    say("\nWhat torch_xla's own counters say about its lazy training loop, step by step, as recorded by the "
        "capture (`train.torch_xla_steps` in the sidecar; optimizer state: AdamW's tensors that existed "
        "when the step began; host reads: where the user's step read a device value on the host, "
        "for which torch_xla runs a graph of its own before the step's):\n")
    say("| model | step | graphs | new graphs | graphs executed | optimizer state tensors at start | host reads |")
    say("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for model, steps in lazy.items():
        for st in steps:
            say(f"| {model} | {st['step']} | {st['graphs']} | {st['new graphs']} | {st['executions']} | "
                f"{st.get('optimizer state tensors', '-')} | {cell(host_reads(st))} |")
    for model, steps in lazy.items():
        if steps:
            say(f"\n- {model}: {graphs_reading(steps)}")
    say("\nWhat each native training loop shows (generated from the rows above):\n")
    for model, e, rows, reports in natives:
        say(f"- {model}, {e.name}: {native_reading(e, lazy.get(model, []))}")
        if split := lazy_split(e, rows, reports):
            say(f"  Where its steps go, by torch_xla's own clocks: {split}")
        if donated := donation_reading(e, rows):
            say(f"  Against jax.jit's undonated loop: {donated}")
    training_ir(a, say)
    return reps


def training_ir(a: "Sources", say: Page) -> None:
    """The captured training steps' IR, JAX against each PyTorch route: alignment by phase, and
    the training summary (weight transposes, the backward's transcendental ops, gradient dtypes)."""
    from stackwars_ir.report.sentences import summaries

    say("\nThe captured steps' IR, JAX against each PyTorch route (`stackwars-ir diff jax-train.mlir "
        "torch-*-train.mlir`): blocks aligned per phase (forward, backward, the optimizer's update) and "
        "what the training summary finds. Layers aligned counts the layers whose norm, attention and MLP "
        "blocks all pair, in that phase.\n")
    say("| model | JAX vs | block pairs | by | layers aligned, forward | layers aligned, backward | "
        "optimizer region on both sides | training summary |")
    say("| --- | --- | ---: | --- | ---: | ---: | --- | --- |")
    for model in TRAIN_MODELS:
        for e in EXPORTERS:
            r = a.res.diff(model, "train", e)
            if r is None:
                continue
            if isinstance(r, str):
                say(f"| {model} | {e} | failed: {cell(r)} | | | | | |")
                continue
            layers = {}
            for phase in ("forward", "backward"):
                per = {}
                for d in r.blocks:
                    if d.phase == phase and d.layer and d.role in ("norm", "attention", "mlp"):
                        per.setdefault(d.layer, set()).add(d.role)
                every = {x.layer for x in r.blocks if x.layer}
                layers[phase] = f"{sum(1 for v in per.values() if v >= {'norm', 'attention', 'mlp'})} of {len(every)}"
            update = "yes" if any(d.phase == "update" for d in r.blocks) else "no"
            say(f"| {model} | {e} | {len(r.blocks)} | {r.method} | {layers['forward']} | {layers['backward']} | "
                f"{update} | {cell(dict(summaries(r)).get('training', '-'))} |")


def host_reads(step: dict) -> str:
    reads = step.get("host reads")
    if reads is None:
        return "-"  # a capture from before stackwars-ir recorded them
    return "; ".join(f"{r['read']} x{r['count']}" for r in reads) or "none"


def graphs_reading(steps: list[dict]) -> str:
    """One generated sentence: how many graphs torch_xla runs per step, and what cuts the step."""
    last = steps[-1]
    reads = sum(r["count"] for r in last.get("host reads") or [])
    out = f"torch_xla runs {last['graphs']} graph{'s' if last['graphs'] != 1 else ''} per steady step"
    if "host reads" not in last:
        return out + "."
    if not reads:
        return out + ("; the user's step reads no device value on the host, so the whole step (forward, "
                      "backward, AdamW) is one graph." if last["graphs"] == 1 else "; no host read explains it.")
    where = "; ".join(r["read"] for r in last["host reads"])
    if last["graphs"] == reads + 1:
        return out + (f": {reads} for the device value{'s' if reads != 1 else ''} the step reads on the host "
                      f"({where}), and one for the rest of the step, AdamW included.")
    return out + f", with {reads} host read{'s' if reads != 1 else ''} in the step ({where})."


def lazy_split(e, rows, reports: list = ()) -> str | None:
    """One generated sentence for a torch_xla lazy row: where its runs go by torch_xla's own clocks
    (XLA compiling, XLA executing, the rest tracing and dispatching), beside the same model's
    torch_xla StableHLO capture run on jax's XLA; None for the other rows. `e` and `rows` as section 10
    reads them (Results.bench_merged: profiles merged across rounds); `reports`: every round's report,
    for the kernel ratio's interval across the rounds."""
    c = e.timing.counters if e.timing else {}
    if "execute ms" not in c.get("steady", {}):
        return None
    t = e.timing

    def n(x):
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"

    def split(wall, d):
        rest = wall * 1e3 - d["compile ms"] - d["execute ms"]
        compiled = f"XLA compiling {n(d['compile ms'])} + " if d["compile ms"] else ""
        return f"{n(wall * 1e3)} ms = {compiled}executing {n(d['execute ms'])} + tracing and dispatch {n(rest)}"

    out = f"run 1: {split(t.first, c['first'])}; run 2: {split(t.second, c['second'])}"
    execute = c["steady"]["execute ms"] / c["steady"]["runs"]
    out += (f"; later runs: {n(execute)} ms executing a run on average (ExecuteTime over "
            f"{c['steady']['runs']} runs), against a median run of {n(t.steady * 1e3)} ms")
    captured = next((r for _, r in rows if r.ok and r.kind == "stablehlo" and r.name.startswith("torch-torch_xla")),
                    None)
    if captured is None:
        return out + "."
    ratio = execute / (captured.timing.steady * 1e3)
    what = (f"Its step, captured from the same lazy tensors ({captured.name}), runs in "
            if captured.name.endswith("-train") else
            f"The model's torch_xla export ({captured.name}: torch.export, then torch_xla; the same model, not "
            "the lazy trace) runs in ")
    host = 1 - execute / (t.steady * 1e3)
    # ExecuteTime's mean over the runs can exceed the median run (a slow run pulls a mean, not a median):
    # then the two clocks leave tracing and dispatch no measurable share, and a negative one is not said
    hosted = f"tracing and dispatch take {host:.0%} of the steady run" if host >= 0 else \
        ("tracing and dispatch take no measurable share of the steady run (ExecuteTime's mean, "
         f"{n(execute)} ms, exceeds the median run)")
    out += (f". {what}{n(captured.timing.steady * 1e3)} ms on jax's XLA: torch_xla's own XLA "
            f"(torch_xla {_torch_xla_version()}) takes {ratio:.2f}x that from the call to its results "
            f"(ExecuteTime), and {hosted}")
    mine, theirs = kernel_sum(e.profile), kernel_sum(captured.profile)
    if mine and theirs:
        from .blocks import kernel_ratio_cell

        ratio = kernel_ratio_cell(reports, e.name, captured.name, mine / theirs, "x")
        # ExecuteTime holds more than the kernels: the profiled kernels of the two builds say which part
        # is the build's code (section 10's rows), so the sentence claims no more than both show.
        out += (f". Profiled, its build's kernels take {n(mine * 1e3)} ms a run against jaxlib's {n(theirs * 1e3)} "
                f"ms, {ratio} (section 10), so "
                + (f"{1 - mine * 1e3 / execute:.0%} of its ExecuteTime lies outside the kernels its profiler sees"
                   if mine * 1e3 < execute else "its ExecuteTime is its kernels'"))
    second = c["second"]
    if captured.name.endswith("-train") and second["compiles"] == 1 and captured.compile_s:
        # Step 2 compiles one graph, the one the capture takes (its step 2): the same graph, two XLA builds.
        out += (f". Run 2 compiled one graph, the captured step, in {n(second['compile ms'])} ms; jax's XLA "
                f"compiles it in {n(captured.compile_s * 1e3)} ms "
                f"({second['compile ms'] / (captured.compile_s * 1e3):.2f}x)")
    return out + "."


def kernel_sum(profile) -> float | None:
    """A profile's kernels' time per run, the untraced ones included (section 10's kernel sums), or None."""
    return profile.kernels_sum_s if profile is not None and profile.kernels else None


def _torch_xla_version() -> str:
    import torch_xla.version as v

    return f"{v.__version__}, XLA {v.__xla_gitrev__[:7]}"


def page_faults(t) -> tuple | None:
    """Page faults of steps 1, 2 and 3 and of a steady step (the later runs' mean), or None."""
    faults = t.page_faults()
    return faults if faults and faults[2] is not None else None


def thousands(n: float) -> str:
    return f"{n / 1e3:,.0f}k" if n >= 1e3 else f"{n:.0f}"


def native_reading(e, lazy_steps) -> str:
    """One generated sentence: steady after how many steps, and what the counters say about why."""
    t = e.timing
    n = steady_after(t)
    steps = "step" if n == "1" else "steps"
    out = f"steady after {n} {steps} (step 2 at {t.second / t.steady:.2f}x, step 3 at {t.third / t.steady:.2f}x " \
          f"the steady state, spread {t.spread:.0%})"
    faults = page_faults(t)
    warming = ""
    if faults and n != "1" and faults[1] > WARMING * faults[3]:
        touched = (f"{faults[1] / faults[3]:.1f}x a steady step's fresh memory" if faults[3] else
                   f"fresh memory ({faults[1]:,.0f} page faults) where a steady step touched none")
        warming = (f", and step 2 touched {touched}: its slower steps map memory for the first time (the allocator "
                   "warming up), not compilation.")
    graphs = [t.counters.get(k, {}).get("graphs compiled") for k in ("first", "second", "third", "steady")]
    compiles = [t.counters.get(k, {}).get("compiles") for k in ("first", "second", "third", "steady")]
    if graphs[0] is not None:  # torch.compile: dynamo's counters
        out += f"; graphs dynamo compiled per step 1/2/3/later: {'/'.join(str(g) for g in graphs)}"
    elif compiles[0] is not None:
        out += f"; compiles per step 1/2/3/later: {'/'.join(str(c) for c in compiles)}"
    if faults:
        out += f"; page faults per step 1/2/3/steady: {'/'.join(thousands(f) for f in faults)}"
    if graphs[0] is not None:
        if any(graphs[1:]):
            return out + ": it compiled again after step 1."
        if warming:
            return out + ": every graph at step 1, none after" + warming
        return out + ": every graph at step 1, none after (the backward is AOTAutograd's, AdamW runs eagerly)."
    if compiles[0] is None:
        if warming:
            return out + ": no compiler (PyTorch eager runs op by op)" + warming
        return out + ": no compiler (PyTorch eager runs op by op)."
    if compiles[1]:
        out += ": it compiled a new graph at step 2"
        if lazy_steps and len(lazy_steps) >= 2 and lazy_steps[0].get("optimizer state tensors") == 0:
            out += (f", the step that first finds AdamW's state ({lazy_steps[1]['optimizer state tensors']} "
                    "tensors, created inside step 1's `optimizer.step()`)")
        return out + "."
    if warming:
        return out + ": nothing compiled after step 1" + warming
    if n != "1":
        return out + ": nothing compiled after step 1, so its slower later steps are not compilation."
    return out + ": one compile, at step 1, whose graph every later step reuses."


def donation_reading(e, rows) -> str | None:
    """The donated jax.jit loop against the undonated one of the same run: warm-up, faults, steady state."""
    if e.kind != "jax.jit donated":
        return None
    plain = next((r for _, r in rows if r.ok and r.kind == "jax.jit" and r.timing), None)
    if plain is None or e.timing is None:
        return None
    mine, theirs = page_faults(e.timing), page_faults(plain.timing)
    out = (f"steady after {steady_after(e.timing)} against {steady_after(plain.timing)}; step 2 at "
           f"{e.timing.second / plain.timing.second:.2f}x the undonated loop's step 2, steady state at "
           f"{e.timing.steady / plain.timing.steady:.2f}x")
    if mine and theirs:
        out += (f"; page faults of step 2 {thousands(mine[1])} against {thousands(theirs[1])}, of a steady step "
                f"{thousands(mine[3])} against {thousands(theirs[3])}")
    if e.resident_bytes and plain.resident_bytes:
        out += f"; resident growth {mib(e.resident_bytes)} MiB against {mib(plain.resident_bytes)} MiB"
    return out + "."


class Results:
    """The sweep's records as the page reads them: each request's bench report, diff result and
    capture file, found by model, step, route and batch; a failed job is its one-line error."""

    def __init__(self, report):
        from stackwars_ir.sweep.job_types import BenchJob, route_of
        from stackwars_ir.common.targets import is_tpu

        self.report, self.root = report, Path(report.root)
        self.by: dict = {}  # key -> the record (a timed bench: its first round's)
        self.rounds: dict = {}  # key -> every round's record, in order (the grid's `rounds`)
        self._merged: dict = {}  # (model, step) -> bench_merged's report
        for rec in sorted(report.records, key=lambda rec: rec.job.round):
            r, job = rec.job.request, rec.job
            if isinstance(job, BenchJob):
                what = "estimate" if is_tpu(job.target) else "bench"
                key = (what, r.model, r.step, route_of(r) if what == "estimate" else "", r.batch)
            else:
                key = (job.command, r.model, r.step, route_of(job.against or r), r.batch)
            self.by.setdefault(key, rec)
            self.rounds.setdefault(key, []).append(rec)

    def _get(self, key):
        rec = self.by.get(key)
        if rec is None:
            return None
        if rec.result is not None:
            return rec.result  # a bench with a failed row still has the others
        return rec.error or "no result"

    def _batch(self, model: str, batch) -> int | None:
        return batch if batch is not None else next((k[4] for k in self.by if k[1] == model), None)

    def shape(self, model: str, text: bool = True) -> str:
        """"batch B, sequence S / image I" of MODEL's and ResNet-50's requests (`text`: the images too)."""
        r = {rec.job.request.model: rec.job.request for rec in self.report.records}
        if model not in r:
            return "-"
        out = f"batch {r[model].batch}, sequence {r[model].seq}"
        return out + (f" / image {r['resnet50'].seq}" if text and "resnet50" in r else "")

    def batches(self, model: str) -> list[int]:
        """The batches MODEL's timed jobs ran at."""
        return sorted({k[4] for k in self.by if k[0] == "bench" and k[1] == model})

    def bench(self, model: str, step: str = "forward", batch=None):
        """The BenchReport of the model's timed job (captures and native runtimes), its error, or None."""
        return self._get(("bench", model, step, "", self._batch(model, batch)))

    def bench_merged(self, model: str, step: str = "forward"):
        """bench's report with each profiled row's profile merged across the job's rounds (blocks.across_rounds):
        what section 10 and the sentences quoting it read; bench's error or None as bench gives them."""
        from stackwars_ir.bench.run import BenchReport
        from .blocks import across_rounds

        if (model, step) not in self._merged:
            rep = self.bench(model, step)
            self._merged[model, step] = across_rounds(rep, self.bench_rounds(model, step)) \
                if isinstance(rep, BenchReport) else rep
        return self._merged[model, step]

    def bench_rounds(self, model: str, step: str = "forward", batch=None) -> list:
        """Every round's BenchReport of the model's timed job (the failed rounds left out)."""
        recs = self.rounds.get(("bench", model, step, "", self._batch(model, batch)), [])
        return [rec.result for rec in recs if rec.result is not None]

    def diff(self, model: str, step: str, route: str, batch=None):
        """JAX's capture against ROUTE's (DiffResult), its error, or None where the route has none."""
        return self._get(("diff", model, step, route, self._batch(model, batch)))

    def path(self, model: str, step: str, stem: str, batch=None) -> Path | None:
        """The capture file of STEM (jax, torch-torch_xla, torch-torchax), or None where it failed or none was asked."""
        rec = self.by.get(("capture", model, step, stem.removeprefix("torch-"), self._batch(model, batch)))
        return self.root / rec.result.file if rec is not None and rec.ok else None

    def estimates(self, model: str, step: str):
        """The TPU estimate jobs' rows of MODEL's STEP, JAX's first, as one BenchReport, and each
        row's capture file (None where none was asked); None where no estimate job ran."""
        from stackwars_ir.bench.run import BenchReport

        rows, files, machine = [], [], {}
        for route in ("jax", "torch_xla", "torchax"):
            rec = self.by.get(("estimate", model, step, route, self._batch(model, None)))
            if rec is None:
                continue
            stem = "jax" if route == "jax" else f"torch-{route}"
            if rec.bench_rows():
                got = rec.result
                rows += list(got.rows)
                machine = got.machine
            else:
                from stackwars_ir.bench import Executable

                rows.append((None, Executable(stem, "stablehlo", None, None, error=rec.error)))
            files.append(self.path(model, step, stem))
        return (BenchReport(TPU, tuple(rows), {}, machine), files) if rows else None


def steady_ratio(rep, b: str, a: str, st: dict) -> str:
    """B's steady time over A's with the interval of the bench's verdict on the pair (bench.compare), and
    "indistinguishable" where that interval holds 1 (or the verdict was withheld as too noisy)."""
    if b not in st or a not in st:
        return "-"
    v = next((v for v in rep.verdicts if {v.faster, v.slower} == {a, b}), None)
    if v is None:
        return f"{st[b] / st[a]:.2f} (no interval)"
    lo, hi = (v.low, v.high) if v.slower == b else (1 / v.high, 1 / v.low)
    said = f"{st[b] / st[a]:.2f} ({lo:.2f}-{hi:.2f})"
    return said + (f", {v.withheld}" if v.withheld else ", indistinguishable" if lo <= 1 <= hi else "")


def study_table(say: Page, results: Path) -> None:
    """Section 12: the study's table predicted for its v6e from this machine's host phases and the v6e
    compiler's estimates (`make findings-host`'s records in RESULTS, out/findings-host: rendered here
    without recomputing)."""
    from . import host

    from .protocols import protocols_summary

    say("\n## 12. The study's table, predicted for its TPU v6e from this machine\n")
    summary = protocols_summary(results / "protocols", results)
    if summary:
        say("The study's candidate timing protocols, measured here in rounds of fresh processes where the device "
            "costs nothing (docs/findings-host.md has the method, the graphs compiled per step, host work per "
            "protocol, the fitted host factor and the calibration): the PyTorch/JAX steady ratio per protocol "
            "against the study's, and a verdict per protocol.\n")
        say("\n".join(summary) + "\n")
        say("The previous prediction, one bench job per workload (kept; its host work has no interval):\n")
    if not host.record_files(results):
        say("Not generated: no records under out/findings-host (`make findings-host` measures them, about 25 "
            "minutes).")
        return
    dates = host.record_dates(results)
    say(f"Rendered from `make findings-host`'s records (out/findings-host, made {', '.join(dates)}; not recomputed "
        "by this run); how each cell is predicted, its assumptions (a host factor of 0.5-1x for a TPU host against "
        "this one; from overlapped to serial steps) and its inputs are on docs/findings-host.md. The study's "
        "steady, first and second runs on a v6e, beside each prediction: every PyTorch cell is split into its "
        "parts (host work measured here, the device's run and compile estimated for the v6e), and each cell "
        "outside 2x of the study's says by how much.\n")
    say("\n".join(host.cell_tables(host.WORKLOADS, results, level="###")))
    say("\n" + "\n".join(host.route_tables(host.ROUTES_OF, results, level="###")))


@dataclass(frozen=True)
class Sources:
    """What the main page renders: the sweep's records, the backend that timed them, the grid file, the
    size its models ran at, the project root the page names paths from, and `make findings-host`'s records."""

    res: "Results"
    backend: str
    grid: Path
    size: str
    root: Path
    host_records: Path
    ablation_records: Path | None = None  # `make findings-ablations`'s (section 13)


def findings_page(res: "Results", backend: str, grid: Path, root: Path, host_records: Path,
                  ablation_records: Path | None = None) -> str:
    """docs/findings.md (docs/findings-BACKEND.md off the CPU) from a sweep's records, as text;
    section 13 from `make findings-ablations`' records where ABLATION_RECORDS is given."""
    size = next((r.job.request.size for r in res.report.records if r.job.request.model in MODELS), "base")
    say = Page()
    print_page(Sources(res, backend, grid, size, root, host_records, ablation_records), say)
    return say.text()


def print_page(a: Sources, say: Page) -> None:
    from stackwars_ir import models
    from stackwars_ir.bench.run import BenchReport, crossover
    from stackwars_ir.report.sweep import pending_why
    from .blocks import profiled_gaps, tpu_estimates

    res, size = a.res, a.size
    suffix = "" if a.backend == "cpu" else f"-{a.backend}"
    say("# Findings: the study's claims, measured on the same backend\n")
    say(f"Generated by `make findings` (`python -m study.run.findings`: a sweep of "
        f"study/grids/findings.toml, then this page from its records) on {records_day(res.report.records)}; "
        f"machine: {records_machine(res.report.records)}; {backend_line(a.backend)}. Models at `{size}` size with random weights "
        f"(transformers configs: GPT-2 small, BERT-base, ResNet-50), {res.shape('gpt2')}. "
        "Every number below comes from the sweep's records (when and by which code each was made: the "
        "sweep line below) or, in section 12, from `make findings-host`'s; none is typed by hand.\n")
    if res.report.pending:
        say(f"**Not complete: {len(res.report.pending)} jobs of the grid have not run yet"
            f"{pending_why(res.report)}.**\n")
    # How many jobs this run recomputed (a resumed run: only what had not finished) and the probe each
    # timed job ran first (bench.timing.machine_noise); the timed jobs ran one at a time, nothing beside them.
    say(f"{sweep_line(res.report)}. The timed jobs ran one at a time, nothing beside them.\n")
    benches, diffs, failed = {}, {}, {}
    for model in MODELS:
        got = res.bench(model)
        if isinstance(got, BenchReport):
            benches[model] = got
        elif got is not None:
            failed[model] = got
        for e in EXPORTERS:
            if (d := res.diff(model, "forward", e)) is not None:
                diffs[(model, e)] = d

    say("## 1. LayerNorm lowering (the study: torch_xla uses `batch_norm_training`, JAX spells it out)\n")
    say("| model | JAX vs | normalization blocks |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        say(f"| {model} | {e} | {said(r, 'normalization')} |")
    say("\n## 2. Flattening before dot_general (the study: PyTorch merges batch and sequence)\n")
    say("| model | JAX vs | dot_general inputs |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        if model != "resnet50":
            say(f"| {model} | {e} | {said(r, 'flattening')} |")
    say("\n## 3. Embeddings (the study: iota + call @take against constant indices + gather)\n")
    say("| model | JAX vs | embedding blocks |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        if model != "resnet50":
            say(f"| {model} | {e} | {said(r, 'embedding')} |")
    say("\n## 4. Block alignment\n")
    say("| model | JAX vs | block pairs | by | unmatched in JAX | unmatched in PyTorch |\n| --- | --- | ---: | --- | ---: | ---: |")
    for (model, e), r in diffs.items():
        if isinstance(r, str):
            say(f"| {model} | {e} | failed: {cell(r)} | | | |")
            continue
        say(f"| {model} | {e} | {len(r.blocks)} | {r.method} | {len(r.only_a)} | {len(r.only_b)} |")
    say("\n## 5. Latency: first run, second run, steady state (the study: JAX steady after one run, "
        "PyTorch after two; JAX 11-39x faster at steady state on a TPU)\n")
    say("Steady state is the median after two warm-up runs; spread is (p90 - p10) / median. The StableHLO "
        "rows run on one XLA runtime, so only what XLA compiled of each IR differs between them (a gap "
        "counts only where its interval, section 6, excludes 1); the native rows add each framework's own "
        "runtime. `output` is the proof that the row did the work: the first run's "
        "max abs error against PyTorch eager on the CPU, same weights and inputs. `counters` are the "
        "runtime's own for the first run / the second / all later runs together: a first run that "
        "compiled nothing, or runs that executed nothing, would show there; `page faults` are the "
        "process's minor faults (memory touched for the first time, which the kernel maps and zeroes), "
        "where a slow run that compiled nothing shows an allocator warming up. torch_xla lazy is the "
        "study's PyTorch: its first run traces the lazy graph and compiles it.\n")
    say("| model | executable | compile ms | first ms | second ms | steady ms | spread | second / steady | fusions "
        "| output | counters |")
    say("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for model, why in failed.items():
        say(f"| {model} | - | failed: {cell(why)} | | | | | | | | |")
    for model, rep in benches.items():
        for _, e in rep.rows:
            name = e.name
            if not e.ok:
                say(f"| {model} | {name} | failed: {e.error} | | | | | | | | |")
                continue
            t = e.timing
            say(f"| {model} | {name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | {ms(t.steady)} | "
                f"{t.spread:.0%} | {t.second / t.steady:.2f} | {e.hlo.get('fusions', '-') if e.hlo else '-'} | "
                f"{e.proof.summary if e.proof else '-'} | {counters_text(t.counters)} |")
    rounds = {model: res.bench_rounds(model) for model in benches}
    across = any(len(r) >= 2 for r in rounds.values())
    say("\n## 6. JAX against PyTorch at steady state, same XLA runtime\n")
    if across:
        say("Each ratio taken in each round (the bench again in a fresh worker: the grid's `rounds`) with its 95% "
            "interval across the rounds (runstats.rounds_ratio); a ratio whose interval holds 1 is indistinguishable, "
            "and one from fewer than 3 rounds is a figure, not a finding.\n")
    else:
        say("Each ratio with its 95% interval from the bench's own runs (paired where the rows were timed in "
            "turns in one worker: bench.compare), within this one job: a ratio whose interval holds 1 is "
            "indistinguishable at this machine's noise; none is repeated across independent runs here, so "
            "none is a finding across runs (the grid's `rounds` repeats them).\n")
    say("| model | torch_xla steady / JAX steady | torchax steady / JAX steady |\n| --- | ---: | ---: |")
    for model, rep in benches.items():
        st = {e.name: e.timing.steady for _, e in rep.rows if e.ok and e.kind == "stablehlo"}
        cells = [rounds_ratio_cell(rounds[model], f"torch-{x}", "jax") or steady_ratio(rep, f"torch-{x}", "jax", st)
                 for x in EXPORTERS]
        say(f"| {model} | {cells[0]} | {cells[1]} |")
    say("\nReading: where the interval holds 1, the two IRs' compiled code cannot be told apart on this "
        "backend at this noise; where it does not, the ratio is what XLA made of the two IRs here, on one "
        "runtime. The study's large gaps were measured on a TPU with the frameworks' own runtimes around the "
        "IR.")
    say("\n## 7. Native runtimes against the JAX StableHLO executable, steady state\n")
    say("| model | " + " | ".join(f"{k} / JAX StableHLO" for k in NATIVE) + " |")
    say("| --- | " + " | ".join("---:" for _ in NATIVE) + " |")
    def kind(e):
        return e.kind if e.kind != "stablehlo" else e.name

    for model, rep in benches.items():
        st = {kind(e): e.timing.steady for _, e in rep.rows if e.ok}
        cells = [rounds_ratio_cell(rounds[model], k, "jax", key=kind) or
                 (f"{st[k] / st['jax']:.2f} (one job)" if k in st and "jax" in st else "-") for k in NATIVE]
        say(f"| {model} | " + " | ".join(cells) + " |")
    splits = [(model, split) for model in benches for _, e in res.bench_merged(model).rows
              if (split := lazy_split(e, res.bench_merged(model).rows, rounds[model]))]
    if splits:
        say("\nWhere torch_xla lazy's runs go, by torch_xla's own clocks (CompileTime, ExecuteTime: from the "
            "call until the results are ready); the rest of a run is tracing the model in Python and "
            "dispatching the graph. Beside it, its captured StableHLO on jax's XLA separates the two XLA "
            "builds from the lazy runtime:\n")
        for model, split in splits:
            say(f"- {model}: {split}")
    workloads = [w for w in models.WORKLOADS if res.batches(w)]
    sweep = sorted({b for w in workloads for b in res.batches(w)})
    natives = ", ".join(sorted({e.kind for w in workloads for b in res.batches(w)
                                if isinstance(r := res.bench(w, batch=b), BenchReport)
                                for _, e in r.rows if e.kind != "stablehlo"})) or "none"
    say("\n## 8. Seed 002's basic workloads: batch sweep and crossover\n")
    say(f"Each workload at its `{size}` size (`base`: seed 002's large size: 1,000,000 elements, 2000 x 2000 "
        f"matrices; the skinny multiply is [4096, 1024] x [1024, 8]), at batch {', '.join(map(str, sweep))}, "
        "inputs only (no weights). The StableHLO rows run on one XLA runtime; the native rows are "
        f"{natives}. The crossover says at which batch the faster of the JAX and PyTorch "
        "StableHLO executables changes (seed 000's method; ties within the p10-p90 ranges do not count).\n")
    say("| workload | batch | executable | compile ms | first ms | second ms | steady ms | spread | output |")
    say("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    crossings, deltas = {}, {}
    for w in workloads:
        rows, exporters = [], models.exporters_for(w, EXPORTERS)[0]
        for b in res.batches(w):
            rep = res.bench(w, batch=b)
            if not isinstance(rep, BenchReport):
                say(f"| {w} | {b} | - | failed: {cell(rep)} | | | | | |")
                continue
            rows += rep.rows
            for _, e in rep.rows:
                if not e.ok:
                    say(f"| {w} | {b} | {e.name} | failed: {cell(e.error)} | | | | | |")
                    continue
                t = e.timing
                say(f"| {w} | {b} | {e.name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | "
                    f"{ms(t.steady)} | {t.spread:.0%} | {e.proof.summary if e.proof else '-'} |")
        crossings[w] = crossover(rows, exporters)
        first = res.batches(w)[0]
        deltas[w] = {e: op_delta(d) for e in exporters if (d := res.diff(w, "forward", e, first)) is not None}
    say("\n| workload | crossover (JAX StableHLO against the first PyTorch exporter's) |\n| --- | --- |")
    for w, c in crossings.items():
        say(f"| {w} | {c or '-'} |")
    say("\nWhat the IR differs in (whole-module op counts, JAX minus PyTorch; none: the same ops):\n")
    say("| workload | JAX vs | ops PyTorch - JAX |\n| --- | --- | --- |")
    for w, per in deltas.items():
        for e, delta in per.items():
            say(f"| {w} | {e} | {delta} |")
    train_benches = training(a, say)
    if a.backend == "cpu":
        profiled_gaps(a, benches, train_benches, say)
        tpu_estimates(a, say)
        study_table(say, a.host_records)
        if a.ablation_records is not None:
            from .ablations import ablations_summary

            say("\n## 13. What the IR differences cost, measured by removing them\n")
            for line in ablations_summary(a.ablation_records):
                say(line)
    peaks = next((b.peaks for b in benches.values() if b.peaks), None)
    if peaks:
        say(f"\nMeasured peaks on this machine: {peaks['flops_per_s'] / 1e9:.0f} GFLOP/s "
            f"(f32 GEMM{', TF32 on this GPU' if a.backend == 'gpu' else ''}), {peaks['bytes_per_s'] / 1e9:.1f} GB/s "
            "(f32 add).")
    # The results folder is the run's choice, not the records': the page names neither it nor the machine's path.
    say(f"\nRaw JSON: every job's record under `jobs/` in the sweep's results folder "
        f"(`stackwars-ir sweep {shown(a.grid, a.root)} --results ... --render` lists them; `make findings` "
        f"keeps them in `benchmarks/records/`); the GPT-2 HTML report: `out/gpt2-{size}{suffix}-report.html`.")
    for what, why in res.report.refused:
        say(f"\nNot a job: {what}: {why}")

