"""Diff: alignment of JAX and PyTorch captures, the study's findings, structural mode, bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, golden
from stackwars_ir.diff import diff_files, diff_modules
from stackwars_ir.diff.blocks import segment
from stackwars_ir.diff.provenance import classify
from stackwars_ir.ir import load_one
from stackwars_ir.report.sentences import summaries

PAIRS = [(m, e) for m in ("gpt2", "bert", "resnet50") for e in ("torch-torch_xla", "torch-torchax")]


def _layers(report, role):
    return sorted({d.a.layer for d in report.blocks if d.a.role == role})


@pytest.mark.parametrize("model, stem", PAIRS)
def test_every_layer_aligns(model, stem):
    report = diff_files(golden(model, "jax"), golden(model, stem))
    assert report.alignment.method == "key"
    if model == "resnet50":
        convs = [d for d in report.blocks if d.a.role == "conv"]
        assert len(convs) == 9 and all(d.a.name == d.b.name for d in convs)
        return
    for role in ("attention", "mlp"):
        assert _layers(report, role) == [(0,), (1,)], role
    norms = [d for d in report.blocks if d.a.role == "norm" and d.a.layer]
    assert len(norms) == 4  # two per layer: ln_1/ln_2 (GPT-2), attention.output/output LayerNorm (BERT)
    assert all(d.a.name == d.b.name for d in norms)
    assert not [b for b in report.alignment.only_a if b.role in ("attention", "mlp", "norm")]
    assert not [b for b in report.alignment.only_b if b.role in ("attention", "mlp", "norm")]


def test_the_study_findings_come_out_by_themselves():
    report = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"))
    summary = dict(summaries(report.result()))
    assert "jax spelled out (reduce/rsqrt; variance E[(x - mean)^2]) x5" in summary["normalization"]
    assert "torch-torch_xla batch_norm_training x5" in summary["normalization"]
    assert "jax: 0 of 12 dot_general take a flattened input" in summary["flattening"]
    assert "[2,16,64] -> [32,64]" in summary["flattening"]
    assert "jax: iota positions; lookup via @_take" in summary["embedding"]
    assert "torch-torch_xla: constant index table" in summary["embedding"] and "i64->ui32" in summary["embedding"]


def _strip_locations(src, dst):
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    with jmlir.make_ir_context():
        dst.write_text(ir.Module.parse(src.read_text()).operation.get_asm(enable_debug_info=False))
    return dst


@pytest.mark.parametrize("stem", ["torch-torch_xla", "torch-torchax"])
def test_structural_mode_aligns_the_same_layers_without_locations(tmp_path, stem):
    a = _strip_locations(golden("gpt2", "jax"), tmp_path / "jax.mlir")
    b = _strip_locations(golden("gpt2", stem), tmp_path / "torch.mlir")
    assert "loc(" not in a.read_text()
    stripped = diff_files(a, b)
    assert stripped.a.segmentation.mode == stripped.b.segmentation.mode == "structure"
    for role in ("attention", "mlp"):
        assert _layers(stripped, role) == [(0,), (1,)]
    norms = sorted(d.a.key for d in stripped.blocks if d.a.role == "norm")
    assert norms == [((), "norm", 0), ((0,), "norm", 0), ((0,), "norm", 1), ((1,), "norm", 0), ((1,), "norm", 1)]
    with_locs = dict(summaries(diff_files(golden("gpt2", "jax"), golden("gpt2", stem)).result()))["flattening"]
    assert dict(summaries(stripped.result()))["flattening"].split(":", 1)[1] == with_locs.split(":", 1)[1].replace(stem, "torch")


@pytest.mark.parametrize("model", ["llama", "vit", "gpt_neo", "bert"])
@pytest.mark.parametrize("stem", ["torch-torch_xla", "torch-torchax"])
def test_every_layer_aligns_with_its_parts_named_with_and_without_locations(tmp_path, model, stem):
    # LLaMA's SiLU reaches StableHLO as x / (1 + exp(-x)) from torchax: an exp that no reduce sums,
    # so an activation, not a softmax (counted as one, it doubled the layers and lost the MLPs).
    for a, b in ((golden(model, "jax"), golden(model, stem)),
                 (_strip_locations(golden(model, "jax"), tmp_path / "jax.mlir"),
                  _strip_locations(golden(model, stem), tmp_path / "torch.mlir"))):
        report = diff_files(a, b)
        assert report.alignment.method == "key" and not report.alignment.only_a
        for role in ("norm", "attention", "mlp"):
            assert sorted({d.a.layer for d in report.blocks if d.a.role == role and d.a.layer}) == [(0,), (1,)], role


def test_one_side_with_locations_and_one_without(tmp_path):
    b = _strip_locations(golden("gpt2", "torch-torch_xla"), tmp_path / "torch.mlir")
    report = diff_files(golden("gpt2", "jax"), b)
    assert report.a.segmentation.mode == "provenance" and report.b.segmentation.mode == "structure"
    for role in ("attention", "mlp"):
        assert _layers(report, role) == [(0,), (1,)]


def test_foreign_jax_code_with_its_own_naming_aligns(tmp_path):
    """A GPT-2 written here in plain jax.numpy, Flax-linen-style scopes (`blocks_0/self_attn`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    side = json.loads(golden("gpt2", "torch-torch_xla").with_suffix(".json").read_text())
    cfg = side["config"]
    d, heads, layers = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    rng = np.random.default_rng(0)

    def norm(x, g, b):
        m = x.mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def model(p, ids):
        with jax.named_scope("Transformer"):
            with jax.named_scope("token_embed"):
                x = p["tok"][ids]
            with jax.named_scope("pos_embed"):
                x = x + p["pos"][jnp.arange(ids.shape[1])]
            for i in range(layers):
                with jax.named_scope(f"blocks_{i}"):
                    with jax.named_scope("pre_attn_norm"):
                        h = norm(x, p["g"], p["b"])
                    with jax.named_scope("self_attn"):
                        q, k, v = jnp.split(h @ p["wqkv"], 3, -1)
                        split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(0, 2, 1, 3)
                        s = split(q) @ split(k).transpose(0, 1, 3, 2) / np.sqrt(d // heads)
                        o = (jax.nn.softmax(s, -1) @ split(v)).transpose(0, 2, 1, 3).reshape(h.shape)
                        x = x + o @ p["wo"]
                    with jax.named_scope("pre_mlp_norm"):
                        h = norm(x, p["g"], p["b"])
                    with jax.named_scope("feed_forward"):
                        x = x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
            with jax.named_scope("final_norm"):
                return norm(x, p["g"], p["b"])

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    params = {"tok": f32(cfg["vocab_size"], d), "pos": f32(64, d), "g": f32(d), "b": f32(d),
              "wqkv": f32(d, 3 * d), "wo": f32(d, d), "w1": f32(d, 4 * d), "w2": f32(4 * d, d)}
    text = jax.jit(model).lower(params, np.zeros((2, 16), np.int32)).as_text(debug_info=True)
    (tmp_path / "foreign.mlir").write_text(text)
    report = diff_files(tmp_path / "foreign.mlir", golden("gpt2", "torch-torch_xla"))
    for role in ("attention", "mlp"):
        assert _layers(report, role) == [(0,), (1,)]
    assert len([x for x in report.blocks if x.a.role == "norm"]) == 5
    assert len([x for x in report.blocks if x.a.role == "embedding"]) == 2


@pytest.mark.parametrize("path, layer, role", [
    ("h.3.attn.c_attn", (3,), "attention"),
    ("encoder.layer.7.attention.output.LayerNorm", (7,), "norm"),
    ("encoder.layer.7.intermediate.dense", (7,), "mlp"),
    ("Transformer.blocks_4.self_attn", (4,), "attention"),
    ("encoder.stages.1.layers.2.layer.0.normalization", (1, 2, 0), "batchnorm"),
    ("embeddings.word_embeddings", (), "embedding"),
    ("ln_f", (), "norm"),
    ("h.3", (3,), "residual"),
])
def test_classify_module_paths(path, layer, role):
    assert classify(path)[:2] == (layer, role)


def test_an_adapters_own_words_name_roles_the_generic_table_does_not():
    from stackwars_ir import models

    bert = tuple(models.entry("bert").roles.items())
    assert classify("encoder.layer.7.output.dense")[:2] == ((7,), "residual")  # generic: a layer's rest
    assert classify("encoder.layer.7.output.dense", bert)[:2] == ((7,), "mlp")  # BERT's layer.N.output
    # Generic words still win: the attention's own output stays attention.
    assert classify("encoder.layer.7.attention.output.dense", bert)[:2] == ((7,), "attention")


def test_identical_files_exit_0_and_different_exit_1(cli, tmp_path):
    a = golden("gemm", "jax")
    code, out, _ = cli("diff", a, a)
    assert code == 0
    code, _, _ = cli("diff", a, golden("gemm", "torch-torch_xla"))
    assert code == 0  # one dot_general each: the same ops, so nothing differs
    code, _, _ = cli("diff", golden("mha", "jax"), golden("mha", "torch-torch_xla"))
    assert code == 1


def test_json_and_markdown_outputs(cli, tmp_path):
    code, _, _ = cli("diff", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"),
                     "--json", tmp_path / "d.json", "--markdown", tmp_path / "d.md")
    assert code == 1
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["format"] == 4 and data["differs"] is True
    assert {b["label"] for b in data["blocks"]} >= {"attention[0]#0", "mlp[1]#0", "norm#0"}
    md = (tmp_path / "d.md").read_text()
    assert "## Findings" in md and "batch_norm_training" in md and "```mlir" in md


def test_unmatched_blocks_are_reported_not_dropped():
    a, b = load_one(golden("gpt2", "jax")), load_one(golden("bert", "jax"))
    report = diff_modules(a, b)
    total_a = len(segment(a).blocks)
    assert len(report.alignment.pairs) + len(report.alignment.only_a) == total_a


_NAMED = """module @jit_f {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<4xf32> loc(#loc1)
    %1 = stablehlo.exponential %0 : tensor<4xf32> loc(#loc2)
    RETURN
  }
}
#loc1 = loc("jit(f)/jit(main)/mlp/tanh"("a.py":1:0))
#loc2 = loc("jit(f)/jit(main)/mlp/exp"("a.py":2:0))
"""


def test_a_block_whose_ops_name_no_module_is_printed_as_such(cli, tmp_path):
    (tmp_path / "a.mlir").write_text(_NAMED.replace("RETURN", "return %1 : tensor<4xf32>"))
    (tmp_path / "b.mlir").write_text(_NAMED.replace("RETURN", "%2 = stablehlo.sine %1 : tensor<4xf32>\n"
                                                    "    %3 = stablehlo.cosine %2 : tensor<4xf32>\n"
                                                    "    return %3 : tensor<4xf32>"))
    code, out, _ = cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir", "--mode", "provenance")
    assert code == 1 and "only in B: other#0 (no module path, 2 ops)" in out and "(, " not in out


@pytest.mark.parametrize("content", [None, b"", b"not mlir at all\n"])
def test_bad_input_exit_2(cli, tmp_path, content):
    bad = tmp_path / "bad.mlir"
    if content is not None:
        bad.write_bytes(content)
    out_json = tmp_path / "out.json"
    code, out, err = cli("diff", golden("gpt2", "jax"), bad, "--json", out_json)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(bad) in err and not out_json.exists()


def test_inference_batch_norm_is_labelled_by_the_ops_it_has():
    summary = dict(summaries(diff_files(golden("resnet50", "jax"), golden("resnet50", "torch-torch_xla")).result()))
    assert "spelled out (rsqrt)" in summary["normalization"] and "reduce" not in summary["normalization"]


def _golden_pairs():
    out = []
    for txt in sorted((ROOT / "tests" / "diffs").glob("*.txt")):
        model, train = txt.stem.removesuffix("-train"), txt.stem.endswith("-train")
        folder = Path("captures") / f"{model}-tiny"
        if train:
            pair = (folder / "jax-train.mlir", folder / "torch-torchax-train.mlir")
        else:
            b = folder / "torch-torch_xla.mlir"
            pair = (folder / "jax.mlir", b if (ROOT / b).exists() else folder / "torch-torchax.mlir")
        out.append(pytest.param(txt, *pair, id=txt.stem))
    return out


@pytest.mark.parametrize("text, a, b", _golden_pairs())
def test_the_diff_text_of_every_adapter_is_pinned(text, a, b, monkeypatch):
    # Regenerate with `make diff-goldens` (after `make captures`) when a change is meant.
    from stackwars_ir.report.text import diff_text

    monkeypatch.chdir(ROOT)  # the text names the files as given: relative to the repository
    assert diff_text(diff_files(a, b).result()) + "\n" == text.read_text()


def test_every_adapter_has_a_pinned_diff():
    from stackwars_ir import models

    pinned = {p.stem for p in (ROOT / "tests" / "diffs").glob("*.txt")}
    assert set(models.ADAPTERS) <= pinned
    assert {f"{m}-train" for m in models.TRAINABLE if (ROOT / "captures" / f"{m}-tiny" / "torch-torchax-train.mlir").exists()} <= pinned


def test_a_pairing_by_key_that_covers_too_little_falls_back_to_order_and_says_why(tmp_path):
    # A training step without its locations is cut by structure: no phases, no module paths, so
    # keys cannot pair it with the JAX step's blocks.
    bare = _strip_locations(golden("gpt2", "torch-torch_xla-train"), tmp_path / "bare.mlir")
    report = diff_files(golden("gpt2", "jax-train"), bare)
    result = report.result()
    assert result.method == "order" and "fell back to order" in result.method_reason
    # Both sides are accounted for: every block is paired once or listed as unmatched.
    for side, only in (("a", result.only_a), ("b", result.only_b)):
        seg = getattr(report, side).segmentation
        paired = [getattr(d, side) for d in report.blocks]
        assert len(paired) + len(only) == len(seg.blocks)
        assert len({id(x) for x in paired}) == len(paired)


@pytest.mark.parametrize("model", ["gpt2", "gpt_neo", "llama"])
def test_a_mask_built_once_for_every_layer_is_its_own_block(model):
    # torch_xla builds the causal mask where layer 0's attention first needs it; every layer reads it.
    report = diff_files(golden(model, "jax"), golden(model, "torch-torch_xla"))
    shared = [blk for blk in report.alignment.only_b if blk.role == "shared"]
    assert len(shared) == 1 and not any(blk.role == "shared" for blk in report.b.segmentation.blocks
                                        if blk not in shared)
    attn = [d for d in report.blocks if d.a.role == "attention"]
    assert len({sum(d.facts_b.histogram.values()) for d in attn}) == 1  # layer 0's attention no larger than layer 1's
    assert not any(d.facts_b.histogram["stablehlo.reduce_window"] for d in attn)
    assert not any(blk.role == "shared" for blk in report.a.segmentation.blocks)  # JAX builds its mask per layer


def test_kernels_per_block_account_for_every_kernel_xla_compiled(cli, tmp_path):
    from stackwars_ir.bench import hlo_stats
    from stackwars_ir.bench.kernels import kernels_of_files
    from stackwars_ir.diff import with_kernels
    from stackwars_ir.common.runtime import runtime

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    report = diff_files(a, b)
    ka, kb = kernels_of_files([a, b])
    result = with_kernels(report, report.result(), ka, kb)
    totals = result.metrics["kernels"]
    for side, ks, path in (("a", ka, a), ("b", kb, b)):
        assert not ks.error and totals[side]["kernels"] == len(ks.kernels) > 0
        # The same count as bench's reading of the optimized HLO (its fusions), compiled once more here.
        exe = runtime("cpu").compile(path.read_text(), str(path))
        assert totals[side]["fusions"] == hlo_stats(exe)["fusions"]
        traced = sum(d.metrics["kernels"][side] for d in result.blocks)
        unmatched = totals[side]["unattributed"]
        assert traced + unmatched <= totals[side]["kernels"]  # unmatched blocks' kernels are neither
        assert traced >= totals[side]["kernels"] // 2  # most kernels trace back to an aligned block
    attn = [d.metrics["kernels"] for d in result.blocks if d.role == "attention"]
    assert all(k["a"] > 0 and k["b"] > 0 for k in attn)
    # The names are the compiled kernels' own (fusions, and under XLA 0.12 `wrapped_*` single ops).
    compiled = {k.name for k in ka.kernels}
    assert all(len(k["names_a"]) == k["a"] and set(k["names_a"]) <= compiled for k in attn)
    assert any("fusion" in n for k in attn for n in k["names_a"])
    code, out, err = cli("diff", a, b, "--kernels")
    assert code == 1 and "kernels A/B" in out and "not traced to a block" in out, err
    code, _, err = cli("report", "--from", tmp_path / "x.json", "-o", tmp_path / "r.html", "--kernels")
    assert code == 2 and "--kernels compiles the files" in err


@pytest.mark.parametrize("model", ["gpt2", "bert", "gpt_neo", "llama", "vit"])
def test_torch_xla_training_step_aligns_every_layer_forward_and_backward_with_jax(model):
    # The lazy training loop's ops carry their module and phase (workload.train.OpNames).
    result = diff_files(golden(model, "jax-train"), golden(model, "torch-torch_xla-train")).result()
    assert result.method == "key" and result.b.mode == "provenance"
    for phase in ("forward", "backward"):
        for role in ("attention", "mlp"):
            layers = sorted(d.layer for d in result.blocks if d.phase == phase and d.role == role)
            assert layers == [(0,), (1,)], (phase, role, layers)
        norms = [d for d in result.blocks if d.phase == phase and d.role == "norm" and d.layer]
        assert len(norms) == 4, (phase, [d.label for d in norms])
    update = [d for d in result.blocks if d.phase == "update"]
    assert len(update) == 1 and update[0].role == "optimizer"


def test_training_summary_says_where_each_side_transposes_weights_and_what_its_backward_evaluates():
    result = diff_files(golden("gpt2", "jax-train"), golden("gpt2", "torch-torch_xla-train")).result()
    train = next(s for s in result.summary if s.topic == "training")
    a, b = train.numbers["a"], train.numbers["b"]
    # Both transpose the tied embedding once for the head (forward); JAX's backward transposes none,
    # its dot_generals contract the right dimensions instead; torch_xla's backward transposes 8
    # weights and takes log-softmax's exp of its saved output (its head's matmul and log_softmax
    # are the loss's forward: named so, not after the backward op that read them).
    assert a["parameter_transposes"] == {"forward": 1, "backward": 0}
    assert b["parameter_transposes"] == {"forward": 1, "backward": 8}
    assert a["backward_transcendentals"] == {} and b["backward_transcendentals"] == {"exponential": 1}
    assert set(a["backward_dot_types"]) == set(b["backward_dot_types"]) == {"f32"}
    assert a["optimizer_ops"] > 0 and b["optimizer_ops"] > 0
    forward = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")).result()
    assert "training" not in {s.topic for s in forward.summary}
    text = dict(summaries(result))["training"]
    assert "parameters transposed 1 in the forward, 8 in the backward" in text
    assert "transcendental ops in the backward: none" in text and "backward: exponential x1" in text


def test_a_training_steps_optimizer_kernels_are_traced_to_its_update_block():
    from stackwars_ir.bench.kernels import kernels_of_files
    from stackwars_ir.diff import with_kernels

    a, b = golden("gpt2", "jax-train"), golden("gpt2", "torch-torch_xla-train")
    report = diff_files(a, b)
    ka, kb = kernels_of_files([a, b])
    result = with_kernels(report, report.result(), ka, kb)
    update = next(d for d in result.blocks if d.phase == "update")
    from stackwars_ir.common.files import read_sidecar

    params = sum(1 for x in read_sidecar(a).arguments if x["kind"] == "parameter")
    for side in ("a", "b"):
        k = update.metrics["kernels"][side]
        # XLA fuses AdamW per parameter (a few kernels each), not into one region over all of them.
        assert params <= k <= 6 * params, (side, k, params)
        # The loss (LM head, log-softmax, the loss), without a module path, goes to the block holding
        # its phase's path-less ops: no kernel of the step is left untraced.
        assert result.metrics["kernels"][side]["unattributed"] == 0
        loss = [d for d in result.blocks if d.role == "other" and d.metrics["kernels"][side]]
        assert {d.phase for d in loss} == {"forward", "backward"}, (side, [d.label for d in loss])


def test_structure_mode_finds_a_layernorm_written_with_sqrt_and_divide(tmp_path):
    """LayerNorm as a user writes it, `(x - mean) / sqrt(var + eps)`: a norm in structure mode, as
    rsqrt and batch norm are (issue 56); AdamW's sqrt(v), divided rather than dividing, is not."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from stackwars_ir.diff.blocks import segment
    from stackwars_ir.ir import load_one

    def norm(x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5)

    def forward(w1, w2, x):
        for _ in range(2):
            x = x + jnp.tanh(norm(x) @ w1) @ w2
        return norm(x)

    def adam(p, m, v):
        return p - 1e-3 * (m / (jnp.sqrt(v) / 0.5)), jnp.sqrt(v) + 1e-8

    x, w = np.ones((2, 8), np.float32), np.ones((8, 8), np.float32)
    for f, args, norms in ((forward, (w, w, x), 3), (adam, (w, w, w), 0)):
        src = tmp_path / f"{f.__name__}.mlir"
        src.write_text(jax.jit(f).lower(*args).as_text())
        seg = segment(load_one(_strip_locations(src, tmp_path / f"{f.__name__}-bare.mlir")))
        assert seg.mode == "structure"
        assert sum(b.role == "norm" for b in seg.blocks) == norms, [(b.role, b.layer) for b in seg.blocks]


def test_a_layers_named_sub_modules_are_blocks_of_their_own_and_an_adapters_words_win_inside_them():
    """Issue 56: a Mixer layer's `token_mix` and `channel_mix` (each fc1, act, fc2) are two MLP blocks
    named after them, not one named after the layer; the adapter's word beats the generic guesses
    inside it (fc1, act), not a generic word outside it nor a norm inside it."""
    from stackwars_ir import models

    assert classify("layers.0.token_mix.fc1") == ((0,), "mlp", "layers.0.token_mix")
    assert classify("layers.0.channel_mix.act") == ((0,), "mlp", "layers.0.channel_mix")
    assert classify("h.3.mlp.c_fc") == ((3,), "mlp", "h.3.mlp")  # generic all the way: the layer's one MLP
    mine = (("token_mix", "attention"),)
    assert classify("layers.0.token_mix.fc1", mine) == ((0,), "attention", "layers.0.token_mix")
    assert classify("layers.0.token_mix.norm", mine)[1] == "norm"
    bert = tuple(models.entry("bert").roles.items())
    assert classify("encoder.layer.7.output.LayerNorm", bert)[:2] == ((7,), "norm")
    assert classify("encoder.layer.7.attention.output.dense", bert)[:2] == ((7,), "attention")


def test_blocks_of_one_role_pair_by_their_module_names_not_their_print_order():
    """Issue 56: torch_xla printed Whisper's conv2 before conv1, and key pairing paired conv1 with
    conv2. Where both sides name the same modules, those names number the blocks."""
    from stackwars_ir.diff.align import align
    from stackwars_ir.diff.block import Block
    from stackwars_ir.diff.blocks import Segmentation

    def seg(*names):
        return Segmentation(None, "provenance", tuple(Block("conv", (), k, n, ()) for k, n in enumerate(names)),
                            1.0, "")

    al = align(seg("encoder.conv1", "encoder.conv2"), seg("encoder.conv2", "encoder.conv1"))
    assert [(x.name, y.name) for x, y in al.pairs] == [("encoder.conv1", "encoder.conv1"),
                                                         ("encoder.conv2", "encoder.conv2")]
    assert "2 numbered by their module names" in al.reason
    # Names that do not match on both sides leave the order as it was.
    al = align(seg("conv1", "conv2"), seg("stem.conv_a", "stem.conv_b"))
    assert [(x.name, y.name) for x, y in al.pairs] == [("conv1", "stem.conv_a"), ("conv2", "stem.conv_b")]


def test_a_file_without_its_sidecar_is_said_to_lose_what_the_sidecar_held(cli, tmp_path):
    """Issue 56: a .mlir copied without its .json diffs as before, with a note of what is lost."""
    import shutil

    copy = tmp_path / "copied.mlir"
    shutil.copy(golden("gpt2", "torch-torch_xla"), copy)
    code, out, err = cli("diff", golden("gpt2", "jax"), copy)
    assert code == 1, err
    assert f"note: copied: no sidecar beside {copy}: its arguments go unnamed" in out
    assert "bench runs it on synthetic arguments" in out
    code, out, _ = cli("diff", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"))
    assert "note:" not in out.split("findings:")[0]  # both sidecars, one framework each: nothing to say


def test_the_same_file_on_both_sides_is_named_apart():
    """A new user's `diff A.mlir A.mlir` named both sides `/A` (the folder of a bare name is "")."""
    from stackwars_ir.diff.analysis import side_names

    assert side_names("A.mlir", "A.mlir") == ("A (A)", "A (B)")
    assert side_names("x/jax.mlir", "y/jax.mlir") == ("x/jax", "y/jax")
    assert side_names("x/jax.mlir", "x/torch.mlir") == ("jax", "torch")


def test_structure_mode_gives_each_call_sites_copy_of_a_helper_to_that_call_s_block(tmp_path):
    """JAX's GPT-2 calls its causal-mask helpers (@tril, @_where) once per layer. Cut by structure (the
    capture printed without locations), every layer's copy of their ops went to the first call's block:
    layer 0's attention showed `iota +2, select +2` and layer 1's `iota -2, select -2` against the same
    capture cut by provenance (a generated 750-layer pair: layer 0's attention 9,052 ops against 58).
    Each copy now goes with its own call, as provenance gives it its call site's path."""
    from jaxlib.mlir import ir

    from stackwars_ir.ir.parse import mlir_context

    a = ROOT / "captures" / "gpt2-tiny" / "jax.mlir"
    b = tmp_path / "no-locations.mlir"
    with mlir_context() as ctx:
        ctx.allow_unregistered_dialects = True
        b.write_text(ir.Module.parse(a.read_text()).operation.get_asm(enable_debug_info=False))
    result = diff_files(a, b).result("none")
    assert (result.a.mode, result.b.mode) == ("provenance", "structure")
    attention = [blk for blk in result.blocks if blk.role == "attention"]
    assert len(attention) == 2
    for blk in attention:
        for op in ("stablehlo.iota", "stablehlo.select", "func.call"):
            assert blk.facts_a["histogram"].get(op, 0) == blk.facts_b["histogram"].get(op, 0), (blk.label, op)
    assert not result.differs
