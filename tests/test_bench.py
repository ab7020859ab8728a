"""Bench: every figure present and sane on the tiny golden captures; bad modules fail alone."""
from __future__ import annotations

import hashlib
import json

import pytest

from conftest import golden
from stackwars_ir.bench.run import bench_files
from stackwars_ir.bench.timing import measure


@pytest.fixture(scope="module")
def gpt2_bench():
    return bench_files([golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")], "cpu", timeout=30)


def test_every_figure_is_present_and_sane(gpt2_bench):
    assert gpt2_bench.backend == "cpu" and not gpt2_bench.failed
    for _, e in gpt2_bench.rows:
        t = e.timing
        assert e.compile_s > 0 and t.first > 0 and t.second > 0 and t.steady > 0
        assert t.second < 10 * t.first
        assert t.p10 <= t.steady <= t.p90 and t.iterations >= 10
        assert e.flops > 0 and e.bytes_accessed > 0
        assert e.memory["argument_bytes"] > 0 and e.memory["output_bytes"] == 2 * 16 * 64 * 4
        assert e.hlo["fusions"] > 0
        assert e.arguments.startswith("capture sidecar")
        assert e.resident_bytes > 0  # at least the compiler's own working memory
    data = gpt2_bench.as_json()
    assert data["peaks"]["flops_per_s"] > 0 and data["machine"]["cpus"]
    for r in data["results"]:
        assert 0 < r["roofline"]["fraction_of_bound"] and r["achieved_flops_per_s"] > 0


def test_the_same_function_costs_the_same_flops_from_both_frameworks(gpt2_bench):
    jax_flops, torch_flops = (e.flops for _, e in gpt2_bench.rows)
    assert abs(jax_flops - torch_flops) / jax_flops < 0.25


def test_synthetic_arguments_keep_token_ids_in_range(tmp_path):
    src = golden("gpt2", "torch-torch_xla")
    (tmp_path / "g.mlir").write_text(src.read_text())  # no sidecar beside it
    report = bench_files([tmp_path / "g.mlir"], "cpu", timeout=30, with_peaks=False)
    (_, e), = report.rows
    assert e.ok and e.arguments.startswith("synthetic")


def test_a_bad_module_fails_alone(cli, tmp_path):
    dynamic = tmp_path / "dyn.mlir"
    dynamic.write_text("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n"
                       "  %0 = stablehlo.abs %a : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}\n")
    out = tmp_path / "b.json"
    code, stdout, err = cli("bench", dynamic, golden("gemm", "jax"), "--json", out, "--timeout", "20")
    assert code == 2
    assert "dynamic shape" in err and "Traceback" not in err
    results = json.loads(out.read_text())["results"]
    assert results[0]["error"] and results[1]["timing"]["steady_median_s"] > 0


def test_measure_reports_first_second_and_steady():
    calls = []
    t = measure(lambda: calls.append(1), min_time=0.0, min_iters=5, max_iters=5)
    assert t.iterations == 5 and len(calls) == 2 + t.warmup + 5


@pytest.mark.slow
def test_bench_model_with_baselines_and_sweep(tmp_path):
    from stackwars_ir.sweep import bench_model

    from stackwars_ir.bench.timing import Asked

    report = bench_model("mha", batches=(1, 2), baselines=("jax", "eager"), out_dir=tmp_path, timeout=30,
                         asked=Asked(runs=10))
    kinds = {(b, e.kind) for b, e in report.rows}
    assert {(1, "stablehlo"), (1, "jax.jit"), (1, "torch eager"), (2, "stablehlo")} <= kinds
    assert not report.failed and report.crossover


# Proof of work: a time without the right output is an error, on the real runtimes.

def test_an_executable_computing_another_function_is_an_error_not_a_number(tmp_path):
    src = golden("ffn", "jax")
    wrong = tmp_path / "ffn-wrong.mlir"
    # The second bias is subtracted instead of added: same shapes, same cost, another function.
    text = src.read_text().replace("%16 = stablehlo.add %13, %15", "%16 = stablehlo.subtract %13, %15")
    assert text != src.read_text()
    wrong.write_text(text)
    side = json.loads(src.with_suffix(".json").read_text())  # a sidecar that describes this very file
    side.update(stablehlo=wrong.name, sha256=hashlib.sha256(text.encode()).hexdigest())
    wrong.with_suffix(".json").write_text(json.dumps(side))
    report = bench_files([src, wrong], "cpu", timeout=30, with_peaks=False)
    (_, right), (_, bad) = report.rows
    assert right.ok and right.proof.ok and right.proof.max_abs < 1e-3
    assert not bad.ok and bad.timing is None and "differs from PyTorch eager" in bad.error


def test_a_baseline_that_discards_its_output_is_an_error(monkeypatch):
    from stackwars_ir.bench import native
    from stackwars_ir.bench.runtimes import torch_eager
    from stackwars_ir.capture import Request

    real = torch_eager.forward

    def discarding(*args):
        label, kind, run, counters, done = real(*args)
        return label, kind, lambda: (run(), None)[1], counters, done  # runs the model, drops the result

    monkeypatch.setattr(torch_eager, "forward", discarding)
    (row,) = native.run_baselines(Request("gemm").validated(), ("eager",), 30)
    assert not row.ok and row.timing is None and "returned no output" in row.error


INFERENCE_RUNTIME = '''"""A test runtime: PyTorch eager under torch.inference_mode, a forward pass only (issue 76)."""
from __future__ import annotations

import copy

from ..host import UNMARKED, torch_meter
from .shared import Setup, nothing


def forward(adapter, req, model, weights, inputs, backend) -> Setup:
    import torch

    m = copy.deepcopy(model)
    xs = [torch.from_numpy(v) for v in inputs.values()]

    def run(clock=UNMARKED):
        with torch.inference_mode():
            out = m(*xs)
        clock.mark("forward")
        return out

    run.meter = torch_meter
    return Setup("torch eager, inference mode (a test runtime)", "torch inference", run, None, nothing)
'''


def test_a_native_runtime_is_added_by_two_files(tmp_path):
    """Adding a native runtime touches its module in bench/runtimes and its row in bench/native.py's
    RUNTIMES, nothing else (issue 76): on a copy of the package with a test runtime so added, `bench
    MODEL --baselines` times it beside jax.jit with its output proven against PyTorch eager's, its
    --host phases read, and a training step it has no loop for is refused in one line."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import stackwars_ir
    from stackwars_ir import models

    code = tmp_path / "code"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(stackwars_ir.__file__).parent, code / "stackwars_ir", ignore=ignore)
    shutil.rmtree(code / "stackwars_ir" / "models", ignore_errors=True)
    shutil.copytree(Path(models.__file__).parent, code / "stackwars_ir" / "models", ignore=ignore)
    native = code / "stackwars_ir" / "bench" / "native.py"
    text = native.read_text()
    anchor = "NativeRuntime(TORCHAX_JIT, torchax_jit))"
    assert anchor in text
    native.write_text(text.replace(anchor, anchor[:-1] + ',\n            NativeRuntime("eager_inference", '
                                   '__import__("stackwars_ir.bench.runtimes.eager_inference", fromlist=["forward"])))'))
    (code / "stackwars_ir" / "bench" / "runtimes" / "eager_inference.py").write_text(INFERENCE_RUNTIME)

    def run(*args):
        boot = f"import sys; sys.path.insert(0, {str(code)!r}); from stackwars_ir.cli.commands import main; main()"
        return subprocess.run([sys.executable, "-c", boot, *map(str, args)], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)

    done = run("bench", "gemm", "--baselines", "jax,eager_inference", "--host", "--runs", "10", "--json", "-", "--out",
               tmp_path / "caps")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["kind"]: r for r in json.loads(done.stdout)["results"]}
    row = rows["torch inference"]
    assert row["error"] is None and row["proof"]["ok"], row
    assert row["timing"]["steady_median_s"] > 0 and "forward" in {p["name"] for p in row["host"]["phases"]}, row
    assert rows["jax.jit"]["error"] is None
    done = run("bench", "gemm", "--step", "train", "--baselines", "eager_inference", "--out", tmp_path / "caps")
    assert done.returncode == 2 and "eager_inference" in done.stderr and "forward pass only" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_every_baseline_proves_its_output_and_torch_xla_compiles_then_executes_every_run():
    from stackwars_ir.bench.native import BASELINES, TRAIN_ONLY, run_baselines
    from stackwars_ir.capture import Request

    forward = tuple(b for b in BASELINES if b not in TRAIN_ONLY)
    rows = {e.kind: e for e in run_baselines(Request("gemm").validated(), forward, 30)}
    assert set(rows) == {"jax.jit", "torch eager", "torch.compile", "torch_xla lazy", "torch_xla dynamo", "torchax jit"}
    for e in rows.values():
        assert e.ok, e.error
        assert e.proof.ok and e.proof.max_abs < 1e-3 and "PyTorch eager" in e.proof.reference
    xla = rows["torch_xla lazy"].timing.counters
    assert xla["first"]["compiles"] + xla["first"]["cache hits"] >= 1  # the first run built its graph
    assert xla["first"]["executions"] == 1 and xla["second"]["executions"] == 1
    assert xla["steady"]["executions"] == xla["steady"]["runs"]  # every timed run executed
    # torch_xla's own clocks: the first run compiled, every run executed, nothing compiled later,
    # and both clocks sit inside the run they were read around (their ms are rounded to 1 us).
    t = rows["torch_xla lazy"].timing
    assert xla["first"]["compile ms"] > 0 and xla["second"]["compile ms"] == 0 == xla["steady"]["compile ms"]
    assert all(xla[k]["execute ms"] > 0 for k in ("first", "second", "steady"))
    for phase, wall in (("first", t.first), ("second", t.second)):
        assert xla[phase]["compile ms"] + xla[phase]["execute ms"] <= wall * 1e3 + 0.01, (phase, xla[phase], wall)
    assert rows["jax.jit"].timing.counters["first"]["compiles"] >= 1
    assert rows["jax.jit"].timing.counters["second"]["compiles"] == 0
    assert rows["torch.compile"].timing.counters["first"]["graphs compiled"] == 1


@pytest.mark.slow
def test_torch_compile_starts_cold_each_time_though_inductor_keeps_its_caches_on_disk(monkeypatch):
    """inductor's caches outlive a process (on by default, in the user's temp folder): a first call after
    an earlier compile of the same graph loaded it (GPT-2 tiny: 6.2 s against 24.9 s compiled, docs/benchmarks.md).
    Each torch.compile row compiles from nothing, in this process too, and leaves no cache behind."""
    import os

    from stackwars_ir.bench.native import run_baselines
    from stackwars_ir.capture import Request

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    for _ in range(2):  # the second: the same graph, just compiled here (the first may follow earlier processes)
        (row,) = run_baselines(Request("gemm").validated(), ("inductor",), 30)
        assert row.ok, row.error
        first = row.timing.counters["first"]
        assert first["graphs compiled"] == 1 and first["persistent cache hits"] == 0, first
        assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == before
    # Warm, asked for: what inductor compiled before (here, just now) is loaded, and counted
    monkeypatch.setenv("STACKWARS_IR_COMPILE_CACHE", "warm")
    (row,) = run_baselines(Request("gemm").validated(), ("inductor",), 30)
    assert row.ok and row.timing.counters["first"]["persistent cache hits"] >= 1, row.timing.counters
    monkeypatch.setenv("STACKWARS_IR_COMPILE_CACHE", "hot")
    (row,) = run_baselines(Request("gemm").validated(), ("inductor",), 30)
    assert not row.ok and "STACKWARS_IR_COMPILE_CACHE='hot'" in row.error and "\n" not in row.error, row.error


def test_measure_inspects_the_first_output_and_reads_counters_around_runs():
    from stackwars_ir.bench.proof import Checker
    from stackwars_ir.common.errors import BenchError

    import numpy as np

    seen = {"n": 0}

    def run():
        seen["n"] += 1
        return np.ones(3)

    t = measure(run, min_time=0.0, min_iters=3, max_iters=3, inspect=Checker("x", np.ones(3), "cpu", "ones"),
                counters=lambda: {"calls": seen["n"]})
    calls = {k: {n: v for n, v in c.items() if n != "page faults"} for k, c in t.counters.items()}
    assert calls["first"] == {"calls": 1} and calls["second"] == {"calls": 1}
    assert calls["third"] == {"calls": 1} and t.third is not None
    assert calls["steady"] == {"calls": t.warmup - 1 + 3, "runs": t.warmup - 1 + 3}
    with pytest.raises(BenchError, match="differs from ones"):
        measure(run, min_iters=1, inspect=Checker("x", np.zeros(3), "cpu", "ones"))


def test_measure_counts_the_page_faults_of_each_run():
    """A run that writes 64 MiB it never touched before (an allocation past any malloc threshold,
    mapped fresh each time) faults; the counts are the process's, read around each phase."""
    import numpy as np

    def run():
        a = np.empty(16 * 2**20, dtype=np.float32)
        a.fill(1.0)
        return a[:1].copy()

    def proof(first):  # outside every run: 256 MiB touched, counted in no phase
        np.ones(64 * 2**20, dtype=np.float32)

    t = measure(run, min_time=0.0, min_iters=3, max_iters=3, inspect=proof)
    faults = {k: c["page faults"] for k, c in t.counters.items()}
    assert set(faults) == {"first", "second", "third", "steady"}
    assert all(f >= 1 for f in faults.values()), faults  # 4 KiB or 2 MiB pages: at least one a run
    assert t.counters["steady"]["runs"] == t.warmup - 1 + 3
    assert faults["second"] < 2 * faults["third"] + 64, faults  # a run's faults, not the proof's 4x more


def test_gpu_backend_without_a_gpu_says_how_to_install_it(cli, tmp_path):
    from stackwars_ir.common.runtime import runtime

    try:
        runtime("gpu")
    except Exception:
        pass
    else:
        pytest.skip("this machine has a GPU backend")
    for args in ([golden("gemm", "jax")], ["gemm", "--out", tmp_path]):
        code, out, err = cli("bench", *args, "--backend", "gpu")
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert "no gpu backend is available" in err and "make setup-gpu" in err
    assert list(tmp_path.iterdir()) == []  # nothing captured before the backend was found missing
    code, _, err = cli("bench", golden("gemm", "jax"), "--backend", "metal")
    assert code == 2 and "unknown backend 'metal'" in err


def test_a_capture_without_a_torch_xla_route_benches_from_its_sidecar():
    report = bench_files([golden("fft", "torch-torchax")], "cpu", timeout=30, with_peaks=False)
    (_, e), = report.rows
    assert e.ok and e.proof.ok and e.arguments.startswith("capture sidecar (fft-tiny")


# Killable benchmarks: a compile or run that will not finish, or eats memory, is stopped alone.

FOREVER = """func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.while(%iter = %x) : tensor<f32>
    cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %y = stablehlo.add %iter, %iter : tensor<f32>
      stablehlo.return %y : tensor<f32>
    }
  return %0 : tensor<f32>
}
"""

HUGE = """func.func @main(%x: tensor<f32>) -> tensor<1073741824xf32> {
  %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<1073741824xf32>
  return %0 : tensor<1073741824xf32>
}
"""


@pytest.mark.slow
def test_an_executable_that_never_finishes_stops_at_its_timeout_and_the_others_are_measured(cli, tmp_path):
    forever = tmp_path / "forever.mlir"
    forever.write_text(FOREVER)
    out = tmp_path / "b.json"
    code, stdout, err = cli("bench", forever, golden("gemm", "jax"), "--timeout", "1", "--json", out)
    assert code == 2 and "Traceback" not in err
    assert f"{forever}: timed out: compile and runs took longer than --timeout 1 s + 10 s" in err
    first, second = json.loads(out.read_text())["results"]
    assert first["error"] and first["timing"] is None
    assert second["error"] is None and second["proof"]["ok"] and second["timing"]["steady_median_s"] > 0


@pytest.mark.slow
def test_an_executable_over_the_memory_limit_is_stopped_and_the_others_are_measured(cli, tmp_path):
    huge = tmp_path / "huge.mlir"  # a 4 GiB output
    huge.write_text(HUGE)
    code, _, err = cli("bench", huge, golden("gemm", "jax"), "--max-memory", "1G", "--timeout", "60")
    assert code == 2 and f"{huge}: used" in err and "more than --max-memory 1.0 GiB" in err
    assert err.count("stackwars-ir: error:") == 1  # the gemm row ran


def test_bad_bench_limits_get_one_line(cli):
    for args, message in ((["--timeout", "0"], "--timeout 0 must be a positive"),
                          (["--max-memory", "much"], "--max-memory 'much' is not a size")):
        code, _, err = cli("bench", golden("gemm", "jax"), *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_verdict_says_how_much_faster_or_indistinguishable():
    import random

    from stackwars_ir.bench.compare import ratio_interval

    rng = random.Random(0)
    a = tuple(1.0 + 0.05 * rng.random() for _ in range(200))
    b = tuple(2.0 + 0.1 * rng.random() for _ in range(200))
    same = tuple(1.0 + 0.05 * rng.random() for _ in range(200))
    ratio, low, high = ratio_interval(a, b)
    assert 1.9 < low <= ratio <= high < 2.1
    ratio, low, high = ratio_interval(a, same)
    assert low <= 1.0 <= high  # the same distribution: the interval spans 1


def test_round_robin_runs_take_turns_and_a_failing_one_leaves_the_rotation():
    from stackwars_ir.bench.timing import Sampling, steady_state

    calls, errors = [], []

    def run(name):
        def go():
            calls.append(name)
            if name == "c" and calls.count("c") == 2:
                raise RuntimeError("device lost")
        return go

    how = Sampling.of(runs=4)
    (a, fa), (b, fb), (c, fc) = steady_state([run("a"), run("b"), run("c")], how,
                                             on_error=lambda i, e: errors.append((i, str(e))))
    assert calls[:6] == ["a", "b", "c", "b", "c", "a"]  # each round starts one further on
    assert errors == [(2, "device lost")] and len(c) == 1 and len(a) == len(b) == 4
    assert all(isinstance(f, int) for f in (fa, fb, fc))


def test_a_paired_interval_sees_through_a_slow_stretch_of_the_machine():
    from stackwars_ir.bench.compare import ratio_interval

    # B is 1.1x A in every round; the machine is twice as slow for the second half of the run.
    a = tuple([1.0] * 50 + [2.0] * 50)
    b = tuple(1.1 * x for x in a)
    ratio, low, high = ratio_interval(a, b, paired=True)
    assert low == pytest.approx(1.1) and high == pytest.approx(1.1)
    _, low, high = ratio_interval(a, b)  # resampled apart, the slow stretch widens it past 1
    assert low < 1.0 and high > 1.5


def test_a_verdict_between_noisy_rows_timed_apart_is_withheld():
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.compare import verdicts
    from stackwars_ir.bench.timing import Timing

    def row(label, samples, interleaved):
        s = sorted(samples)
        t = Timing(1, 1, s[len(s) // 2], s[len(s) // 10], s[-len(s) // 10], len(s), 2, {}, tuple(samples), 1,
                   interleaved)
        return Executable(label, "stablehlo", 1.0, t)

    noisy = [1.0, 1.5] * 20
    apart = verdicts([(2, row("x/jax.mlir", noisy, 1)), (2, row("x/torch-torch_xla.mlir", [2 * x for x in noisy], 1))])
    assert apart[0].withheld.startswith("too noisy to call: spread 33% (over 10%) and timed one after the other")
    assert apart[0].sentence().endswith("pin a core (taskset -c 1 stackwars-ir bench ...)")
    assert apart[0].as_json()["withheld"] and not apart[0].as_json()["indistinguishable"]
    together = verdicts([(2, row("x/jax.mlir", noisy, 2)), (2, row("x/torch-torch_xla.mlir", [2 * x for x in noisy], 2))])
    assert together[0].paired and not together[0].withheld and together[0].ratio == pytest.approx(2.0)


def test_every_pair_gets_a_verdict_and_a_file_of_unknown_batch_joins_each_batch():
    """issue 53: a file without a sidecar (batch None) against captures (batch 2) had no verdict, and
    only the fastest row was compared, so a jax-vs-torchax diff --bench had none."""
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.compare import verdicts
    from stackwars_ir.bench.timing import Timing

    def row(label, scale, interleaved=3):
        samples = tuple(scale * (1 + 0.001 * (i % 3)) for i in range(30))
        s = sorted(samples)
        return Executable(label, "stablehlo", 1.0, Timing(1, 1, s[15], s[3], s[-3], 30, 2, {}, samples, 1, interleaved))

    rows = [(2, row("x/jax.mlir", 1.0)), (2, row("x/torch-torch_xla.mlir", 2.0)), (2, row("x/torch-torchax.mlir", 3.0))]
    pairs = {(v.faster, v.slower) for v in verdicts(rows)}
    assert pairs == {("jax", "torch-torch_xla"), ("jax", "torch-torchax"), ("torch-torch_xla", "torch-torchax")}
    loose = verdicts([(None, row("y/edited.mlir", 1.0)), (2, row("x/jax.mlir", 2.0)), (4, row("x/jax4.mlir", 4.0))])
    assert {(v.faster, v.slower, v.batch) for v in loose} == {("edited", "jax", None), ("edited", "jax4", None)}
    assert all(not v.tie and v.ratio > 1.5 for v in loose)


def test_bench_of_two_files_ends_with_a_verdict(gpt2_bench):
    (verdict,) = gpt2_bench.verdicts
    assert {verdict.faster, verdict.slower} == {"jax", "torch-torch_xla"} and verdict.ratio >= 1
    assert verdict.sentence().startswith(verdict.faster)
    assert gpt2_bench.as_json()["verdicts"][0]["interval_95"][0] <= verdict.ratio


# One set of conventions (issue 16): validation before work, --json -, commas.

@pytest.mark.parametrize("args, message", [
    (["bench", "gpt3"], "unknown model 'gpt3' (fix: did you mean 'gpt2'?"),
    (["bench", str(golden("gemm", "jax")), "--batch", "4"], "--batch applies to `bench MODEL`, not to StableHLO files"),
    (["bench", str(golden("gemm", "jax")), "--exporter", "torchax"], "--exporter applies to `bench MODEL`"),
    (["capture", "gpt2", "--batch", "0", "--framework", "jax"], "--batch and --seq must be positive"),
    (["capture", "gpt3"], "did you mean 'gpt2'?"),
])
def test_bad_requests_fail_before_any_work_in_one_line(cli, tmp_path, args, message):
    code, _, err = cli(*args, *(["--out", tmp_path] if args[0] == "capture" else []))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_json_dash_writes_json_to_stdout_on_every_command(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a file named '-' would land here
    a, b = golden("gemm", "jax"), golden("gemm", "torch-torchax")
    for args in (["bench", a, "--json", "-"], ["diff", a, b, "--json", "-"], ["stats", a, "--json", "-"],
                 ["stats", "--json", a, b]):
        code, out, _ = cli(*args)
        assert code in (0, 1) and isinstance(json.loads(out), dict), args
    assert list(tmp_path.iterdir()) == []


def test_exporters_take_commas(cli, tmp_path):
    code, out, _ = cli("capture", "gemm", "--exporter", "torch_xla,torchax", "--out", tmp_path)
    assert code == 0 and sorted(p.name for p in (tmp_path / "gemm-tiny").glob("*.mlir")) == \
        ["jax.mlir", "torch-torch_xla.mlir", "torch-torchax.mlir"]


@pytest.mark.slow  # over 20 s here (issue 52)
def test_report_refuses_a_bench_of_other_files(cli, tmp_path):
    bench = tmp_path / "gpt2-bench.json"
    code, _, _ = cli("bench", golden("gpt2", "jax"), "--json", bench)
    assert code == 0 and json.loads(bench.read_text())["results"][0]["sha256"]
    code, _, err = cli("report", golden("resnet50", "jax"), golden("resnet50", "torch-torch_xla"),
                       "--bench", bench, "-o", tmp_path / "r.html")
    assert code == 2 and "timed other files (jax.mlir), not jax.mlir or torch-torch_xla.mlir" in err
    assert not (tmp_path / "r.html").exists()
    # the fix printed is the bench of the report's own files; run as printed, the report takes it (issue 75, item 6)
    import re
    import shlex

    fix = re.search(r"\(fix: (stackwars-ir bench .*), or drop --bench\)$", err.strip())[1]
    own = tmp_path / "own.json"
    code, _, err = cli(*shlex.split(fix.replace("FILE", str(own)))[1:], "--runs", "2")
    assert code == 0, err
    code, _, err = cli("report", golden("resnet50", "jax"), golden("resnet50", "torch-torch_xla"), "--bench", own,
                       "--html", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").exists(), err
    (tmp_path / "r.html").unlink()
    code, _, _ = cli("report", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), "--bench", bench,
                     "-o", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").exists()


def test_a_sidecar_given_as_ir_gets_a_did_you_mean(cli):
    code, _, err = cli("diff", golden("gemm", "jax").with_suffix(".json"), golden("gemm", "torch-torchax"))
    assert code == 2 and f"did you mean {golden('gemm', 'jax')}?" in err


def test_every_command_documents_its_exit_codes():
    import click

    from stackwars_ir.cli.commands import main

    for name in ("capture", "stats", "diff", "bench", "report"):
        assert "Exit code 0" in main.get_command(click.Context(main), name).help, name


def test_bench_says_what_it_is_doing_on_stderr(cli):
    code, out, err = cli("bench", golden("gemm", "jax"))
    assert code == 0 and f"{golden('gemm', 'jax')}: compiling and timing ..." in err
    assert "done in" in err and "compiling" not in out


def test_each_row_says_how_much_resident_memory_it_took():
    # GEMM base: a 1024 x 1024 float32 weight (4 MiB). Every row holds its own copy of the weights, as
    # a StableHLO executable holds its placed arguments: eager's and torch_xla's copies are measured.
    from stackwars_ir.bench.native import run_baselines
    from stackwars_ir.capture import Request

    rows = {e.kind: e for e in run_baselines(Request("gemm", size="base", batch=1, seq=8).validated(),
                                              ("eager", "torch_xla"), 30)}
    weight = 1024 * 1024 * 4
    for e in rows.values():
        assert e.ok, e.error
        assert e.resident_bytes >= weight, (e.kind, e.resident_bytes)
        assert e.as_json()["resident"]["peak_growth_bytes"] == e.resident_bytes


def test_warmup_and_runs_fix_the_sampling_of_every_row(cli, tmp_path, monkeypatch):
    code, out, err = cli("bench", golden("gemm", "jax"), golden("gemm", "torch-torch_xla"), "--warmup", "0",
                         "--runs", "7", "--json", tmp_path / "b.json")
    assert code == 0, err
    for r in json.loads((tmp_path / "b.json").read_text())["results"]:
        t = r["timing"]
        assert t["iterations"] == 7 and len(t["samples_s"]) == 7 and t["warmup"] == 0 and t["third_s"] is None
    assert "XLA plan: arguments" in out and "bound by" in out  # memory and roofline in the text
    for args, words in [(("--runs", "0"), "at least 1 run"), (("--warmup", "-1"), "0 or more runs")]:
        code, _, err = cli("bench", golden("gemm", "jax"), *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_bench_reuses_a_capture_only_from_the_same_request_capture_revision_and_versions(tmp_path):
    import json as _json

    from stackwars_ir.sweep import captured
    from stackwars_ir.capture import Request
    from stackwars_ir.workload import CAPTURE_REVISION

    req = Request("gemm", exporters=("torch_xla",)).validated()
    said = []
    files = captured(req, tmp_path, sweep=False, show=False, progress=said.append)
    assert said[-1].startswith("capturing")
    side = files[0].with_suffix(".json")
    assert _json.loads(side.read_text())["run"]["capture_revision"] == CAPTURE_REVISION
    captured(req, tmp_path, sweep=False, show=False, progress=said.append)
    assert said[-1].startswith("using the captures")
    # Written by an older stackwars-ir (an older revision, or none recorded): captured again.
    data = _json.loads(side.read_text())
    del data["run"]["capture_revision"]
    side.write_text(_json.dumps(data))
    captured(req, tmp_path, sweep=False, show=False, progress=said.append)
    assert said[-1].startswith("capturing")
    assert _json.loads(side.read_text())["run"]["capture_revision"] == CAPTURE_REVISION
    # Lowered by another lock's packages (the sidecar names them): another program, captured again.
    data = _json.loads(side.read_text())
    data["versions"]["jax"] = "0.10.2"
    side.write_text(_json.dumps(data))
    captured(req, tmp_path, sweep=False, show=False, progress=said.append)
    assert said[-1].startswith("capturing")
    from stackwars_ir.common.files import versions
    assert _json.loads(side.read_text())["versions"]["jax"] == versions()["jax"]
    # One whose parity failed (its files kept for inspection): captured again, never planned or timed.
    data = _json.loads(side.read_text())
    data["parity"]["ok"], data["parity"]["verdict"] = False, "differs"
    side.write_text(_json.dumps(data))
    captured(req, tmp_path, sweep=False, show=False, progress=said.append)
    assert said[-1].startswith("capturing") and _json.loads(side.read_text())["parity"]["ok"] is True


def test_findings_split_a_torch_xla_run_into_compile_execute_and_tracing_by_its_own_clocks():
    from stackwars_ir.bench import Executable
    from study import claims as findings
    from stackwars_ir.bench.timing import Timing

    def phase(compile_ms, execute_ms, runs=None):
        d = {"compiles": int(compile_ms > 0), "cache hits": 0, "executions": 1,
             "compile ms": compile_ms, "execute ms": execute_ms}
        return d if runs is None else {**d, "runs": runs}

    counters = {"first": phase(600.0, 300.0), "second": phase(0.0, 250.0), "third": phase(0.0, 250.0),
                "steady": phase(0.0, 2000.0, runs=10)}
    lazy = Executable("torch_xla lazy training loop", "torch_xla lazy", None,
                      Timing(1.0, 0.4, 0.25, 0.24, 0.26, 8, 2, counters, third=0.25))
    captured = Executable("out/gpt2-base/torch-torch_xla-train.mlir", "stablehlo", 1.0,
                          Timing(0.3, 0.2, 0.16, 0.15, 0.17, 8, 2))
    text = findings.lazy_split(lazy, [(None, captured), (None, lazy)])
    assert "run 1: 1,000 ms = XLA compiling 600 + executing 300 + tracing and dispatch 100" in text
    assert "run 2: 400 ms = executing 250 + tracing and dispatch 150" in text
    assert "later runs: 200 ms executing a run on average (ExecuteTime over 10 runs), against a median run of 250" in text
    assert "captured from the same lazy tensors (torch-torch_xla-train), runs in 160 ms on jax's XLA" in text
    assert "takes 1.25x that from the call to its results (ExecuteTime), and tracing and dispatch take 20% of the " \
        "steady run." in text
    # Issue 53: with both builds profiled, the sentence says how much of ExecuteTime their kernels are
    # (torch_xla's build: kernels at 0.31x jaxlib's while its ExecuteTime is 1.39x, GPT-2 base here).
    import dataclasses
    from types import SimpleNamespace

    from stackwars_ir.bench.xla_profile import Profile

    def prof(seconds):
        return Profile(2, seconds, seconds, seconds, seconds, (SimpleNamespace(seconds=seconds * 0.9),),
                       (("transfer: x", seconds * 0.1),))

    text = findings.lazy_split(dataclasses.replace(lazy, profile=prof(0.05)),
                               [(None, dataclasses.replace(captured, profile=prof(0.16))),
                                (None, lazy)])
    assert ("Profiled, its build's kernels take 50 ms a run against jaxlib's 160 ms, 0.31x (section 10), so 75% of "
            "its ExecuteTime lies outside the kernels its profiler sees") in text
    counters["second"] = phase(2500.0, 250.0)  # step 2 compiled the captured graph
    lazy = Executable(lazy.label, lazy.kind, None, Timing(1.0, 3.0, 0.25, 0.24, 0.26, 8, 2, counters, third=0.25))
    text = findings.lazy_split(lazy, [(None, captured), (None, lazy)])
    assert text.endswith("Run 2 compiled one graph, the captured step, in 2,500 ms; jax's XLA compiles it in "
                         "1,000 ms (2.50x).")
    assert findings.lazy_split(captured, [(None, captured)]) is None  # only rows with torch_xla's clocks


def test_the_bandwidth_probe_writes_into_its_argument_run_after_run():
    """The peak bandwidth is timed on an add whose output is its first argument's buffer, fed back
    each run: a fresh output per run would time the kernel mapping and zeroing it (docs/benchmarks.md)."""
    import numpy as np

    from stackwars_ir.bench import add_in_place
    from stackwars_ir.common.runtime import runtime

    rt = runtime("cpu")
    exe = rt.compile(add_in_place(1024), "probe")
    stats = exe.get_compiled_memory_stats()
    assert stats.alias_size_in_bytes == stats.output_size_in_bytes == 4 * 1024  # XLA writes into argument 0
    a, b = rt.put([np.ones(1024, np.float32), np.full(1024, 2.0, np.float32)])
    for _ in range(3):
        (out,) = rt.run(exe, [a, b])
        assert a.is_deleted()  # donated: its buffer now holds the sum
        a = out
    np.testing.assert_array_equal(np.asarray(a), np.full(1024, 7.0, np.float32))


def test_bench_notes_a_second_run_slowed_by_fresh_memory_not_by_a_compile():
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.compare import warming
    from stackwars_ir.bench.run import BenchReport
    from stackwars_ir.bench.timing import Timing
    from stackwars_ir.report.text import bench_text

    def row(name, second, faults, compiles=None):
        phase = (lambda f, c=0: {"page faults": f, **({"compiles": c} if compiles is not None else {})})
        counters = {"first": phase(600_000, 1), "second": phase(faults[0], compiles or 0),
                    "third": phase(faults[1]), "steady": {**phase(faults[2] * 8), "runs": 8}}
        return Executable(name, "stablehlo", 1.0, Timing(3.0, second, 1.0, 0.95, 1.05, 8, 2, counters,
                                                         samples=(1.0,) * 8, third=1.1))

    warm = row("out/gpt2-base/jax-train.mlir", 2.0, (390_000, 143_000, 140_000))
    rows = [(2, warm), (2, row("compiled.mlir", 2.0, (390_000, 143_000, 140_000), compiles=1)),
            (2, row("quiet.mlir", 1.2, (390_000, 143_000, 140_000))),
            (2, row("no-faults.mlir", 2.0, (140_000, 140_000, 140_000)))]
    (note,) = warming(rows)
    assert note.startswith("jax-train (batch 2): run 2 took 2.0x the steady state and compiled nothing, but "
                           "touched 2.8x a steady run's fresh memory (390,000 page faults against 140,000): "
                           "the allocator warming up")
    text = bench_text(BenchReport("cpu", tuple(rows)))
    assert f"note: {note}" in text.splitlines()
    # A steady run that touched no fresh memory: counts, never a ratio over 0 (issue 75, item 7).
    (zero,) = warming([(2, row("quiet-steady.mlir", 2.0, (9, 0, 0)))])
    assert "touched fresh memory (9 page faults) where a steady run touched none" in zero and "x a steady" not in zero
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from page_claims import claims

    assert claims(note) == [] and claims(zero) == []


def test_findings_read_page_faults_as_an_allocator_warming_up_and_compare_the_donated_loop():
    from stackwars_ir.bench import Executable
    from study import claims as findings
    from stackwars_ir.bench.timing import Timing

    def counters(faults, steady_runs=10):
        return {"first": {"compiles": 1, "page faults": faults[0]}, "second": {"compiles": 0, "page faults": faults[1]},
                "third": {"compiles": 0, "page faults": faults[2]},
                "steady": {"compiles": 0, "page faults": faults[3] * steady_runs, "runs": steady_runs}}

    plain = Executable("jax.jit training step (native)", "jax.jit", None,
                       Timing(9.0, 2.2, 0.8, 0.75, 0.9, 10, 2, counters((350e3, 320e3, 280e3, 70e3)), third=1.9),
                       resident_bytes=4 * 2**30)
    text = findings.native_reading(plain, [])
    assert text.startswith("steady after more than 2 steps (step 2 at 2.75x")
    assert "compiles per step 1/2/3/later: 1/0/0/0; page faults per step 1/2/3/steady: 350k/320k/280k/70k" in text
    assert text.endswith("nothing compiled after step 1, and step 2 touched 4.6x a steady step's fresh memory: its "
                         "slower steps map memory for the first time (the allocator warming up), not compilation.")
    flat = Executable(plain.label, plain.kind, None,
                      Timing(9.0, 2.2, 0.8, 0.75, 0.9, 10, 2, counters((350e3, 70e3, 70e3, 70e3)), third=1.9))
    assert findings.native_reading(flat, []).endswith("so its slower later steps are not compilation.")
    donated = Executable("jax.jit training step, state donated (native)", "jax.jit donated", None,
                         Timing(9.0, 0.88, 0.8, 0.75, 0.9, 10, 2, counters((117e3, 64e3, 64e3, 64e3)), third=0.9),
                         resident_bytes=3 * 2**30)
    assert findings.native_reading(donated, []).startswith("steady after 1 step")
    rows = [(2, plain), (2, donated)]
    assert findings.donation_reading(donated, rows) == (
        "steady after 1 against more than 2; step 2 at 0.40x the undonated loop's step 2, steady state at 1.00x; "
        "page faults of step 2 64k against 320k, of a steady step 64k against 70k; resident growth 3,072 MiB "
        "against 4,096 MiB.")
    assert findings.donation_reading(plain, rows) is None  # only the donated row reads against the other


@pytest.mark.slow
def test_xla_builds_benchmark_runs_torch_xlas_captured_step_on_both_xla_builds_with_the_same_result():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "benchmarks/xla_builds.py", "--rounds", "1",
                          "captures/gpt2-tiny/torch-torch_xla-train.mlir"], cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (row,) = [line for line in out.stdout.splitlines() if line.startswith("| gpt2-tiny/")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 10 and "not run" not in row, row
    times = [float(c.replace(",", "")) for c in cells[1:3] + cells[4:6]]
    assert all(t > 0 for t in times), row  # both builds compiled and executed it
    assert float(cells[-1]) < 1e-5, row  # the same step's outputs, float32 rounding apart


def test_jax_linear_algebra_runs_from_its_text(tmp_path):
    """bugs/03: jnp.linalg lowers to jaxlib's LAPACK custom calls, whose functions jax fills in only
    when it lowers such an op itself; the worker compiles text, so it fills them in (it died of SIGSEGV).
    A Cholesky's synthetic input is made positive definite (a random one gives NaN)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((4, 4), jnp.float32)
    paths = []
    for name, f in (("cholesky", jnp.linalg.cholesky), ("qr", jnp.linalg.qr), ("eigh", jnp.linalg.eigh),
                    ("svd", jnp.linalg.svd)):
        path = tmp_path / f"{name}.mlir"
        path.write_text(jax.jit(f).lower(x).as_text())
        assert "lapack_" in path.read_text()
        paths.append(path)
    report = bench_files(paths, "cpu", timeout=60, with_peaks=False)
    assert not report.failed, [e.error for e in report.failed]
    assert "positive definite" in report.rows[0][1].arguments


KV_DUS = """func.func public @main(%arg0: tensor<2x256x64xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<2x1x64xf32>,
                       %arg2: tensor<i32>) -> tensor<2x256x64xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %arg0, %arg1, %c, %arg2, %c : (tensor<2x256x64xf32>, tensor<2x1x64xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x256x64xf32>
  return %0 : tensor<2x256x64xf32>
}
"""


def test_a_program_that_donates_its_state_is_timed_over_many_runs(tmp_path):
    """bugs/12 (apple/axlearn#1068): a decode step updating its KV cache in place (`tf.aliasing_output`)
    failed every row: each run passed the buffer the run before had consumed."""
    path = tmp_path / "kv_dus.mlir"
    path.write_text(KV_DUS)
    report = bench_files([path], "cpu", timeout=60, with_peaks=False)
    (_, e), = report.rows
    assert e.ok, e.error
    assert e.timing.iterations >= 5 and "argument 0 from output 0" in e.arguments


def test_a_gap_far_larger_than_the_noise_gets_its_verdict_though_timed_apart():
    """issue 75: jax.jit against torch_xla lazy, a 13x gap, was 'too noisy to call' on a loaded machine.
    Rows timed one after the other with a 40% spread: a load that moved each row by 40% cannot make
    13x, so the verdict is given; a 1.2x gap under the same noise stays withheld."""
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.compare import verdicts
    from stackwars_ir.bench.timing import Timing

    def row(label, samples):
        s = sorted(samples)
        t = Timing(1, 1, s[len(s) // 2], s[len(s) // 10], s[-len(s) // 10], len(s), 2, {}, tuple(samples), 1, 1)
        return Executable(label, "stablehlo", 1.0, t)

    loaded = [1.0, 1.2, 1.45] * 14  # a loaded machine: spread (p90 - p10) / median about 40%
    big = verdicts([(2, row("x/jax.mlir", loaded)), (2, row("x/torch-torch_xla.mlir", [13 * x for x in loaded]))])
    assert big[0].withheld == "" and big[0].ratio == pytest.approx(13.0) and big[0].low > 5
    assert "ran 13" in big[0].sentence() and "too noisy" not in big[0].sentence()
    small = verdicts([(2, row("x/jax.mlir", loaded)), (2, row("x/torch-torch_xla.mlir", [1.2 * x for x in loaded]))])
    assert small[0].withheld.startswith("too noisy to call: spread 38%")


# bugs/11's per-axis quantized weight as an argument of the entry function (qparam_conv.mlir).
QPARAM_CONV = """module @qparam_conv {
  func.func @main(%wq: tensor<4x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {2.000000e-02,3.000000e-02,1.000000e-02,2.500000e-02}>>, %x: tensor<1x3x8x8xf32>) -> tensor<1x4x6x6xf32> {
    %0 = stablehlo.uniform_quantize %x : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.uniform<i8:f32, 5.000000e-02>>
    %1 = stablehlo.uniform_dequantize %0 : (tensor<1x3x8x8x!quant.uniform<i8:f32, 5.000000e-02>>) -> tensor<1x3x8x8xf32>
    %3 = stablehlo.uniform_dequantize %wq : (tensor<4x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {2.000000e-02,3.000000e-02,1.000000e-02,2.500000e-02}>>) -> tensor<4x3x3x3xf32>
    %4 = stablehlo.convolution(%1, %3) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
    return %4 : tensor<1x4x6x6xf32>
  }
}
"""


def test_a_quantized_program_runs_as_integer_math(tmp_path):
    """issue 78: quantized programs stopped at XLA's "'stablehlo.uniform_quantize' op can't be translated"
    and a quantized argument at "unsupported element type". Now StableHLO's own pass writes them as
    integer math before XLA compiles (runtime.integer_math), per-axis scales included, and the row says so."""
    import numpy as np

    from stackwars_ir.common.runtime import integer_math, runtime

    path = tmp_path / "qparam_conv.mlir"
    path.write_text(QPARAM_CONV)
    report = bench_files([path], "cpu", timeout=60, with_peaks=False)
    (_, e), = report.rows
    assert e.ok, e.error
    assert "quantized ops compiled as integer math (StableHLO's stablehlo-legalize-quant-to-math)" in e.arguments
    assert e.memory["argument_bytes"] == 108 + 768  # the weight in its int8 storage
    lowered = integer_math(QPARAM_CONV)
    assert "!quant" not in lowered and "chlo." not in lowered and "tensor<4x3x3x3xi8>" in lowered
    # the arithmetic: (q - 0) * scale per output channel, against numpy
    rt = runtime("cpu")
    rng = np.random.default_rng(0)
    wq = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    (got,) = rt.run(rt.compile(QPARAM_CONV), rt.put([wq, x]))
    w = wq.astype(np.float32) * np.array([0.02, 0.03, 0.01, 0.025], np.float32)[:, None, None, None]
    xq = np.clip(np.round(x / np.float32(0.05)), -128, 127) * np.float32(0.05)
    want = np.zeros((1, 4, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            want[0, :, i, j] = np.einsum("oikl,ikl->o", w, xq[0, :, i:i + 3, j:j + 3])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_a_noisy_row_is_warned_of_with_the_cause_that_fits_its_scale():
    """A 12 us program's spread (69-806% at a few runs, bugs/03 and 12) was blamed on other programs
    competing for the machine; at that scale the clock's and the scheduler's jitter alone do it."""
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.compare import noisy
    from stackwars_ir.bench.timing import Timing

    def row(label, samples):
        s = sorted(samples)
        t = Timing(1, 1, s[len(s) // 2], s[len(s) // 10], s[-len(s) // 10], len(s), 2, {}, tuple(samples), 1, 1)
        return Executable(label, "stablehlo", 1.0, t)

    loaded = [1.0, 1.2, 1.45] * 14
    tiny, big = noisy([(None, row("x/tiny.mlir", [12e-6 * x for x in loaded])),
                       (None, row("x/big.mlir", [0.1 * x for x in loaded]))])
    assert tiny.startswith("tiny: spread 37% exceeds 10%: at 14 us a run, the clock's and the scheduler's jitter")
    assert "other programs may be competing" in big and "jitter" not in big
    assert noisy([(None, row("x/calm.mlir", [0.1] * 20))]) == []


@pytest.mark.slow  # a capture and two benches of GPT-2 tiny
def test_a_capture_whose_sidecar_does_not_fit_prints_the_capture_that_writes_it_again_and_it_runs(cli, tmp_path):
    """issue 75, item 6: "re-run stackwars-ir capture" named no model, size, batch or route; the fix is now
    the command that writes this very file again, into its own folder, and run as printed it does."""
    import re
    import shlex
    import shutil

    from conftest import golden

    folder = tmp_path / "caps" / "gpt2-tiny"
    folder.mkdir(parents=True)
    for ext in (".mlir", ".json"):
        shutil.copy(golden("gpt2", "torch-torch_xla").with_suffix(ext), folder / f"torch-torch_xla{ext}")
    side = json.loads((folder / "torch-torch_xla.json").read_text())
    side["arguments"] = side["arguments"][:-1]  # one argument fewer than the module has
    (folder / "torch-torch_xla.json").write_text(json.dumps(side))
    code, _, err = cli("bench", folder / "torch-torch_xla.mlir", "--runs", "2")
    assert code == 2 and "sidecar lists" in err, err
    fix = re.search(r"\(fix: (stackwars-ir capture .*)\)$", err.strip().splitlines()[-1])[1]
    assert fix == (f"stackwars-ir capture gpt2 --size tiny --seed 0 --batch 2 --seq 16 --framework torch "
                   f"--exporter torch_xla --out {tmp_path / 'caps'} --force")
    code, _, err = cli(*shlex.split(fix)[1:])
    assert code == 0, err
    assert (folder / "torch-torch_xla.mlir").read_text() == golden("gpt2", "torch-torch_xla").read_text()
    code, _, err = cli("bench", folder / "torch-torch_xla.mlir", "--runs", "2")
    assert code == 0, err
