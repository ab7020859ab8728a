"""Capture: every tiny adapter from JAX, torch_xla and torchax, parity-checked; goldens reproduce."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAPTURES, golden, pins
from stackwars_ir import models
from stackwars_ir.capture import Request, run
from stackwars_ir.common.routes import LOCK_EXPORTERS as EXPORTERS  # the routes the lock runs (torch_tpu: a stack of its own)
from stackwars_ir.capture.sanitize import absolute_paths
from stackwars_ir.ir import load_one

STEMS = ("jax", "torch-torch_xla", "torch-torchax")


def stems(model: str) -> tuple:
    """The captures a model has: every exporter that can export it (fft: not torch_xla)."""
    usable, _ = models.exporters_for(model, EXPORTERS)
    return ("jax",) + tuple(f"torch-{e}" for e in usable)


PAIRS = [(m, s) for m in models.ADAPTERS for s in stems(m)]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """Every adapter captured anew, tiny, both frameworks and both exporters."""
    out = tmp_path_factory.mktemp("captures")
    return out, {m: run(Request(m, exporters=models.exporters_for(m, EXPORTERS)[0]), out) for m in models.ADAPTERS}


@pytest.mark.slow
@pytest.mark.parametrize("model", models.ADAPTERS)
def test_parity_within_tolerance(fresh, model):
    _, results = fresh
    parity = {p.stem: p for p in results[model].parity}
    assert set(parity) == set(stems(model))
    for p in parity.values():
        assert p.ok and p.max_abs < 1e-3, p


@pytest.mark.slow
@pytest.mark.parametrize("model, stem", PAIRS)
def test_capture_is_deterministic_and_matches_golden(fresh, model, stem):
    out, _ = fresh
    new, old = out / f"{model}-tiny" / f"{stem}.mlir", golden(model, stem)
    assert new.read_text() == old.read_text(), f"{old} is stale: run `make captures`"
    new_side, old_side = (json.loads(p.with_suffix(".json").read_text()) for p in (new, old))
    new_side.pop("run"), old_side.pop("run")  # wall times and host: the only part that may differ
    # Parity errors are floating-point evidence: their last digits depend on the CPU and its BLAS
    # threads, so they are compared for what they mean (within tolerance, as in the golden).
    for side in (new_side, old_side):
        errors = side["parity"]
        assert errors["ok"] is True and errors["max_abs_error"] < 1e-3, errors
        del errors["max_abs_error"], errors["max_rel_error"]
        float64 = errors["float64"]  # against the model in float64: within a few times eager's own
        assert errors["verdict"] == "ok" and float64["multiple"] < 4, float64
        for k in ("capture_error", "eager_float32_error", "multiple"):
            del float64[k]
    assert new_side == old_side


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*/*")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_has_no_absolute_path(path):
    assert absolute_paths(path.read_text()) == []


def test_gpt2_torch_xla_uses_batch_norm_training_and_jax_does_not():
    torch_ops = load_one(golden("gpt2", "torch-torch_xla")).histogram()
    jax_ops = load_one(golden("gpt2", "jax")).histogram()
    # LayerNorm: 2 per layer (2 layers) + ln_f, as the study saw on the torch_xla path.
    assert torch_ops["stablehlo.batch_norm_training"] == 5
    assert jax_ops["stablehlo.batch_norm_training"] == 0
    assert jax_ops["stablehlo.reduce"] > 0


@pytest.mark.parametrize("model, stem", PAIRS)
def test_sidecar_describes_every_argument(model, stem):
    path = golden(model, stem)
    side = json.loads(path.with_suffix(".json").read_text())
    module = load_one(path)
    assert len(side["arguments"]) == len(module.entry.args)
    for arg, vid in zip(side["arguments"], module.entry.args):
        assert tuple(arg["shape"]) == module.values[vid].type.shape
    lock = pins()  # goldens are regenerated with the lock (make captures)
    assert side["versions"]["jax"] == lock["jax"] and side["versions"]["torch"] == lock["torch"]
    assert side["parity"]["ok"] is True
    assert {"model", "config", "inputs", "exporter", "run"} <= set(side)


def test_jax_capture_keeps_weights_as_arguments():
    text = golden("gpt2", "jax").read_text()
    side = json.loads(golden("gpt2", "jax").with_suffix(".json").read_text())
    names = [a["name"] for a in side["arguments"] if a["kind"] == "parameter"]
    assert "h.0.attn.c_attn.weight" in names and "wte.weight" in names
    assert len(text) < 200_000  # weights inlined as constants would be megabytes


@pytest.mark.parametrize("args, message", [
    (["capture", "nosuchmodel"], "unknown model 'nosuchmodel'"),
    (["capture", "gpt2", "--size", "huge"], "unknown size 'huge'"),
    (["capture", "gpt2", "--framework", "tf"], "unknown framework 'tf'"),
    (["capture", "gpt2", "--exporter", "onnx"], "unknown exporter 'onnx'"),
    (["capture", "gpt2", "--attn", "sdpa"], "attention implementation 'sdpa' cannot be captured"),
    (["capture", "gpt2", "--seq", "100000", "--framework", "jax"], "exceeds GPT-2 tiny's 128 positions (fix: give "
                                                                   "a --size, --batch or --seq this model takes"),
    (["capture", "fft", "--exporter", "torch_xla"], "fft cannot be captured through torch_xla: torch_xla 2.9 "
                                                    "cannot capture aten::_fft_r2c"),
])
def test_bad_capture_requests_get_one_line_and_exit_2(cli, tmp_path, args, message):
    code, out, err = cli(*args, "--out", tmp_path)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_existing_capture_is_refused_without_force(cli, tmp_path):
    target = tmp_path / "gemm-tiny" / "jax.mlir"
    target.parent.mkdir()
    target.write_text("keep me")
    code, _, err = cli("capture", "gemm", "--framework", "jax", "--out", tmp_path)
    assert code == 2 and "already exists" in err and "--force" in err
    assert target.read_text() == "keep me"
    code, out, _ = cli("capture", "gemm", "--framework", "jax", "--out", tmp_path, "--force")
    assert code == 0 and "parity jax" in out
    assert "stablehlo.dot_general" in target.read_text()


def test_missing_torch_xla_gives_install_hint(monkeypatch, cli, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "torch_xla.stablehlo", None)  # as if torch_xla were not installed
    code, _, err = cli("capture", "gemm", "--framework", "torch", "--out", tmp_path)
    assert code == 2 and "cannot import torch_xla" in err and "make setup" in err
    assert list(tmp_path.rglob("*.mlir")) == []


def test_atomic_write_leaves_nothing_behind_on_failure(tmp_path):
    from stackwars_ir.common.files import write_atomic


    with pytest.raises(TypeError):
        write_atomic(tmp_path / "x.mlir", 42)  # not text: the write fails half-way
    assert list(tmp_path.iterdir()) == []


def test_models_command_lists_every_adapter(cli):
    code, out, _ = cli("models")
    assert code == 0
    for name in models.ADAPTERS:
        assert name in out


def test_exporter_all_skips_an_exporter_that_cannot_export_the_model_and_says_so(cli, tmp_path):
    code, out, err = cli("capture", "fft", "--exporter", "all", "--out", tmp_path)
    assert code == 0 and "torch_xla skipped" in err and "_fft_r2c" in err
    assert sorted(p.name for p in (tmp_path / "fft-tiny").glob("*.mlir")) == ["jax.mlir", "torch-torchax.mlir"]


@pytest.mark.parametrize("model, op", [("elementwise", "stablehlo.sine"), ("matmul", "stablehlo.dot_general"),
                                       ("matmul_skinny", "stablehlo.dot_general"), ("fft", "stablehlo.fft"),
                                       ("sort", "stablehlo.sort")])
def test_seed_002_workloads_lower_to_their_op_in_every_capture(model, op):
    for stem in stems(model):
        assert load_one(golden(model, stem)).histogram()[op] >= 1, (model, stem)


def test_an_argument_without_a_value_is_one_line_not_a_traceback():
    # torch.export lifts tensors a model makes inside forward (GPT-Neo's mask value, measured): a
    # capture whose argument has no known value must say so, not raise KeyError.
    from stackwars_ir.common.errors import CaptureError
    from stackwars_ir.workload import Argument, argument_values

    args = (Argument(0, "constant", "h.1.attn.lifted_tensor_1", (), "float32"),)
    with pytest.raises(CaptureError, match="torch-torch_xla: argument 0 .* neither a weight"):
        argument_values(args, {}, {}, {}, "torch-torch_xla")


def test_a_capture_that_differs_from_eager_is_written_for_inspection_and_exits_1(monkeypatch, cli, tmp_path):
    import stackwars_ir.capture.pipeline as capture

    real = capture.prepare

    def off_by_one(req):  # eager's reference moved: every capture now differs from it
        import dataclasses

        w = real(req)
        return dataclasses.replace(w, reference=w.reference + 1.0)

    monkeypatch.setattr(capture, "prepare", off_by_one)
    code, out, err = cli("capture", "gemm", "--exporter", "all", "--out", tmp_path)
    assert code == 1 and "DIFFERS" in err and "files written for inspection" in err, err
    assert sorted(p.name for p in (tmp_path / "gemm-tiny").glob("*.mlir")) == \
        ["jax.mlir", "torch-torch_xla.mlir", "torch-torchax.mlir"]


def test_a_parity_run_that_fails_in_its_thread_stops_the_set_and_writes_nothing(monkeypatch, cli, tmp_path):
    # Parity runs in a second thread beside the next export: XLA's refusal of one capture comes back
    # as one line, exit 2, and the captures made beside it are not written either.
    import dataclasses

    import stackwars_ir.capture.lowerings as tc  # where the route table reads the exporters

    real = tc.capture_torch_xla
    monkeypatch.setattr(tc, "capture_torch_xla", lambda *a, **k: dataclasses.replace(real(*a, **k), text="module {"))
    code, _, err = cli("capture", "gemm", "--exporter", "all", "--out", tmp_path)
    assert code == 2 and "torch-torch_xla: " in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not list(tmp_path.rglob("*.*"))


def test_an_export_that_fails_while_a_parity_check_runs_writes_nothing(monkeypatch, cli, tmp_path):
    import stackwars_ir.capture.lowerings as tc  # where the route table reads the exporters
    from stackwars_ir.common.errors import CaptureError

    def refuse(*a, **k):
        raise CaptureError("torchax export failed: injected")

    monkeypatch.setattr(tc, "capture_torchax", refuse)
    # One route asked for: its failure stops the set, though JAX's parity check ran beside it.
    code, _, err = cli("capture", "gemm", "--framework", "both", "--exporter", "torchax", "--out", tmp_path)
    assert code == 2 and "injected" in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.rglob("*.*"))
    # --exporter all tries every route (issue 78): the one that captured is written whole, the other
    # named, exit 1.
    code, out, err = cli("capture", "gemm", "--exporter", "all", "--out", tmp_path)
    assert code == 1 and "torch-torchax: not captured: torchax export failed: injected" in err, err
    assert len(err.strip().splitlines()) == 1 and "parity torch-torch_xla" in out
    written = sorted(p.name for p in tmp_path.rglob("*.*"))
    assert "torch-torch_xla.mlir" in written and "torch-torch_xla.json" in written
    assert not [n for n in written if "torchax" in n], written


def test_a_failed_forward_parity_says_where_the_output_differs_most():
    import numpy as np

    from stackwars_ir.capture.parity import compare

    want = np.zeros((2, 3, 4), dtype=np.float32)
    got = want.copy()
    got[1, 2, 0] = 0.5
    p = compare("jax", got, want)
    assert not p.ok and p.worst == ({"max_abs": 0.5, "at": [1, 2, 0]},)
    assert p.line().endswith("; max |difference| 0.5 at [1, 2, 0] of the output")
    assert compare("jax", want, want).worst == ()  # computed for a failure only



def test_beyond_the_elementwise_bound_a_capture_as_close_to_float64_as_eager_passes_and_says_so():
    """At a published size float32's error outgrows 1e-4 + 1e-3|x| near outputs of 0 (GPT-Neo 1.3B
    through torch_xla: 3.1e-4): judged against the float64 run, a capture within NOISE_OK times float32
    eager's own error rounds the same computation and passes, saying so; one beyond it still differs."""
    import json

    import numpy as np

    from stackwars_ir.capture.parity import Parity, compare

    rng = np.random.default_rng(0)
    exact = rng.standard_normal(4096)
    want = exact + 3e-4 * rng.standard_normal(4096)  # float32 eager: its own error against float64
    close = exact + 3e-4 * rng.standard_normal(4096)  # another order of rounding, as far from float64
    p = compare("torch-torch_xla", close, want, exact)
    assert p.ok and not p.elementwise_ok and p.verdict == "ok" and 0.5 < p.multiple < 2, p
    assert "passed beyond it: as close to float64 as float32 eager" in p.line()
    back = Parity.from_json(json.loads(json.dumps(p.as_json())), p.stem)
    assert (back.ok, back.elementwise_ok, back.multiple) == (True, False, p.multiple) and "float64" in p.as_json()["passed_by"]
    far = exact + 3e-3 * rng.standard_normal(4096)  # ten times eager's error: another computation
    q = compare("torch-torch_xla", far, want, exact)
    assert not q.ok and q.verdict == "differs" and q.multiple > 2
    # Without a float64 run the hard bound alone decides.
    assert not compare("torch-torch_xla", close, want, None, "not run").ok
    # A reference far from float64 itself (not float32's rounding) lets no capture pass by being closer.
    assert not compare("torch-torch_xla", exact, exact + 1.0, exact).ok


def test_a_model_too_large_to_copy_in_float64_runs_in_float64_layer_by_layer(monkeypatch):
    """float64_streamed: each layer made float64 while it runs and float32 again after: the same output
    as the float64 copy, and the model left exactly as it was."""
    import numpy as np
    import torch

    import stackwars_ir.workload.prepared as prepared
    import stackwars_ir.workload.values as values
    from stackwars_ir.capture import Request
    from stackwars_ir.workload import prepare
    from stackwars_ir.workload.prepared import float64_output, float64_streamed

    w = prepare(Request("gpt_neo").validated())
    before = {k: v.detach().clone() for k, v in w.model.state_dict().items()}
    copied = float64_output(w.model, w.inputs)
    assert copied.why == "" and copied.value.dtype == np.float64
    # Below the whole model's float64 size, above any one module's own: the copy is refused, the
    # layers run in float64 one at a time.
    biggest = max(8 * sum(t.numel() for t in (*m.parameters(recurse=False), *m.buffers(recurse=False))
                          if t.is_floating_point()) for m in w.model.modules())
    monkeypatch.setattr(values, "FLOAT64_BYTES", biggest)
    monkeypatch.setattr(prepared, "FLOAT64_BYTES", biggest)
    assert values.float64_copy(w.model)[0] is None
    streamed = float64_output(w.model, w.inputs)
    assert streamed.why == "" and np.allclose(streamed.value, copied.value, rtol=1e-12, atol=1e-14)  # float64 rounding
    after = w.model.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())
    monkeypatch.setattr(values, "FLOAT64_BYTES", biggest - 8)
    monkeypatch.setattr(prepared, "FLOAT64_BYTES", biggest - 8)  # one module's own tensors pass it
    assert float64_streamed(w.model, w.inputs) is None
    assert "a float64 copy would take" in float64_output(w.model, w.inputs).why

def test_a_copy_on_a_device_is_a_copy_with_ties_kept():
    """copy_on (the lazy copies of capture and bench): every tensor its own copy with the same values,
    type and requires_grad, a tied weight still one tensor in the copy, writes to the copy not seen in
    the original."""
    import torch

    from stackwars_ir.capture import Request
    from stackwars_ir.workload import prepare
    from stackwars_ir.workload.values import copy_on

    model = prepare(Request("gpt2").validated()).model
    head = torch.nn.Linear(*model.wte.weight.shape[::-1], bias=False)
    head.weight = model.wte.weight  # tied, as a language model's head is to its embedding
    tied = torch.nn.ModuleDict({"body": model, "head": head})
    tied.body.h[0].ln_1.weight.requires_grad_(False)
    try:
        c = copy_on(tied, "cpu")
        assert c.head.weight is c.body.wte.weight and c.head.weight is not tied.head.weight
        pairs = list(zip(tied.state_dict(keep_vars=True).items(), c.state_dict(keep_vars=True).items()))
        assert pairs and all(ka == kb and a.data_ptr() != b.data_ptr() and torch.equal(a, b)
                             and a.requires_grad == b.requires_grad and type(a) is type(b) for (ka, a), (kb, b) in pairs)
        assert len(list(c.parameters())) == len(list(tied.parameters()))  # the tie counted once in both
        with torch.no_grad():
            c.body.h[0].mlp.c_fc.weight.add_(1.0)
        assert not torch.equal(c.body.h[0].mlp.c_fc.weight, tied.body.h[0].mlp.c_fc.weight)
    finally:
        tied.body.h[0].ln_1.weight.requires_grad_(True)


ROUTE_ROW = '''
TWIN = Route("torchax_twin", "torch", "torch.export, then torchax (a test route: issue 52)")
ROUTES = {r.name: r for r in (JAX, TORCH_XLA, TORCHAX, TORCH_TPU, TWIN)}
'''
TWIN_LOWERING = '''"""The test route's lowering: torchax's, under its own name, a forward and a training step."""
import dataclasses


def capture(ep, inputs, stages, placement=None):
    from .torch_capture import capture_torchax

    return dataclasses.replace(capture_torchax(ep, inputs, stages, placement), exporter="torchax_twin")


def train(model, state, stages, req, entry):
    from .lowering import placement
    from .train import capture_torchax_train

    return dataclasses.replace(capture_torchax_train(model, state, stages, placement(req)), exporter="torchax_twin")
'''


def test_a_route_is_added_by_three_files(tmp_path):
    """Adding a PyTorch route touches common/routes.py (its row), capture/lowerings.py (a line naming its
    forward's lowering, one its training step's) and the lowering's own module, nothing else (issues 52
    and 76): on a copy of the package with a test route so added, `capture --exporter` offers it, writes
    its forward and training step with sidecars, checks their parity, and `diff` reads each against
    torchax's (the same lowering: op-identical)."""
    import shutil

    import stackwars_ir
    from stackwars_ir import models

    code = tmp_path / "code"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(stackwars_ir.__file__).parent, code / "stackwars_ir", ignore=ignore)
    shutil.rmtree(code / "stackwars_ir" / "models", ignore_errors=True)
    shutil.copytree(Path(models.__file__).parent, code / "stackwars_ir" / "models", ignore=ignore)
    pkg = code / "stackwars_ir"
    routes = (pkg / "common" / "routes.py").read_text()
    anchor = "ROUTES = {r.name: r for r in (JAX, TORCH_XLA, TORCHAX, TORCH_TPU)}\n"
    assert anchor in routes
    (pkg / "common" / "routes.py").write_text(routes.replace(anchor, ROUTE_ROW.lstrip("\n")))
    lowerings = (pkg / "capture" / "lowerings.py").read_text()
    anchor = "{TORCH_XLA.name: capture_torch_xla, TORCHAX.name: capture_torchax, TORCH_TPU.name: capture_torch_tpu}[route]"
    assert anchor in lowerings
    (pkg / "capture" / "lowerings.py").write_text(lowerings.replace(
        anchor, anchor.replace("}[route]", ', "torchax_twin": __import__("stackwars_ir.capture.twin_capture", '
                                           'fromlist=["capture"]).capture}[route]')))
    anchor = "{TORCH_XLA.name: _torch_xla_train, TORCHAX.name: _torchax_train}[route]"
    lowerings = (pkg / "capture" / "lowerings.py").read_text()
    assert anchor in lowerings
    (pkg / "capture" / "lowerings.py").write_text(lowerings.replace(
        anchor, anchor.replace("}[route]", ', "torchax_twin": __import__("stackwars_ir.capture.twin_capture", '
                                           'fromlist=["train"]).train}[route]')))
    (pkg / "capture" / "twin_capture.py").write_text(TWIN_LOWERING)

    def run(*args):
        boot = f"import sys; sys.path.insert(0, {str(code)!r}); from stackwars_ir.cli.commands import main; main()"
        return subprocess.run([sys.executable, "-c", boot, *map(str, args)], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)

    done = run("capture", "--help")  # the --exporter help is built from the route table
    assert "torchax_twin" in " ".join(done.stdout.split()), done.stdout
    done = run("capture", "gemm", "--exporter", "torchax,torchax_twin", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-2000:]
    folder = tmp_path / "out" / "gemm-tiny"
    assert {p.name for p in folder.iterdir()} >= {"torch-torchax_twin.mlir", "torch-torchax_twin.json"}
    side = json.loads((folder / "torch-torchax_twin.json").read_text())
    assert side["exporter"] == "torchax_twin" and side["parity"]["ok"], side
    done = run("diff", folder / "torch-torchax.mlir", folder / "torch-torchax_twin.mlir", "--json", "-")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["differs"] is False
    # and its training step (a route with one: issue 76), lowered by the same module
    done = run("capture", "gemm", "--exporter", "torchax,torchax_twin", "--step", "train", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-2000:]
    side = json.loads((folder / "torch-torchax_twin-train.json").read_text())
    assert side["exporter"] == "torchax_twin" and side["parity"]["ok"], side
    done = run("diff", folder / "torch-torchax-train.mlir", folder / "torch-torchax_twin-train.mlir", "--json", "-")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["differs"] is False
