"""sweep runs: a grid's jobs on local workers or Ray, each finished job a file, resumable, failures and noise recorded."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from stackwars_ir.cli.commands import main
from stackwars_ir.sweep.job_types import CaptureJob, DiffJob, MemoryJob


# Two routes of a tiny model: 2 captures, 2 memory plans on the CPU, 1 diff.
SMALL = '[[grid]]\ncommands = ["memory", "diff"]\nmodels = ["ffn"]\nroutes = ["jax", "torchax"]\n'


def _sha(root: Path, records) -> dict:
    return {r.job.label: r.result.sha256 for r in records if isinstance(r.job, CaptureJob)}


def _plans(records) -> dict:
    return {r.job.label: [(p.argument_bytes, p.temp_bytes, p.peak_bytes) for p in r.result.plans]
            for r in records if isinstance(r.job, MemoryJob)}


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
    (d1,), (d2,) = ([r.result.as_json()["alignment"] for r in rep.records if isinstance(r.job, DiffJob)]
                    for rep in (local, on_ray))
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
    from stackwars_ir.sweep.job_types import CaptureRecord

    typed = {r.job.command: type(r.result) for r in SweepReport.from_json(summary).records}
    assert typed == {"capture": CaptureRecord, "memory": MemoryReport, "diff": DiffResult}, typed
    for name, mtime in finished.items():
        assert (results / "jobs" / name).stat().st_mtime_ns == mtime  # not written again
    # Each record names the commit of the code that made it (None only outside a git checkout).
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        commits = {json.loads(p.read_text())["host"]["commit"].rstrip("+") for p in (results / "jobs").glob("*.json")}
        assert commits == {head}, commits


def test_a_results_folder_kept_without_its_captures_captures_them_again_the_same_and_recomputes_nothing_else(tmp_path):
    """A sweep's records are small: a results folder published or carried without its captures/ resumes
    by capturing them again (byte for byte the same, by the records' sha256) before anything reads them;
    no other finished job runs again."""
    from stackwars_ir.sweep.execute import captures_gone, run_sweep
    from stackwars_ir.sweep.grid import read_grid

    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    results = tmp_path / "r"
    first = run_sweep(read_grid(grid), results, jobs=1)
    assert first.ran == 5 and not first.failed
    shas = {r.key: r.result.sha256 for r in first.records if r.job.command == "capture"}
    others = {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json") if p.stem not in shas}
    assert len(shas) == 2 and len(others) == 3
    for f in (results / "captures").rglob("*"):
        if f.is_file():
            f.unlink()
    rendered = run_sweep(read_grid(grid), results, render_only=True)  # rendering reads records alone
    assert rendered.ran == 0 and rendered.reused == 5
    again = run_sweep(read_grid(grid), results, jobs=1)
    assert (again.reused, again.ran) == (3, 2) and not again.failed
    assert {r.key: r.result.sha256 for r in again.records if r.job.command == "capture"} == shas
    assert all((results / r.result.file).is_file() for r in again.records if r.job.command == "capture")
    assert {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json") if p.stem not in shas} == others
    # Kept beside the records (study/run/findings.py keeps them): restored, nothing is captured again; a
    # capture whose bytes are not its record's is not kept (a measurement read the recorded bytes).
    from stackwars_ir.sweep.kept import keep_captures, restore_captures

    kept = tmp_path / "kept-captures"
    assert keep_captures(again.records, results, kept) == 4 and keep_captures(again.records, results, kept) == 0
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*.xz")) == sorted(
        f"{r.result.file}{ext}.xz".replace(".mlir.json", ".json")
        for r in again.records if r.job.command == "capture" for ext in ("", ".json"))
    for f in (results / "captures").rglob("*"):
        if f.is_file():
            f.unlink()
    assert restore_captures(kept, results) == 4 and restore_captures(kept, results) == 0
    third = run_sweep(read_grid(grid), results, jobs=1)
    assert (third.reused, third.ran) == (5, 0)
    odd = next(r for r in again.records if r.job.command == "capture")
    (results / odd.result.file).write_text("other bytes")
    assert keep_captures(again.records, results, tmp_path / "k2") == 2  # the other capture alone, with its sidecar
    assert odd.key in captures_gone(again.records, results)  # and the sweep would capture it again


def test_a_finished_job_that_read_other_bytes_than_its_capture_now_holds_runs_again(tmp_path):
    """A capture made again does not always come out byte for byte (its locations name the model code's
    lines: docs/findings.md's six JAX captures after an edit of models/, 2026-11-30). A job's result
    names the bytes it read (Record.sources: sha256); a finished job whose capture now holds other bytes
    runs again (here the JAX side's memory plan and the diff), the others (torchax's plan) do not, also
    when the capture was made again by an earlier run that stopped before them. A result that names no
    bytes: the captures made again in this run with other bytes than their previous record's decide
    (simulated by that record's sha256)."""
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import read_grid

    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    results = tmp_path / "r"
    first = run_sweep(read_grid(grid), results, jobs=1)
    assert first.ran == 5 and not first.failed
    jax = next(r for r in first.records if r.job.command == "capture" and r.job.request.framework == "jax")
    torchax = next(r for r in first.records if r.job.command == "capture" and r.job.request.framework == "torch")
    readers = [r for r in first.records if jax.result.sha256 in r.sources()]
    assert sorted(r.job.command for r in readers) == ["diff", "memory"], readers
    assert not jax.sources() and all(r.sources() for r in first.records if r.job.command != "capture")

    def rerun_since(untouched):
        return {r.job.command + ":" + r.job.request.framework for r in again.records
                if (results / "jobs" / f"{r.key}.json").stat().st_mtime_ns != untouched[f"{r.key}.json"]}

    # The captures as the folder holds them; the two records that read the JAX one say other bytes.
    for r in readers:
        path = results / "jobs" / f"{r.key}.json"
        path.write_text(path.read_text().replace(jax.result.sha256, "0" * 64))
    rendered = run_sweep(read_grid(grid), results, render_only=True)  # a page never shows them as done
    assert sorted(r.job.command for r in rendered.pending) == ["diff", "memory"], rendered.pending
    untouched = {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json")}
    said = []
    again = run_sweep(read_grid(grid), results, jobs=1, progress=said.append)
    assert (again.reused, again.ran) == (3, 2) and not again.failed, said
    assert rerun_since(untouched) == {"memory:jax", "diff:jax"}
    assert any("2 finished job(s) read other bytes than their captures now hold" in m for m in said), said

    # Results that name no bytes: the capture made again with other bytes than its previous record decides.
    for path in (results / "jobs").glob("*.json"):
        text = path.read_text()
        if json.loads(text)["key"] == jax.key:
            text = text.replace(jax.result.sha256, "0" * 64)  # the bytes the jobs read, which will not come out again
        elif json.loads(text)["job"]["command"] != "capture":
            text = text.replace(jax.result.sha256, "").replace(torchax.result.sha256, "")  # names none
        path.write_text(text)
    for f in (results / "captures").rglob("*"):
        if f.is_file():
            f.unlink()
    untouched = {p.name: p.stat().st_mtime_ns for p in (results / "jobs").glob("*.json")}
    again = run_sweep(read_grid(grid), results, jobs=1)
    assert (again.reused, again.ran) == (1, 4) and not again.failed
    assert rerun_since(untouched) == {"capture:jax", "capture:torch", "memory:jax", "diff:jax"}


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
    # a page whose runs retry failed jobs keeps them too, so its render names them on a fresh machine
    with_failed = tmp_path / "kept-failed"
    assert keep(jobs, with_failed, failed=True) == 3 and (with_failed / "c.json.xz").exists()
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


BROKEN = '''"""A linear layer whose inputs cannot be made: its capture fails (tests/test_sweep_run.py)."""
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


def test_a_job_that_asks_for_more_memory_than_the_machine_has_is_not_started(tmp_path, monkeypatch):
    """A job whose memory request passes this machine's memory is a record that says so, and no worker
    is started for it (one would be killed part-way, or take the machine down)."""
    import stackwars_ir.sweep.execute as execute
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of

    monkeypatch.setattr(execute, "host_memory", lambda: 1 << 30)  # the machine's memory as the sweep reads it
    grid = grid_of([{"commands": ["memory"], "models": ["ffn"], "routes": ["jax"], "targets": ["cpu"]}])
    started = time.perf_counter()
    report = run_sweep(grid, tmp_path / "r", jobs=1)
    assert time.perf_counter() - started < 60  # no worker (each imports jax and torch)
    capture, memory = sorted(report.records, key=lambda r: r.job.command)
    assert not capture.ok and capture.error.startswith("not run here: it asks for 3.0 GiB of host memory"), capture.error
    assert "more than this machine's 1.0 GiB" in capture.error
    assert not memory.ok and "not run here: " in memory.error, memory.error


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
                     "baselines": ["jax", "eager"], "profile": 2, "runs": 10}])
    keys = [(j, j.label) for j in grid.jobs]
    order = phases(keys)
    assert [(len(b), alone) for b, alone in order] == [(2, False), (1, False), (1, True)]
    assert order[2][0][0][0].baselines == ("jax", "eager")
    report = run_sweep(grid, tmp_path, jobs=2)
    assert not report.failed, [r.error for r in report.failed]
    bench = next(r for r in report.records if r.job.command == "bench")
    rep = bench.result
    assert isinstance(rep, BenchReport)
    rows = {e.name if e.kind == "stablehlo" else e.kind: e for _, e in rep.rows}
    assert set(rows) == {"jax", "torch-torchax", "jax.jit", "torch eager"}, set(rows)
    assert all(e.ok and e.timing.steady > 0 for e in rows.values())
    assert rows["jax"].profile is not None and rows["torch-torchax"].profile is not None
    assert rep.peaks["flops_per_s"] > 0
    # The captures it timed are the capture jobs' (shared with the diff), not captured again.
    caps = {r.result.sha256 for r in report.records if isinstance(r.job, CaptureJob)}
    assert {rows["jax"].sha256, rows["torch-torchax"].sha256} == caps
    # The timed job measured how steady the machine was before it timed anything; the summary says so.
    assert [r.job.command for r in report.records if "noise" in r.host] == ["bench"]
    assert 0 <= bench.host["noise"] < 100
    assert "machine noise before the 1 timed job: " in summary_line(report)


@pytest.mark.slow
def test_a_bench_together_times_both_pytorch_routes_interleaved_in_one_job_and_the_zoo_reads_each(tmp_path):
    """The zoo's way of timing the two routes against each other: one worker, their steady runs
    taking turns, each executable its own row named by its capture's stem; the zoo page reads each
    route's numbers from that one record."""
    from study import zoo
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.report.sweep import sweep_tables

    grid = grid_of([{"commands": ["diff", "bench"], "models": ["ffn"], "routes": ["torch_xla", "torchax"],
                     "together": True, "runs": 10}])
    report = run_sweep(grid, tmp_path, jobs=2)
    assert not report.failed, [r.error for r in report.failed]
    (bench,) = [r for r in report.records if r.job.command == "bench"]
    results = bench.bench_rows()
    assert [e.name for e in results] == ["torch-torch_xla", "torch-torchax"]
    assert all(e.timing.interleaved == 2 and e.timing.steady > 0 for e in results)
    caps = {r.result.sha256 for r in report.records if isinstance(r.job, CaptureJob)}
    assert {e.sha256 for e in results} == caps
    (title, _, headers, rows), = [t for t in sweep_tables(report) if t[0].startswith("Timings")]
    assert [row[headers.index("route")] for row in rows] == ["torch-torch_xla", "torch-torchax"]
    # issue 53: the page shows the verdict its record holds, and how quiet the machine was for it
    (_, _, vh, verdicts), = [t for t in sweep_tables(report) if t[0] == "Verdicts"]
    (verdict,) = verdicts
    assert {"torch-torch_xla", "torch-torchax"} <= set(verdict[vh.index("verdict")].replace(":", "").split())
    assert verdict[vh.index("machine")].startswith("noise ")
    _, by = zoo.index_records(report)
    row = zoo.row_of(by, "ffn", "forward")
    assert [b["steady"] for b in row["bench"]] == [e.timing.steady for e in results]
    assert all(b["together"] for b in row["bench"])
    assert zoo.how_timed({("ffn", "forward"): row}, "forward").startswith(
        "The two routes' executables were timed in one process, their steady runs taking turns")


@pytest.mark.slow
def test_retry_noisy_runs_again_only_the_timed_jobs_a_noisy_machine_measured(tmp_path):
    """A finished bench whose record says its machine was noisy is kept by a plain resume and run again
    by --retry-noisy; its capture is not."""
    from stackwars_ir.sweep.execute import run_sweep
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import read_record, record_path

    grid = grid_of([{"commands": ["bench"], "models": ["ffn"], "routes": ["jax"], "runs": 10}])
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


def test_a_capture_record_without_a_result_names_no_bytes_and_is_captured_again(tmp_path):
    """Record.capture_sha256: a capture's sha256; None for a capture that kept no result (a record written
    by hand, a failed capture) or another job's record. Such a capture is neither kept (sweep.kept) nor
    trusted as on disk (captures_gone): it is captured again, and nothing raises."""
    from stackwars_ir.sweep.execute import captures_gone
    from stackwars_ir.sweep.grid import read_grid
    from stackwars_ir.sweep.job_types import CaptureRecord
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.sweep.kept import keep_captures

    grid = tmp_path / "small.toml"
    grid.write_text(SMALL)
    jobs = read_grid(grid).jobs
    capture = next(j for j in jobs if isinstance(j, CaptureJob))
    other = next(j for j in jobs if isinstance(j, MemoryJob))
    (tmp_path / "c.mlir").write_text("module {}\n")
    sha = hashlib.sha256(b"module {}\n").hexdigest()
    full = Record("full", capture, {}, True, "", CaptureRecord("c.mlir", sha, 10, None, {}), 1.0, {})
    bare = Record("bare", capture, {}, True, "", None, 1.0, {})
    unnamed = Record("unnamed", capture, {}, True, "", CaptureRecord("c.mlir", None, 10, None, {}), 1.0, {})
    assert full.capture_sha256() == sha
    assert bare.capture_sha256() is None and unnamed.capture_sha256() is None
    assert Record("m", other, {}, True, "", None, 1.0, {}).capture_sha256() is None
    assert captures_gone([full, bare, unnamed], tmp_path) == {"bare"}
    assert keep_captures([full, bare, unnamed], tmp_path, tmp_path / "kept") == 1


def test_a_render_says_which_stack_made_the_records_its_jobs_lack(tmp_path):
    """A results folder rendered under another stack (docs/findings.md's TPU v6e jobs are keyed by libtpu's
    version; a fresh clone has none) lists its jobs as not run yet: the line says why, naming what differs
    between the stack that made their records and this one."""
    from stackwars_ir.report.sweep import summary_line
    from stackwars_ir.sweep.execute import other_stacks, run_sweep
    from stackwars_ir.sweep.grid import read_grid
    from stackwars_ir.sweep.jobs import Record, stack, write_record

    grid_file = tmp_path / "small.toml"
    grid_file.write_text(SMALL)
    grid = read_grid(grid_file)
    here = stack()
    other = {**here, "jax": "0.0.1"}
    results = tmp_path / "r"
    for job in grid.jobs[:3]:
        write_record(results, Record(job.key(other), job, other, True, "", None, 1.0, {}))
    report = run_sweep(grid, results, render_only=True)
    assert len(report.pending) == len(grid.jobs) == 5
    words = f"jax 0.0.1 there, {here['jax']} here"
    assert other_stacks(report) == ((words, 3),)
    assert f"5 not run yet (3 of them have records made by another stack: {words})" in summary_line(report)
    for job in grid.jobs:  # made under this stack: nothing pending, nothing said
        write_record(results, Record(job.key(here), job, here, True, "", None, 1.0, {}))
    again = run_sweep(grid, results, render_only=True)
    assert not again.pending and other_stacks(again) == () and "not run yet" not in summary_line(again)
