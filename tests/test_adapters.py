"""The adapter protocol: a model is one file, read into the catalogue without importing it; a user's file outside the repository captures and diffs."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from conftest import ROOT
from stackwars_ir import models

TOY = ROOT / "tests" / "adapters" / "toy_mixer.py"


@pytest.fixture
def user_adapters(tmp_path, monkeypatch):
    """A folder outside the repository holding the toy adapter; the environment restored afterwards."""
    folder = tmp_path / "my_models"
    folder.mkdir()
    shutil.copy(TOY, folder / "toy_mixer.py")
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    return folder


def test_every_adapter_is_one_file_whose_entry_is_read_without_importing_it():
    for name, e in models.CATALOG.items():
        assert e.path.endswith(f"models/{name}.py") and e.name == name and set(e.sizes) == set(e.shapes)
    t0 = time.perf_counter()
    fresh = [models.read_entry(__import__("pathlib").Path(e.path)) for e in models.CATALOG.values()]
    assert fresh == list(models.CATALOG.values())
    assert time.perf_counter() - t0 < 5  # a generous bound: parsing, no framework import


def test_a_user_adapter_file_outside_the_repository_captures_and_diffs(cli, user_adapters, tmp_path):
    code, out, err = cli("--adapters", user_adapters, "models")
    assert code == 0 and "toy_mixer" in out and "(adapter file" in out, err
    out_dir = tmp_path / "caps"
    code, out, err = cli("--adapters", user_adapters, "capture", "toy_mixer", "--exporter", "all", "--out", out_dir)
    assert code == 0 and "warning" not in err, err
    folder = out_dir / "toy_mixer-tiny"
    for stem in ("jax", "torch-torch_xla", "torch-torchax"):
        side = json.loads((folder / f"{stem}.json").read_text())
        assert side["model"] == "toy_mixer" and side["parity"]["ok"] is True
        assert str(user_adapters) not in (folder / f"{stem}.mlir").read_text()  # no machine path in the data
    # The adapter's own word `mix` names the MLP role: each layer's MLP aligns with its twin.
    code, out, err = cli("--adapters", user_adapters, "diff", folder / "jax.mlir", folder / "torch-torch_xla.mlir",
                         "--json", tmp_path / "d.json")
    assert code == 1, err
    blocks = json.loads((tmp_path / "d.json").read_text())["blocks"]
    assert [(b["role"], b["layer"]) for b in blocks if b["role"] == "mlp"] == [("mlp", [0]), ("mlp", [1])]


@pytest.mark.parametrize("text, words", [
    ("ENTRY = Entry(\n", "not Python"),
    ("SIZES = {}\n", "no ENTRY = Entry(...)"),
    ("D = 4\nENTRY = Entry('bad', 'x', {'tiny': dict(d=D)}, {'tiny': dict(batch=1, seq=1)})\n", "uses 'D'"),
    ("ENTRY = Entry('other', 'x', {'tiny': {}}, {'tiny': dict(batch=1, seq=1)})\n", "names the model 'other'"),
    ("ENTRY = Entry('bad', 'x', {'tiny': {}}, {})\n", "must name the same sizes"),
    ("ENTRY = dict(a=1)\n", "not an Entry"),
])
def test_a_bad_adapter_file_is_one_line_naming_it(cli, tmp_path, monkeypatch, text, words):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    code, _, err = cli("--adapters", bad, "models")
    assert code == 2 and words in err and str(bad) in err and len(err.strip().splitlines()) == 1, err


def test_a_broken_file_in_a_folder_is_skipped_and_named_and_the_others_stay_usable(cli, tmp_path, user_adapters):
    """One syntax error made every adapter of its folder unusable (issue 75): now the file is named,
    with its line and cause, and skipped; the folder's other adapters are listed and usable."""
    (user_adapters / "broken.py").write_text("ENTRY = Entry(\n")
    code, out, err = cli("--adapters", user_adapters, "models")
    assert code == 0, err
    assert "toy_mixer" in out and f"could not read {user_adapters.resolve() / 'broken.py'}" in out
    assert "broken.py:1: not Python" in out
    assert err.count("warning: skipped adapter file") == 1 and "Traceback" not in err


def test_a_folder_with_no_adapter_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = cli("--adapters", empty, "models")
    assert code == 0 and f"no adapter in {empty.resolve()}" in out, (out, err)


def test_a_missing_adapter_path_and_a_name_taken_twice_are_one_line(cli, tmp_path, monkeypatch, user_adapters):
    code, _, err = cli("--adapters", tmp_path / "nowhere", "models")
    assert code == 2 and "no adapter file or folder there" in err
    prose = tmp_path / "notes.txt"
    prose.write_text("my adapter ideas\n")
    code, _, err = cli("--adapters", prose, "models")
    assert code == 2 and f"--adapters {prose}: a file, but not a .py or .toml adapter file" in err, err
    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # each command is a process of its own
    clash = tmp_path / "gpt2.py"
    clash.write_text(TOY.read_text().replace('"toy_mixer"', '"gpt2"'))
    code, _, err = cli("--adapters", clash, "models")
    assert code == 2 and "a model named 'gpt2' exists already" in err


OPT = ROOT / "tests" / "adapters" / "opt.py"


def _opt_variant(folder, name: str, old: str = "", new: str = "", cut: str = ""):
    """tests/adapters/opt.py as model `name` (one module name per variant: adapters are imported once
    per process), with `old` replaced by `new`, or everything from `cut` on dropped."""
    text = OPT.read_text().replace('"opt"', f'"{name}"')
    if cut:
        text = text[:text.index(cut)]
    if old:
        assert old in text
        text = text.replace(old, new)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


TORCH_MODEL = "return positional(OPTModel, config(size), lambda out: out.last_hidden_state, use_cache=False)"
WRAPPED = '''import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = OPTModel(config(size))

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).last_hidden_state

    return Wrapped().eval()'''


@pytest.mark.parametrize("name, change, args, words", [
    ("opt_raw", dict(old=TORCH_MODEL, new="return OPTModel(config(size)).eval()"), (),
     "the model from torch_model(size) returns a BaseModelOutputWithPast from forward, not a tensor"),
    ("opt_nojax", dict(cut="class Attention"), ("--framework", "jax"), "the adapter defines no jax_model(size, weights)"),
    # refused before the model is built or sized (it once took 26 s of transformers first)
    ("opt_nojax_early", dict(old=TORCH_MODEL, new="raise RuntimeError('built')", cut="class Attention"),
     ("--framework", "jax"), "the adapter defines no jax_model(size, weights)"),
    ("opt_f64", dict(old='(batch, seq), dtype=np.int64)}', new='(batch, seq)).astype(np.float64)}'), (),
     "opt_f64.py:37: inputs(size, batch, seq, rng) returned 'input_ids' as float64 [2, "),
    ("opt_notorch", dict(old="def torch_model(", new="def build_torch_model("), (),
     "the adapter defines no torch_model(size)"),
    ("opt_listed", dict(old='return {"input_ids": rng.integers(2, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}',
                        new='return [rng.integers(2, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)]'), (), "returned list"),
    ("opt_wrap", dict(old=TORCH_MODEL, new=WRAPPED), ("--step", "train", "--framework", "torch"),
     "the 'lm' training loss needs the tied token embedding; the adapter has LM_HEAD"),
    ("opt_twin", dict(old='Linear(w, f"{prefix}.fc2", "fc2")', new='Linear(w, f"{prefix}.fc3", "fc2")'),
     ("--framework", "jax"), "in __init__(): KeyError: 'decoder.layers.0.fc3.weight'; nearest PyTorch names: "
                             "decoder.layers.0.fc"),
    ("opt_import", dict(old="import numpy as np\n", new="import numpy as np\nimport no_such_package\n"), (),
     "ModuleNotFoundError: No module named 'no_such_package'"),
])
def test_each_adapter_mistake_is_one_line_naming_its_file(cli, tmp_path, monkeypatch, name, change, args, words):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    path = _opt_variant(folder, name, **change)
    out_dir = tmp_path / "caps"
    code, out, err = cli("capture", name, *args, "--exporter", "torchax", "--out", out_dir, "--adapters", folder)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"stackwars-ir: error: {path}") and words in lines[0], lines[0]
    assert "docs/adapters.md" in lines[0]
    assert not out_dir.exists()  # nothing written


def test_an_exception_in_the_adapters_own_code_names_its_line(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    path = _opt_variant(folder, "opt_raises", old="    import jax.numpy as jnp\n\n        with self.scoped():\n"
                        "            positions", new="    import jax.numpy as jnp\n\n        with self.scoped():\n"
                        "            raise RuntimeError('not yet')\n            positions")
    line = 1 + path.read_text().splitlines().index("            raise RuntimeError('not yet')")
    code, _, err = cli("--adapters", folder, "capture", name := "opt_raises", "--framework", "jax",
                       "--out", tmp_path / "caps")
    caller = 1 + path.read_text().splitlines().index("        return self.decoder(input_ids)")
    assert code == 2 and err.strip() == (
        f"stackwars-ir: error: {path}:{line}: in __call__(): RuntimeError: not yet (called from line {caller} in "
        "__call__()) (fix: correct the adapter (docs/adapters.md states what each function must define and "
        "return))"), (name, err)


@pytest.mark.slow
def test_a_pytorch_only_adapter_captures_the_pytorch_routes(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    _opt_variant(folder, "opt_torch_only", cut="class Attention")
    code, out, err = cli("capture", "opt_torch_only", "--exporter", "all", "--out", tmp_path / "caps",
                         "--adapters", folder)
    assert code == 0, err
    assert "jax: not captured: opt_torch_only.py defines no jax_model(size, weights)" in out
    assert sorted(p.name for p in (tmp_path / "caps" / "opt_torch_only-tiny").glob("*.mlir")) == \
        ["torch-torch_xla.mlir", "torch-torchax.mlir"]
    # memory MODEL finds them on disk under the stems capture wrote (it once looked for a jax.mlir too
    # and captured again on every run).
    code, _, err = cli("memory", "opt_torch_only", "--exporter", "all", "--out", tmp_path / "caps",
                       "--adapters", folder)
    assert code == 0 and "using the captures of opt_torch_only-tiny" in err and "capturing" not in err, err


def test_unknown_models_and_adapter_paths_say_how_to_add_one(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    code, _, err = cli("capture", "opt")
    assert code == 2 and "unknown model 'opt'" in err and "--adapters PATH" in err
    code, _, err = cli("capture", "opt", "--adapters", tmp_path / "nowhere")
    assert code == 2 and err.strip() == (f"stackwars-ir: error: --adapters {tmp_path / 'nowhere'}: no adapter file "
                                         "or folder there (fix: name a .py or .toml adapter file, or a folder that holds "
                                         "them (docs/adapters.md))")


@pytest.fixture(scope="module")
def opt_captures(tmp_path_factory):
    """OPT, a model outside the catalogue, captured through its user adapter on all three routes."""
    from click.testing import CliRunner

    from stackwars_ir.cli.commands import main

    root = tmp_path_factory.mktemp("opt")
    folder = root / "mine"
    folder.mkdir()
    shutil.copy(OPT, folder / "opt.py")
    result = CliRunner().invoke(main, ["capture", "opt", "--exporter", "all", "--out", str(root / "caps"),
                                       "--adapters", str(folder)])
    assert result.exit_code == 0, result.output
    return folder, root / "caps" / "opt-tiny"


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["torch-torch_xla", "torch-torchax"])
def test_opt_layers_pair_by_key_with_fc2_in_the_mlp(cli, opt_captures, tmp_path, stem):
    from stackwars_ir.diff.blocks import segment
    from stackwars_ir.ir import load_one

    _, caps = opt_captures
    code, _, err = cli("diff", caps / "jax.mlir", caps / f"{stem}.mlir", "--json", tmp_path / "d.json")
    assert code == 1, err
    pairs = {(b["role"], tuple(b["layer"])) for b in json.loads((tmp_path / "d.json").read_text())["blocks"]}
    for layer in (0, 1):
        assert {("norm", (layer,)), ("attention", (layer,)), ("mlp", (layer,))} <= pairs, pairs
    for path in (caps / "jax.mlir", caps / f"{stem}.mlir"):
        for block in segment(load_one(path)).blocks:
            dots = sum(op.name == "stablehlo.dot_general" for op, _ in block.ops)
            if block.layer and block.role in ("mlp", "residual"):  # fc1 and fc2 in the MLP, on every route
                assert dots == (2 if block.role == "mlp" else 0), (path.name, block.label)


@pytest.mark.slow
def test_a_user_models_captures_need_no_adapter_to_diff_bench_and_plan(cli, opt_captures, tmp_path, monkeypatch):
    folder, caps = opt_captures
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    a, b = caps / "jax.mlir", caps / "torch-torch_xla.mlir"
    assert json.loads(a.with_suffix(".json").read_text())["values"]["file"] == "jax.npz"
    runs = {}
    for how, extra in (("with", ("--adapters", folder)), ("without", ())):
        code, diff_text, err = cli("diff", a, b, *extra)
        assert code == 1, err
        code, _, err = cli("memory", a, b, "--json", tmp_path / f"m-{how}.json", *extra)
        assert code == 0, err
        code, out, err = cli("bench", a, b, "--runs", "3", "--json", tmp_path / f"b-{how}.json", *extra)
        assert code == 0 and "FAILED" not in out and "unknown model" not in err, (out, err)
        rows = json.loads((tmp_path / f"b-{how}.json").read_text())["results"]
        plans = json.loads((tmp_path / f"m-{how}.json").read_text())["executables"]
        runs[how] = (diff_text, [(r["arguments"], r["proof"]["ok"], r["proof"]["reference"]) for r in rows],
                     [{k: v for k, v in p.items() if k not in ("seconds", "compile_s")} for p in plans])
    assert runs["with"] == runs["without"]
    assert [o for o, _, _ in runs["without"][1]] == ["capture's recorded values (opt-tiny, seed 0)"] * 2
    assert all(ok for _, ok, _ in runs["without"][1])


@pytest.mark.slow
def test_a_failed_training_parity_names_the_parameter_and_every_routes_verdict(cli, tmp_path, monkeypatch):
    """OPT's inputs drawn with its padding id 1: PyTorch leaves the padding row of embed_tokens without
    gradient, JAX's take does not, so the gradients differ there, in that parameter's row 1."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    _opt_variant(folder, "opt_pad", old="rng.integers(2, SIZES", new="rng.integers(0, SIZES")
    out_dir = tmp_path / "caps"
    code, _, err = cli("capture", "opt_pad", "--step", "train", "--exporter", "torchax", "--out", out_dir,
                       "--adapters", folder)
    line = err.strip()
    assert code == 1 and len(line.splitlines()) == 1, err
    assert "routes differ from PyTorch eager: parity jax-train DIFFERS" in line
    assert "worst gradients: decoder.embed_tokens.weight" in line and "at [1, " in line
    side = json.loads((out_dir / "opt_pad-tiny" / "jax-train.json").read_text())["parity"]
    assert side["ok"] is False and set(side["routes"]) == {"jax-train", "torch-torchax-train"}
    worst = side["worst"][0]
    assert worst["name"] == "decoder.embed_tokens.weight" and worst["at"][0] == 1 and worst["share"] > 0.99


ZOO = ROOT / "study" / "adapters"


def test_the_zoos_adapters_are_read_beside_the_built_in_ones_without_a_name_taken_twice(monkeypatch):
    """The zoo is one data file (issue 52): each table a model the catalogue reads without importing
    anything, whose adapter module is built from its type and input kind."""
    import tomllib

    monkeypatch.setenv(models.ADAPTERS_ENV, str(ZOO))
    zoo = {n: e for n, e in models.catalog().items() if e.path.startswith(str(ZOO))}
    assert set(zoo) == set(tomllib.loads((ZOO / "zoo.toml").read_text())) and len(zoo) >= 20
    assert all(e.loss == "mse" and e.sizes.keys() == {"tiny"} and e.data for e in zoo.values())
    bert_like = models.adapter("roberta")
    assert bert_like.__file__ == str((ZOO / "zoo.toml").resolve()) and not hasattr(bert_like, "jax_model")
    import numpy as np

    ids = bert_like.inputs("tiny", 2, 16, np.random.default_rng(0))["input_ids"]
    assert ids.shape == (2, 16) and ids.dtype == np.int64
    assert models.adapter("deit").inputs("tiny", 1, 32, np.random.default_rng(0))["pixel_values"].shape == (1, 3, 32, 32)


@pytest.mark.parametrize("text, words", [
    ("[m]\ninputs = 'tokens'\ntiny = {}\nshapes = {tiny = {batch = 1, seq = 1}}\n", "[m]: no model type"),
    ("[m]\ntype = 'bert'\ninputs = 'audio'\ntiny = {}\nshapes = {tiny = {batch = 1, seq = 1}}\n",
     "inputs 'audio' is none of tokens, pixels"),
    ("[m]\ntype = 'bert'\ninputs = 'tokens'\ntiny = {}\nshapes = {tiny = {batch = 1, seq = 1}}\ncolour = 1\n",
     "unknown key 'colour'"),
    ("[m]\ntype = 'bert'\ninputs = 'tokens'\ntiny = {}\n", "no size with a shape"),
    ("[m\n", "not TOML"),
])
def test_a_bad_data_adapters_file_is_one_line_naming_it(cli, tmp_path, monkeypatch, text, words):
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    (tmp_path / "mine.toml").write_text(text)
    code, _, err = cli("--adapters", tmp_path / "mine.toml", "models")
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and "mine.toml" in err, err


def test_recorded_values_keep_a_scalar_reference_a_scalar(tmp_path):
    """A training step's reference is its loss, a 0-d array: numpy's ascontiguousarray made it [1] and
    every bench of a user model's training step failed its proof on the shape."""
    import numpy as np

    from stackwars_ir.common import files

    data = files.values_bytes([("arg0", np.arange(6, dtype=np.float32).reshape(2, 3)),
                               ("reference", np.asarray(1.5, dtype=np.float32))])
    (tmp_path / "f.npz").write_bytes(data)
    with np.load(tmp_path / "f.npz") as z:
        assert z["reference"].shape == () and z["arg0"].shape == (2, 3)


@pytest.mark.slow
def test_a_zoo_models_training_step_is_benched_and_proved_with_its_recorded_values(cli, tmp_path, monkeypatch):
    from stackwars_ir.workload.train import register_torch_xla

    register_torch_xla()  # this backward may be the process's first: later torch_xla training captures need it
    monkeypatch.setenv(models.ADAPTERS_ENV, str(ZOO))
    code, _, err = cli("capture", "qwen3", "--step", "train", "--exporter", "torchax", "--out", tmp_path)
    assert code == 0, err
    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # the bench reads what the capture recorded
    code, out, err = cli("bench", tmp_path / "qwen3-tiny" / "torch-torchax-train.mlir", "--runs", "3",
                         "--json", tmp_path / "b.json")
    assert code == 0 and "FAILED" not in out, (out, err)
    row, = json.loads((tmp_path / "b.json").read_text())["results"]
    assert row["arguments"].startswith("capture's recorded values") and row["proof"]["ok"], row


@pytest.mark.slow
def test_a_parameter_the_loss_never_reaches_is_held_as_pytorch_holds_it_on_every_route(cli, tmp_path, user_adapters):
    """AdamW skips a parameter without a gradient (a pooler under the last hidden state, DINOv2's mask
    token); it was a KeyError 'exp_avg'. Every route's step now holds it constant, no moments for it,
    and passes parity against PyTorch eager's two steps."""
    from stackwars_ir.workload.train import register_torch_xla

    register_torch_xla()  # torch_xla's route needs it before this process's first backward (another test's)
    line = "self.layers = torch.nn.ModuleList(Layer() for _ in range(n))"
    text = (user_adapters / "toy_mixer.py").read_text().replace('"toy_mixer"', '"toy_unused"')
    # A name of its own: an adapter module is imported once per process, and other tests import toy_mixer.
    (user_adapters / "toy_unused.py").write_text(text.replace(line, line + "\n            self.unused = torch.nn.Linear(d, d)"))
    code, _, err = cli("capture", "toy_unused", "--step", "train", "--exporter", "all", "--out", tmp_path,
                       "--adapters", user_adapters)
    assert code == 0, err
    stems = ["jax-train", "torch-torch_xla-train", "torch-torchax-train"]
    for stem in stems:
        side = json.loads((tmp_path / "toy_unused-tiny" / f"{stem}.json").read_text())
        assert side["parity"]["ok"], stem
        names = {a["name"]: a["kind"] for a in side["arguments"]}
        assert "exp_avg.unused.weight" not in names and "exp_avg.layers.0.mix.up.weight" in names, (stem, names)
        assert names.get("unused.weight", "buffer") != "parameter", stem


def _gelu_twin(folder, name: str, approximate: bool):
    """The toy adapter with PyTorch's exact GELU, its twin's GELU exact or at jax.nn.gelu's tanh default."""
    text = TOY.read_text().replace('"toy_mixer"', f'"{name}"')
    text = text.replace("torch.tanh(self.up(x))", "torch.nn.functional.gelu(self.up(x))")
    text = text.replace("jnp.tanh(self.up(x))", f"__import__('jax').nn.gelu(self.up(x), approximate={approximate})")
    (folder / f"{name}.py").write_text(text)


@pytest.mark.parametrize("step", ["forward", "train"])
def test_a_twin_computing_another_gelu_is_suspect_and_named_at_its_mlp(cli, tmp_path, monkeypatch, step):
    """Within the hard bound but far beyond float32's own error against the float64 model: the tanh
    GELU twin is SUSPECT (exit 0, files written), named at the first module whose output leaves the
    model's; the exact twin and the PyTorch route are ok, within a few times float32 eager's error."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    _gelu_twin(folder, f"gelu_exact_{step}", False)
    _gelu_twin(folder, f"gelu_tanh_{step}", True)
    for name, verdict in ((f"gelu_exact_{step}", "ok"), (f"gelu_tanh_{step}", "suspect")):
        out_dir = tmp_path / name
        code, out, err = cli("--adapters", folder, "capture", name, "--exporter", "torchax", "--step", step,
                             "--out", out_dir)
        assert code == 0, err
        stem = "jax-train" if step == "train" else "jax"
        sides = {s: json.loads((out_dir / f"{name}-tiny" / f"{s}.json").read_text())["parity"]
                 for s in (stem, stem.replace("jax", "torch-torchax"))}
        assert sides[stem]["ok"] is True and sides[stem]["verdict"] == verdict, sides[stem]
        torch_side = sides[stem.replace("jax", "torch-torchax")]
        assert torch_side["verdict"] == "ok" and torch_side["float64"]["multiple"] < 4, torch_side
        f64 = sides[stem]["float64"]
        assert f64["eager_float32_error"] > 0 and f64["compared"] == ("gradients" if step == "train" else "output")
        if verdict == "ok":
            assert f64["multiple"] < 4 and "SUSPECT" not in out and "diverges" not in out
        else:
            assert f64["multiple"] > 16 and f64["first_divergence"].startswith("layers.0.mix.")
            line = next(x for x in out.splitlines() if x.startswith(f"parity {stem} "))
            assert "SUSPECT" in line and "the twin first diverges at layers.0.mix." in line, line
            if step == "forward":  # --strict: a script reading exit codes refuses it (issue 75)
                code, _, err = cli("--adapters", folder, "capture", name, "--exporter", "torchax", "--out",
                                   tmp_path / "strict", "--strict")
                assert code == 1 and f"{stem} SUSPECT under --strict" in err and "Traceback" not in err, err
                assert (tmp_path / "strict" / f"{name}-tiny" / f"{stem}.mlir").exists()  # written for inspection


def test_a_twin_without_named_scopes_is_warned_of_with_the_fix(cli, tmp_path, monkeypatch):
    """The toy twin with its scopes removed: exit 0, files written, and one warning that diff will pair
    its blocks by structure and how to name the twin's ops (the scoped twin: no warning, above)."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    text = TOY.read_text().replace('"toy_mixer"', '"toy_unscoped"')
    (folder / "toy_unscoped.py").write_text(text.replace("with self.scoped():", "if True:"))
    code, out, err = cli("--adapters", folder, "capture", "toy_unscoped", "--exporter", "torchax",
                         "--out", tmp_path / "caps")
    assert code == 0 and (tmp_path / "caps" / "toy_unscoped-tiny" / "jax.mlir").exists(), err
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "jax.mlir: 0% of the JAX twin's ops carry a PyTorch module path" in warning[0], err
    assert "by structure" in warning[0] and "jax.named_scope" in warning[0] and "models._nnx.Scoped" in warning[0]


@pytest.mark.parametrize("change, words", [
    # the adapter's own refusal of a size: its words at its line, the fix pointing at the sizes given
    (("def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:\n",
      "def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:\n"
      "    raise ValueError(f'--seq {seq} must be a multiple of 32')\n"),
     "in inputs(): --seq 4 must be a multiple of 32"),
    # a twin attribute named otherwise than PyTorch's: the file and the nearest PyTorch names
    (('self.down = Linear(w, f"{prefix}.mix.down", "down")\n',
      'self.down = Linear(w, f"{prefix}.mix.down", "down")\n'
      '        self.up.scale = __import__("stackwars_ir.models._nnx", fromlist=["param"]).param(w, f"{prefix}.mix.up.weight")\n'),
     "the Flax twin's parameter 'layers.0.mix.up.scale' has no PyTorch tensor of that name; nearest: "
     "layers.0.mix.up.bias, layers.0.mix.up.weight"),
])
def test_an_adapters_mistake_is_named_at_its_cause(cli, tmp_path, monkeypatch, change, words):
    """Issue 56: messages at the cause, not at the symptom."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    name = "toy_cause_" + ("seq" if "ValueError" in change[1] else "scale")
    text = TOY.read_text().replace('"toy_mixer"', f'"{name}"')
    assert change[0] in text
    path = folder / f"{name}.py"
    path.write_text(text.replace(change[0], change[1]))
    code, out, err = cli("--adapters", folder, "capture", name, "--framework", "jax", "--out", tmp_path / "caps")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and words in lines[0] and str(path) in lines[0], err
    if "ValueError" in change[1]:
        line = 1 + path.read_text().splitlines().index("    raise ValueError(f'--seq {seq} must be a multiple of 32')")
        assert f"{path}:{line}: in inputs()" in lines[0], lines[0]
        # the fix points at what inputs() reads, never at the adapter's code
        assert "(fix: give a --size, --batch or --seq this model takes" in lines[0], lines[0]
    assert not (tmp_path / "caps").exists()


MIXER = ROOT / "tests" / "adapters" / "mixer.py"


@pytest.mark.slow  # three captures (about 25 s here)
def test_a_mixers_two_mlps_pair_by_their_names_and_its_head_keeps_its_linear(cli, tmp_path, monkeypatch):
    """Issue 56: each layer's token_mix and channel_mix are blocks of their own on every route, paired
    by key with the same names on both sides; torch_xla's head (its dot_general and bias named by
    nothing but the weight's transpose) is the head's, not `other`'s."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(MIXER, folder / "mixer.py")
    out_dir = tmp_path / "caps"
    code, _, err = cli("--adapters", folder, "capture", "mixer", "--exporter", "all", "--out", out_dir)
    assert code == 0, err
    caps = out_dir / "mixer-tiny"
    for stem in ("torch-torch_xla", "torch-torchax"):
        code, _, err = cli("--adapters", folder, "diff", caps / "jax.mlir", caps / f"{stem}.mlir",
                           "--json", tmp_path / f"{stem}.json")
        assert code == 1, err
        report = json.loads((tmp_path / f"{stem}.json").read_text())
        blocks = report["blocks"]
        mlps = [(b["layer"], b["name_a"], b["name_b"]) for b in blocks if b["role"] == "mlp"]
        assert mlps == [([i], f"layers.{i}.{m}", f"layers.{i}.{m}") for i in (0, 1)
                        for m in ("token_mix", "channel_mix")], (stem, mlps)
        head = next(b for b in blocks if b["role"] == "head")
        for side in ("a", "b"):
            assert head[side]["histogram"].get("stablehlo.dot_general") == 1, (stem, side, head[side]["histogram"])


@pytest.mark.slow  # two captures of transformers' Whisper encoder (about 20 s here)
def test_whispers_two_convolutions_pair_by_their_names_across_the_pytorch_routes(cli, tmp_path, monkeypatch):
    """Issue 56: torch_xla's conv#0 was conv2 while torchax's was conv1, paired "by key". Each side's
    convolution blocks pair with the other's of the same module name."""
    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "adapters" / "whisper_enc.py", folder / "whisper_enc.py")
    out_dir = tmp_path / "caps"
    code, _, err = cli("--adapters", folder, "capture", "whisper_enc", "--exporter", "all", "--out", out_dir)
    assert code == 0, err
    caps = out_dir / "whisper_enc-tiny"
    code, _, err = cli("--adapters", folder, "diff", caps / "torch-torch_xla.mlir", caps / "torch-torchax.mlir",
                       "--json", tmp_path / "d.json")
    assert code == 1, err
    convs = [(b["name_a"], b["name_b"]) for b in json.loads((tmp_path / "d.json").read_text())["blocks"]
             if b["role"] == "conv"]
    assert sorted(convs) == [("encoder.conv1", "encoder.conv1"), ("encoder.conv2", "encoder.conv2")], convs


def test_a_twin_weight_of_another_shape_is_refused_by_name_never_reshaped():
    """issue 75: a twin parameter stored transposed ([64,256] where PyTorch has [256,64]) was reshaped to
    fit, scrambling it; a fused one of the wrong size failed with numpy's words, blaming the tool."""
    import numpy as np

    from stackwars_ir.common.errors import CaptureError
    from stackwars_ir.workload import argument_values
    from stackwars_ir.workload.prepared import Argument

    weight = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    turned = Argument(0, "parameter", "mlp.fc.weight", (64, 256), "float32")
    with pytest.raises(CaptureError) as e:
        argument_values([turned], {}, {"mlp.fc.weight": weight}, {}, "jax")
    msg = str(e.value)
    assert "'mlp.fc.weight'" in msg and "[64, 256]" in msg and "[256, 64]" in msg and "transpose" in msg
    assert "bug in stackwars-ir" not in msg
    fused = Argument(0, "parameter", "attn.qkv.weight", (128, 64), "float32")
    with pytest.raises(CaptureError, match="'attn.qkv.weight'.*\\[128, 64\\].*\\[256, 64\\]"):
        argument_values([fused], {}, {"attn.qkv.weight": weight}, {}, "jax")
    # unit dimensions only: the same values written otherwise
    bias = Argument(0, "parameter", "b", (1, 64), "float32")
    (value,) = argument_values([bias], {}, {"b": np.ones(64, np.float32)}, {}, "jax")
    assert value.shape == (1, 64)


def test_the_nnx_rmsnorm_computes_torchs_rmsnorm_under_its_module_path():
    import jax
    import numpy as np
    import torch

    from stackwars_ir.models._nnx import RMSNorm

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = {"norm.weight": rng.standard_normal(8).astype(np.float32)}
    ref = torch.nn.RMSNorm(8, eps=1e-5)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w["norm.weight"]))
        want = ref(torch.from_numpy(x)).numpy()
    norm = RMSNorm(w, "norm", "norm", 1e-5)
    np.testing.assert_allclose(np.asarray(norm(x)), want, rtol=1e-5, atol=1e-6)
    text = jax.jit(lambda v: norm(v)).lower(x).as_text(debug_info=True)
    assert "norm/" in text  # its ops carry the PyTorch module path


@pytest.mark.parametrize("model", ["gpt2", "bert"])
def test_the_twins_train_mode_drops_out_where_the_pytorch_model_does(model):
    """models/_nnx.py training(): every dropout site of the twin sits under the module path of a torch
    nn.Dropout of the PyTorch model, at its rate, and none is missing (the study's train-mode protocol)."""
    import importlib
    import re

    import jax
    import numpy as np
    import torch
    from flax import nnx

    from stackwars_ir.models import _nnx

    mod = importlib.import_module(f"stackwars_ir.models.{model}")
    tm = mod.torch_model("tiny")
    want = {n: d.p for n, d in tm.named_modules() if isinstance(d, torch.nn.Dropout) and d.p > 0}
    weights = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    graphdef, state = nnx.split(mod.jax_model("tiny", weights))

    def forward(s, key, ids):
        with _nnx.training(key) as record:
            out = nnx.merge(graphdef, s)(ids)
        forward.drawn = record["drawn"]
        return out

    ids = np.zeros((2, 16), np.int64)
    text = jax.jit(forward).lower(state, jax.random.key(0), ids).as_text(debug_info=True)
    got = {p.replace("/", ".") for p in re.findall(r'loc\("jit\(forward\)/([^"]*?drop(?:out)?)/', text)}
    assert got == set(want)
    assert forward.drawn == len(want) and set(want.values()) == {0.1}
    # Outside training() the twin draws nothing: its forward's program holds no random bits.
    plain = jax.jit(lambda s, ids: nnx.merge(graphdef, s)(ids)).lower(state, ids).as_text()
    assert "rng_bit_generator" not in plain and "threefry" not in plain


def test_the_nnx_dropout_keeps_each_element_at_its_rate_scaled_as_torch_does():
    import jax
    import numpy as np

    from stackwars_ir.models import _nnx

    x = np.ones((200, 500), np.float32)
    with _nnx.training(jax.random.key(1)):
        y = np.asarray(_nnx.dropout(x, 0.1, "drop"))
    kept = y != 0
    assert abs(kept.mean() - 0.9) < 0.005  # 100,000 draws: a standard error of 0.001
    np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=1e-6)
    assert _nnx.dropout(x, 0.1, "drop") is x  # outside training(): the input itself


def test_the_nnx_batch_norm_in_train_mode_matches_torchs_output_and_running_statistics():
    import jax
    import numpy as np
    import torch
    from flax import nnx

    from stackwars_ir.bench.protocols import running_statistic
    from stackwars_ir.models import _nnx

    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5, 5)).astype(np.float32) * 2 + 1
    ref = torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        for t in (ref.weight, ref.bias, ref.running_mean):
            t.copy_(torch.from_numpy(rng.standard_normal(4).astype(np.float32)))
        ref.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 2, 4).astype(np.float32)))
    w = {f"bn.{k}": v.detach().numpy().copy() for k, v in ref.state_dict().items() if k != "num_batches_tracked"}
    graphdef, stats, params = nnx.split(_nnx.BatchNorm2d(w, "bn", "bn"), running_statistic, ...)

    def forward(params, stats, x):
        m = nnx.merge(graphdef, stats, params)
        with _nnx.training():
            out = m(x)
        return out, nnx.split(m, running_statistic, ...)[1]

    out, new = jax.jit(forward)(params, stats, x)
    ref.train()
    want = ref(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(new["running_mean"][...]), ref.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(new["running_var"][...]), ref.running_var.numpy(), rtol=1e-5, atol=1e-6)
