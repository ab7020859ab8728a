"""The findings page: each claim of the Stack Wars study, measured by stackwars-ir on this machine.

Captures GPT-2, BERT and ResNet-50 at base size from JAX, torch_xla and torchax (reusing captures
already in --captures), diffs them, times every executable and the native runtimes, and prints
docs/findings.md. Regenerate with `make findings` (several minutes on 2 cores); on a machine with a
GPU, `make findings BACKEND=gpu` writes docs/findings-gpu.md (the CUDA PJRT plugin: `make setup-gpu`).
"""
from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from _common import machine_line

from stackwars_ir.bench.compare import WARMING

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gpt2", "bert", "resnet50")
EXPORTERS = ("torch_xla", "torchax")


NATIVE = ("jax.jit", "torch eager", "torch.compile", "torch_xla lazy")


def backend_line(backend: str) -> str:
    """The XLA backend and the versions that ran it (a GPU page may run another jax than the lock's)."""
    import jax

    from stackwars_ir.runtime import runtime

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

    d = counter_delta(report.b.histogram, report.a.histogram)  # PyTorch - JAX: + is more in PyTorch
    return ", ".join(f"{k.split('.', 1)[-1]} {v:+d}" for k, v in sorted(d.items(), key=lambda kv: -abs(kv[1]))) \
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


def cell(text: str) -> str:
    """A table cell: the sentences separate the two sides with " | ", which would end the cell."""
    return str(text).replace("|", "\\|")


def training(a, suffix: str) -> dict:
    """Section 9: whole training steps (capture --step train), the study's steady-state claim."""
    from stackwars_ir.sweep import bench_model
    from stackwars_ir.files import read_sidecar

    print("\n## 9. Training steps: steady after one step or two? (the study: JAX after one, PyTorch after two, "
          "\"because PyTorch creates optimizer state lazily during the first step\")\n")
    print(f"One training step (loss, backward, AdamW lr 1e-3 on every parameter) of {', '.join(TRAIN_MODELS)} at "
          f"`{a.size}` size, batch 2, sequence 64 (`bench MODEL --step train`). GPT-2's loss is next-token "
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
    print("| model | executable | compile ms | step 1 ms | step 2 ms | step 3 ms | steady ms | spread | steady after "
          "| output | counters (steps 1/2/3/rest) | memory MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    lazy, natives, reps = {}, [], {}
    for model in TRAIN_MODELS:
        rep = bench_model(model, size=a.size, exporters=EXPORTERS, out_dir=a.captures, backend=a.backend,
                          baselines=("jax", "jax_donate", "eager", "inductor", "torch_xla") if a.backend == "cpu"
                          else ("jax", "jax_donate", "eager", "inductor"),
                          timeout=300, show=False, step="train")
        reps[model] = rep
        (ROOT / "out" / f"{model}-{a.size}{suffix}-train-bench.json").write_text(json.dumps(rep.as_json(), indent=1))
        for _, e in rep.rows:
            if not e.ok:
                print(f"| {model} | {e.name} | failed: {e.error} | | | | | | | | | |")
                continue
            t, m = e.timing, e.memory
            total = sum(m.get(k, 0) for k in ("argument_bytes", "output_bytes", "temp_bytes")) if m else None
            print(f"| {model} | {e.name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | {ms(t.third)} | "
                  f"{ms(t.steady)} | {t.spread:.0%} | {steady_after(t)} | {e.proof.summary if e.proof else '-'} | "
                  f"{counters_text(t.counters)} | {mib(total)} |")
            if e.kind != "stablehlo":
                natives.append((model, e, rep.rows))
        side = read_sidecar(a.captures / f"{model}-{a.size}" / "torch-torch_xla-train.mlir")
        lazy[model] = side.data["train"]["torch_xla_steps"] if side else []
    print("\nWhat torch_xla's own counters say about its lazy training loop, step by step, as recorded by the "
          "capture (`train.torch_xla_steps` in the sidecar; optimizer state: AdamW's tensors that existed "
          "when the step began; host reads: where the user's step read a device value on the host, "
          "for which torch_xla runs a graph of its own before the step's):\n")
    print("| model | step | graphs | new graphs | graphs executed | optimizer state tensors at start | host reads |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for model, steps in lazy.items():
        for st in steps:
            print(f"| {model} | {st['step']} | {st['graphs']} | {st['new graphs']} | {st['executions']} | "
                  f"{st.get('optimizer state tensors', '-')} | {cell(host_reads(st))} |")
    for model, steps in lazy.items():
        if steps:
            print(f"\n- {model}: {graphs_reading(steps)}")
    print("\nWhat each native training loop shows (generated from the rows above):\n")
    for model, e, rows in natives:
        print(f"- {model}, {e.name}: {native_reading(e, lazy.get(model, []))}")
        if split := lazy_split(e, rows):
            print(f"  Where its steps go, by torch_xla's own clocks: {split}")
        if donated := donation_reading(e, rows):
            print(f"  Against jax.jit's undonated loop: {donated}")
    training_ir(a)
    return reps


def training_ir(a) -> None:
    """The captured training steps' IR, JAX against each PyTorch route: alignment by phase, and
    the training summary (weight transposes, the backward's transcendental ops, gradient dtypes)."""
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report.sentences import summaries

    print("\nThe captured steps' IR, JAX against each PyTorch route (`stackwars-ir diff jax-train.mlir "
          "torch-*-train.mlir`): blocks aligned per phase (forward, backward, the optimizer's update) and "
          "what the training summary finds. Layers aligned counts the layers whose norm, attention and MLP "
          "blocks all pair, in that phase.\n")
    print("| model | JAX vs | block pairs | by | layers aligned, forward | layers aligned, backward | "
          "optimizer region on both sides | training summary |")
    print("| --- | --- | ---: | --- | ---: | ---: | --- | --- |")
    for model in TRAIN_MODELS:
        folder = a.captures / f"{model}-{a.size}"
        for e in EXPORTERS:
            other = folder / f"torch-{e}-train.mlir"
            if not other.exists():
                continue
            r = diff_files(folder / "jax-train.mlir", other).result()
            layers = {}
            for phase in ("forward", "backward"):
                per = {}
                for d in r.blocks:
                    if d.phase == phase and d.layer and d.role in ("norm", "attention", "mlp"):
                        per.setdefault(d.layer, set()).add(d.role)
                every = {x.layer for x in r.blocks if x.layer}
                layers[phase] = f"{sum(1 for v in per.values() if v >= {'norm', 'attention', 'mlp'})} of {len(every)}"
            update = "yes" if any(d.phase == "update" for d in r.blocks) else "no"
            print(f"| {model} | {e} | {len(r.blocks)} | {r.method} | {layers['forward']} | {layers['backward']} | "
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


def lazy_split(e, rows) -> str | None:
    """One generated sentence for a torch_xla lazy row: where its runs go by torch_xla's own clocks
    (XLA compiling, XLA executing, the rest tracing and dispatching), beside the same model's
    torch_xla StableHLO capture run on jax's XLA; None for the other rows."""
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
    out += (f". {what}{n(captured.timing.steady * 1e3)} ms on jax's XLA: torch_xla's own XLA "
            f"(torch_xla {_torch_xla_version()}) executes a run at {ratio:.2f}x that, and tracing and "
            f"dispatch take {1 - execute / (t.steady * 1e3):.0%} of the steady run")
    second = c["second"]
    if captured.name.endswith("-train") and second["compiles"] == 1 and captured.compile_s:
        # Step 2 compiles one graph, the one the capture takes (its step 2): the same graph, two XLA builds.
        out += (f". Run 2 compiled one graph, the captured step, in {n(second['compile ms'])} ms; jax's XLA "
                f"compiles it in {n(captured.compile_s * 1e3)} ms "
                f"({second['compile ms'] / (captured.compile_s * 1e3):.2f}x)")
    return out + "."


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
        warming = (f", and step 2 touched {faults[1] / max(faults[3], 1):.1f}x a steady step's fresh memory: its "
                   "slower steps map memory for the first time (the allocator warming up), not compilation.")
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--captures", type=Path, default=Path("out") / "bench-captures",
                    help="relative to the project root, so reports show no machine paths")
    ap.add_argument("--size", default="base")
    ap.add_argument("--baselines", default="jax,eager,inductor,torch_xla",
                    help="torch_xla lazy is the study's PyTorch; on a GPU it reports that it has no route")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--workload-batches", default=None,
                    help="batch sweep of seed 002's workloads (default 1,8 on the CPU, 1,8,64 on a GPU)")
    ap.add_argument("--workload-baselines", default="jax,eager")
    ap.add_argument("--workload-size", default="base")
    a = ap.parse_args()
    sweep = tuple(int(x) for x in (a.workload_batches or ("1,8" if a.backend == "cpu" else "1,8,64")).split(","))
    import os

    os.chdir(ROOT)
    from findings_time import PROFILE_RUNS, profiled_gaps, tpu_estimates

    from stackwars_ir.bench.timing import SAMPLING_ENV

    # Every row profiled after its steady state (bench --profile): section 10 splits the gaps by block.
    os.environ[SAMPLING_ENV] = f"profile={PROFILE_RUNS}" if a.backend == "cpu" else ""
    suffix = "" if a.backend == "cpu" else f"-{a.backend}"
    from stackwars_ir.sweep import bench_model
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report import write_outputs

    print("# Findings: the study's claims, measured on the same backend\n")
    print(f"Generated by `make findings` (`python benchmarks/findings.py`) on {datetime.date.today()}; "
          f"machine: {machine_line()}; {backend_line(a.backend)}. Models at `{a.size}` size with random weights "
          "(transformers configs: GPT-2 small, BERT-base, ResNet-50), batch 2, sequence 64 / image 224. "
          "Every number below comes from that run; none is typed by hand.\n")
    benches, diffs = {}, {}
    for model in MODELS:
        report = bench_model(model, size=a.size, exporters=EXPORTERS, out_dir=a.captures, backend=a.backend,
                             baselines=tuple(x for x in a.baselines.split(",") if x), timeout=120, show=False)
        benches[model] = report
        folder = a.captures / f"{model}-{a.size}"
        for e in EXPORTERS:
            diffs[(model, e)] = diff_files(folder / "jax.mlir", folder / f"torch-{e}.mlir")
        (ROOT / "out").mkdir(exist_ok=True)
        (ROOT / "out" / f"{model}-{a.size}{suffix}-bench.json").write_text(json.dumps(report.as_json(), indent=1))
        if model == "gpt2":
            write_outputs(diffs[(model, "torch_xla")].result(), html_path=ROOT / "out" / f"gpt2-{a.size}{suffix}-report.html",
                          bench=report)

    from stackwars_ir.report.sentences import summaries

    print("## 1. LayerNorm lowering (the study: torch_xla uses `batch_norm_training`, JAX spells it out)\n")
    print("| model | JAX vs | normalization blocks |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        print(f"| {model} | {e} | {cell(dict(summaries(r.result())).get('normalization', '-'))} |")
    print("\n## 2. Flattening before dot_general (the study: PyTorch merges batch and sequence)\n")
    print("| model | JAX vs | dot_general inputs |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        if model != "resnet50":
            print(f"| {model} | {e} | {cell(dict(summaries(r.result())).get('flattening', '-'))} |")
    print("\n## 3. Embeddings (the study: iota + call @take against constant indices + gather)\n")
    print("| model | JAX vs | embedding blocks |\n| --- | --- | --- |")
    for (model, e), r in diffs.items():
        if model != "resnet50":
            print(f"| {model} | {e} | {cell(dict(summaries(r.result())).get('embedding', '-'))} |")
    print("\n## 4. Block alignment\n")
    print("| model | JAX vs | block pairs | by | unmatched in JAX | unmatched in PyTorch |\n| --- | --- | ---: | --- | ---: | ---: |")
    for (model, e), r in diffs.items():
        al = r.alignment
        print(f"| {model} | {e} | {len(al.pairs)} | {al.method} | {len(al.only_a)} | {len(al.only_b)} |")
    print("\n## 5. Latency: first run, second run, steady state (the study: JAX steady after one run, "
          "PyTorch after two; JAX 11-39x faster at steady state on a TPU)\n")
    print("Steady state is the median after two warm-up runs; spread is (p90 - p10) / median. The StableHLO "
          "rows run on one XLA runtime, so a gap between them is caused by the IR; the native rows add "
          "each framework's own runtime. `output` is the proof that the row did the work: the first run's "
          "max abs error against PyTorch eager on the CPU, same weights and inputs. `counters` are the "
          "runtime's own for the first run / the second / all later runs together: a first run that "
          "compiled nothing, or runs that executed nothing, would show there; `page faults` are the "
          "process's minor faults (memory touched for the first time, which the kernel maps and zeroes), "
          "where a slow run that compiled nothing shows an allocator warming up. torch_xla lazy is the "
          "study's PyTorch: its first run traces the lazy graph and compiles it.\n")
    print("| model | executable | compile ms | first ms | second ms | steady ms | spread | second / steady | fusions "
          "| output | counters |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for model, rep in benches.items():
        for _, e in rep.rows:
            name = e.name
            if not e.ok:
                print(f"| {model} | {name} | failed: {e.error} | | | | | | | | |")
                continue
            t = e.timing
            print(f"| {model} | {name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | {ms(t.steady)} | "
                  f"{t.spread:.0%} | {t.second / t.steady:.2f} | {e.hlo.get('fusions', '-') if e.hlo else '-'} | "
                  f"{e.proof.summary if e.proof else '-'} | {counters_text(t.counters)} |")
    print("\n## 6. JAX against PyTorch at steady state, same XLA runtime\n")
    print("| model | torch_xla steady / JAX steady | torchax steady / JAX steady |\n| --- | ---: | ---: |")
    for model, rep in benches.items():
        st = {e.name: e.timing.steady for _, e in rep.rows if e.ok and e.kind == "stablehlo"}
        cells = [f"{st[f'torch-{x}'] / st['jax']:.2f}" if f"torch-{x}" in st and "jax" in st else "-"
                 for x in EXPORTERS]
        print(f"| {model} | {cells[0]} | {cells[1]} |")
    print("\nReading: a ratio near 1 means the two IRs compile to equally fast code on this backend; "
          "the study's large gaps were measured on a TPU with the frameworks' own runtimes around the IR.")
    print("\n## 7. Native runtimes against the JAX StableHLO executable, steady state\n")
    print("| model | " + " | ".join(f"{k} / JAX StableHLO" for k in NATIVE) + " |")
    print("| --- | " + " | ".join("---:" for _ in NATIVE) + " |")
    for model, rep in benches.items():
        st = {e.kind if e.kind != "stablehlo" else e.name: e.timing.steady for _, e in rep.rows if e.ok}
        cells = [f"{st[k] / st['jax']:.2f}" if k in st and "jax" in st else "-" for k in NATIVE]
        print(f"| {model} | " + " | ".join(cells) + " |")
    splits = [(model, split) for model, rep in benches.items() for _, e in rep.rows if (split := lazy_split(e, rep.rows))]
    if splits:
        print("\nWhere torch_xla lazy's runs go, by torch_xla's own clocks (CompileTime, ExecuteTime: from the "
              "call until the results are ready); the rest of a run is tracing the model in Python and "
              "dispatching the graph. Beside it, its captured StableHLO on jax's XLA separates the two XLA "
              "builds from the lazy runtime:\n")
        for model, split in splits:
            print(f"- {model}: {split}")
    print("\n## 8. Seed 002's basic workloads: batch sweep and crossover\n")
    print(f"Each workload at its `base` size (seed 002's large size: 1,000,000 elements, 2000 x 2000 matrices; "
          f"the skinny multiply is [4096, 1024] x [1024, 8]), at batch {', '.join(map(str, sweep))}, "
          "inputs only (no weights). The StableHLO rows run on one XLA runtime; the native rows are "
          f"{a.workload_baselines}. The crossover says at which batch the faster of the JAX and PyTorch "
          "StableHLO executables changes (seed 000's method; ties within the p10-p90 ranges do not count).\n")
    from stackwars_ir import models
    from stackwars_ir.workload import EXPORTERS as ALL_EXPORTERS

    print("| workload | batch | executable | compile ms | first ms | second ms | steady ms | spread | output |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    crossings, deltas = {}, {}
    for w in models.WORKLOADS:
        exporters = models.exporters_for(w, ALL_EXPORTERS)[0]
        rep = bench_model(w, size=a.workload_size, batches=sweep, exporters=exporters, out_dir=a.captures, backend=a.backend,
                          baselines=tuple(x for x in a.workload_baselines.split(",") if x), timeout=60, show=False)
        (ROOT / "out" / f"{w}-{a.workload_size}{suffix}-bench.json").write_text(json.dumps(rep.as_json(), indent=1))
        crossings[w] = rep.crossover
        for b, e in rep.rows:
            if not e.ok:
                print(f"| {w} | {b} | {e.name} | failed: {e.error} | | | | | |")
                continue
            t = e.timing
            print(f"| {w} | {b} | {e.name} | {ms(e.compile_s)} | {ms(t.first)} | {ms(t.second)} | {ms(t.steady)} | "
                  f"{t.spread:.0%} | {e.proof.summary if e.proof else '-'} |")
        first = Path(a.captures) / f"b{sweep[0]}-s{models.entry(w).shapes[a.workload_size]['seq']}" / f"{w}-{a.workload_size}"
        deltas[w] = {e: op_delta(diff_files(first / "jax.mlir", first / f"torch-{e}.mlir")) for e in exporters}
    print("\n| workload | crossover (JAX StableHLO against the first PyTorch exporter's) |\n| --- | --- |")
    for w, c in crossings.items():
        print(f"| {w} | {c or '-'} |")
    print("\nWhat the IR differs in (whole-module op counts, JAX minus PyTorch; none: the same ops):\n")
    print("| workload | JAX vs | ops PyTorch - JAX |\n| --- | --- | --- |")
    for w, per in deltas.items():
        for e, delta in per.items():
            print(f"| {w} | {e} | {delta} |")
    train_benches = training(a, suffix)
    if a.backend == "cpu":
        profiled_gaps(a, benches, train_benches)
        tpu_estimates(a)
    print(f"\nMeasured peaks on this machine: {benches['gpt2'].peaks['flops_per_s'] / 1e9:.0f} GFLOP/s "
          f"(f32 GEMM{', TF32 on this GPU' if a.backend == 'gpu' else ''}), {benches['gpt2'].peaks['bytes_per_s'] / 1e9:.1f} GB/s (f32 add). Raw JSON: "
          f"`out/<model>-base{suffix}-bench.json`; the GPT-2 base HTML report: `out/gpt2-base{suffix}-report.html`.")


if __name__ == "__main__":
    main()
