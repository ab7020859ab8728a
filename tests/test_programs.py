"""Capture options for programs as written at scale: --scan-layers and --remat on JAX and torch_xla, parity-checked, and what the differ makes of them."""
from __future__ import annotations

import json

import pytest

from conftest import golden
from stackwars_ir.capture import Request, run
from stackwars_ir.workload.train import register_torch_xla

LAYERED = (("norm", 0), ("attention", 0), ("norm", 1), ("mlp", 0))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """LLaMA tiny captured scanned (forward, both frameworks; training step, torch_xla),
    rematerialized (training step, both) and scanned with remat (training step, JAX)."""
    out = tmp_path_factory.mktemp("programs")
    register_torch_xla()  # before this process's first backward
    sets = {"scan": run(Request("llama", scan_layers=True), out),
            "remat": run(Request("llama", step="train", remat=True), out),
            "scan-remat": run(Request("llama", framework="jax", step="train", scan_layers=True, remat=True), out),
            "train-scan": run(Request("llama", framework="torch", step="train", scan_layers=True), out)}
    return out / "llama-tiny", sets


@pytest.mark.slow
def test_scanned_and_rematerialized_captures_pass_parity_under_their_own_names(made):
    folder, sets = made
    assert all(s.ok for s in sets.values())
    names = sorted(p.name for s in sets.values() for p in s.files if p.suffix == ".mlir")
    assert names == ["jax-scan.mlir", "jax-train-remat.mlir", "jax-train-scan-remat.mlir",
                     "torch-torch_xla-scan.mlir", "torch-torch_xla-train-remat.mlir", "torch-torch_xla-train-scan.mlir"]
    for stem in ("jax-scan", "torch-torch_xla-scan"):
        side = json.loads((folder / f"{stem}.json").read_text())
        assert side["program"] == {"scan_layers": True, "remat": False} and side["parity"]["ok"]
        assert "stablehlo.while" in (folder / f"{stem}.mlir").read_text()
    assert json.loads((folder / "jax-train-scan-remat.json").read_text())["program"] == \
        {"scan_layers": True, "remat": True}


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["jax-scan", "torch-torch_xla-scan"])
def test_each_scanned_capture_aligns_every_layer_with_the_unrolled_torch_capture(made, stem):
    """The loop body's norms, attention and MLP pair with each unrolled layer's by key, and the
    executed dot_generals are those of the unrolled program: two layers of nine."""
    from stackwars_ir.diff import diff_files

    folder, _ = made
    report = diff_files(folder / f"{stem}.mlir", golden("llama", "torch-torch_xla"))
    assert report.alignment.method == "key"
    paired = {(d.a.role, d.b.layer, d.a.ordinal): d for d in report.blocks if d.b.layer}
    for layer in range(2):
        for role, ordinal in LAYERED:
            assert paired[(role, (layer,), ordinal)].a.trips == 2, (role, layer)
    assert not any(b.role in ("norm", "attention", "mlp") for b in report.alignment.only_b)
    result = report.result()
    assert result.a.loops == (2,)
    assert result.a.executed["stablehlo.dot_general"] == result.b.histogram["stablehlo.dot_general"] == 18
    # The body's slicing and tuple are the loop's ("other", scanned), not the layer's residual, on
    # either framework (torch_xla's carry no location; JAX's carry `while.body`).
    body = [b for b in report.a.segmentation.blocks if b.trips == 2]
    residual = [b.histogram() for b in body if b.role == "residual"]
    assert residual and not any({"stablehlo.dynamic_slice", "stablehlo.get_tuple_element"} & set(h) for h in residual)
    assert any("stablehlo.dynamic_slice" in b.histogram() for b in body if b.role == "other")
    # The while itself is the program's, not the block that reads its result (it sat in the final norm).
    assert not [b.label for b in report.a.segmentation.blocks if b.role != "other"
                and any(op.name == "stablehlo.while" for op, _ in b.ops)]


@pytest.mark.slow
def test_torch_remat_names_its_recomputed_ops_per_block_as_jax_does(made):
    """torch_xla's checkpoint recomputes each layer's forward in the backward: those ops carry JAX's
    rematted_computation scope word, so remat against no remat counts them per backward block, on
    the PyTorch side as on the JAX side."""
    from stackwars_ir.diff import diff_files

    folder, _ = made
    for stem in ("torch-torch_xla-train-remat", "jax-train-remat"):
        report = diff_files(golden("llama", "torch-torch_xla-train"), folder / f"{stem}.mlir")
        assert report.alignment.method == "key"
        recomputed = {(d.a.role, d.a.layer): d.facts_b.recomputed for d in report.blocks
                      if d.a.phase == "backward" and d.a.layer}
        for layer in ((0,), (1,)):
            assert recomputed[("attention", layer)] > 0 and recomputed[("mlp", layer)] > 0, (stem, recomputed)
        assert all(d.facts_a.recomputed == 0 for d in report.blocks)


@pytest.mark.slow
def test_a_scanned_rematerialized_training_step_aligns_its_layers_forward_and_backward(made):
    from stackwars_ir.diff import diff_files

    folder, _ = made
    report = diff_files(folder / "jax-train-scan-remat.mlir", golden("llama", "torch-torch_xla-train"))
    assert report.alignment.method == "key"
    paired = {(d.a.role, d.b.layer, d.a.ordinal, d.a.phase) for d in report.blocks if d.b.layer and d.a.trips == 2}
    for layer in range(2):
        for role, ordinal in LAYERED:
            for phase in ("forward", "backward"):
                assert (role, (layer,), ordinal, phase) in paired, (role, layer, phase)


@pytest.mark.slow
def test_torch_xla_scanned_training_step_aligns_every_layer_backward_too(made):
    """torch_xla's scanned backward is one loop body under `layers`, its softmax and norm outputs
    read back from what the forward saved: split by the forward block that computed each saved
    activation, every layer's norms, attention and MLP backward pair with the unrolled step's,
    and the body's own slicing of the saved activations is the loop's plumbing ("other", as JAX's
    `while.body`), not the layer's residual (issue 56: 2 -> 92 ops)."""
    from stackwars_ir.diff import diff_files

    folder, _ = made
    report = diff_files(golden("llama", "torch-torch_xla-train"), folder / "torch-torch_xla-train-scan.mlir")
    assert report.alignment.method == "key"
    paired = {(d.a.role, d.a.layer, d.a.ordinal, d.a.phase): d.b for d in report.blocks if d.b.trips == 2}
    for layer in range(2):
        for role, ordinal in LAYERED:
            for phase in ("forward", "backward"):
                assert (role, (layer,), ordinal, phase) in paired, (role, layer, ordinal, phase)
    assert not any(b.layer and b.role in ("norm", "attention", "mlp") for b in report.alignment.only_a)
    backward = {(b.role, b.ordinal): b for b in paired.values() if b.phase == "backward"}
    # each part's ops are that block's gradient: the MLP's reads its silu's logistic (recomputed by
    # scan_layers' partitioner), the attention's its saved softmax through a multiply
    assert backward[("mlp", 0)].histogram()["stablehlo.logistic"] == 1
    assert backward[("attention", 0)].histogram()["stablehlo.dot_general"] >= 8
    assert all(b.histogram()["stablehlo.dot_general"] == 0 for k, b in backward.items() if k[0] == "norm")
    leftover = [b for b in report.alignment.only_b if b.phase == "backward" and b.trips == 2]
    assert sorted(b.role for b in leftover) == ["other", "residual"]
    plumbing = next(b for b in leftover if b.role == "other").histogram()
    assert {"stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.get_tuple_element"} <= set(plumbing)
    residual = next(b for b in leftover if b.role == "residual").histogram()
    assert not {"stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"} & set(residual), residual


@pytest.mark.parametrize("args, message", [
    (("--remat",), "--remat recomputes forward ops in the backward, and a forward capture has no backward"),
    (("--scan-layers", "--exporter", "torchax"), "--scan-layers cannot be captured through torchax"),
    (("--step", "train", "--remat", "--exporter", "torchax"), "--remat cannot be captured through torchax"),
])
def test_program_options_refused_in_one_line(cli, tmp_path, args, message):
    code, out, err = cli("capture", "llama", "--out", tmp_path, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_a_model_without_a_layer_list_refuses_scan(cli, tmp_path):
    code, _, err = cli("capture", "resnet50", "--scan-layers", "--out", tmp_path)
    assert code == 2 and "names no list of identical layers" in err and "llama" in err, err


def test_native_baselines_with_a_layers_program_are_jax_alone():
    from stackwars_ir.bench.native import baselines_asked
    from stackwars_ir.common.errors import StackwarsError

    assert baselines_asked(("jax", "jax_donate"), "train", "-scan-remat") == ("jax", "jax_donate")
    with pytest.raises(StackwarsError, match="baseline 'eager' cannot run the layers"):
        baselines_asked(("jax", "eager"), "forward", "-scan")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["bert", "vit"])
def test_encoders_scan_their_layers_on_both_frameworks_and_every_layer_aligns_with_the_unrolled_capture(
        tmp_path, model):
    """BERT (encoder.layer) and ViT (layers) take --scan-layers as LLaMA does: JAX's lax.scan and
    torch_xla's scan_layers, parity-checked; each loop body pairs with both unrolled layers."""
    from stackwars_ir.diff import diff_files

    made = run(Request(model, scan_layers=True), tmp_path)
    assert made.ok
    for stem in ("jax-scan", "torch-torch_xla-scan"):
        path = tmp_path / f"{model}-tiny" / f"{stem}.mlir"
        assert "stablehlo.while" in path.read_text()
        report = diff_files(path, golden(model, "torch-torch_xla"))
        assert report.alignment.method == "key", stem
        layers = {(d.a.role, d.b.layer) for d in report.blocks if d.b.layer and d.a.trips == 2}
        for layer in range(2):
            assert {("attention", (layer,)), ("mlp", (layer,))} <= layers, (stem, layers)
        assert report.result().a.loops == (2,)


@pytest.mark.slow
def test_a_scanned_programs_kernels_and_time_go_to_its_layers(made, tmp_path):
    """diff --kernels and --bench read the loop's body: each scanned layer's row holds the body's
    kernels (compiled once) and one trip's share of their profiled time, and what the rows, the
    unmatched blocks and the untraced kernels hold adds up to every kernel's time."""
    from click.testing import CliRunner

    from stackwars_ir.bench.kernels import block_kernels, kernels_of_files
    from stackwars_ir.bench.attach import block_times_from
    from stackwars_ir.cli.commands import main
    from stackwars_ir.diff import diff_files

    folder, _ = made
    files = (golden("llama", "jax"), folder / "jax-scan.mlir")
    bench = tmp_path / "bench.json"
    run = CliRunner().invoke(main, ["bench", *map(str, files), "--runs", "5", "--profile", "3", "--json", str(bench)])
    assert run.exit_code == 0, run.stderr
    scanned = json.loads(bench.read_text())["results"][1]["profile"]["kernels"]
    (compiled,) = kernels_of_files([files[1]])
    in_body = {k.name for k in compiled.kernels if k.loop and "while.body" in k.path}
    assert len(in_body) > 20 and {k["calls"] for k in scanned if k["name"] in in_body} == {2}
    report = diff_files(*files)
    result = block_times_from(report, block_kernels(report, report.result(), files), bench)
    rows = {(b.layer, b.role, b.ordinal): b for b in result.blocks if b.role in ("attention", "mlp", "norm")}
    for role, ordinal in LAYERED:
        zero, one = rows[((0,), role, ordinal)], rows[((1,), role, ordinal)]
        assert zero.metrics["kernels"]["b"] > 0 and zero.metrics["kernels"]["b"] == one.metrics["kernels"]["b"]
        assert zero.metrics["time"]["b"] > 0 and zero.metrics["time"]["b"] == pytest.approx(one.metrics["time"]["b"])
    t = result.metrics["time"]["b"]
    paired = sum(b.metrics["time"]["b"] for b in result.blocks)
    assert paired + t["unaligned_s"] + t["unattributed_s"] == pytest.approx(t["kernels_sum_s"], rel=1e-6)
