"""sweep: a grid's jobs (captures, memory plans, benches, diffs) on local workers or Ray, each finished job a file, resumable."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from stackwars_ir.cli import main

# Two routes of a tiny model: 2 captures, 2 memory plans on the CPU, 1 diff.
SMALL = '[[grid]]\ncommands = ["memory", "diff"]\nmodels = ["ffn"]\nroutes = ["jax", "torchax"]\n'


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


def _sha(root: Path, records) -> dict:
    return {r.job.label: r.result["sha256"] for r in records if r.job.command == "capture"}


def _plans(records) -> dict:
    return {r.job.label: [(p["argument_bytes"], p["temp_bytes"], p["peak_bytes"]) for p in r.result["executables"]]
            for r in records if r.job.command == "memory"}


@pytest.mark.slow
def test_local_workers_and_a_local_ray_cluster_give_the_same_results(tmp_path):
    """The same grid on 2 local worker processes and on a Ray cluster of 2 CPUs started here: the
    same jobs, the same captures (byte for byte: captures are deterministic), the same memory plans
    (XLA's, exact integers) and the same diff alignment; records carry no path of this machine."""
    ray = pytest.importorskip("ray")
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import records

    import tomllib

    grid = grid_of(tomllib.loads(SMALL)["grid"], "small.toml")
    local = run_sweep(grid, tmp_path / "local", jobs=2)
    assert (local.ran, local.reused, len(local.failed)) == (5, 0, 0), [r.error for r in local.failed]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_sweep(grid, tmp_path / "ray", ray="auto")
        # A job that needs a GPU (a bench timing it, a memory plan compiled on it) asks Ray for one: on
        # this cluster of CPUs alone it fails at once, in one line, and nothing else is recomputed.
        gpu = grid_of(tomllib.loads('[[grid]]\ncommands = ["bench", "memory"]\nmodels = ["ffn"]\n'
                                    'routes = ["jax"]\ntargets = ["gpu"]\n')["grid"], "gpu.toml")
        on_gpu = run_sweep(gpu, tmp_path / "ray", ray="auto")
        # A bench that times a TPU asks for the custom resource TPU: refused on this cluster too...
        tpu = grid_of(tomllib.loads('[[grid]]\ncommands = ["bench"]\nmodels = ["ffn"]\n'
                                    'routes = ["jax"]\ntargets = ["tpu"]\n')["grid"], "tpu.toml")
        no_tpu = run_sweep(tpu, tmp_path / "ray", ray="auto")
    finally:
        ray.shutdown()
    # ... and placed on a cluster whose node declares one (`ray start --resources '{"TPU": 1}'`), where
    # it runs and fails in its own worker: this machine has no TPU for jax (the suite pins the CPU).
    ray.init(num_cpus=2, resources={"TPU": 1}, include_dashboard=False, log_to_driver=False)
    try:
        on_tpu = run_sweep(tpu, tmp_path / "ray", ray="auto", retry_failed=True)
    finally:
        ray.shutdown()
    assert (on_gpu.ran, on_gpu.reused) == (2, 1)
    assert sorted(r.error for r in on_gpu.failed) == ["no node of the Ray cluster has a GPU for it"] * 2
    assert (no_tpu.ran, no_tpu.reused) == (1, 1)
    assert [r.error for r in no_tpu.failed] == ["no node of the Ray cluster has a TPU for it"]
    assert on_tpu.executor == "ray, 1 node, 2 CPUs, 1 TPU"
    assert (on_tpu.ran, on_tpu.reused) == (1, 1)
    assert [r.error.split(" (")[0] for r in on_tpu.failed] == ["no tpu backend is available to jax here"]
    assert on_ray.executor.startswith("ray, 1 node, 2 CPUs")
    assert (on_ray.ran, len(on_ray.failed)) == (5, 0), [r.error for r in on_ray.failed]
    assert [r.key for r in local.records] == [r.key for r in on_ray.records]
    assert _sha(tmp_path / "local", local.records) == _sha(tmp_path / "ray", on_ray.records)
    assert _plans(local.records) == _plans(on_ray.records)
    (d1,), (d2,) = ([r.result["alignment"] for r in rep.records if r.job.command == "diff"] for rep in (local, on_ray))
    assert d1 == d2 and d1["pairs"] >= 1
    for root, n in ((tmp_path / "local", 5), (tmp_path / "ray", 8)):  # the refused GPU and TPU jobs' records too
        assert len(records(root)) == n
        for f in (root / "jobs").iterdir():
            assert str(tmp_path) not in f.read_text()


def test_the_progress_estimates_each_kind_of_job_from_its_own_and_names_the_kinds_not_run_yet():
    """A capture's seconds say nothing of a timed bench's minutes: the time left adds, kind by kind,
    what this run's jobs of that kind took (untimed ones shared among the workers, timed ones alone)
    and names the kinds none of which has run yet instead of guessing them."""
    from stackwars_ir.sweep.execute import _Clock
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record

    grid = grid_of([{"commands": ["memory", "bench"], "models": ["ffn"], "routes": ["jax", "torchax"]}])
    todo = [(j, str(i)) for i, j in enumerate(grid.jobs)]
    assert [(j.command, j.timed) for j, _ in todo] == [("capture", False)] * 2 + [("memory", False)] * 2 + [("bench", True)] * 2
    lines: list[str] = []
    clock = _Clock(len(todo) + 3, 3, todo, 2, lines.append)  # 3 finished before this run
    for (job, key), seconds in zip(todo, (10.0, 20.0, 30.0, 50.0, 300.0, 100.0)):
        clock.finished(Record(key, job, {}, True, None, {}, seconds, {}))
    assert [line.split("; ", 1)[1] for line in lines[1:]] == [
        "about 5 s left, and 2 bench cpu jobs, 2 memory cpu jobs not estimated yet)",  # 1 capture at 10 s, 2 workers
        "2 bench cpu jobs, 2 memory cpu jobs not estimated yet)",
        "about 15 s left, and 2 bench cpu jobs not estimated yet)",
        "2 bench cpu jobs not estimated yet)",
        "about 5 min left)",  # a timed job runs alone: 300 s
        "none left)"]
    assert lines[0] == "sweep: 9 jobs, 3 finished before (not recomputed), 6 to run"
    assert lines[-1].startswith("[9/9] bench ffn-tiny torch-torchax b2 s16 cpu: 100.0 s, ok (0 failed;")


def test_a_job_is_kept_off_the_accelerators_it_does_not_use():
    """Captures and CPU or TPU-target jobs see jax's CPU client alone (a GPU node's memory, a TPU VM's
    chips stay for the job that times them); a GPU plan preallocates nothing; a GPU bench is left as is."""
    from stackwars_ir.sweep.grid import BenchJob, CaptureJob, MemoryJob
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


@pytest.mark.slow
def test_a_sweep_killed_halfway_resumes_without_recomputing_a_finished_job(tmp_path):
    """`stackwars-ir sweep` killed with SIGKILL (its workers with it) once some jobs are written, then
    run again: the finished jobs are counted as such and not run; only the others run."""
    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    results = tmp_path / "r"
    cmd = [str(Path(sys.executable).with_name("stackwars-ir")), "sweep", str(grid), "--results", str(results), "--jobs", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PJRT_DEVICE": "CPU"})
    deadline = time.time() + 300
    while time.time() < deadline and len(list((results / "jobs").glob("*.json"))) < 2 and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json")}
    assert 2 <= len(finished) < 5, finished
    run = subprocess.run(cmd + ["--json", "-"], capture_output=True, text=True, env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert (summary["jobs"], summary["reused"], summary["ran"]) == (5, len(finished), 5 - len(finished))
    # The records read back typed (issue 52): each job's command's own result type.
    from stackwars_ir.bench.memory import MemoryReport
    from stackwars_ir.diff.result import DiffResult
    from stackwars_ir.sweep.execute import SweepReport
    from stackwars_ir.sweep.jobs import CaptureRecord

    typed = {r.job.command: type(r.value()) for r in SweepReport.from_json(summary).records}
    assert typed == {"capture": CaptureRecord, "memory": MemoryReport, "diff": DiffResult}, typed
    for name, mtime in finished.items():
        assert (results / "jobs" / name).stat().st_mtime_ns == mtime  # not written again


def test_a_results_folder_kept_without_its_captures_captures_them_again_the_same_and_recomputes_nothing_else(tmp_path):
    """Captures are large and deterministic, a sweep's records small: a results folder published or
    carried without its captures/ resumes by capturing them again (byte for byte the same, by the
    records' sha256) before anything reads them; no other finished job runs again."""
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    results = tmp_path / "r"
    first = run_sweep(read_grid(grid), results, jobs=1)
    assert first.ran == 5 and not first.failed
    shas = {r.key: r.value().sha256 for r in first.records if r.job.command == "capture"}
    others = {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json") if p.stem not in shas}
    assert len(shas) == 2 and len(others) == 3
    for f in (results / "captures").rglob("*"):
        if f.is_file():
            f.unlink()
    rendered = run_sweep(read_grid(grid), results, render_only=True)  # rendering reads records alone
    assert rendered.ran == 0 and rendered.reused == 5
    again = run_sweep(read_grid(grid), results, jobs=1)
    assert (again.reused, again.ran) == (3, 2) and not again.failed
    assert {r.key: r.value().sha256 for r in again.records if r.job.command == "capture"} == shas
    assert all((results / r.value().file).is_file() for r in again.records if r.job.command == "capture")
    assert {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json") if p.stem not in shas} == others


def test_records_kept_in_the_repository_restore_byte_for_byte_never_overwrite_and_skip_failed_jobs(tmp_path):
    """benchmarks/records/: a sweep longer than one machine's life resumes on the next from its kept
    records. Each finished record is kept once (xz), restored byte for byte where the results folder
    lacks it, never over one it has; a failed one is not kept, so the next run tries its job again; a job
    run again (timed on another kind of machine) replaces its kept record."""
    from stackwars_ir.sweep.kept import keep, restore

    jobs, kept = tmp_path / "r" / "jobs", tmp_path / "kept"
    jobs.mkdir(parents=True)
    texts = {"a.json": json.dumps({"ok": True, "result": {"x": [1.5] * 1000}}),
             "b.json": json.dumps({"ok": True, "result": {}}),
             "c.json": json.dumps({"ok": False, "error": "it failed"})}
    for name, text in texts.items():
        (jobs / name).write_text(text)
    assert keep(jobs, kept) == 2 and keep(jobs, kept) == 0
    assert sorted(p.name for p in kept.iterdir()) == ["a.json.xz", "b.json.xz"]
    assert (kept / "a.json.xz").stat().st_size < len(texts["a.json"]) / 10
    fresh = tmp_path / "fresh" / "jobs"
    assert restore(kept, fresh) == 2
    assert {p.name: p.read_text() for p in fresh.iterdir()} == {k: v for k, v in texts.items() if k != "c.json"}
    (fresh / "b.json").write_text(json.dumps({"ok": True, "result": {"newer": 1}}))
    assert restore(kept, fresh) == 0 and "newer" in (fresh / "b.json").read_text()
    assert keep(fresh, kept) == 1 and restore(kept, tmp_path / "third") == 2  # a job run again: its new record
    assert "newer" in (tmp_path / "third" / "b.json").read_text()
    # Around a run that stops on an error (or Ctrl-C): restored before, what it finished kept after.
    from stackwars_ir.sweep.kept import carried

    said, fourth = [], tmp_path / "fourth" / "jobs"
    with pytest.raises(KeyboardInterrupt):
        with carried(kept, fourth, said.append):
            assert sorted(p.name for p in fourth.iterdir()) == ["a.json", "b.json"]
            (fourth / "d.json").write_text(json.dumps({"ok": True, "result": {"d": 1}}))
            raise KeyboardInterrupt
    assert (kept / "d.json.xz").exists() and len(said) == 2, said
    assert not [p for p in (tmp_path / "fresh").rglob("*") if p.name.endswith(".tmp")]
    # A run that names its jobs keeps only their records: one left by an edited model's old key is not.
    with carried(kept, fourth) as only:
        (fourth / "e.json").write_text(json.dumps({"ok": True, "result": {"e": 1}}))
        (fourth / "stale.json").write_text(json.dumps({"ok": True, "result": {"old": 1}}))
        only.update({"a", "b", "d", "e"})
    assert (kept / "e.json.xz").exists() and not (kept / "stale.json.xz").exists()


BROKEN = '''"""A linear layer whose inputs cannot be made: its capture fails (tests/test_sweep.py)."""
from stackwars_ir.models import Entry

ENTRY = Entry("broken", "a linear layer whose inputs raise", {"tiny": dict(width=8)}, {"tiny": dict(batch=2, seq=4)})
SIZES = ENTRY.sizes


def torch_model(size):
    import torch

    return torch.nn.Linear(8, 8)


def inputs(size, batch, seq, rng):
    raise ValueError("no inputs for this model")
'''


@pytest.mark.slow
def test_a_failed_job_is_recorded_with_its_error_its_dependents_say_so_and_the_rest_goes_on(tmp_path, monkeypatch):
    """A model whose inputs raise: its capture job fails in one line, the memory plan that reads it
    is recorded as blocked by it, the other model's jobs still run; `--render` then shows the same
    page from the files alone, and the exit code says some job failed. (A request no route can take,
    torch_xla without weights, is not a job: named, not failed.)"""
    from stackwars_ir import models

    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # the grid's adapters join it: put back afterwards
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "broken.py").write_text(BROKEN)
    grid = tmp_path / "g.toml"
    grid.write_text('adapters = ["mine"]\n[[grid]]\ncommands = ["memory"]\nmodels = ["ffn"]\nroutes = ["jax"]\n'
                    '\n[[grid]]\ncommands = ["memory"]\nmodels = ["broken"]\nroutes = ["torchax"]\n'
                    '\n[[grid]]\ncommands = ["memory"]\nmodels = ["ffn"]\nroutes = ["torch_xla"]\nabstract = true\n'
                    'dtypes = ["bfloat16"]\n')
    args = ["sweep", str(grid), "--results", str(tmp_path / "r"), "--jobs", "2"]
    run = CliRunner().invoke(main, args + ["--markdown", str(tmp_path / "page.md")])
    assert run.exit_code == 1, run.output
    page = (tmp_path / "page.md").read_text()
    assert "| ffn-tiny | forward | jax | 2 | 16 | - | cpu | 1 |" in page
    assert "| broken-tiny | forward | torchax |" in page and "failed: " in page and "no inputs for this model" in page
    assert "its capture failed: " in page
    assert "ffn-tiny forward torch_xla: torch_xla cannot capture without weights" in page
    assert "4 jobs: 0 finished before (not recomputed), 4 run now, 2 failed" in page
    again = CliRunner().invoke(main, args + ["--render", "--markdown", str(tmp_path / "again.md")])
    assert again.exit_code == 1
    rendered = (tmp_path / "again.md").read_text()
    assert rendered.split("## Captures")[1] == page.split("## Captures")[1]
    assert "4 jobs: 4 finished before (not recomputed), 0 run now, 2 failed" in rendered


def test_the_grids_shipped_in_benchmarks_read(monkeypatch):
    """benchmarks/grids/*.toml (the one docs/sweep.md shows among them) are grids this version reads."""
    from stackwars_ir import models
    from stackwars_ir.sweep.grid import read_grid

    monkeypatch.setenv(models.ADAPTERS_ENV, "")  # zoo.toml adds benchmarks/zoo: put back afterwards

    grids = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "grids").glob("*.toml"))
    assert grids
    for path in grids:
        assert read_grid(path).jobs, path


def test_render_of_a_sweep_not_run_yet_names_every_job_as_such_and_writes_nothing(tmp_path):
    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    run = CliRunner().invoke(main, ["sweep", str(grid), "--results", str(tmp_path / "r"), "--render", "--json", "-"])
    assert run.exit_code == 1, run.output
    summary = json.loads(run.stdout)
    assert (summary["jobs"], summary["not_run"], summary["failed"], summary["ran"]) == (5, 5, 0, 0)
    assert "5 jobs: 0 finished before (not recomputed), 0 run now, 0 failed, 5 not run yet" in run.stderr
    assert run.stderr.count("not run yet (run the sweep without --render)") == 5
    assert not (tmp_path / "r").exists()


def test_the_zoo_pages_claims_count_what_the_rows_hold():
    """findings_zoo's verdicts from three programs: torchax fewer ops in 1, the same fusions in 2, faster
    by more than 10% in 1, slower in 1, within 10% in 1, and the geometric mean of the time ratios."""
    from stackwars_ir.report.findings import zoo

    def row(ops, fusions, steady):
        return {"ops": ops, "bench": [{"compile": 1.0, "steady": steady[0], "fusions": fusions[0]},
                                      {"compile": 2.0, "steady": steady[1], "fusions": fusions[1]}]}

    rows = {("a", "forward"): row((100, 80), (10, 10), (1.0, 0.5)),
            ("b", "forward"): row((100, 120), (10, 12), (1.0, 2.0)),
            ("c", "forward"): row((100, 150), (7, 7), (1.0, 1.05)),
            ("c", "train"): None}
    verdict, = zoo.verdicts(rows)
    assert "Forward, 3 architectures." in verdict
    assert "fewer ops than torch_xla's in 1 of 3 (median ops ratio torchax/torch_xla 1.20)" in verdict
    assert "the same number of fusions in 2 of 3" in verdict and "(geometric mean) 2.00" in verdict
    assert "faster by more than 10% in 1, slower by more than 10% in 1, within 10% in 1" in verdict
    assert "geometric mean ratio torchax/torch_xla 1.02" in verdict  # (0.5 * 2 * 1.05) ** (1/3)
    assert "fewer than 3 rounds per row: each a figure of one run, not a finding" in verdict
    # With three rounds a row: faster or slower only where the interval across the rounds excludes 1.
    rounds = {("a", "forward"): dict(rows[("a", "forward")], ratios=[0.5, 0.52, 0.49]),
              ("b", "forward"): dict(rows[("b", "forward")], ratios=[2.0, 1.9, 2.1]),
              ("c", "forward"): dict(rows[("c", "forward")], ratios=[1.3, 0.8, 1.05])}
    verdict, = zoo.verdicts(rounds)
    assert "torchax faster in 1 (95% interval across 3 or more rounds below 1), slower in 1 (above 1), " \
           "indistinguishable in 1 (the interval holds 1)" in verdict
    ratio, low, high, k = zoo.interval(rounds[("c", "forward")])
    assert k == 3 and low < 1 < high


def test_zoo_repeat_reads_the_committed_zoo_page_and_counts_changed_and_reversed_verdicts(tmp_path):
    """benchmarks/zoo_repeat.py on the page findings_zoo.py wrote (docs/findings-zoo.md): every row of
    both tables read (as many as the page's own counts say), a page against itself changes nothing,
    and one row turned from slower to faster is one change and one reversal."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import re

    import zoo_repeat

    page = Path(__file__).resolve().parents[1] / "docs" / "findings-zoo.md"
    when, rows = zoo_repeat.ratios(page)
    text = page.read_text()
    for step, title in (("Forward", "Forward"), ("Training step", "Training step")):
        said = int(re.search(rf"\*\*{title}, (\d+) architectures", text).group(1))
        assert sum(s == step for s, _ in rows) == said
    assert when.startswith("20") and "cpus" in when
    same = zoo_repeat.compare(rows, rows)
    assert all("changed in 0, reversed in 0;" in line and "1.00 (median), 1.00 at most" in line for line in same)
    step, model = next(k for k, v in rows.items() if v > 1.1 and k[0] == "Forward")
    changed = zoo_repeat.compare(rows, rows | {(step, model): 0.5})[0]
    assert "changed in 1, reversed in 1 (" in changed and f"{model} {rows[(step, model)]:.2f} -> 0.50" in changed
    (tmp_path / "x.md").write_text("# not a zoo page\n")
    with pytest.raises(SystemExit, match="not a findings-zoo page"):
        zoo_repeat.ratios(tmp_path / "x.md")


@pytest.mark.slow  # over 20 s here (issue 52)
def test_the_memory_page_is_a_rendering_of_its_results_folder(tmp_path, monkeypatch):
    """findings_memory as a sweep: cells from the records (a route no abstract capture can take is a
    cell that says why, not a job), the slice table from the mesh jobs; --render rebuilds the same
    tables from the folder, running nothing."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import findings_memory

    from stackwars_ir.report.findings import memory_page

    grid = tmp_path / "memory.toml"
    common = ('models = ["llama"]\nsteps = ["train"]\nbatches = [1]\nseqs = [8]\ndtypes = ["bfloat16"]\n'
              'abstract = true\ntargets = ["cpu"]\nbudgets = ["v6e-1"]\n')
    grid.write_text('[[grid]]\ncommands = ["memory"]\n' + common +
                    '\n[[grid]]\ncommands = ["memory"]\nroutes = ["jax"]\nmeshes = ["fsdp=2"]\n' + common)
    page = memory_page(findings_memory.run(grid, tmp_path / "r", jobs=2, render=False))
    row = next(line for line in page.splitlines() if line.startswith("| train | 1 | bfloat16 |"))
    jax_cell, torchax_cell, torch_xla_cell = row.split(" | ")[3:6]
    assert jax_cell.startswith("fits, ") and torchax_cell.startswith("fits, "), row
    assert torch_xla_cell.rstrip(" |") == "not captured [1]", row  # the reason written once, under the table
    assert "\n[1] not captured: torch_xla cannot capture without weights" in page
    slices = next(line for line in page.splitlines() if line.startswith("| llama-tiny | jax |"))
    assert "| v6e-2 |" in page and "per chip" in slices and slices.endswith("| v6e-1 |"), slices
    assert "6 jobs: 0 finished before (not recomputed), 6 run now, 0 failed" in page
    assert "  - torch-torch_xla: no plan (bfloat16: not captured [1]): this page says nothing" in page
    assert "  - jax: bfloat16: fits at batch 1 (largest " in page and "so the IR is cleared in bfloat16 only" in page

    rendered = memory_page(findings_memory.run(grid, tmp_path / "r", jobs=2, render=True))
    assert rendered.split("\n## ", 1)[1] == page.split("\n## ", 1)[1]
    assert "6 jobs: 6 finished before (not recomputed), 0 run now, 0 failed" in rendered
    assert "| record |" not in page  # every record made on one day by one commit: the header says so once
    # A record made on another day (a resumed sweep, a retried job): each row names its records' day.
    import json

    jax_memory = next(f for f in (tmp_path / "r" / "jobs").glob("*.json")
                      if (lambda d: d["job"]["command"] == "memory" and d["job"]["request"]["framework"] == "jax"
                          and not d["job"]["request"]["mesh"])(json.loads(f.read_text())))
    data = json.loads(jax_memory.read_text())
    data["host"]["finished"], data["host"]["commit"] = "2026-01-02T03:04:05Z", "0123456789ab"
    jax_memory.write_text(json.dumps(data))
    dated = memory_page(findings_memory.run(grid, tmp_path / "r", jobs=2, render=True))
    assert "(a row's `record` column): a 2026-01-02 at commit 0123456789ab; b " in dated
    row = next(line for line in dated.splitlines() if line.startswith("| train | 1 | bfloat16 |"))
    assert row.endswith("| a, b |"), row


def test_a_job_that_asks_for_more_memory_than_the_machine_has_is_not_started(tmp_path, monkeypatch):
    """A job whose memory request passes this machine's memory is a record that says so, and no worker
    is started for it (one would be killed part-way, or take the machine down)."""
    import stackwars_ir.files
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of

    monkeypatch.setattr(stackwars_ir.files, "host_memory", lambda: 1 << 30)
    grid = grid_of([{"commands": ["memory"], "models": ["ffn"], "routes": ["jax"], "targets": ["cpu"]}])
    started = time.perf_counter()
    report = run_sweep(grid, tmp_path / "r", jobs=1)
    assert time.perf_counter() - started < 60  # no worker (each imports jax and torch)
    capture, memory = sorted(report.records, key=lambda r: r.job.command)
    assert not capture.ok and capture.error.startswith("not run here: it asks for 3.0 GiB of host memory"), capture.error
    assert "more than this machine's 1.0 GiB" in capture.error
    assert not memory.ok and "not run here: " in memory.error, memory.error


def test_the_memory_reading_is_worded_per_route_and_per_dtype():
    """The memory page's verdict for each route: fits in every dtype planned (the OOM is outside the
    executable), fits in one dtype only (the study's dtype decides), OOM wherever planned, or no plan
    (the page says nothing of that route); never one verdict for routes that were not planned."""
    from stackwars_ir.bench.memory import Budget
    from stackwars_ir.report.findings.memory import Cell, reading

    gib = 1 << 30
    budget = Budget("v6e-1", 32 * gib)
    fits = lambda n: Cell(f"fits, {n} GiB", "fits", n * gib)  # noqa: E731
    oom = lambda n: Cell(f"OOM, needs {n} GiB", "oom", n * gib)  # noqa: E731
    cells = {("M", "forward", 1, "float32", "jax"): fits(5), ("M", "forward", 1, "bfloat16", "jax"): fits(3),
             ("M", "train", 1, "float32", "jax"): oom(40), ("M", "train", 1, "bfloat16", "jax"): fits(20),
             ("M", "forward", 1, "float32", "torch-torch_xla"): fits(6),
             ("M", "train", 1, "float32", "torch-torch_xla"): Cell("not run here: it asks for 35 GiB"),
             ("M", "train", 1, "float32", "torch-torchax"): oom(41), ("M", "train", 1, "bfloat16", "torch-torchax"): oom(30.5)}
    text = reading("M", cells, [1], ["float32", "bfloat16"], budget)
    fwd, train = text.split("- Training step:")
    jax_f = next(line for line in fwd.splitlines() if line.startswith("  - jax:"))
    assert "float32: fits at batch 1 (largest 5.0 GiB, 27.0 GiB to spare); bfloat16: fits" in jax_f
    assert "fits in float32 and bfloat16: an OOM of jax on this model comes from outside the executable" in jax_f
    xla_f = next(line for line in fwd.splitlines() if line.startswith("  - torch-torch_xla:"))
    assert "outside the executable" not in xla_f and "so the IR is cleared in float32 only" in xla_f, xla_f
    assert "torch-torchax: no plan" in fwd
    jax_t = next(line for line in train.splitlines() if line.startswith("  - jax:"))
    assert "OOM at batch 1 (needs 40.0 GiB at least)" in jax_t and "depends on the dtype" in jax_t, jax_t
    assert "outside the executable" not in train
    xla_t = next(line for line in train.splitlines() if line.startswith("  - torch-torch_xla:"))
    assert "no plan (float32: not run here: it asks for 35 GiB" in xla_t, xla_t
    torchax_t = next(line for line in train.splitlines() if line.startswith("  - torch-torchax:"))
    assert "OOM wherever planned" in torchax_t and "four times the weights" in torchax_t, torchax_t


def test_a_sweep_with_a_tpu_target_and_no_libtpu_stops_before_any_job(tmp_path, monkeypatch):
    import importlib.util

    from stackwars_ir.errors import StackwarsError
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else find_spec(name, *a))
    grid = grid_of([{"commands": ["memory"], "models": ["ffn"], "routes": ["jax"], "targets": ["tpu-v6e"]}])
    with pytest.raises(StackwarsError, match="libtpu, which is not installed"):
        run_sweep(grid, tmp_path / "r", jobs=1)
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # over 20 s here (issue 52)
def test_a_bench_with_baselines_times_every_route_and_the_native_runtimes_in_one_job_run_alone(tmp_path):
    """`baselines`: one bench job per request times JAX's capture, the PyTorch route's and the native
    runtimes in one worker (their ratios from one run), profiled as `profile` asks; it runs after the
    jobs that time nothing, on its own; its record is `bench MODEL`'s report."""
    from stackwars_ir.bench.run import BenchReport
    from stackwars_ir.sweep.execute import phases, run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.report.sweep import summary_line

    grid = grid_of([{"commands": ["bench", "diff"], "models": ["ffn"], "routes": ["jax", "torchax"],
                     "baselines": ["jax", "eager"], "profile": 2}])
    keys = [(j, j.label) for j in grid.jobs]
    order = phases(keys)
    assert [(len(b), alone) for b, alone in order] == [(2, False), (1, False), (1, True)]
    assert order[2][0][0][0].baselines == ("jax", "eager")
    report = run_sweep(grid, tmp_path, jobs=2)
    assert not report.failed, [r.error for r in report.failed]
    bench = next(r for r in report.records if r.job.command == "bench")
    rep = BenchReport.from_json(bench.result)
    rows = {e.name if e.kind == "stablehlo" else e.kind: e for _, e in rep.rows}
    assert set(rows) == {"jax", "torch-torchax", "jax.jit", "torch eager"}, set(rows)
    assert all(e.ok and e.timing.steady > 0 for e in rows.values())
    assert rows["jax"].profile is not None and rows["torch-torchax"].profile is not None
    assert rep.peaks["flops_per_s"] > 0
    # The captures it timed are the capture jobs' (shared with the diff), not captured again.
    caps = {r.result["sha256"] for r in report.records if r.job.command == "capture"}
    assert {rows["jax"].sha256, rows["torch-torchax"].sha256} == caps
    # The timed job measured how steady the machine was before it timed anything; the summary says so.
    assert [r.job.command for r in report.records if "noise" in r.host] == ["bench"]
    assert 0 <= bench.host["noise"] < 100
    assert "machine noise before the 1 timed job: " in summary_line(report)


def test_baselines_in_a_grid_are_checked_and_what_cannot_take_them_named():
    from stackwars_ir.errors import StackwarsError
    from stackwars_ir.sweep.grid import grid_of

    with pytest.raises(StackwarsError, match="unknown baseline 'jaxx'"):
        grid_of([{"commands": ["bench"], "models": ["ffn"], "baselines": ["jaxx"]}])
    with pytest.raises(StackwarsError, match="`commands` has no bench"):
        grid_of([{"commands": ["memory"], "models": ["ffn"], "baselines": ["jax"]}])
    with pytest.raises(StackwarsError, match="at least 2 profiled runs"):
        grid_of([{"commands": ["bench"], "models": ["ffn"], "profile": 1}])
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
    from stackwars_ir.errors import StackwarsError
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
    from stackwars_ir.errors import StackwarsError
    from stackwars_ir.sweep.execute import phases
    from stackwars_ir.sweep.grid import Job, grid_of

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


@pytest.mark.slow
def test_a_bench_together_times_both_pytorch_routes_interleaved_in_one_job_and_the_zoo_reads_each(tmp_path):
    """The zoo's way of timing the two routes against each other: one worker, their steady runs
    taking turns, each executable its own row named by its capture's stem; the zoo page reads each
    route's numbers from that one record."""
    from stackwars_ir.report.findings import zoo
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.report.sweep import sweep_tables

    grid = grid_of([{"commands": ["diff", "bench"], "models": ["ffn"], "routes": ["torch_xla", "torchax"],
                     "together": True}])
    report = run_sweep(grid, tmp_path, jobs=2)
    assert not report.failed, [r.error for r in report.failed]
    (bench,) = [r for r in report.records if r.job.command == "bench"]
    results = bench.result["results"]
    assert [e["name"] for e in results] == ["torch-torch_xla", "torch-torchax"]
    assert all(e["timing"]["interleaved_with"] == 1 and e["timing"]["steady_median_s"] > 0 for e in results)
    caps = {r.result["sha256"] for r in report.records if r.job.command == "capture"}
    assert {e["sha256"] for e in results} == caps
    (title, _, headers, rows), = [t for t in sweep_tables(report) if t[0].startswith("Timings")]
    assert [row[headers.index("route")] for row in rows] == ["torch-torch_xla", "torch-torchax"]
    # issue 53: the page shows the verdict its record holds, and how quiet the machine was for it
    (_, _, vh, verdicts), = [t for t in sweep_tables(report) if t[0] == "Verdicts"]
    (verdict,) = verdicts
    assert {"torch-torch_xla", "torch-torchax"} <= set(verdict[vh.index("verdict")].replace(":", "").split())
    assert verdict[vh.index("machine")].startswith("noise ")
    _, by = zoo.index_records(report)
    row = zoo.row_of(by, "ffn", "forward")
    assert [b["steady"] for b in row["bench"]] == [e["timing"]["steady_median_s"] for e in results]
    assert all(b["together"] for b in row["bench"])
    assert zoo.how_timed({("ffn", "forward"): row}, "forward").startswith(
        "The two routes' executables were timed in one process, their steady runs taking turns")


@pytest.mark.slow  # over 20 s here (issue 52)
def test_the_main_findings_page_is_a_rendering_of_its_results_folder(tmp_path):
    """findings.py as a sweep: GPT-2's captures diffed and timed beside jax.jit in one job, profiled, the
    page's sections from the records; --render rebuilds the same page from the folder, running nothing."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import findings

    grid = tmp_path / "findings.toml"
    grid.write_text('[[grid]]\ncommands = ["bench", "diff"]\nmodels = ["gpt2"]\nbaselines = ["jax"]\nprofile = 2\n')
    res = findings.run(grid, tmp_path / "r", jobs=2)
    assert not res.report.failed, [r.error for r in res.report.failed]
    page = findings.page(res, grid)
    from page_claims import claims

    assert claims(page) == []  # no sentence claims more than its own numbers (issue 53)

    def section(n: int) -> list[str]:
        return [line for line in page.split(f"\n## {n}.")[1].split("\n## ")[0].splitlines()
                if line.startswith("| gpt2 |")]

    # Sections 1-4 from the diff records: both PyTorch routes, a sentence each, blocks paired by key.
    for n in (1, 2, 3):
        assert [line.split(" | ")[1] for line in section(n)] == ["torch_xla", "torchax"], section(n)
        assert not any("failed" in line for line in section(n)), section(n)
    pairs, method = section(4)[0].split(" | ")[2:4]
    assert int(pairs) > 5 and method == "key", section(4)
    # Section 5: the three captures and jax.jit, timed in one job; section 6: their ratios.
    timed = [line.split(" | ")[1] for line in section(5)]
    assert {"jax", "torch-torch_xla", "torch-torchax"} <= set(timed) and any(t.startswith("jax.jit") for t in timed), timed
    assert all(float(x.split()[0]) > 0 and "(" in x for x in section(6)[0].rstrip(" |").split(" | ")[1:3]), section(6)
    # Section 10: the profiled gaps split by block (every StableHLO row was profiled in the job).
    gaps = section(10)
    assert any(line.startswith("| gpt2 | forward | torch_xla |") for line in gaps), gaps
    assert not any("not profiled" in line for line in gaps), gaps
    rendered = findings.page(findings.run(grid, tmp_path / "r", render=True), grid)
    assert rendered.split("\n## ", 1)[1] == page.split("\n## ", 1)[1]
    # The header says what each run computed: everything the first time, nothing when rendered.
    n = len(res.report.records)
    assert f"Sweep: {n} jobs: 0 finished before (not recomputed), {n} run now, 0 failed; local, 2 workers;" in page
    assert f"Sweep: {n} jobs: {n} finished before (not recomputed), 0 run now, 0 failed;" in rendered


@pytest.mark.slow  # over 20 s here (issue 52)
def test_the_programs_page_is_a_rendering_of_its_results_folder(tmp_path):
    """findings_programs as a sweep: a memory plan and a timing per program (unrolled, scan) from the
    records, op counts from the captures they read; --render gives the same tables, running nothing."""
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import findings_programs

    from stackwars_ir.report.findings import programs_page

    grid = tmp_path / "programs.toml"
    memory = '[[grid]]\ncommands = ["memory"]\nmodels = ["llama"]\nsteps = ["train"]\nroutes = ["jax"]\n'
    bench = '[[grid]]\ncommands = ["bench"]\nmodels = ["llama"]\nroutes = ["jax"]\n'
    grid.write_text("\n".join([memory, memory + "scan_layers = true\n", bench + "rounds = 2\n", bench + "scan_layers = true\n"]))
    args = SimpleNamespace(grid=grid, results=tmp_path / "r", jobs=2, render=False)
    page = programs_page(findings_programs.run(args))
    rows = {line.split(" | ")[0]: line.split(" | ") for line in page.splitlines() if line.startswith("| unrolled |")
            or line.startswith("| scan |")}
    static, executed = (int(x) for x in rows["| scan"][2].split(" / "))
    assert executed > static, rows  # the loop's body counted once per trip
    assert rows["| unrolled"][-1].rstrip(" |") in ("fits", "OOM"), rows
    timed = [line.split(" | ") for line in page.splitlines() if line.startswith("| forward |")]
    assert [(t[1], t[2]) for t in timed] == [("unrolled", "JAX"), ("scan", "JAX")], timed
    assert all(float(t[-2]) > 0 for t in timed) and [t[-1].rstrip(" |") for t in timed] == ["2", "1"], timed
    again = programs_page(findings_programs.run(SimpleNamespace(**{**vars(args), "render": True})))
    assert again.split("\n## ", 1)[1] == page.split("\n## ", 1)[1]


def test_a_sweeps_tables_put_a_repeated_jobs_rounds_together_with_their_interval():
    """report/sweep.py: each round's row names its round, and one row per pair of a repeated job's rows
    gives the ratio in each round and across them; a round whose row failed is left out of the ratio."""
    from types import SimpleNamespace

    from stackwars_ir.report.sweep import sweep_tables
    from stackwars_ir.sweep.grid import BenchJob
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.workload import Request

    req = Request("ffn", framework="both").validated()

    def record(rnd, jax_s, xla_s):
        rows = [{"name": "jax", "compile_s": 0.1, "timing": {"steady_median_s": jax_s}},
                {"name": "torch-torch_xla", "compile_s": 0.1,
                 **({"timing": {"steady_median_s": xla_s}} if xla_s else {"error": "failed"})}]
        return Record(f"k{rnd}", BenchJob(req, target="cpu", round=rnd), {}, True, "", {"results": rows}, 1.0, {})

    recs = [record(0, 1.0e-3, 1.5e-3), record(1, 1.0e-3, 1.52e-3), record(2, 1.1e-3, 1.6e-3), record(3, 1e-3, None)]
    tables = {t[0]: t for t in sweep_tables(SimpleNamespace(records=recs))}
    _, _, headers, rows = tables["Timings on one XLA runtime"]
    routes = [row[headers.index("route")] for row in rows]
    assert routes[:2] == ["jax", "torch-torch_xla"] and routes[4] == "jax (round 3)"
    _, _, headers, (row,) = tables["Across rounds"]
    assert row[headers.index("B / A")] == "torch-torch_xla / jax"
    assert row[headers.index("each round")] == "1.50, 1.52, 1.45"  # round 4's failed row: no ratio
    assert row[headers.index("across rounds")].startswith("1.49x (95% interval 1.4")
    # Two rounds: a figure, no finding.
    _, _, _, (row,) = {t[0]: t for t in sweep_tables(SimpleNamespace(records=recs[:2]))}["Across rounds"]
    assert row[-1].endswith("no interval across runs, so no finding)")
    # One round: no such table.
    assert "Across rounds" not in {t[0] for t in sweep_tables(SimpleNamespace(records=recs[:1]))}


def test_a_ratio_across_rounds_is_a_finding_only_from_three_rounds_whose_interval_excludes_one():
    from stackwars_ir.report.sweep import across_rounds
    from stackwars_ir.report.findings.programs import _cpu_findings

    assert across_rounds([1.5, 1.52]) == "1.51x from 2 rounds (fewer than 3: no interval across runs, so no finding)"
    assert across_rounds([1.50, 1.52, 1.49]).startswith("1.50x (95% interval 1.4")
    assert across_rounds([0.9, 1.1, 1.02]).startswith("indistinguishable from 1 (1.00x, 95% interval 0.")
    assert across_rounds([]) == "not measured"
    # The programs page's sentences take each ratio per round, from the rounds both sides hold.
    facts = {("forward", "unrolled", "JAX"): {"compile": {0: 20.0, 1: 21.0, 2: 19.0}, "steady": {0: 0.1, 1: 0.1, 2: 0.1},
                                              "static": 900},
             ("forward", "scan", "JAX"): {"compile": {0: 4.0, 1: 4.2, 2: 3.9}, "steady": {0: 0.1, 1: 0.11, 2: 0.095},
                                          "static": 120}}
    (line,) = _cpu_findings(facts)
    assert "(unrolled / scanned: 4.96x (95% interval 4." in line and "scanned / unrolled: indistinguishable from 1" in line


def test_the_noise_each_timed_job_measured_first_is_summed_up_and_a_noisy_run_named():
    from stackwars_ir.bench.timing import machine_noise
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.report.sweep import noise_line

    job = grid_of([{"commands": ["capture"], "models": ["ffn"], "routes": ["jax"]}]).jobs[0]
    rec = [Record(f"k{i}", job, {}, True, "", {}, 1.0, {"cpus": 2, **({"noise": n} if n is not None else {})})
           for i, n in enumerate((0.21, None, 0.72))]
    assert noise_line(rec[:2]) == "machine noise before the 1 timed job: 21% (quiet under 50%)"
    assert noise_line(rec) == ("machine noise before the 2 timed jobs: 21%-72% (quiet under 50%); 1 timed on a noisy "
                               "machine: their times are not comparable with a quiet run's (sweep --retry-noisy "
                               "runs them again): ffn-tiny forward jax b2")  # issue 53: the noisy rows named
    assert noise_line(rec[1:2]) == ""
    timed = [Record(f"k{i}", job, {}, True, "", {}, 1.0, {"noise": 0.2, "probe_ms": ms}) for i, ms in enumerate((31.5, 36.2))]
    assert noise_line(timed) == ("machine noise before the 2 timed jobs: 20% (quiet under 50%); the probe's chain "
                                 "32-36 ms (the slowest 1.15x the fastest)")
    assert machine_noise(0.2) >= 0


def test_a_timed_record_is_noisy_by_its_probe_or_by_its_own_rows_spread():
    """The probe runs 2 s before the job; a row of the job itself can still spread wide (seen: a quiet
    probe of 7%, rows of 11-25%). Either makes the record noisy, and the summary says so."""
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.report.sweep import noise_line

    jobs = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"]}]).jobs
    bench = next(j for j in jobs if j.command == "bench")
    capture = next(j for j in jobs if j.command == "capture")

    def rec(job, noise, *spreads):
        rows = {"results": [{"timing": {"spread": s}} for s in spreads]}
        return Record("k", job, {}, True, "", rows, 1.0, {"noise": noise})

    assert not rec(bench, 0.21, 0.05, 0.08).noisy  # an idle machine's probe reads 6-44% (docs/sweep.md)
    assert rec(bench, 0.21, 0.05, 0.25).noisy and rec(bench, 0.72, 0.05).noisy
    assert not rec(capture, 0.9, 0.5).noisy  # only a timed job's record can be
    assert noise_line([rec(bench, 0.21, 0.25)]) == (
        "machine noise before the 1 timed job: 21% (quiet under 50%); 1 more with a row's steady-state spread "
        "over 10% on a quiet probe (sweep --retry-noisy runs them again): ffn-tiny forward jax b2")


def test_a_timed_record_whose_probe_chain_ran_slow_against_the_same_processors_fastest_is_noisy(tmp_path):
    """Every core busy at once slows the probe's chain evenly: its spread reads quiet (0% on the 16-core
    host, docs/sweep.md) and only the chain's time against the sweep's fastest shows the load (idle up to
    1.37x, loaded 1.75x or more). Chains are compared within one kind of processor; --retry-noisy runs
    the slowed jobs again, and nothing else."""
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record, noisy_keys, slowed, stack, write_record
    from stackwars_ir.report.sweep import noise_line

    grid = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"], "batches": [1, 2, 4, 8]}])
    here = stack()
    benches = [(j, j.key(here)) for j in grid.jobs if j.command == "bench"]
    cpu = {"processor": "AMD EPYC", "cpus": 2, "machine": "x86_64"}
    other = cpu | {"processor": "Intel Xeon"}
    # fastest 31 ms on the EPYC: 42 ms is idle (1.35x), 56 ms slowed (1.81x); the Xeon's 80 ms is
    # 1.33x its own fastest (60 ms), not 2.58x the EPYC's.
    hosts = [cpu | {"probe_ms": 31.0}, cpu | {"probe_ms": 42.0}, cpu | {"probe_ms": 56.0}, other | {"probe_ms": 60.0}]
    records = [Record(k, j, here, True, "", {}, 1.0, h | {"noise": 0.2}) for (j, k), h in zip(benches, hosts)]
    records.append(Record("x", benches[0][0], here, True, "", {}, 1.0, other | {"noise": 0.2, "probe_ms": 80.0}))
    assert [r.key for r in slowed(records)] == [benches[2][1]]
    assert noisy_keys(records) == {benches[2][1]}
    assert noise_line(records).endswith(
        "; 1 more on a slowed machine (the chain 1.5x the fastest or more) (sweep --retry-noisy runs them again): "
        "ffn-tiny forward jax b4")  # the slowed record, named
    assert not slowed(records[:2] + [Record("c", grid.jobs[0], here, True, "", {}, 1.0, cpu | {"probe_ms": 99.0})])
    for rec in records[:4]:
        write_record(tmp_path, rec)
    for job, key in ((j, j.key(here)) for j in grid.jobs if j.command == "capture"):
        write_record(tmp_path, Record(key, job, here, True, "", {}, 1.0, cpu))
    assert not run_sweep(grid, tmp_path, render_only=True).pending
    again = run_sweep(grid, tmp_path, render_only=True, retry_noisy=True)
    assert [r.key for r in again.pending] == [benches[2][1]]


@pytest.mark.slow
def test_retry_noisy_runs_again_only_the_timed_jobs_a_noisy_machine_measured(tmp_path):
    """A finished bench whose record says its machine was noisy is kept by a plain resume and run again
    by --retry-noisy; its capture is not."""
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import read_record, record_path

    grid = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"]}])
    first = run_sweep(grid, tmp_path)
    assert (first.ran, len(first.failed)) == (2, 0), [r.error for r in first.failed]
    (bench,) = [r for r in first.records if r.job.command == "bench"]
    assert bench.host["probe_ms"] > 0 and bench.host["noise"] >= 0  # the probe's chain, and its spread
    path = record_path(tmp_path, bench.key)
    data = json.loads(path.read_text())
    noisy = 0.9 if not bench.noisy else data["host"]["noise"]
    data["host"]["noise"] = noisy  # as a busy machine's probe reads
    path.write_text(json.dumps(data))
    assert read_record(tmp_path, bench.key).noisy
    assert run_sweep(grid, tmp_path).ran == 0
    again = run_sweep(grid, tmp_path, retry_noisy=True)
    assert (again.reused, again.ran) == (1, 1)
    # Restored from the repository onto another kind of machine: timed again there, its capture not.
    data = json.loads(path.read_text())
    data["host"]["processor"] = "Another CPU"
    path.write_text(json.dumps(data))
    assert run_sweep(grid, tmp_path, render_only=True).ran == 0  # a rendering shows it as it was made
    elsewhere = run_sweep(grid, tmp_path)
    assert (elsewhere.reused, elsewhere.ran) == (1, 1)
    assert read_record(tmp_path, bench.key).host["processor"] != "Another CPU"


KILLED = BROKEN.replace('"broken", "a linear layer whose inputs raise"', '"killed", "a linear layer killed for memory"').replace(
    '    raise ValueError("no inputs for this model")\n',
    '    import os, signal\n\n    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel\'s OOM killer does\n')


@pytest.mark.slow
def test_a_worker_killed_outright_is_a_failed_record_that_says_why_and_names_no_path_of_this_machine(
        tmp_path, monkeypatch):
    from stackwars_ir import models
    from stackwars_ir.sweep.execute import _in_worker
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import stack

    monkeypatch.setenv(models.ADAPTERS_ENV, str(tmp_path / "mine"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "killed.py").write_text(KILLED)
    job = grid_of([{"commands": ["capture"], "models": ["killed"], "routes": ["torchax"]}]).jobs[0]
    root = tmp_path / "results"
    rec = _in_worker(job, "k", root, stack())
    assert not rec.ok and "its worker died (signal 9, killed: most likely out of memory)" in rec.error, rec.error
    assert "capturing killed-tiny" in rec.error and str(tmp_path) not in rec.error, rec.error


def test_a_pages_records_say_when_and_by_which_code_they_were_made():
    """issue 53: a page rendered from older records said "this run" of them; each record now keeps its
    date and commit, and the summary line names them."""
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.report.sweep import dated_line

    job = grid_of([{"commands": ["capture"], "models": ["ffn"], "routes": ["jax"]}]).jobs[0]

    def rec(i, host):
        return Record(f"k{i}", job, {}, True, "", {}, 1.0, host)

    recs = [rec(0, {"finished": "2026-11-20T10:00:00Z", "commit": "aaaaaaaaaaaa"}),
            rec(1, {"finished": "2026-11-27T06:00:00Z", "commit": "bbbbbbbbbbbb"}), rec(2, {})]
    assert dated_line(recs) == ("records finished 2026-11-20 to 2026-11-27 by commits aaaaaaaaaaaa, bbbbbbbbbbbb; "
                                "1 undated (made before records kept their date)")
    assert dated_line(recs[1:2]) == "records finished 2026-11-27 by commit bbbbbbbbbbbb"
    assert dated_line([Record("x", job, {}, False, "not run", {}, 0.0, {})]) == ""


def test_each_command_is_a_job_type_of_its_own_whose_record_reads_back_as_that_type():
    """Issue 52: a sweep's jobs are typed per command (the fields each reads, no bag of optional ones);
    a job's JSON, as records hold it, reads back as the same job, and keys stay what they were."""
    import dataclasses

    import pytest

    from stackwars_ir.sweep.grid import BenchJob, CaptureJob, DiffJob, Job, MemoryJob, grid_of

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
    assert fields[BenchJob] == {"request", "timeout", "target", "baselines", "profile", "round"}
    assert fields[DiffJob] == {"request", "timeout", "against"}
    capture = next(j for j in grid.jobs if isinstance(j, CaptureJob))
    # the JSON (and with it every record's key) names the other commands' fields empty, as before
    assert capture.as_json()["target"] == "" and capture.as_json()["budget"] == "" and "against" not in capture.as_json()
    with pytest.raises(TypeError):
        DiffJob(capture.request)  # a diff without its other side is not a job
    with pytest.raises(ValueError, match="not a sweep job's command"):
        Job.from_json({"command": "train", "request": capture.as_json()["request"]})


def test_a_data_entrys_key_follows_its_own_table_not_the_other_models_of_its_file(tmp_path, monkeypatch):
    """A .toml adapters file holds many models (benchmarks/zoo/zoo.toml: 24): editing one model's table
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
