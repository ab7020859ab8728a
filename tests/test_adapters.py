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
    assert code == 0, err
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


def test_a_missing_adapter_path_and_a_name_taken_twice_are_one_line(cli, tmp_path, monkeypatch, user_adapters):
    code, _, err = cli("--adapters", tmp_path / "nowhere", "models")
    assert code == 2 and "no adapter file or folder there" in err
    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # each command is a process of its own
    clash = tmp_path / "gpt2.py"
    clash.write_text(TOY.read_text().replace('"toy_mixer"', '"gpt2"'))
    code, _, err = cli("--adapters", clash, "models")
    assert code == 2 and "a model named 'gpt2' exists already" in err
