"""Programs as written at scale: counted loops (JAX's scan, fori_loop, the corpus's threefry loops) and executed op counts, scanned layers aligned with unrolled ones, layers scoped coarsely split by structure, rematerialized ops named."""
from __future__ import annotations

import pytest

from stackwars_ir.ir import load, load_one
from stackwars_ir.ir.stats import module_stats
from stackwars_ir.report.text import stats_text


def _lowered(tmp_path, fn, *args, name="m.mlir"):
    import jax

    path = tmp_path / name
    path.write_text(jax.jit(fn).lower(*args).as_text())
    return load_one(path)


def _layers(x, ws):
    import jax
    import jax.numpy as jnp

    y, _ = jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)
    return y


def test_a_scanned_layer_runs_once_per_layer_and_the_stats_say_so(tmp_path):
    import jax.numpy as jnp

    module = _lowered(tmp_path, _layers, jnp.ones((2, 4)), jnp.ones((3, 4, 4)))
    (loop,) = module.loops.values()
    assert loop.trips == 3 and loop.counted
    static, executed = module.histogram(), module.executed_histogram()
    assert static["stablehlo.dot_general"] == 1 and executed["stablehlo.dot_general"] == 3
    assert executed["stablehlo.compare"] == 4  # the condition runs once more than the body
    assert executed["stablehlo.while"] == 1
    s = module_stats(module)
    assert s.loops == (3,) and s.ops_executed == sum(executed.values()) > s.ops_inlined
    text = stats_text(s)
    assert f"loops: 1 (x3); ops executed per run: {s.ops_executed}" in text
    assert any(line.split()[:3] == ["stablehlo.dot_general", "1", "3"] for line in text.splitlines())
    assert s.as_json()["histogram_executed"]["stablehlo.tanh"] == 3


def test_nested_loops_multiply_and_fori_loop_bounds_are_read(tmp_path):
    import jax
    import jax.numpy as jnp

    def nested(x, ws):  # 2 outer steps, each scanning 3 layers
        y, _ = jax.lax.scan(lambda h, _: (_layers(h, ws), None), x, None, length=2)
        return y

    module = _lowered(tmp_path, nested, jnp.ones((2, 4)), jnp.ones((3, 4, 4)))
    assert sorted(loop.trips for loop in module.loops.values()) == [2, 3]
    assert module.executed_histogram()["stablehlo.dot_general"] == 6

    def fori(x):  # from 2 below 11 by one: 9 trips, whatever form JAX lowers it to
        return jax.lax.fori_loop(2, 11, lambda i, h: jnp.sin(h) + i, x)

    module = _lowered(tmp_path, fori, jnp.ones((4,)), name="fori.mlir")
    (loop,) = module.loops.values()
    assert loop.trips == 9 and module.executed_histogram()["stablehlo.sine"] == 9


def _layer(h, w):
    import jax
    import jax.numpy as jnp

    return h + jnp.tanh(jax.nn.softmax(h @ w, axis=-1) @ w)


def test_layers_scanned_in_groups_are_one_layer_per_trip_of_both_loops_and_align_with_the_unrolled(tmp_path):
    """A scan over 2 groups of a scan over 3 layers (how a model repeats a stage of scanned layers):
    the inner body is a layer that runs 6 times per call, and each of 6 unrolled layers pairs with it."""
    import jax
    import jax.numpy as jnp

    from stackwars_ir.diff import diff_modules
    from stackwars_ir.diff.blocks import segment

    def grouped(x, ws):  # ws: [groups, layers, 4, 4]
        def group(h, wg):
            return jax.lax.scan(lambda hh, w: (_layer(hh, w), None), h, wg)[0], None
        return jax.lax.scan(group, x, ws)[0]

    def unrolled(x, ws):
        for w in ws.reshape(6, 4, 4):
            x = _layer(x, w)
        return x

    args = (jnp.ones((2, 4)), jnp.ones((2, 3, 4, 4)))
    scanned = _lowered(tmp_path, grouped, *args)
    assert sorted(loop.trips for loop in scanned.loops.values()) == [2, 3]
    body = [b for b in segment(scanned).blocks if b.loop >= 0]
    layer = {(b.role, b.trips) for b in body if b.role != "other"}
    assert layer == {("attention", 6), ("mlp", 6)}, [(b.label, b.trips) for b in body]  # the outer body's
    assert {b.trips for b in body if b.role == "other"} <= {2, 6}  # own plumbing runs twice
    flat = _lowered(tmp_path, unrolled, *args, name="flat.mlir")
    report = diff_modules(flat, scanned)
    paired = sorted((d.a.layer, d.a.role) for d in report.blocks if d.b.trips == 6)
    assert paired == [((i,), role) for i in range(6) for role in ("attention", "mlp")], paired
    assert scanned.executed_histogram()["stablehlo.dot_general"] == flat.histogram()["stablehlo.dot_general"] == 12


def test_a_data_dependent_while_has_no_trip_count_and_executions_are_unknown(tmp_path):
    import jax
    import jax.numpy as jnp

    def until(x):
        return jax.lax.while_loop(lambda h: jnp.sum(h) < 100.0, lambda h: h * 2.0, x)

    module = _lowered(tmp_path, until, jnp.ones((4,)))
    (loop,) = module.loops.values()
    assert loop.trips is None and not loop.counted
    assert module.executed_histogram() is None
    s = module_stats(module)
    assert s.loops == (None,) and s.ops_executed is None and s.by_op_executed == ()
    assert "loops: 1 (x?); ops executed per run: unknown" in stats_text(s)


def test_a_module_without_loops_executes_each_op_once(tmp_path):
    import jax.numpy as jnp

    module = _lowered(tmp_path, lambda x: jnp.tanh(x) * 2, jnp.ones((4,)))
    s = module_stats(module)
    assert module.loops == {} and s.loops == () and s.ops_executed == s.ops_inlined
    assert "loops:" not in stats_text(s)


def test_the_corpus_threefry_loops_are_counted_and_series_loops_are_not(corpus):
    randint, igamma = load([corpus / "random_randint_.mlir",
                            corpus / "igamma_float32_20_20_float32_20_20_chlo.mlir"])
    assert [loop.trips for loop in randint.modules[0].loops.values()] == [5, 5, 5]
    assert all(loop.trips is None for loop in igamma.modules[0].loops.values())


def test_a_scanned_maxtext_llama_aligns_every_layer_with_the_unrolled_torch_capture(tmp_path):
    """The issue's check: a LLaMA written as MaxText writes it (nn.scan over the decoder layers)
    against the project's unrolled torch_xla capture of the same configuration: each layer's two
    norms, attention and MLP pair with the loop body by key, and the executed op counts say what
    runs per call beside the static ones."""
    from conftest import golden
    from scanned_llama import lowered_text

    from stackwars_ir.diff import diff_files
    from stackwars_ir.report.text import diff_text

    path = tmp_path / "maxtext-llama.mlir"
    path.write_text(lowered_text(layers=2))
    report = diff_files(path, golden("llama", "torch-torch_xla"))
    assert report.alignment.method == "key"
    paired = {(d.a.role, d.b.layer, d.a.ordinal): d for d in report.blocks if d.b.layer}
    for layer in range(2):
        for role, ordinal in (("norm", 0), ("attention", 0), ("norm", 1), ("mlp", 0)):
            d = paired[(role, (layer,), ordinal)]
            assert d.a.trips == 2 and d.a.layer == (layer,) and d.b.trips == 0
            assert "(scanned x2)" in d.label
    assert not any(b.role in ("norm", "attention", "mlp") for b in report.alignment.only_b)
    result = report.result()
    assert result.a.loops == (2,) and result.b.loops == ()
    # Two layers of q, k, v, o, scores, context and three MLP projections run on each side: the
    # scanned body holds them once, and runs twice.
    assert report.a.module.histogram()["stablehlo.dot_general"] == 9
    assert result.a.executed["stablehlo.dot_general"] == result.b.histogram["stablehlo.dot_general"] == 18
    text = diff_text(result)
    assert "loops: A 1 loop (x2); B no loop" in text and "executed per run: A " in text
    assert result.as_json()["a"]["histogram_executed"] == result.a.executed
    from stackwars_ir.diff.result import DiffResult
    from stackwars_ir.report.html_report import diff_html
    from stackwars_ir.report.markdown import diff_markdown

    saved = DiffResult.from_json(result.as_json())  # a saved diff renders the same loops
    assert saved.a.loops == (2,) and saved.a.executed == result.a.executed
    for page in (diff_markdown(saved), diff_html(saved)):
        assert "loops: A 1 loop (x2); B no loop" in page and "executed per run: A " in page


@pytest.mark.parametrize("other", ["torch-torch_xla", "torch-torchax", "jax"])
def test_an_nnx_scanned_llama_without_module_scopes_aligns_every_layer_by_key(tmp_path, other):
    """A model the adapters never wrote: Flax NNX, layers scanned with nnx.scan, no named scope on any
    op (only JAX's `while/body` and einsum specs, which name no module). Auto mode segments it by
    structure (the loop's scopes do not count as module paths), its top level's norms are a
    transformer's (its softmaxes run in the loop), and every layer's norms, attention and MLP pair
    with the loop body by key against each capture of the same configuration."""
    from conftest import golden
    from scanned_llama import nnx_lowered_text

    from stackwars_ir.diff import diff_files

    path = tmp_path / "nnx-llama.mlir"
    path.write_text(nnx_lowered_text(layers=2))
    report = diff_files(path, golden("llama", other))
    assert report.a.segmentation.mode == "structure", report.a.segmentation.reason
    assert report.alignment.method == "key", report.alignment.reason
    paired = {(d.a.role, d.b.layer, d.a.ordinal): d for d in report.blocks if d.b.layer}
    for layer in range(2):
        for role, ordinal in (("norm", 0), ("attention", 0), ("norm", 1), ("mlp", 0)):
            d = paired[(role, (layer,), ordinal)]
            assert d.a.trips == 2 and "(scanned x2)" in d.label, d.label
    assert {d.a.role for d in report.blocks if not d.a.layer and not d.a.trips} >= {"embedding", "norm"}
    assert not any(b.role == "batchnorm" for b in report.a.segmentation.blocks)
    assert not any(b.role in ("norm", "attention", "mlp") for b in report.alignment.only_b)
    result = report.result()
    assert result.a.loops == (2,)
    assert result.a.executed["stablehlo.dot_general"] == 18 == result.b.histogram["stablehlo.dot_general"]


def test_a_scanned_model_against_itself_unrolled_pairs_every_layer_and_executes_the_same_compute(tmp_path):
    from scanned_llama import lowered_text

    from stackwars_ir.diff import diff_files

    scanned, unrolled = tmp_path / "scan.mlir", tmp_path / "unrolled.mlir"
    scanned.write_text(lowered_text(layers=3))
    unrolled.write_text(lowered_text(layers=3, scan=False))
    report = diff_files(unrolled, scanned)
    layered = [d for d in report.blocks if d.a.role in ("norm", "attention", "mlp") and d.a.layer]
    assert len(layered) == 3 * 4 and all(d.b.trips == 3 and d.b.layer == d.a.layer for d in layered)
    assert all(d.label.endswith("(B scanned x3)") for d in layered)
    a, b = report.result().a, report.result().b
    # The layers' compute runs as often scanned as unrolled: the dot_generals per call are equal.
    assert b.executed["stablehlo.dot_general"] == a.histogram["stablehlo.dot_general"]
    assert b.histogram["stablehlo.dot_general"] < a.histogram["stablehlo.dot_general"]


@pytest.mark.parametrize("scan", [False, True])
def test_a_layer_scoped_coarsely_is_split_by_structure_and_aligns_by_key(tmp_path, scan):
    """Issue 14's coarse provenance: a JAX LLaMA whose scopes stop at the layer (its norms, attention
    and MLP computed inline: one residual block per layer) is split by structure in auto mode, so each
    layer's two norms, attention and MLP pair with the torch_xla capture's by key, unrolled or scanned."""
    from conftest import golden
    from scanned_llama import lowered_text

    from stackwars_ir.diff import diff_files

    path = tmp_path / "coarse.mlir"
    path.write_text(lowered_text(layers=2, scan=scan, coarse=True))
    report = diff_files(path, golden("llama", "torch-torch_xla"))
    assert report.a.segmentation.mode == "provenance" and report.alignment.method == "key"
    for role, ordinals in (("norm", (0, 1)), ("attention", (0,)), ("mlp", (0,))):
        got = sorted((d.b.layer, d.a.ordinal) for d in report.blocks if d.a.role == role and d.b.layer)
        assert got == [((layer,), o) for layer in range(2) for o in ordinals], role
    assert all("by structure" in d.a.name for d in report.blocks if d.b.layer)
    assert not [b for b in report.alignment.only_b if b.role in ("norm", "attention", "mlp")]
    # Outside the layers too (issue 56): the embedding and the final norm pair with the model's.
    outside = {(d.a.role, d.b.name) for d in report.blocks if not d.b.layer}
    assert {("embedding", "embed_tokens"), ("norm", "norm")} <= outside, outside


def test_a_coarse_module_against_itself_without_locations_pairs_every_layer(tmp_path):
    """The same module with every location stripped is segmented by structure; its coarse twin's
    layers, split by structure too, pair with it by key, every layer's parts."""
    from scanned_llama import lowered_text
    from test_diff import _strip_locations

    from stackwars_ir.diff import diff_files

    path = tmp_path / "coarse.mlir"
    path.write_text(lowered_text(layers=3, scan=False, coarse=True))
    bare = _strip_locations(path, tmp_path / "bare.mlir")
    report = diff_files(path, bare)
    assert report.b.segmentation.mode == "structure" and report.alignment.method == "key"
    for role, per_layer in (("norm", 2), ("attention", 1), ("mlp", 1)):
        assert sum(1 for d in report.blocks if d.a.role == role and d.a.layer) == 3 * per_layer, role


def _grad_text(remat: bool) -> str:
    """The gradient of a two-layer pre-LN block stack (Flax linen), each layer under nn.remat or not."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x + jax.nn.softmax(nn.Dense(8, name="attn")(nn.LayerNorm(name="ln_1")(x)))
            return x + nn.Dense(8, name="mlp")(jnp.tanh(nn.Dense(16, name="c_fc")(nn.LayerNorm(name="ln_2")(x))))

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            for i in range(2):
                x = (nn.remat(Layer) if remat else Layer)(name=f"h_{i}")(x)
            return x

    m, x = Model(), jnp.ones((4, 8))
    params = m.init(jax.random.PRNGKey(0), x)
    grad = jax.jit(jax.grad(lambda p: jnp.sum(m.apply(p, x) ** 2)))
    return grad.lower(params).compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)


def test_rematerialized_forward_ops_are_counted_in_the_backward_block_of_their_module(tmp_path):
    """Remat against no remat, same training step: the recomputed forward ops (jax.checkpoint's
    rematted_computation scope) join the backward block of the module they recompute, every block
    still pairs by key, and each backward block says how many of its ops are recomputed."""
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report.text import diff_text

    plain, remat = tmp_path / "plain.mlir", tmp_path / "remat.mlir"
    plain.write_text(_grad_text(False))
    remat.write_text(_grad_text(True))
    report = diff_files(plain, remat)
    assert report.alignment.method == "key"
    assert not [b for b in report.alignment.only_b if b.layer], report.alignment.only_b
    recomputed = {(d.a.role, d.a.layer, d.a.ordinal): d.facts_b.recomputed for d in report.blocks
                  if d.a.phase == "backward" and d.a.layer}
    for layer in ((0,), (1,)):
        for key in (("norm", layer, 0), ("norm", layer, 1), ("attention", layer, 0), ("mlp", layer, 0)):
            assert recomputed[key] > 0, key
    assert all(d.facts_a.recomputed == 0 for d in report.blocks)
    assert all(d.facts_b.recomputed == 0 for d in report.blocks if d.a.phase != "backward")
    text = diff_text(report.result())
    n = recomputed[("attention", (1,), 0)]
    assert f"attention[1]#0 (backward) forward ops recomputed in the backward (remat): plain 0; remat {n}" in text


@pytest.mark.slow  # over 20 s here (issue 52)
def test_torch_xla_scan_layers_aligns_every_layer_with_the_same_model_unrolled(tmp_path):
    """torch_xla's own scan_layers (a while whose counter starts at an argument of the function
    holding it, the body unnamed) against the same blocks unrolled: the trip count is read through
    the call, the body is clustered by structure as one layer, and every layer pairs with it."""
    import subprocess
    import sys
    from pathlib import Path

    from stackwars_ir.diff import diff_files

    script = Path(__file__).with_name("torch_xla_scan.py")
    files = {}
    for mode in ("unroll", "scan"):
        files[mode] = tmp_path / f"{mode}.mlirbc"
        done = subprocess.run([sys.executable, str(script), mode, str(files[mode])], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    scanned = load_one(files["scan"])
    assert [loop.trips for loop in scanned.loops.values()] == [4]
    report = diff_files(files["unroll"], files["scan"])
    assert report.alignment.method == "key" and not report.alignment.only_a
    for role, ordinals in (("norm", (0, 1)), ("attention", (0,)), ("mlp", (0,))):
        got = sorted((d.a.layer, d.a.ordinal) for d in report.blocks if d.a.role == role and d.b.trips == 4)
        assert got == [((layer,), o) for layer in range(4) for o in ordinals], role


@pytest.mark.slow  # two torch_xla runs (about 25 s here)
def test_unnamed_mlp_layers_scanned_and_unrolled_pair_layer_by_layer(tmp_path):
    """Issue 56: files dumped with torch_xla's defaults (no locations), blocks without attention
    (LayerNorm, Linear, LayerNorm, MLP) under scan_layers against unrolled: the unrolled layers are
    found by their repeating structure, so each layer's two norms and its MLP pair with the loop's
    body by key (they paired 4 blocks by order: batch norms and MLPs without layers)."""
    import subprocess
    import sys
    from pathlib import Path

    from stackwars_ir.diff import diff_files

    script = Path(__file__).with_name("torch_xla_scan.py")
    files = {}
    for mode in ("unroll", "scan"):
        files[mode] = tmp_path / f"{mode}.mlirbc"
        done = subprocess.run([sys.executable, str(script), mode, str(files[mode]), "mlp"], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    report = diff_files(files["unroll"], files["scan"])
    assert report.a.segmentation.mode == "structure" and report.alignment.method == "key"
    assert not report.alignment.only_a
    for role, ordinals in (("norm", (0, 1)), ("mlp", (0,))):
        got = sorted((d.a.layer, d.a.ordinal) for d in report.blocks if d.a.role == role and d.b.trips == 4)
        assert got == [((layer,), o) for layer in range(4) for o in ordinals], role


def test_a_loops_kernels_are_listed_with_how_often_they_run_through_nested_loops():
    """bench.kernels reads the optimized HLO's while bodies as well as its entry: each body kernel
    names its while and runs trip-count times per call, multiplied through nested scans (3 x 4); a
    condition runs once more than its body."""
    import jax
    import jax.numpy as jnp

    from stackwars_ir.bench.kernels import kernels_of

    def f(x, ws):
        def outer(h, w):
            h, _ = jax.lax.scan(lambda g, _: (jnp.tanh(g @ w), None), h, None, length=4)
            return h, None
        return jax.lax.scan(outer, x, ws)[0]

    text = jax.jit(f).lower(jnp.ones((8, 16)), jnp.ones((3, 16, 16))).compile().as_text()
    kernels = kernels_of(text)
    whiles = [k for k in kernels if k.opcode == "while"]
    assert len(whiles) == 2 and whiles[0].trips == 0 and whiles[1].loop == whiles[0].name and whiles[1].trips == 3
    inner = [k for k in kernels if k.loop == whiles[1].name]
    tanh = [k for k in inner if "tanh" in k.name]
    assert tanh and all(k.trips == 12 for k in tanh), [(k.name, k.trips) for k in inner]
    assert {k.trips for k in inner if "while.cond" in k.path} == {15}
    outer = [k for k in kernels if k.loop == whiles[0].name and k.opcode != "while"]
    assert {k.trips for k in outer if "while.cond" not in k.path} == {3}
    assert {k.trips for k in outer if "while.cond" in k.path} == {4}
