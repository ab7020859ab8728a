"""The GPU code paths: StableHLO and native baselines on CUDA, with proof of work. Skipped without a GPU."""
from __future__ import annotations

import pytest

from conftest import golden


@pytest.fixture(scope="module")
def gpu():
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.common.runtime import runtime

    try:
        return runtime("gpu")
    except StackwarsError:
        pytest.skip("no GPU backend here (on a machine with an NVIDIA GPU: make setup-gpu, then "
                    "JAX_PLATFORMS=cuda,cpu pytest tests/test_gpu.py; conftest pins the CPU otherwise)")


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


def test_a_profile_on_the_gpu_times_every_kernel_and_splits_the_gap_by_block(gpu):
    """bench --profile on the GPU (CUPTI's kernel events, bench.profile._read_gpu) and diff --bench."""
    from stackwars_ir.bench.run import bench_files
    from stackwars_ir.bench.timing import Asked
    from stackwars_ir.diff import diff_files, with_times

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    report = bench_files([a, b], "gpu", timeout=60, asked=Asked(runs=5, profile=3))
    assert not report.failed, [e.error for _, e in report.rows]
    (_, ea), (_, eb) = report.rows
    for e in (ea, eb):
        p = e.profile
        assert p.runs == 3 and p.untraced == () and [k.calls for k in p.kernels] == [1] * len(p.kernels)
        assert 0 < p.busy_s <= p.wall_s
    diff = diff_files(a, b)
    time = with_times(diff, diff.result(), ea.profile, eb.profile)
    roles = {blk.role for blk in time.blocks if blk.metrics["time"]["a"] > 0 and blk.metrics["time"]["b"] > 0}
    assert {"attention", "mlp", "norm"} <= roles
