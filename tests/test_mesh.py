"""Sharded programs: --mesh's rule, sharded captures on forced CPU devices (parity), shardings read from IR and diffed, per-device plans."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import golden
from stackwars_ir.common.errors import StackwarsError
from stackwars_ir.workload.mesh import Mesh, spec_text

LLAMA_TP = {"q_proj.weight": 0, "k_proj.weight": 0, "v_proj.weight": 0, "o_proj.weight": 1,
            "gate_proj.weight": 0, "up_proj.weight": 0, "down_proj.weight": 1}


def test_mesh_parses_axes_in_order_and_refuses_bad_text_in_one_line():
    mesh = Mesh.parse("fsdp=4, tp=2")
    assert mesh.axes == (("fsdp", 4), ("tp", 2)) and mesh.devices == 8 and mesh.stem == "-fsdp4-tp2"
    for bad in ("", "fsdp", "fsdp=0", "fsdp=2,fsdp=2", "ep=2", "fsdp=x"):
        with pytest.raises(StackwarsError) as e:
            Mesh.parse(bad)
        assert "--mesh" in str(e.value) and "\n" not in e.value.one_line()


def test_the_rule_places_tensor_parallel_dims_first_then_fsdp_on_the_largest_free_dimension():
    mesh = Mesh.parse("fsdp=2,tp=2")
    rule = {(kind, name, shape): spec_text(mesh.spec(kind, name, shape, LLAMA_TP)) for kind, name, shape in [
        ("parameter", "layers.0.self_attn.q_proj.weight", (64, 64)),  # column: output features on tp
        ("parameter", "layers.0.mlp.down_proj.weight", (64, 128)),  # row: input features on tp
        ("parameter", "embed_tokens.weight", (512, 64)),  # no tp entry: fsdp on the largest dimension
        ("optimizer", "exp_avg.layers.0.mlp.down_proj.weight", (64, 128)),  # moments placed as their parameter
        ("optimizer", "step", ()),
        ("buffer", "rotary_emb.inv_freq", (8,)),  # buffers whole
        ("input", "input_ids", (2, 16)),  # the batch on fsdp
        ("input", "input_ids", (3, 16)),  # a batch fsdp does not divide: whole
        ("parameter", "norm.weight", (63,)),  # nothing fsdp divides: whole
    ]}
    assert list(rule.values()) == ["[tp, fsdp]", "[fsdp, tp]", "[fsdp, -]", "[fsdp, tp]", "[]", "[-]",
                                   "[fsdp, -]", "[-, -]", "[-]"]
    assert spec_text(Mesh.parse("dp=2").spec("parameter", "embed_tokens.weight", (512, 64))) == "[-, -]"


def test_a_tp_axis_needs_the_adapters_table_and_the_stems_name_the_mesh():
    from stackwars_ir.workload import Request

    with pytest.raises(StackwarsError, match="tensor-parallel"):
        Request("bert", mesh="tp=2", framework="jax").validated()
    req = Request("llama", mesh="fsdp=2, tp=2", step="train", exporters=("torch_xla", "torchax")).validated()
    assert req.mesh == "fsdp=2,tp=2"
    assert req.stems() == ["jax-train-fsdp2-tp2", "torch-torch_xla-train-fsdp2-tp2", "torch-torchax-train-fsdp2-tp2"]


def _cli(*args) -> subprocess.CompletedProcess:
    """The CLI in a fresh process: a mesh's CPU devices are set before jax starts."""
    exe = Path(sys.executable).parent / "stackwars-ir"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """LLaMA tiny on a 2x2 mesh: forward and training step, JAX, torch_xla (SPMD) and torchax."""
    out = tmp_path_factory.mktemp("mesh")
    for step in ("forward", "train"):
        proc = _cli("capture", "llama", "--framework", "both", "--exporter", "all", "--step", step,
                    "--mesh", "fsdp=2,tp=2", "--out", out)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "llama-tiny"


ROUTES = ("jax", "torch-torch_xla", "torch-torchax")


@pytest.mark.slow
def test_sharded_captures_pass_parity_on_four_cpu_devices_with_the_same_shardings_on_every_route(sharded):
    from stackwars_ir.ir import load, sharding

    placed = {}
    for stem in [f"{r}{step}-fsdp2-tp2" for step in ("", "-train") for r in ROUTES]:
        side = json.loads((sharded / f"{stem}.json").read_text())
        assert side["parity"]["ok"] and side["mesh"]["axes"] == {"fsdp": 2, "tp": 2}, stem
        (result,) = load([sharded / f"{stem}.mlir"])
        module = result.modules[0]
        assert sharding.devices(module) == 4
        names = {a["index"]: a["name"] for a in side["arguments"]}
        placed[stem] = {a.name: a for a in sharding.argument_shardings(module, names)}
        if "torch_xla" in stem:  # GSPMD attributes: pieces per dimension, no axis names
            assert "mhlo.sharding" in (sharded / f"{stem}.mlir").read_text()
            continue
        text = (sharded / f"{stem}.mlir").read_text()
        assert 'sdy.mesh @mesh = <["fsdp"=2, "tp"=2]>' in text and "mhlo.num_partitions = 4" in text
        # What the IR says is what the sidecar recorded from the rule.
        assert {n: a.split.replace("whole", "") for n, a in placed[stem].items()} == \
            {n: ("" if set(s[1:-1].split(", ")) <= {"-", ""} else s) for n, s in side["mesh"]["shardings"].items()}
    assert placed["jax-fsdp2-tp2"]["layers.0.self_attn.q_proj.weight"].split == "[tp, fsdp]"
    for step in ("", "-train"):
        jax_side = placed[f"jax{step}-fsdp2-tp2"]
        for route in ROUTES[1:]:
            other = placed[f"{route}{step}-fsdp2-tp2"]
            common = set(jax_side) & set(other)
            assert len(common) >= 22 and all(jax_side[n].parts == other[n].parts for n in common), (route, step)


@pytest.mark.slow
def test_a_sharded_capture_diffed_against_its_unsharded_twin_names_every_argument_split(sharded, cli):
    from stackwars_ir.diff import diff_files

    result = diff_files(golden("llama", "jax"), sharded / "jax-fsdp2-tp2.mlir").result()
    assert result.differs and (result.a.devices, result.b.devices) == (1, 4)
    changes = {c.name: (c.a, c.b) for c in result.sharding_changes}
    side = json.loads((sharded / "jax-fsdp2-tp2.json").read_text())["mesh"]["shardings"]
    split = {n for n, s in side.items() if set(s[1:-1].split(", ")) - {"-", ""}}
    assert set(changes) == split and len(split) == 21  # every parameter and the ids; the rotary buffer stays whole
    assert changes["layers.1.mlp.down_proj.weight"] == ("whole", "[fsdp, tp]")
    # The same rule on both sides: no sharding differs, Shardy's against GSPMD's alike.
    for route in ROUTES[1:]:
        same = diff_files(sharded / "jax-train-fsdp2-tp2.mlir", sharded / f"{route}-train-fsdp2-tp2.mlir").result()
        assert same.sharding_changes == () and same.a.devices == same.b.devices == 4
    code, out, _ = cli("diff", golden("llama", "jax"), sharded / "jax-fsdp2-tp2.mlir")
    assert code == 1 and "arguments split differently: 21 of 22" in out
    assert "layers.0.mlp.down_proj.weight 64x128: A whole, B [fsdp, tp]" in out
    # The diff says first what it mixes (issue 56): the collectives are not in StableHLO, and the
    # torch_xla mesh capture came by lazy tensors where the plain one came by torch.export.
    assert "note: jax-fsdp2-tp2 is sharded over 4 devices, jax runs on one" in out and "diff --kernels" in out
    code, out, _ = cli("diff", golden("llama", "torch-torch_xla"), sharded / "torch-torch_xla-fsdp2-tp2.mlir")
    assert "note: different routes: torch-torch_xla by torch.export, then torch_xla's exported-program path; " \
           "torch-torch_xla-fsdp2-tp2 by torch_xla's lazy tensors (sharded over a mesh" in out, out[:1500]


def test_gspmd_shardings_are_read_as_torch_xla_writes_them(tmp_path):
    from stackwars_ir.ir import load, sharding

    f = tmp_path / "gspmd.mlir"
    f.write_text('module @IrToHlo.13 {\n  func.func @main(%arg0: tensor<8x8xf32> {mhlo.sharding = '
                 '"{devices=[2,2]0,1,2,3}"}, %arg1: tensor<4x8xf32> {mhlo.sharding = "{devices=[2,1,2]0,1,2,3 '
                 'last_tile_dim_replicate}"}, %arg2: tensor<8xf32> {mhlo.sharding = "{replicated}"}) -> '
                 'tensor<4x8xf32> {\n    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0] : '
                 '(tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>\n    return %0 : tensor<4x8xf32>\n  }\n}\n')
    (result,) = load([f])
    module = result.modules[0]
    args = sharding.argument_shardings(module)
    assert [(a.parts, a.replicated_on, a.split) for a in args] == [
        ((2, 2), 1, "[2, 2]"), ((2, 1), 2, "[2, -]"), ((1,), 1, "whole")]
    assert sharding.devices(module) == 4


@pytest.mark.slow
def test_memory_plans_a_sharded_file_per_device_on_as_many_cpu_devices(sharded):
    from stackwars_ir.bench.planning import plan_files

    report = plan_files([golden("llama", "jax"), sharded / "jax-fsdp2-tp2.mlir",
                         sharded / "torch-torch_xla-fsdp2-tp2.mlir"], "cpu")
    whole, split, gspmd = report.plans
    assert (whole.devices, split.devices, gspmd.devices) == (1, 4, 4) and whole.ok and split.ok and gspmd.ok
    # Each device holds about a quarter of the arguments (the rotary buffer aside), Shardy's module and
    # GSPMD's alike (torch_xla's is compiled by GSPMD's partitioner: Shardy left it whole on every device).
    assert 0.2 < split.argument_bytes / whole.argument_bytes < 0.4
    assert 0.2 < gspmd.argument_bytes / whole.argument_bytes < 0.4


@pytest.mark.slow
def test_diff_kernels_counts_the_collectives_each_block_needs_on_either_side(sharded):
    from stackwars_ir.bench.kernels import kernels_of_files
    from stackwars_ir.diff import diff_files, with_kernels

    a, b = sharded / "jax-fsdp2-tp2.mlir", sharded / "torch-torch_xla-fsdp2-tp2.mlir"
    report = diff_files(a, b)
    ka, kb = kernels_of_files([a, b])
    result = with_kernels(report, report.result(), ka, kb)
    for side in ("a", "b"):
        moved = result.metrics["kernels"][side]["collectives"]
        assert moved.get("all-gather", [0])[0] > 0 and all(n > 0 and size > 0 for n, size in moved.values()), side
    mlp = [d for d in result.blocks if d.role == "mlp"]
    assert len(mlp) == 2 and all(d.metrics["collectives"]["a"] and d.metrics["collectives"]["b"] for d in mlp)


@pytest.mark.slow
def test_bench_times_a_sharded_file_on_as_many_cpu_devices_and_refuses_one_device_baselines(sharded):
    from stackwars_ir.bench.native import baselines_asked
    from stackwars_ir.bench.run import bench_files

    report = bench_files([sharded / "jax-fsdp2-tp2.mlir"], "cpu", timeout=300, with_peaks=False)
    ((_, row),) = report.rows
    assert row.ok, row.error
    with pytest.raises(StackwarsError, match="one device"):
        baselines_asked("jax", "forward", "", mesh="fsdp=2")
    assert baselines_asked("none", "forward", "", mesh="fsdp=2") == ()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="needs libtpu (`make setup-tpu`)")
def test_a_sharded_file_is_planned_and_its_collectives_counted_per_chip_of_a_v6e_slice(sharded):
    from stackwars_ir.bench.kernels import kernels_of_files
    from stackwars_ir.bench.planning import plan_files

    whole, split = plan_files([golden("llama", "jax"), sharded / "jax-fsdp2-tp2.mlir"], "tpu-v6e").plans
    assert (whole.devices, split.devices) == (1, 4) and whole.ok and split.ok
    # Less per chip, not a quarter: at tiny sizes the TPU's tiled layouts pad each small piece (measured: half).
    assert split.argument_bytes < 0.75 * whole.argument_bytes
    (k,) = kernels_of_files([sharded / "jax-fsdp2-tp2.mlir"], "tpu-v6e")
    assert k.error is None and any(x.collective == "all-gather" and x.bytes > 0 for x in k.kernels)
