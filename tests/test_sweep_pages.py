"""sweep pages: the tables, summary lines and findings pages rendered from a sweep's records."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from stackwars_ir.cli.commands import main
from stackwars_ir.sweep.job_types import BenchJob
from test_sweep_run import SMALL


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
    """study/run/zoo.py's verdicts from three programs: torchax fewer ops in 1, the same fusions in 2, faster
    by more than 10% in 1, slower in 1, within 10% in 1, and the geometric mean of the time ratios."""
    from study import zoo

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
    """benchmarks/zoo_repeat.py on the page study/run/zoo.py wrote (docs/findings-zoo.md): every row of
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
def test_the_memory_page_is_a_rendering_of_its_results_folder(tmp_path, monkeypatch, capsys):
    """study/run/memory.py as a sweep: cells from the records (a route no abstract capture can take is a
    cell that says why, not a job), the slice table from the mesh jobs; --render rebuilds the same
    tables from the folder, running nothing."""
    from study.run import memory as findings_memory

    from study import memory_page

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
    assert "Sweep: 6 jobs, 0 failed; records finished " in page
    assert "  - torch-torch_xla: no plan (bfloat16: not captured [1]): this page says nothing" in page
    assert "  - jax: bfloat16: fits at batch 1 (largest " in page and "so the IR is cleared in bfloat16 only" in page

    rendered = memory_page(findings_memory.run(grid, tmp_path / "r", jobs=2, render=True))
    assert rendered == page  # the page says what its records hold, not what a run computed (issue 76)
    assert "| record |" not in page  # every record made on one day by one commit: the header says so once
    # Issue 76: the driver keeps the finished records (benchmarks/records/findings-memory by default), and
    # a fresh machine's empty results folder renders the same page from them alone
    kept = tmp_path / "kept"
    for results in (tmp_path / "r", tmp_path / "fresh"):
        monkeypatch.setattr(sys, "argv", ["memory", "--grid", str(grid), "--results", str(results), "--render",
                                          "--kept", str(kept)])
        findings_memory.main()
        assert sorted(p.name for p in kept.glob("*.json.xz")) == \
            sorted(p.name + ".xz" for p in (tmp_path / "r" / "jobs").glob("*.json"))
    again = capsys.readouterr().out.split("# The study's OOM rows")[-1]
    assert "# The study's OOM rows" + again == page  # byte for byte, from the kept records alone
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


def test_the_memory_reading_is_worded_per_route_and_per_dtype():
    """The memory page's verdict for each route: fits in every dtype planned (the OOM is outside the
    executable), fits in one dtype only (the study's dtype decides), OOM wherever planned, or no plan
    (the page says nothing of that route); never one verdict for routes that were not planned."""
    from stackwars_ir.bench.memory import Budget
    from study.memory import Cell, reading

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


@pytest.mark.slow  # over 20 s here (issue 52)
def test_the_main_findings_page_is_a_rendering_of_its_results_folder(tmp_path):
    """study/run/findings.py as a sweep: GPT-2's captures diffed and timed beside jax.jit in one job, profiled, the
    page's sections from the records; --render rebuilds the same page from the folder, running nothing."""
    from study.run import findings

    grid = tmp_path / "findings.toml"
    # runs: each row's steady state 5 runs, not adaptive (up to 10 s a row on a busy test machine)
    grid.write_text('[[grid]]\ncommands = ["bench", "diff"]\nmodels = ["gpt2"]\nbaselines = ["jax"]\nprofile = 2\n'
                    'runs = 5\n')
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
    # The page says what its records hold (their jobs, dates, commits, noise), not what one run computed,
    # so a page rendered later from them is the same text (issue 76).
    assert rendered == page
    n = len(res.report.records)
    assert f"Sweep: {n} jobs, 0 failed; records finished " in page
    (bench,) = [r.result for r in res.report.records if r.job.command == "bench"]
    assert {e.timing.iterations for _, e in bench.rows} == {5}, "the grid's runs, asked of every row"


@pytest.mark.slow  # over 20 s here (issue 52)
def test_the_programs_page_is_a_rendering_of_its_results_folder(tmp_path):
    """study/run/programs.py as a sweep: a memory plan and a timing per program (unrolled, scan) from the
    records, op counts from the captures they read; --render gives the same tables, running nothing."""
    from types import SimpleNamespace

    from study.run import programs as findings_programs

    from study import programs_page

    grid = tmp_path / "programs.toml"
    memory = '[[grid]]\ncommands = ["memory"]\nmodels = ["llama"]\nsteps = ["train"]\nroutes = ["jax"]\n'
    bench = '[[grid]]\ncommands = ["bench"]\nmodels = ["llama"]\nroutes = ["jax"]\nruns = 10\n'
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
    assert again == page


def test_a_sweeps_tables_put_a_repeated_jobs_rounds_together_with_their_interval():
    """report/sweep.py: each round's row names its round, and one row per pair of a repeated job's rows
    gives the ratio in each round and across them; a round whose row failed is left out of the ratio."""
    from types import SimpleNamespace

    from stackwars_ir.report.sweep import sweep_tables
    from stackwars_ir.sweep.job_types import BenchJob
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.workload import Request

    req = Request("ffn", framework="both").validated()

    def record(rnd, jax_s, xla_s):
        rows = [_row("jax.mlir", jax_s), _row("torch-torch_xla.mlir", xla_s)]
        return Record(f"k{rnd}", BenchJob(req, target="cpu", round=rnd), {}, True, "", _bench(rows), 1.0, {})

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
    from study.programs import _cpu_findings

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
    rec = [Record(f"k{i}", job, {}, True, "", None, 1.0, {"cpus": 2, **({"noise": n} if n is not None else {})})
           for i, n in enumerate((0.21, None, 0.72))]
    assert noise_line(rec[:2]) == "machine noise before the 1 timed job: 21% (quiet under 50%)"
    assert noise_line(rec) == ("machine noise before the 2 timed jobs: 21%-72% (quiet under 50%); 1 timed on a noisy "
                               "machine: their times are not comparable with a quiet run's (sweep --retry-noisy "
                               "runs them again): ffn-tiny forward jax b2")  # issue 53: the noisy rows named
    assert noise_line(rec[1:2]) == ""
    timed = [Record(f"k{i}", job, {}, True, "", None, 1.0, {"noise": 0.2, "probe_ms": ms}) for i, ms in enumerate((31.5, 36.2))]
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
    bench = next(j for j in jobs if isinstance(j, BenchJob))
    capture = next(j for j in jobs if not isinstance(j, BenchJob))

    def rec(job, noise, *spreads):
        rows = _bench([_row(f"{i}.mlir", 1e-3, s) for i, s in enumerate(spreads)]) if isinstance(job, BenchJob) else None
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
    records = [Record(k, j, here, True, "", None, 1.0, h | {"noise": 0.2}) for (j, k), h in zip(benches, hosts)]
    records.append(Record("x", benches[0][0], here, True, "", None, 1.0, other | {"noise": 0.2, "probe_ms": 80.0}))
    assert [r.key for r in slowed(records)] == [benches[2][1]]
    assert noisy_keys(records) == {benches[2][1]}
    assert noise_line(records).endswith(
        "; 1 more on a slowed machine (the chain 1.5x the fastest or more) (sweep --retry-noisy runs them again): "
        "ffn-tiny forward jax b4")  # the slowed record, named
    assert not slowed(records[:2] + [Record("c", grid.jobs[0], here, True, "", None, 1.0, cpu | {"probe_ms": 99.0})])
    for rec in records[:4]:
        write_record(tmp_path, rec)
    for job, key in ((j, j.key(here)) for j in grid.jobs if j.command == "capture"):
        write_record(tmp_path, Record(key, job, here, True, "", None, 1.0, cpu))
    assert not run_sweep(grid, tmp_path, render_only=True).pending
    again = run_sweep(grid, tmp_path, render_only=True, retry_noisy=True)
    assert [r.key for r in again.pending] == [benches[2][1]]


def test_a_pages_records_say_when_and_by_which_code_they_were_made():
    """issue 53: a page rendered from older records said "this run" of them; each record now keeps its
    date and commit, and the summary line names them."""
    from stackwars_ir.sweep.grid import grid_of
    from stackwars_ir.sweep.jobs import Record
    from stackwars_ir.report.sweep import dated_line

    job = grid_of([{"commands": ["capture"], "models": ["ffn"], "routes": ["jax"]}]).jobs[0]

    def rec(i, host):
        return Record(f"k{i}", job, {}, True, "", None, 1.0, host)

    recs = [rec(0, {"finished": "2026-11-20T10:00:00Z", "commit": "aaaaaaaaaaaa"}),
            rec(1, {"finished": "2026-11-27T06:00:00Z", "commit": "bbbbbbbbbbbb"}), rec(2, {})]
    assert dated_line(recs) == ("records finished 2026-11-20 to 2026-11-27 by commits aaaaaaaaaaaa, bbbbbbbbbbbb; "
                                "1 undated (made before records kept their date)")
    assert dated_line(recs[1:2]) == "records finished 2026-11-27 by commit bbbbbbbbbbbb"
    assert dated_line([Record("x", job, {}, False, "not run", None, 0.0, {})]) == ""
    # a job whose worker was killed (for memory) after 182 s: no host to date it, and no older record either
    killed = Record("y", job, {}, False, "its worker died (signal 9)", None, 182.0, {})
    assert dated_line(recs[1:2] + [killed]) == "records finished 2026-11-27 by commit bbbbbbbbbbbb"


def _row(file: str, steady: float | None, spread: float = 0.0):
    """A bench row of the StableHLO file `file` timed at `steady` seconds (None: failed) whose steady
    runs spread `spread` ((p90 - p10) / median)."""
    from stackwars_ir.bench.executable import Executable
    from stackwars_ir.bench.timing import Timing

    if steady is None:
        return Executable(file, "stablehlo", 0.1, None, error="failed")
    return Executable(file, "stablehlo", 0.1, Timing(steady, steady, steady, steady, steady * (1 + spread), 10, 2))


def _bench(rows: list):
    """A bench job's result holding `rows` (bench.executable.Executable) on the CPU."""
    from stackwars_ir.bench.result import BenchReport

    return BenchReport("cpu", tuple((None, e) for e in rows))


@pytest.mark.parametrize("page", ["zoo", "host", "ablations", "findings", "programs", "memory"])
def test_a_committed_findings_page_renders_byte_for_byte_from_its_kept_records(page, tmp_path, monkeypatch, capsys):
    """Issue 76: a committed findings page is what its records, kept in benchmarks/records, render into
    on a fresh machine (an empty results folder, nothing recomputed): the text names the records' days,
    commits and machine, never the renderer's nor its results folder. (The main page also diffs its
    kept captures, benchmarks/records/findings-captures, again; test_the_memory_page_... checks the
    memory page's round trip on a small grid too.)"""
    import importlib
    import importlib.util
    import shutil

    records = {"programs": "findings-programs", "memory": "findings-memory"}.get(page, page)
    if page in ("findings", "programs", "memory") and importlib.util.find_spec("libtpu") is None:
        # their TPU v6e jobs' keys name libtpu's version (the stack): without it they are "not run yet"
        pytest.skip(f"docs/{'findings' if page == 'findings' else 'findings-' + page}.md's records were made with "
                    "libtpu (`make setup-tpu`)")
    root = Path(__file__).resolve().parents[1]
    driver = importlib.import_module(f"study.run.{page}")
    args = [page, "--results", str(tmp_path / "r"), "--render"]
    if page != "ablations":  # its kept records are restored from benchmarks/records/ablations, never written there
        kept = tmp_path / "kept"
        shutil.copytree(root / "benchmarks" / "records" / records, kept)
        if page in ("findings", "programs"):  # the captures the page reads (findings: sections 10 and 11
            # diff them; programs: counts their ops), kept beside the records
            shutil.copytree(root / "benchmarks" / "records" / f"findings{'-programs' if page == 'programs' else ''}"
                            "-captures", tmp_path / "kept-captures")
        args += ["--kept", str(kept)]
    monkeypatch.setattr(sys, "argv", args)
    monkeypatch.chdir(root)
    driver.main()
    doc = "findings.md" if page == "findings" else f"findings-{page}.md"
    assert capsys.readouterr().out == (root / "docs" / doc).read_text()


VERSIONS_PAGES = {"jax": ("", "findings-versions.md"), "pytorch": ("--pytorch", "findings-versions-torch.md"),
                  "torchax": ("--torchax", "findings-versions-torchax.md"), "upgrade": ("--upgrade", "findings-upgrade.md")}


@pytest.mark.parametrize("page", sorted(VERSIONS_PAGES))
def test_a_committed_versions_page_renders_byte_for_byte_from_its_kept_record(page, tmp_path, monkeypatch, capsys):
    """Issue 76: a versions page (`make findings-versions`) is what its record, kept in
    benchmarks/records/versions, renders into on a fresh machine: no version stack made, nothing measured,
    the record's day, machine and lock named."""
    import shutil

    from study.run import versions

    root = Path(__file__).resolve().parents[1]
    flag, doc = VERSIONS_PAGES[page]
    if not (root / "benchmarks" / "records" / "versions" / f"{page}.json.xz").exists():
        pytest.skip(f"docs/{doc} was made before its pages kept records (`make findings-versions` keeps one)")
    kept = tmp_path / "kept"
    shutil.copytree(root / "benchmarks" / "records" / "versions", kept)
    monkeypatch.setattr(sys, "argv", ["versions", "--out", str(tmp_path / "out"), "--render", "--kept", str(kept),
                                      *([flag] if flag else [])])
    monkeypatch.chdir(root)
    versions.main()
    assert capsys.readouterr().out == (root / "docs" / doc).read_text()
