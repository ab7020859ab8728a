"""A catalogue capture's rebuilt values kept between processes: the same arrays, bit for bit, keyed by all they depend on."""
import numpy as np
import pytest

from conftest import golden


def _arguments(stem: str, model: str = "gpt2"):
    from stackwars_ir.bench.arguments import sidecar_arguments
    from stackwars_ir.common.files import read_sidecar
    from stackwars_ir.ir import load

    path = golden(model, stem)
    (parsed,) = load([path])
    return sidecar_arguments(parsed.modules[0], read_sidecar(path))


@pytest.mark.parametrize("model, stem", [("gpt2", "jax"), ("ffn", "jax-train")])
def test_values_kept_by_one_process_are_read_by_the_next_bit_for_bit_without_the_model(model, stem, tmp_path,
                                                                                         monkeypatch):
    from stackwars_ir.bench import arguments

    monkeypatch.setenv("STACKWARS_IR_VALUES", str(tmp_path / "values"))
    made, reference = _arguments(stem, model)
    (entry,) = (tmp_path / "values").glob("*.npz")

    def no_model(req):
        raise AssertionError(f"the model was built again for {req}")

    monkeypatch.setattr(arguments, "prepare", no_model)
    kept, kept_reference = _arguments(stem, model)
    assert len(kept) == len(made)
    for a, b in zip(made, kept):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert np.asarray(reference).tobytes() == np.asarray(kept_reference).tobytes()
    # An entry that cannot be read is made again (here: the model is needed, and asked for)
    entry.write_bytes(b"not an npz")
    with pytest.raises(AssertionError, match="built again"):
        _arguments(stem, model)


def test_the_key_holds_the_request_and_the_libraries_and_off_keeps_nothing(tmp_path, monkeypatch):
    import dataclasses
    from importlib import metadata

    from stackwars_ir.workload import Request, kept_values

    req = Request("gpt2", "tiny", "torch", exporters=()).validated()
    base = kept_values.key(req)
    assert kept_values.key(req) == base
    assert kept_values.key(dataclasses.replace(req, seed=1)) != base
    assert kept_values.key(dataclasses.replace(req, step="train")) != base
    # The routes a request names make no other values: a bench of its captures and jax.jit's forward share them
    assert kept_values.key(dataclasses.replace(req, framework="both", exporters=("torch_xla", "torchax"))) == base
    version = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0" if name == "torch" else version(name))
    assert kept_values.key(req) != base  # another torch: other weights may come from the same seed
    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.setattr(kept_values.Path, "home", lambda: tmp_path)  # the default folder: under tmp_path
    monkeypatch.setenv("STACKWARS_IR_VALUES", "")
    assert kept_values.folder() == tmp_path / ".cache" / "stackwars-ir" / "values"
    monkeypatch.setenv("STACKWARS_IR_VALUES", "off")
    _arguments("jax")
    assert kept_values.folder() is None and not list(tmp_path.rglob("*.npz"))
    monkeypatch.setenv("STACKWARS_IR_VALUES", "")
    _arguments("jax")
    assert len(list(tmp_path.rglob("*.npz"))) == 1


def test_the_folder_keeps_its_size_by_removing_the_entries_read_least_recently(tmp_path, monkeypatch):
    import os

    from stackwars_ir.workload import kept_values

    monkeypatch.setattr(kept_values, "MAX_BYTES", 2500)
    for i, name in enumerate("abc"):
        p = tmp_path / f"{name}.npz"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (i, i))
    kept_values._prune(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == ["b.npz", "c.npz"]



def test_jax_jits_forward_row_takes_kept_values_and_builds_no_pytorch_model(tmp_path, monkeypatch):
    """jax.jit's forward runs the JAX twin: with the values kept by an earlier process (the same entry
    as a bench of the captures: the key leaves out the routes), its row builds and runs no PyTorch model."""
    from stackwars_ir.bench import native
    from stackwars_ir.workload import Request, prepare_values, prepared

    monkeypatch.setenv("STACKWARS_IR_VALUES", str(tmp_path))
    made = prepare_values(Request("gpt2").validated())  # nothing kept yet: the model built, its values kept
    assert made.model is not None and len(list(tmp_path.glob("*.npz"))) == 1

    def no_model(req):
        raise AssertionError(f"the model was built again for {req}")

    monkeypatch.setattr(prepared, "_prepare", no_model)
    (row,) = native.run_baselines(Request("gpt2", exporters=("torchax",)).validated(), ("jax",), None)
    assert row.ok and row.proof.ok, row.error
    with pytest.raises(AssertionError, match="built again"):  # torch eager runs the model: it is built
        native.run_baselines(Request("gpt2").validated(), ("eager",), None)
