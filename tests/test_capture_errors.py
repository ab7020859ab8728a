"""A capture that fails says so at the model's own line (data-dependent branches and shapes, ops a route cannot lower); `--exporter all` tries every route; a model built only for real is still sized."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import ROOT
from stackwars_ir import models

ADAPTERS = ROOT / "tests" / "adapters"


@pytest.fixture(scope="module")
def shared_folder(tmp_path_factory):
    """A user's folder of adapters: the MoE, quantized and calibrated ones of tests/adapters (one for
    the module: an adapter is imported once per process, from the first folder that names it)."""
    mine = tmp_path_factory.mktemp("my_models")
    for name in ("moe_sparse", "moe_dense", "quantized", "calib"):
        shutil.copy(ADAPTERS / f"{name}.py", mine / f"{name}.py")
    return mine


@pytest.fixture
def folder(shared_folder, monkeypatch):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    return shared_folder


def _line(path, text: str) -> int:
    """The line number of the first line of `path` holding `text`."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_branch_on_a_data_dependent_value_is_named_at_its_line(cli, folder, tmp_path):
    """bugs/14 (tenstorrent/tt-xla#1283): a sparse MoE's `if tok.numel() == 0: continue` gave FX graph
    dumps on the terminal, torch.export's guard message and an sdpa-attention hint for a model without
    attention. Now: the adapter's line, the branch, the line that made the size, a fix that fits."""
    code, out, err = cli("--adapters", folder, "capture", "moe_sparse", "--exporter", "all",
                         "--out", tmp_path / "out")
    src = folder / "moe_sparse.py"
    branch, where = _line(src, "tok.numel() == 0"), _line(src, "torch.where(idx == e)")
    assert code == 2, (out, err)
    assert f"moe_sparse.py:{branch}: in forward(): torch.export cannot branch on a data-dependent value" in err
    assert f"made at line {where} (`tok, slot = torch.where(idx == e)`)" in err
    assert "torch._check" in err and "fixed capacity per expert" in err
    assert "sdpa" not in err and "attention" not in err
    assert "def forward(" not in out + err and "Traceback" not in err  # no FX graph, no traceback
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_data_dependent_shape_is_named_by_every_route_at_its_line(cli, folder, tmp_path):
    """bugs/14, without the branch: torch_xla said "ops not capturable: aten::nonzero" (no line), torchax
    "ConcretizationTypeError: Abstract tracer value" (no op, no line). --exporter all tries both."""
    code, out, err = cli("--adapters", folder, "capture", "moe_sparse", "--size", "nobranch", "--exporter", "all",
                         "--out", tmp_path / "out")
    where = _line(folder / "moe_sparse.py", "torch.where(idx == e)")
    assert code == 2, (out, err)
    for route in ("torch_xla", "torchax"):
        assert (f"torch-{route}: not captured: {folder}/moe_sparse.py:{where}: in forward(): "
                f"`tok, slot = torch.where(idx == e)` (aten.where.default) gives an output whose size depends on "
                f"the data, which {route} cannot lower") in err
    assert "(torch_xla: aten::nonzero)" in err and "every expert on every token" in err
    assert "drop the branch" not in err  # there is none


def test_the_same_moe_dispatched_densely_captures_on_every_route(cli, folder, tmp_path):
    code, out, err = cli("--adapters", folder, "capture", "moe_dense", "--framework", "both", "--exporter", "all",
                         "--out", tmp_path / "out")
    assert code == 0, err
    for stem in ("jax", "torch-torch_xla", "torch-torchax"):
        side = json.loads((tmp_path / "out" / "moe_dense-tiny" / f"{stem}.json").read_text())
        assert side["parity"]["ok"] is True, stem


def test_exporter_all_writes_the_routes_that_capture_and_names_the_op_the_others_cannot_lower(cli, folder, tmp_path):
    """A pt2e-style quantized model: torchax has no lowering for quantized_decomposed ops (it said
    `AssertionError: quantized_decomposed.quantize_per_tensor.default`); torch_xla lowers them to
    stablehlo.uniform_quantize, which XLA compiles once written as integer math (runtime.integer_math).
    --exporter all stopped at the first route that failed; now it tries each, writes what captured, exits 1."""
    out_dir = tmp_path / "out"
    code, out, err = cli("--adapters", folder, "capture", "quantized", "--exporter", "all", "--out", out_dir)
    line = _line(folder / "quantized.py", "quantize_per_tensor(x")
    assert code == 1, (out, err)
    assert "parity torch-torch_xla" in out and "ok (tolerance" in out
    assert (f"torch-torchax: not captured: {folder}/quantized.py:{line}: in forward(): torchax has no lowering "
            "for quantized_decomposed.quantize_per_tensor.default") in err
    assert "1 of 2 routes not captured" in err and len(err.strip().splitlines()) == 1
    folder_out = out_dir / "quantized-tiny"
    assert sorted(p.name for p in folder_out.iterdir()) == ["torch-torch_xla.json", "torch-torch_xla.mlir",
                                                            "torch-torch_xla.npz"]
    assert "!quant.uniform<i8:f32" in (folder_out / "torch-torch_xla.mlir").read_text()
    # bench runs the quantized program as written, on the capture's real values, and says how
    code, out, err = cli("--adapters", folder, "bench", folder_out / "torch-torch_xla.mlir", "--json",
                         tmp_path / "b.json")
    assert code == 0, err
    (row,) = json.loads((tmp_path / "b.json").read_text())["results"]
    assert row["error"] is None and row["proof"]["ok"] and "compiled as integer math (StableHLO's stablehlo-legalize-quant-to-math)" in row["arguments"]


def test_a_model_that_cannot_be_built_on_the_meta_device_is_built_for_real(cli, folder, tmp_path):
    """A model that calibrates with .item() while built failed "Tensor.item() cannot be called on meta
    tensors (fix: correct the adapter)": the tool sized its weights on the meta device."""
    code, out, err = cli("--adapters", folder, "capture", "calib", "--exporter", "torch_xla", "--out", tmp_path / "o")
    assert code == 0, err
    assert "calib-tiny cannot be built on the meta device" in err and "built for real on the CPU" in err
    assert "parity torch-torch_xla" in out and " ok " in out
