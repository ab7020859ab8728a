"""Abstract capture: from shapes alone, the same IR as with weights; sizes that do not fit refused; the TPU compiler's refusal read."""
from __future__ import annotations

import json

import pytest

from conftest import golden
from stackwars_ir.bench.planning import refusal
from stackwars_ir.capture import Request, run
from stackwars_ir.capture.sanitize import relativize


@pytest.fixture(scope="module")
def abstract_llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("abstract")
    run(Request("llama", exporters=("torchax",), abstract=True), out, show=False)
    run(Request("llama", exporters=("torchax",), step="train", abstract=True), out, show=False)
    return out / "llama-tiny"


@pytest.mark.parametrize("stem", ["jax", "torch-torchax", "jax-train", "torch-torchax-train"])
def test_shapes_alone_lower_to_the_same_ir_as_the_weights(abstract_llama, stem):
    # The weights are arguments either way: the capture without them is the golden, byte for byte.
    assert (abstract_llama / f"{stem}.mlir").read_text() == golden("llama", stem).read_text()
    side = json.loads((abstract_llama / f"{stem}.json").read_text())
    assert side["abstract"] is True and side["dtype"] == "float32"
    assert side["parity"]["checked"] is False and "tiny size" in side["parity"]["why"]
    assert side["arguments"] == json.loads(golden("llama", stem).with_suffix(".json").read_text())["arguments"]


def test_a_regression_losss_training_step_from_shapes_is_the_same_ir_as_with_weights(tmp_path):
    """ViT's training step (a mean-squared-error loss: its target shaped as the output, which the
    meta-device model's forward gives) from shapes alone: the golden captured with weights, byte for
    byte, target argument included."""
    run(Request("vit", exporters=("torchax",), step="train", abstract=True), tmp_path, show=False)
    for stem in ("jax-train", "torch-torchax-train"):
        assert (tmp_path / "vit-tiny" / f"{stem}.mlir").read_text() == golden("vit", stem).read_text(), stem
        side = json.loads((tmp_path / "vit-tiny" / f"{stem}.json").read_text())
        assert side["arguments"] == json.loads(golden("vit", stem).with_suffix(".json").read_text())["arguments"]
        assert any(a["name"] == "target" for a in side["arguments"])


def test_an_abstract_capture_benches_on_synthetic_arguments(abstract_llama):
    from stackwars_ir.bench.run import bench_files

    (_, e), = bench_files([abstract_llama / "jax.mlir"], "cpu", timeout=60, with_peaks=False).rows
    assert e.ok and e.arguments.startswith("synthetic")


def test_bad_abstract_requests_are_one_line(cli, tmp_path):
    cases = [
        (("llama", "--abstract", "--exporter", "torch_xla"), "cannot capture without weights"),
        (("llama", "--dtype", "bfloat16"), "add --abstract"),
        (("llama", "--dtype", "float8"), "unknown dtype"),
        (("llama", "--abstract", "--step", "train", "--exporter", "torch_xla"), "cannot capture without weights"),
        (("gpt2", "--size", "8b"), "unknown size"),
        # Too big for weights, and an exporter asked for that has no route without them.
        (("llama", "--size", "8b", "--exporter", "torch_xla"), "torch_xla cannot capture without weights"),
    ]
    for args, words in cases:
        code, _, err = cli("capture", *args, "--out", tmp_path)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not any(tmp_path.rglob("*.mlir"))


def test_the_tpu_compilers_refusal_is_read_as_its_figures():
    message = ("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
               "(84.01G) exceeds available HBM (31.25G). Consider ...")
    r = refusal(message)
    assert r["required_bytes"] == int(84.01 * 2 ** 30) and r["available_bytes"] == int(31.25 * 2 ** 30)
    assert r["memory"] == "HBM" and refusal("INVALID_ARGUMENT: something else") is None


def test_fx_generated_code_counters_are_not_kept():
    text = 'loc("<eval_with_key>.284\\22, line 10, in forward")'
    assert relativize(text) == 'loc("<eval_with_key>\\22, line 10, in forward")'


def test_a_size_whose_weights_do_not_fit_is_captured_from_shapes_in_bfloat16(cli, tmp_path):
    # LLaMA-3.1-8B in float32: 28 GiB of weights, held about three times by a capture with weights.
    code, out, err = cli("capture", "llama", "--size", "8b", "--framework", "jax", "--out", tmp_path)
    assert code == 0, err
    assert "capturing from shapes (--abstract), in bfloat16" in err and "28.0 GiB" in err
    side = json.loads((tmp_path / "llama-8b" / "jax.json").read_text())
    assert side["abstract"] is True and side["dtype"] == "bfloat16" and side["parity"]["checked"] is False


def test_an_image_model_in_bfloat16_takes_its_images_in_bfloat16(cli, tmp_path):
    """ViT from shapes in bfloat16: its pixels are cast as its users cast them (JAX's convolution refused
    float32 images beside bfloat16 weights, which stopped the memory page's ViT rows, measured), and
    both routes' programs take them in bfloat16."""
    import json

    code, _, err = cli("capture", "vit", "--abstract", "--dtype", "bfloat16", "--framework", "both",
                       "--exporter", "torchax", "--out", str(tmp_path))
    assert code == 0, err
    for stem in ("jax", "torch-torchax"):
        side = json.loads((tmp_path / "vit-tiny" / f"{stem}.json").read_text())
        pixels = [a for a in side["arguments"] if a["kind"] == "input"]
        assert [a["dtype"] for a in pixels] == ["bfloat16"], (stem, pixels)
