"""Bench: every figure present and sane on the tiny golden captures; bad modules fail alone."""
from __future__ import annotations

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
    from stackwars_ir.bench.run import bench_model

    report = bench_model("mha", batches=(1, 2), baselines=("jax", "eager"), out_dir=tmp_path, timeout=30)
    kinds = {(b, e.kind) for b, e in report.rows}
    assert {(1, "stablehlo"), (1, "jax.jit"), (1, "torch eager"), (2, "stablehlo")} <= kinds
    assert not report.failed and report.crossover
