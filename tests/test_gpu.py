"""The GPU code paths: StableHLO and native baselines on CUDA, with proof of work. Skipped without a GPU."""
from __future__ import annotations

import pytest

from conftest import golden


@pytest.fixture(scope="module")
def gpu():
    from stackwars_ir.errors import StackwarsError
    from stackwars_ir.runtime import runtime

    try:
        return runtime("gpu")
    except StackwarsError:
        pytest.skip("no GPU backend here (make setup-gpu on a machine with an NVIDIA GPU)")


def test_stablehlo_captures_run_on_the_gpu_and_prove_their_output(gpu):
    from stackwars_ir.bench.run import bench_files

    report = bench_files([golden("gpt2", s) for s in ("jax", "torch-torch_xla", "torch-torchax")], "gpu", timeout=60)
    assert report.backend == "gpu" and not report.failed
    for _, e in report.rows:
        assert e.proof.ok and e.timing.steady > 0 and e.hlo["fusions"] > 0
    assert report.peaks["flops_per_s"] > 1e12  # any datacenter GPU is past a TFLOP/s


def test_native_baselines_run_on_the_gpu_and_torch_xla_says_it_has_no_route(gpu):
    from stackwars_ir.bench.native import BASELINES, run_baselines
    from stackwars_ir.capture import Request

    rows = {e.kind if e.ok else e.label: e for e in run_baselines(Request("ffn").validated(), BASELINES, 60, "gpu")}
    for kind in ("jax.jit", "torch eager", "torch.compile"):
        assert rows[kind].ok and rows[kind].proof.ok, rows[kind].error
    assert "NVIDIA" in rows["torch eager"].label or "H" in rows["torch eager"].label
    assert "no gpu route" in rows["torch_xla"].error
