"""sweep grids: how a grid's tables become typed jobs (product, checks, adapter folders, keys, baselines, together, rounds)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from stackwars_ir.cli.commands import main


def test_a_grid_is_its_product_each_job_once_captures_first_and_what_cannot_be_captured_named():
    """Two tables overlapping in one capture: that capture is one job; every memory plan, diff and
    bench job follows the captures it reads; a request no route can take is named with its reason."""
    from stackwars_ir.sweep.grid import grid_of

    grid = grid_of([{"commands": ["memory", "diff"], "models": ["ffn", "sort"], "steps": ["forward", "train"],
                     "routes": ["jax", "torchax"], "targets": ["cpu", "tpu-v6e"], "budgets": ["v6e-1"]},
                    {"commands": ["bench"], "models": ["ffn"], "routes": ["jax"]}])
    labels = [j.label for j in grid.jobs]
    assert len(labels) == len(set(labels))
    first_other = next(i for i, j in enumerate(grid.jobs) if j.command != "capture")
    assert all(j.command == "capture" for j in grid.jobs[:first_other])
    assert all(j.command != "capture" for j in grid.jobs[first_other:])
    counts = {c: sum(j.command == c for j in grid.jobs) for c in ("capture", "memory", "diff", "bench")}
    # ffn forward + train, sort forward (sort has no training step): 3 requests x 2 routes.
    assert counts == {"capture": 6, "memory": 12, "diff": 3, "bench": 1}
    assert {w for w, _ in grid.refused} == {"sort-tiny train jax", "sort-tiny train torchax"}
    assert all("no parameters to train" in why for _, why in grid.refused)
    # Keys: the request and the stack; another stack is another job; libtpu only keys TPU targets.
    job = grid.jobs[-1]
    stack = {"jax": "0.10.2", "capture_revision": 5}
    assert job.key(stack) != job.key({**stack, "jax": "0.9.2"})
    assert job.key(stack) == job.key({**stack, "libtpu": "0.0.42.1"})
    tpu = next(j for j in grid.jobs if j.target == "tpu-v6e")
    assert tpu.key(stack) != tpu.key({**stack, "libtpu": "0.0.42.1"})


@pytest.mark.parametrize("text, says", [
    ("[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\nbatchez = [1]\n", "unknown key 'batchez'"),
    ("[[grid]]\nmodels = ['ffn']\ncommands = ['plot']\n", "`commands` must list some of"),
    ("[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\ntargets = ['tpu-v9']\n", "unknown target 'tpu-v9'"),
    ("[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\ntargets = ['tpu']\n",
     "unknown target 'tpu' (a memory plan compiles for a TPU generation)"),
    ("[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\nroutes = ['onnx']\n", "unknown route 'onnx'"),
    ("[[grid]]\nmodels = ['gtp2']\ncommands = ['memory']\n", "gtp2"),
    ("[[grid]]\nmodels = 'ffn'\ncommands = ['memory']\n", "`models` must be a non-empty list"),
    ("[[grid]\nmodels = ['ffn']\n", "not TOML"),
    ("[run]\nmodels = ['ffn']\n", "one or more [[grid]] tables"),
    ("adapters = ['nowhere']\n[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\n", "no adapter file or folder there"),
    ("adapters = 'zoo'\n[[grid]]\nmodels = ['ffn']\ncommands = ['memory']\n", "`adapters` must be a list of paths"),
])
def test_a_bad_grid_is_one_line_naming_the_file_and_table_and_nothing_runs(tmp_path, text, says):
    grid = tmp_path / "g.toml"
    grid.write_text(text)
    run = CliRunner().invoke(main, ["sweep", str(grid), "--results", str(tmp_path / "r")])
    assert run.exit_code == 2, run.output
    assert says in run.stderr and str(grid) in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "r").exists()


def test_a_grid_names_adapter_folders_beside_it_and_their_text_is_part_of_each_jobs_key(tmp_path, monkeypatch):
    """`adapters = ["mine"]`: the folder beside the grid file joins the catalogue for the sweep and its
    workers; editing an adapter's configuration makes its jobs new ones (another key), not reused."""
    import shutil

    from stackwars_ir import models
    from stackwars_ir.sweep.grid import read_grid

    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    (tmp_path / "mine").mkdir()
    toy = tmp_path / "mine" / "toy_mixer.py"
    shutil.copy(Path(__file__).parent / "adapters" / "toy_mixer.py", toy)
    grid = tmp_path / "g.toml"
    grid.write_text('adapters = ["mine"]\n[[grid]]\ncommands = ["memory"]\nmodels = ["toy_mixer", "ffn"]\n'
                    'routes = ["torchax"]\n')
    jobs = read_grid(grid).jobs
    assert os.environ[models.ADAPTERS_ENV] == str(tmp_path / "mine")
    stack = {"jax": "0.10.2"}
    before = {j.label: j.key(stack) for j in jobs}
    toy.write_text(toy.read_text().replace("d=16", "d=32"))
    after = {j.label: j.key(stack) for j in jobs}
    changed = {label for label in before if before[label] != after[label]}
    assert changed == {label for label in before if "toy_mixer" in label} and len(changed) == 2


def test_a_job_is_kept_off_the_accelerators_it_does_not_use():
    """Captures and CPU or TPU-target jobs see jax's CPU client alone (a GPU node's memory, a TPU VM's
    chips stay for the job that times them); a GPU plan preallocates nothing; a GPU bench is left as is."""
    from stackwars_ir.sweep.job_types import BenchJob, CaptureJob, MemoryJob
    from stackwars_ir.sweep.jobs import pin_platform
    from stackwars_ir.workload import Request

    req = Request("ffn", framework="jax").validated()
    cases = [(CaptureJob(req), {"JAX_PLATFORMS": "cpu"}),
             (MemoryJob(req, target="tpu-v6e"), {"JAX_PLATFORMS": "cpu"}),
             (BenchJob(req, target="cpu"), {"JAX_PLATFORMS": "cpu"}),
             (MemoryJob(req, target="gpu"), {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
             (BenchJob(req, target="gpu"), {}),
             (BenchJob(req, target="tpu"), {})]
    for job, expected in cases:
        env = {}
        pin_platform(job, env)
        assert env == expected, job.label
    env = {"JAX_PLATFORMS": "cuda"}  # a capture is lowered and parity-checked on the CPU whatever the node
    pin_platform(CaptureJob(req), env)
    assert env == {"JAX_PLATFORMS": "cpu"}


def test_the_grids_shipped_in_benchmarks_and_the_study_read(monkeypatch):
    """benchmarks/grids/*.toml (the one docs/sweep.md shows among them) and the study's (study/grids: its
    pages' sweeps, the zoo's reading study/adapters) are grids this version reads."""
    from stackwars_ir import models
    from stackwars_ir.sweep.grid import read_grid

    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # zoo.toml adds study/adapters: put back afterwards

    root = Path(__file__).resolve().parents[1]
    grids = sorted((root / "benchmarks" / "grids").glob("*.toml")) + sorted((root / "study" / "grids").glob("*.toml"))
    assert len(grids) >= 7
    for path in grids:
        assert read_grid(path).jobs, path


def test_a_sweep_with_a_tpu_target_and_no_libtpu_stops_before_any_job(tmp_path, monkeypatch):
    import importlib.util

    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else find_spec(name, *a))
    grid = grid_of([{"commands": ["memory"], "models": ["ffn"], "routes": ["jax"], "targets": ["tpu-v6e"]}])
    with pytest.raises(StackwarsError, match="libtpu, which is not installed"):
        run_sweep(grid, tmp_path / "r", jobs=1)
    assert not (tmp_path / "r").exists()


def test_baselines_in_a_grid_are_checked_and_what_cannot_take_them_named():
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.sweep.grid import grid_of

    with pytest.raises(StackwarsError, match="unknown baseline 'jaxx'"):
        grid_of([{"commands": ["bench"], "models": ["ffn"], "baselines": ["jaxx"]}])
    with pytest.raises(StackwarsError, match="`commands` has no bench"):
        grid_of([{"commands": ["memory"], "models": ["ffn"], "baselines": ["jax"]}])
    with pytest.raises(StackwarsError, match="at least 2 profiled runs"):
        grid_of([{"commands": ["bench"], "models": ["ffn"], "profile": 1}])
    for runs in (-1, 0):  # as bench --runs: 1 or more; adaptive is the key left out
        with pytest.raises(StackwarsError, match=f"`runs` = {runs}: a bench job's steady-state runs per row must be 1"):
            grid_of([{"commands": ["bench"], "models": ["ffn"], "runs": runs}])
    with pytest.raises(StackwarsError, match="`runs` sets a bench job's steady-state runs per row, and `commands` has no"):
        grid_of([{"commands": ["memory"], "models": ["ffn"], "runs": 5}])
    # runs: kept in the job (and its key) only where set, so records made before stay theirs
    runs = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"], "runs": 5}])
    plain = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"]}])
    (five,), (adaptive,) = ([j for j in g.jobs if j.command == "bench"] for g in (runs, plain))
    assert five.asked.runs == 5 and adaptive.asked.runs is None
    assert five.as_json() == dict(adaptive.as_json(), runs=5)
    grid = grid_of([{"commands": ["bench"], "models": ["ffn"], "steps": ["forward", "train"],
                     "baselines": ["jax_donate"]}])
    assert [j.request.step for j in grid.jobs if j.command == "bench"] == ["train"]
    assert "a forward pass has nothing to donate" in dict(grid.refused)["ffn-tiny forward bench with baselines"]
    grid = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["torchax"], "baselines": ["eager"]}])
    assert not [j for j in grid.jobs if j.command == "bench"]
    assert "has only torchax's" in dict(grid.refused)["ffn-tiny forward bench with baselines"]


def test_together_makes_one_bench_job_of_a_tables_routes_that_reads_their_own_capture_jobs():
    """`together = true`: one bench job per request and timed target holding every route (framework
    "torch" for the PyTorch routes alone, "both" with JAX); its captures are the per-route capture
    jobs (shared, not captured again); a TPU estimate times nothing and stays one job per route."""
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.sweep.grid import grid_of

    grid = grid_of([{"commands": ["capture", "bench"], "models": ["ffn"], "routes": ["torch_xla", "torchax"],
                     "targets": ["cpu", "tpu-v6e"], "together": True}])
    benches = [j for j in grid.jobs if j.command == "bench"]
    assert [(j.route, j.target) for j in benches] == [
        ("torch_xla", "tpu-v6e"), ("torchax", "tpu-v6e"), ("torch_xla+torchax", "cpu")]
    together = benches[2]
    assert together.request.framework == "torch" and together.label.startswith(
        "bench ffn-tiny torch-torch_xla+torch-torchax ")
    here = {"torch": "x"}
    caps = {j.key(here) for j in grid.jobs if j.command == "capture"}
    assert {c.key(here) for c in together.captures()} == caps and len(caps) == 2
    three = grid_of([{"commands": ["bench"], "models": ["ffn"], "together": True}])
    (both,) = [j for j in three.jobs if j.command == "bench"]
    assert (both.route, both.request.framework) == ("jax+torch_xla+torchax", "both")
    one = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["torchax"], "together": True}])
    assert [j.route for j in one.jobs if j.command == "bench"] == ["torchax"]
    with pytest.raises(StackwarsError, match="`together` times a table's routes in one bench job"):
        grid_of([{"commands": ["memory"], "models": ["ffn"], "together": True}])
    with pytest.raises(StackwarsError, match="`together` must be a bool"):
        grid_of([{"commands": ["bench"], "models": ["ffn"], "together": 1}])


def test_rounds_time_each_bench_job_again_in_fresh_workers_round_by_round():
    """`rounds = 3`: each timed bench job three times, each its own job (its own key and record, so its
    own worker), run round by round; a TPU estimate is computed once; the first round's key is the
    key the job had before rounds existed (records made then are reused)."""
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.sweep.execute import phases
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.job_types import Job

    table = {"commands": ["bench"], "models": ["ffn"], "routes": ["jax", "torch_xla"], "targets": ["cpu", "tpu-v6e"]}
    once, thrice = grid_of([table]), grid_of([dict(table, rounds=3)])
    bench = [j for j in thrice.jobs if j.command == "bench"]
    assert sorted((j.route, j.target, j.round) for j in bench) == [
        ("jax", "cpu", 0), ("jax", "cpu", 1), ("jax", "cpu", 2), ("jax", "tpu-v6e", 0),
        ("torch_xla", "cpu", 0), ("torch_xla", "cpu", 1), ("torch_xla", "cpu", 2), ("torch_xla", "tpu-v6e", 0)]
    here = {"jax": "x"}
    assert {j.key(here) for j in once.jobs} == {j.key(here) for j in thrice.jobs if getattr(j, "round", 0) == 0}
    assert len({j.key(here) for j in thrice.jobs}) == len(thrice.jobs)
    third = next(j for j in bench if j.round == 2)
    assert third.label.endswith("round 3") and Job.from_json(third.as_json()) == third
    (_, _), (_, _), (timed, alone) = phases([(j, j.key(here)) for j in thrice.jobs])
    assert alone and [j.round for j, _ in timed] == [0, 0, 1, 1, 2, 2]
    with pytest.raises(StackwarsError, match="`commands` has no bench"):
        grid_of([{"commands": ["memory"], "models": ["ffn"], "rounds": 3}])
    with pytest.raises(StackwarsError, match="must be at least 1"):
        grid_of([dict(table, rounds=0)])


def test_each_command_is_a_job_type_of_its_own_whose_record_reads_back_as_that_type():
    """Issue 52: a sweep's jobs are typed per command (the fields each reads, no bag of optional ones);
    a job's JSON, as records hold it, reads back as the same job, and keys stay what they were."""
    import dataclasses

    import pytest

    from stackwars_ir.sweep.grid import grid_of

    from stackwars_ir.sweep.job_types import BenchJob, CaptureJob, DiffJob, Job, MemoryJob

    grid = grid_of([{"commands": ["capture", "memory", "bench", "diff"], "models": ["ffn"], "budgets": ["v6e-1"],
                     "profile": 2}])
    kinds = {type(j) for j in grid.jobs}
    assert kinds == {CaptureJob, MemoryJob, BenchJob, DiffJob}
    for job in grid.jobs:
        assert Job.from_json(job.as_json()) == job and type(Job.from_json(job.as_json())) is type(job)
        assert job.as_json()["command"] == job.command
    fields = {kind: {f.name for f in dataclasses.fields(kind)} for kind in kinds}
    assert fields[CaptureJob] == {"request", "timeout"}
    assert fields[MemoryJob] == {"request", "timeout", "target", "budget"}
    assert fields[BenchJob] == {"request", "timeout", "target", "baselines", "profile", "runs", "round"}
    assert fields[DiffJob] == {"request", "timeout", "against"}
    capture = next(j for j in grid.jobs if isinstance(j, CaptureJob))
    # the JSON (and with it every record's key) names the other commands' fields empty, as before
    assert capture.as_json()["target"] == "" and capture.as_json()["budget"] == "" and "against" not in capture.as_json()
    with pytest.raises(TypeError):
        DiffJob(capture.request)  # a diff without its other side is not a job
    with pytest.raises(ValueError, match="not a sweep job's command"):
        Job.from_json({"command": "train", "request": capture.as_json()["request"]})


def test_a_data_entrys_key_follows_its_own_table_not_the_other_models_of_its_file(tmp_path, monkeypatch):
    """A .toml adapters file holds many models (study/adapters/zoo.toml: 24): editing one model's table
    makes that model's jobs new ones and leaves the others' keys, so their finished records are reused."""
    from stackwars_ir import models
    from stackwars_ir.sweep.grid import read_grid

    monkeypatch.setenv(models.ADAPTERS_ENV, "")
    (tmp_path / "mine").mkdir()
    zoo = tmp_path / "mine" / "zoo.toml"
    table = ('[{name}]\ntype = "gpt2"\ninputs = "tokens"\ndescription = "{name}"\n'
             'tiny = {{n_embd = 32, n_layer = {layers}, n_head = 2, vocab_size = 128}}\nshapes = {{tiny = {{batch = 2, seq = 8}}}}\n')
    zoo.write_text(table.format(name="one", layers=1) + table.format(name="two", layers=1))
    grid = tmp_path / "g.toml"
    grid.write_text('adapters = ["mine"]\n[[grid]]\ncommands = ["capture"]\nmodels = ["one", "two"]\nsizes = ["tiny"]\n'
                    'routes = ["torchax"]\n')
    stack = {"jax": "0.12.0.1"}
    before = {j.label: j.key(stack) for j in read_grid(grid).jobs}
    zoo.write_text(table.format(name="one", layers=1) + table.format(name="two", layers=2))
    after = {j.label: j.key(stack) for j in read_grid(grid).jobs}
    changed = {label for label in before if before[label] != after[label]}
    assert changed and all(label.split()[1].startswith("two-") for label in changed), changed
    assert any(label.split()[1].startswith("one-") for label in before)


def test_kept_records_read_back_typed_and_round_trip():
    """Issue 76: a record holds its job's typed result, read once as the job's own type
    (Job.result_type()), and what it writes reads back the same: on the findings page's kept records
    (benchmarks/records/findings), the smallest finished one of each command."""
    import json
    import lzma

    from stackwars_ir.sweep.jobs import Record

    kept = Path(__file__).resolve().parents[1] / "benchmarks" / "records" / "findings"
    smallest: dict = {}
    for path in sorted(kept.glob("*.json.xz")):
        d = json.loads(lzma.decompress(path.read_bytes()))
        size = len(json.dumps(d.get("result") or {}))
        if d.get("ok") and size < smallest.get(d["job"]["command"], (float("inf"),))[0]:
            smallest[d["job"]["command"]] = (size, d)
    assert {"capture", "bench", "diff"} <= set(smallest), sorted(smallest)
    same = set()
    for _, d in smallest.values():
        rec = Record.from_json(d)
        value = rec.result  # parsed once, as the job's own type
        assert isinstance(value, rec.job.result_type()), (rec.job.command, type(value))
        written = rec.as_json()
        if written["result"].get("format") == d["result"].get("format"):  # an older format's is upgraded
            assert written == d, rec.job.command  # written back as it was read
            same.add(rec.job.command)
        assert Record.from_json(json.loads(json.dumps(rec.as_json()))) == rec
        again = type(value).from_json(json.loads(json.dumps(value.as_json())))
        assert again.as_json() == value.as_json(), rec.job.command
    assert {"capture", "bench"} <= same, same
