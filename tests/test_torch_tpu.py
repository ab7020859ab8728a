"""TorchTPU's route: its ops named by their modules (from a fixture TorchTPU wrote), and the route refused where it cannot run."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "torch_tpu" / "two-blocks.mlir"


def test_torch_tpu_ops_are_named_by_the_module_they_came_from(tmp_path):
    """TorchTPU names an op after its aten op and the source line of its module's class (two Linear
    layers share one); with module_frames' mark on each node's frame, named_by_module gives every op
    its module path, as JAX's captures carry it: the three Linear layers' matmuls in three modules,
    each LayerNorm's reduce in its own block, and nothing named after a frame or the mark."""
    from stackwars_ir.capture.torchtpu_route import MARK, named_by_module
    from stackwars_ir.ir.pool import load_one

    raw = FIXTURE.read_text()
    assert raw.count('"linear/linear"') == 3 and "blocks.0.fc/" not in raw  # its own names: the op, not the module
    out = tmp_path / "torch-torch_tpu.mlir"
    out.write_text(named_by_module(raw))
    module = load_one(out)
    ops = [op for f in module.functions for op in f.ops] if hasattr(module, "functions") else list(module.ops)
    dots = Counter(op.path for op in ops if op.name == "stablehlo.dot_general")
    assert dots == Counter({"blocks.0.fc": 1, "blocks.1.fc": 1, "head": 1}), dots
    reduces = Counter(op.path for op in ops if op.name == "stablehlo.reduce")
    assert reduces == Counter({"blocks.0.norm": 1, "blocks.1.norm": 1}), reduces
    assert {op.path for op in ops if op.name == "chlo.erf"} == {"blocks.0", "blocks.1"}  # gelu, called in the block
    assert not any(MARK in op.path for op in ops)
    assert out.read_text().startswith("#loc") and "module @torch_tpu {" in out.read_text()


def test_torch_tpus_layernorm_is_named_as_its_own_variance_form(tmp_path):
    """TorchTPU lowers LayerNorm to one variadic reduce of x and x*x, then E[x^2] - mean^2 clamped at 0;
    JAX's twins (and torchax, torch_xla's spelled-out forms) take the mean of the squared deviations.
    The diff names each block's form, so the two lowerings are told apart in its findings."""
    from stackwars_ir.capture.torchtpu_route import named_by_module
    from stackwars_ir.diff.findings import CENTERED, MEAN_SQUARE, ONE_REDUCE, facts
    from stackwars_ir.diff import diff_files

    out = tmp_path / "torch-torch_tpu.mlir"
    out.write_text(named_by_module(FIXTURE.read_text()))
    golden = Path(__file__).resolve().parents[1] / "captures"
    report = diff_files(golden / "gpt2-tiny" / "jax.mlir", out)
    norms = [blk for blk in report.b.segmentation.blocks if blk.role == "norm"]
    assert len(norms) == 2 and all(facts(report.b.module, blk).variance == ONE_REDUCE for blk in norms)
    jax_norms = [d.facts_a.variance for d in report.blocks if d.a.role == "norm"]
    assert jax_norms and set(jax_norms) == {CENTERED}
    llama = diff_files(golden / "llama-tiny" / "jax.mlir", golden / "llama-tiny" / "torch-torchax.mlir")
    assert {d.facts_a.variance for d in llama.blocks if d.a.role == "norm"} == {MEAN_SQUARE}  # RMSNorm


def test_torch_tpu_is_refused_where_it_cannot_run():
    """Its training step, --abstract and the lock's environment (torch 2.9): one line each, with the fix."""
    from stackwars_ir.capture import Request
    from stackwars_ir.capture.pipeline import run
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.common.files import distribution_version

    with pytest.raises(StackwarsError, match="--step train cannot be captured through torch_tpu"):
        Request("gpt2", framework="torch", exporters=("torch_tpu",), step="train").validated()
    with pytest.raises(StackwarsError, match="torch_tpu cannot capture without weights: TorchTPU's exporter"):
        Request("gpt2", framework="torch", exporters=("torch_tpu",), abstract=True).validated().check_weightless()
    if distribution_version("torch_tpu") is None:
        with pytest.raises(StackwarsError, match="runs in a version stack of its own: .*torch >= 2.11") as e:
            run(Request("gemm", framework="torch", exporters=("torch_tpu",)), Path("/nonexistent"))
        assert "--stack torch-tpu" in e.value.fix


def test_all_exporters_means_those_the_lock_runs():
    from stackwars_ir.common.routes import EXPORTERS, LOCK_EXPORTERS
    from stackwars_ir.workload.shapes import exporters_asked

    assert "torch_tpu" in EXPORTERS and "torch_tpu" not in LOCK_EXPORTERS
    assert exporters_asked("gpt2", ("all",))[0] == ("torch_xla", "torchax")


def test_the_tensors_the_program_makes_move_to_torch_tpus_device_while_it_lowers():
    """torch.export records this CPU as the device of the tensors a program makes (torch.arange), as a
    keyword or positionally (aten.to.device); on_device names TorchTPU's device there while it lowers,
    and gives the program back as it was."""
    import torch

    from stackwars_ir.capture.torchtpu_route import on_device

    class Positions(torch.nn.Module):
        def forward(self, x):
            pos = torch.arange(x.shape[1], device=x.device)
            return x + pos.to(x.device, torch.float32)

    ep = torch.export.export(Positions(), (torch.zeros(2, 4),))

    def devices():
        return [a for n in ep.graph.nodes for a in (*n.args, *n.kwargs.values()) if isinstance(a, torch.device)]

    before = devices()
    assert before and all(d.type == "cpu" for d in before)
    with on_device(ep, torch.device("meta")) as moved:
        assert moved >= 1 and all(d.type == "meta" for d in devices())
    assert devices() == before


def test_a_sweep_takes_the_locks_routes_only():
    """A grid's default routes are the lock's (a sweep's workers run the lock's packages); a grid that
    names torch_tpu is refused in one line that says where it runs."""
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.sweep.grid import grid_of

    grid = grid_of([{"commands": ["capture"], "models": ["ffn"]}])
    assert {j.request.exporters[0] if j.request.framework == "torch" else "jax" for j in grid.jobs} == \
        {"jax", "torch_xla", "torchax"}
    with pytest.raises(StackwarsError, match="route 'torch_tpu' runs in a version stack of its own"):
        grid_of([{"commands": ["capture"], "models": ["ffn"], "routes": ["torch_tpu"]}])
