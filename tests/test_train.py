"""Training-step captures: every trainable tiny adapter through JAX, torch_xla and torchax, parity-checked."""
from __future__ import annotations

import json
import re

import pytest

from conftest import golden
from stackwars_ir import models
from stackwars_ir.capture import Request, run
from stackwars_ir.common.routes import LOCK_EXPORTERS as EXPORTERS  # the routes the lock runs (torch_tpu: a stack of its own)
from stackwars_ir.workload.train import register_torch_xla
from stackwars_ir.ir import load_one



def exporters(model: str) -> tuple:
    return models.exporters_for(model, EXPORTERS, "train")[0]


def stems(model: str) -> tuple:
    """The training captures a model has (resnet50: JAX and torchax, not torch_xla: models/resnet50.py)."""
    return ("jax-train",) + tuple(f"torch-{e}-train" for e in exporters(model))


PAIRS = [(m, s) for m in models.TRAINABLE for s in stems(m)]
XLA = [m for m in models.TRAINABLE if "torch_xla" in exporters(m)]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Every trainable adapter's training step captured anew, tiny, every route that has one."""
    out = tmp_path_factory.mktemp("train")
    # Before any backward of this test process (autograd sizes its device queues at the first one);
    # here rather than at import, so collecting this file starts no runtime.
    register_torch_xla()
    return out, {m: run(Request(m, exporters=exporters(m), step="train"), out) for m in models.TRAINABLE}


def sidecar(path):
    return json.loads(path.with_suffix(".json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("model", models.TRAINABLE)
def test_training_step_parity(fresh, model):
    _, results = fresh
    parity = {p.stem: p for p in results[model].parity}
    assert set(parity) == set(stems(model))
    for p in parity.values():
        assert p.ok, p.line()
        # 10x under the gradients' tolerance; the rule within 3 float32 steps of a norm weight near 1
        # (1.2e-7 each; torch_xla's graph: 1.3e-7, compiled without LLVM's optimizations, runtime.QUICK).
        assert p.grad_rel < 1e-4 and p.rule_max_abs < 3.6e-7, p.line()


def _adamw_state(size: int, seed: int = 0):
    """A state after one step and the exact float64 AdamW step 2 from it, with gradient `g`."""
    import numpy as np

    from stackwars_ir.workload.train import ADAMW, TrainState

    rng = np.random.default_rng(seed)
    p, m0, g = (rng.standard_normal(size) * 0.05 for _ in range(3))  # weights' scale: rounding ~1e-9
    v0 = rng.random(size) * 1e-2
    a, t = ADAMW, 2

    def step(grad, lr=a["lr"]):
        m = a["b1"] * m0 + (1 - a["b1"]) * grad
        v = a["b2"] * v0 + (1 - a["b2"]) * grad ** 2
        new = p * (1 - lr * a["weight_decay"]) - lr / (1 - a["b1"] ** t) * m / (
            np.sqrt(v) / np.sqrt(1 - a["b2"] ** t) + a["eps"])
        return {"w": new.astype(np.float32), "exp_avg.w": m.astype(np.float32), "exp_avg_sq.w": v.astype(np.float32)}

    ref = step(g)
    f32 = {k: v.astype(np.float32) for k, v in (("p", p), ("m0", m0), ("v0", v0))}
    state = TrainState("mse", {"w": f32["p"]}, {}, {"w": f32["m0"]}, {"w": f32["v0"]}, 1, {}, 0.0,
                       {"w": ref["w"]}, {"w": ref["exp_avg.w"]}, {"w": ref["exp_avg_sq.w"]})
    return state, step, g


def test_step_errors_hold_a_correct_step_and_catch_wrong_gradients_and_a_wrong_rule_across_chunks():
    import numpy as np

    from stackwars_ir.capture.parity import CHUNK, step_errors
    from stackwars_ir.workload.train import RULE_ATOL

    state, step, g = _adamw_state(2 * CHUNK + 123)
    grad_rel, rule, param = step_errors(step(g), state, ["w"])
    assert grad_rel < 1e-6 and rule < 1e-7 and param == 0.0
    grad_rel, rule, _ = step_errors(step(g * 1.01), state, ["w"])  # gradients 1% off, the rule applied right
    assert 5e-3 < grad_rel < 2e-2 and rule < 1e-7  # 10x GRAD_RTOL
    grad_rel, rule, _ = step_errors(step(g, lr=2 * 1e-3), state, ["w"])  # the right gradients, the wrong rule
    assert grad_rel < 1e-6 and rule > RULE_ATOL
    wrong = step(g)
    wrong["w"] = wrong["w"].copy()
    wrong["w"][-1] += 0.01  # one element, in the last chunk
    _, rule, param = step_errors(wrong, state, ["w"])
    assert rule > RULE_ATOL and np.isclose(param, 0.01, rtol=1e-3), (rule, param)


@pytest.mark.slow
@pytest.mark.parametrize("model, stem", PAIRS)
def test_training_capture_is_deterministic_and_matches_golden(fresh, model, stem):
    out, _ = fresh
    new, old = out / f"{model}-tiny" / f"{stem}.mlir", golden(model, stem)
    assert new.read_text() == old.read_text(), f"{old} is stale: run `make captures`"
    new_side, old_side = sidecar(new), sidecar(old)
    new_side.pop("run"), old_side.pop("run")
    for side in (new_side, old_side):  # floating-point evidence: within tolerance, not digit for digit
        errors = side["parity"]
        assert errors["ok"] is True and errors["gradient_rel_error"] <= errors["gradient_rtol"], errors
        for k in ("max_abs_error", "max_rel_error", "gradient_rel_error", "adamw_rule_max_abs_error",
                  "parameter_max_abs_error"):
            del errors[k]
        float64 = errors["float64"]  # against the model in float64: within a few times eager's own
        assert errors["verdict"] == "ok" and float64["multiple"] < 4, float64
        for k in ("capture_error", "eager_float32_error", "multiple"):
            del float64[k]
        for arg in side["arguments"]:  # torch_xla's scalars: AdamW's factors, compared below
            if arg["kind"] == "constant":
                side["constants"][arg["name"]].pop("values", None)
    assert new_side == old_side


@pytest.mark.parametrize("model, stem", PAIRS)
def test_training_sidecar_names_every_argument_and_output(model, stem):
    path = golden(model, stem)
    side = sidecar(path)
    module = load_one(path)
    assert side["step"] == "train" and side["train"]["optimizer"]["name"] == "AdamW"
    assert len(side["arguments"]) == len(module.entry.args)
    kinds = {a["kind"] for a in side["arguments"]}
    assert {"parameter", "optimizer", "input"} <= kinds, kinds
    outputs = side["train"]["outputs"]
    assert outputs[0] == {"index": 0, "kind": "loss", "name": "loss"}
    params = {a["name"] for a in side["arguments"] if a["kind"] == "parameter"}
    assert {o["name"] for o in outputs if o["kind"] == "parameter"} == params
    assert {o["name"] for o in outputs if o["name"].startswith("exp_avg.")} == {f"exp_avg.{p}" for p in params}


@pytest.mark.parametrize("model", XLA)
def test_torch_xla_compiles_a_new_graph_at_step_2_and_none_at_step_3(model):
    """The study's claim, as torch_xla's counters record it: AdamW creates its state during step 1,
    so step 2's graph differs and is compiled anew; step 3 reuses it."""
    steps = sidecar(golden(model, "torch-torch_xla-train"))["train"]["torch_xla_steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert steps[0]["new graphs"] >= 1 and steps[1]["new graphs"] == 1 and steps[2]["new graphs"] == 0, steps
    assert all(s["graphs"] == steps[0]["graphs"] for s in steps), steps
    assert all(s["executions"] == steps[0]["executions"] for s in steps), steps  # graphs per step
    params = sum(a["kind"] == "parameter" for a in sidecar(golden(model, "torch-torch_xla-train"))["arguments"])
    # where AdamW's state is created: inside step 1 (step, exp_avg, exp_avg_sq per parameter)
    assert [s["optimizer state tensors"] for s in steps] == [0, 3 * params, 3 * params], steps
    # One graph for the step, AdamW included, and one for each device value the step reads on the
    # host: the decoders' is transformers' packed-sequence check in their causal-mask code.
    for s in steps:
        assert s["graphs"] == 1 + sum(r["count"] for r in s["host reads"]), s
    where = {r["read"] for s in steps for r in s["host reads"]}
    if model in ("gpt2", "gpt_neo", "llama"):
        # (the line number moves with each transformers release: 776 in 5.23, 761 in 5.24)
        lines = {re.sub(r":\d+ ", ":N ", w) for w in where}
        assert lines == {"_local_scalar_dense at transformers/masking_utils.py:N (find_packed_sequence_indices)"}, where
    else:
        assert where == set(), where


def test_torch_xla_adamw_scalars_are_arguments_with_their_values():
    """AdamW's Python floats (learning rate, bias corrections) reach the lazy graph as data, not constants."""
    side = sidecar(golden("gpt2", "torch-torch_xla-train"))
    scalars = [a for a in side["arguments"] if a["kind"] == "constant"]
    assert scalars and all(a["shape"] == [] for a in scalars)
    values = [side["constants"][a["name"]]["values"][0] for a in scalars]
    lr, b1, b2 = 1e-3, 0.9, 0.999
    assert any(abs(v - -lr / (1 - b1 ** 2)) < 1e-9 for v in values) or \
        any(abs(v - (1 - b2 ** 2) ** 0.5) < 1e-6 for v in values), values


@pytest.mark.parametrize("args, message", [
    (["elementwise", "--step", "train"], "has no parameters to train"),
    (["gpt2", "--step", "backward"], "unknown step 'backward'"),
])
def test_bad_training_requests_get_one_line_and_exit_2(cli, tmp_path, args, message):
    code, out, err = cli("capture", *args, "--out", tmp_path)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_bench_step_train_times_captures_and_native_loops_and_torch_xla_compiles_again_at_step_2(cli, tmp_path):
    """The study's claim measured on the runtimes themselves, each in a fresh bench worker (torch_xla's
    graph cache is per process): jax.jit compiles once (step 1); torch_xla's lazy loop compiles at
    step 1 and again at step 2, then runs cached graphs."""
    import json as _json

    out = tmp_path / "b.json"
    code, _, err = cli("bench", "gemm", "--step", "train", "--exporter", "torch_xla", "--baselines",
                       "jax,eager,inductor,torch_xla,jax_donate", "--runs", "10", "--out", tmp_path / "c", "--json", out)
    assert code == 0, err
    rows = {r["kind"] if r["kind"] != "stablehlo" else r["label"].rsplit("/", 1)[-1]: r
            for r in _json.loads(out.read_text())["results"]}
    assert set(rows) == {"jax-train.mlir", "torch-torch_xla-train.mlir", "jax.jit", "torch eager", "torch.compile",
                         "torch_xla lazy", "jax.jit donated"}
    for r in rows.values():
        assert r["proof"]["ok"], r
        assert all("page faults" in p for p in r["timing"]["counters"].values()), r  # every row, every phase
    for kind in ("jax.jit", "torch eager", "torch.compile", "torch_xla lazy", "jax.jit donated"):
        assert "first training step" in rows[kind]["proof"]["reference"]
    donated = rows["jax.jit donated"]["timing"]["counters"]
    assert donated["first"]["compiles"] >= 1 and donated["second"]["compiles"] == 0 == donated["steady"]["compiles"]
    # torch.compile of the model: dynamo compiles its graph at step 1, nothing after.
    dyn = rows["torch.compile"]["timing"]["counters"]
    assert dyn["first"]["graphs compiled"] >= 1 and dyn["second"]["graphs compiled"] == 0, dyn
    assert dyn["steady"]["recompiles"] == 0, dyn
    jit = rows["jax.jit"]["timing"]["counters"]
    assert jit["first"]["compiles"] >= 1 and jit["second"]["compiles"] == 0 and jit["third"]["compiles"] == 0
    xla = rows["torch_xla lazy"]["timing"]["counters"]
    assert xla["first"]["compiles"] >= 1 and xla["second"]["compiles"] == 1, xla
    assert xla["third"]["compiles"] == 0 and xla["steady"]["compiles"] == 0, xla
    assert xla["steady"]["executions"] == xla["steady"]["runs"]  # one graph per step here, every step ran


@pytest.mark.slow
def test_bench_of_a_training_capture_proves_its_loss(cli, tmp_path):
    import json as _json

    out = tmp_path / "b.json"
    code, _, err = cli("bench", golden("ffn", "jax-train"), golden("ffn", "torch-torch_xla-train"), "--json", out)
    assert code == 0, err
    rows = _json.loads(out.read_text())["results"]
    assert len(rows) == 2
    for r in rows:
        assert r["proof"]["ok"] and r["proof"]["reference"].startswith("PyTorch eager"), r["proof"]
        assert r["timing"]["third_s"] is not None


@pytest.mark.parametrize("args, message", [
    (["gpt2", "--step", "train", "--baselines", "tvm"], "unknown baseline 'tvm'"),
    (["sort", "--step", "train"], "has no parameters to train"),
    (["gpt2", "--step", "sideways"], "unknown step 'sideways'"),
])
def test_bad_bench_training_requests_get_one_line_and_exit_2(cli, tmp_path, args, message):
    code, _, err = cli("bench", *args, "--out", tmp_path)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name, want", [
    ("jit(step)/transpose(jvp(h.3))/attn/c_attn/dot_general", ("h.3.attn.c_attn", "", "backward")),
    ("jit(step)/jvp(h.3)/ln_1/rsqrt", ("h.3.ln_1", "", "forward")),
    ("jit(step)/jvp(jit(log_softmax))/reduce_max", ("", "", "forward")),
    ("jit(forward)/h.3/attn/dot_general", ("h.3.attn", "", "")),
    ("jit(_take)/gather", ("", "", "")),
    # torch_xla's own op scope in an XLA dump of a lazy graph (XLA_HLO_DEBUG=1) names an op, not a module:
    # read as one, `aten__add.2` made a layer 2 "residual" block (issue 74)
    ("aten__add.2/aten__add", ("", "", "")),
    ("h.0.attn/aten__addmm", ("h.0.attn", "", "")),
    ("jvp(h.0.mlp)/aten__mul.7/aten__mul", ("h.0.mlp", "", "forward")),
])
def test_provenance_keeps_the_scope_a_transformation_wraps_and_names_the_phase(name, want):
    from stackwars_ir.ir.locations import provenance

    assert provenance(name) == want


def test_training_diff_aligns_every_forward_and_backward_block_and_names_the_update():
    """JAX against torchax (both lowered by jax.jit): per layer, the forward block pairs with the
    forward block and the backward (transpose) block with the backward block; the optimizer's
    update is one region on each side."""
    from stackwars_ir.diff import diff_files

    r = diff_files(golden("gpt2", "jax-train"), golden("gpt2", "torch-torchax-train"))
    keys = {a.key for a, _ in r.alignment.pairs}
    for layer in (0, 1):
        for role, ordinals in (("norm", (0, 1)), ("attention", (0,)), ("mlp", (0,))):
            for k in ordinals:
                assert ((layer,), role, k, "forward") in keys and ((layer,), role, k, "backward") in keys, (layer, role, k)
    assert ((), "optimizer", 0, "update") in keys
    assert not r.alignment.only_a, [b.label for b in r.alignment.only_a]
    labels = {a.label for a, _ in r.alignment.pairs}
    assert "attention[1]#0 (backward)" in labels and "optimizer#0 (update)" in labels


def test_forward_diff_has_no_phases():
    from stackwars_ir.diff import diff_files

    r = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torchax"))
    assert all(a.phase == "" and b.phase == "" for a, b in r.alignment.pairs)


_NAMES_PROBE = r"""
import os, re, sys
os.environ["PJRT_DEVICE"] = "CPU"; os.environ["XLA_HLO_DEBUG"] = "1"
import torch, torch_xla, torch_xla.core.xla_model as xm
from stackwars_ir.workload.train import OpNames
from stackwars_ir.capture.torch_capture import portable_to_text
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(torch_xla.device())
x = torch.randn(3, 4).to(torch_xla.device())
texts = []
for named in (False, True):
    model.zero_grad(set_to_none=True)
    names = OpNames(model)
    if named:
        names.__enter__()
    try:
        loss = model(x).square().mean()
        loss.backward()
    finally:
        if named:
            names.__exit__(None, None, None)
    grads = [p.grad for p in model.parameters()]
    texts.append(portable_to_text(xm.get_stablehlo_bytecode([loss, *grads])))
from jax._src.interpreters import mlir as jmlir
from jaxlib.mlir import ir
with jmlir.make_ir_context():
    bare = [ir.Module.parse(t).operation.get_asm(enable_debug_info=False) for t in texts]
print("SAME" if bare[0] == bare[1] else "DIFFERENT")
print(" ".join(sorted(set(re.findall(r'"((?:transpose\()?jvp\([^"]*)/aten__\w+"', texts[1])))))
"""


def test_op_names_change_the_locations_of_the_lazy_graph_and_nothing_else():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _NAMES_PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    same, names = out.stdout.splitlines()[-2:]
    assert same == "SAME"
    found = set(names.split())
    assert {"jvp(0)", "jvp(1)", "jvp(2)", "transpose(jvp(0))", "transpose(jvp(2))"} <= found, found


@pytest.mark.parametrize("model", XLA)
def test_torch_xla_training_leaves_only_the_update_without_a_phase(model):
    # Every op the optimizer does not run is named forward or backward: the loss after the model's
    # forward too (before, GPT-2's nll_loss counted in the update, and its head's matmul and
    # log_softmax read `transpose(jvp())` after loss.backward() renamed them).
    mod = load_one(golden(model, "torch-torch_xla-train"))
    adamw = {"multiply", "add", "subtract", "divide", "sqrt", "broadcast_in_dim", "constant", "convert", "return"}
    other = sorted({o.name for o in mod.ops if not o.phase and o.parent is None} - {f"stablehlo.{n}" for n in adamw}
                   - {"func.return"})
    assert other == [], other
    text = golden(model, "torch-torch_xla-train").read_text()
    assert 'loc("transpose(jvp())/aten__log_softmax")' not in text  # a forward op, named backward
    if models.entry(model).loss == "lm":  # the head's matmul, log_softmax and nll_loss: the loss's forward
        for op in ("aten__mm", "aten__log_softmax", "aten__nll_loss"):
            assert f'loc("jvp()/{op}")' in text, op


def test_the_donated_jax_loop_hands_its_state_to_xla_and_computes_the_same_steps():
    """jax_donate: each step consumes the parameters and AdamW state it was given (their buffers are
    deleted, XLA wrote the results into them), and the losses are the undonated loop's."""
    import jax
    import numpy as np

    from stackwars_ir.bench.runtimes import jax_jit
    from stackwars_ir.workload import prepare
    from stackwars_ir.workload.train import train_state

    req = Request("ffn", step="train").validated()
    w = prepare(req)
    adapter, model, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    state = train_state(req, model, inputs, reference)
    losses = {}
    for donate in (False, True):
        label, kind, run, _, done = jax_jit.train(adapter, req, model, weights, state, "cpu", donate=donate)
        box = dict(zip(run.__code__.co_freevars, (c.cell_contents for c in run.__closure__)))["box"]
        given = jax.tree_util.tree_leaves((box["params"], box["opt_state"]))
        losses[donate] = [float(run()) for _ in range(3)]
        assert all(leaf.is_deleted() for leaf in given) == donate, kind
        done()
    assert kind == "jax.jit donated" and "donated" in label
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-6)
    assert losses[True][2] < losses[True][0]  # the steps train: the loss falls


def test_jax_donate_is_a_training_baseline_only(cli):
    code, out, err = cli("bench", "ffn", "--baselines", "jax,jax_donate")
    assert code == 2 and "baseline 'jax_donate' times a training loop" in err and "--step train" in err
    assert "Traceback" not in err and out == ""
