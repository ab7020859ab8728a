"""One answer to "why is B slower than A": the native step gap split into the program's, the host's and the rest's parts, each with its interval (issue 75, item 1)."""
from __future__ import annotations

import json

import pytest

from stackwars_ir.bench import Executable
from stackwars_ir.bench.answer import answer
from stackwars_ir.bench.host import HostPhases, Phase
from stackwars_ir.bench.result import BenchReport
from stackwars_ir.bench.timing import Timing
from stackwars_ir.report.answer import answer_html, answer_markdown, answer_text


def _timing(samples) -> Timing:
    s = sorted(samples)
    return Timing(s[0], s[0], s[len(s) // 2], s[len(s) // 10], s[-len(s) // 10], len(s), 2, {}, tuple(samples))


def _report(shift: float = 0.0, host: bool = True, b_step: float = 16e-3) -> BenchReport:
    """jax.jit at 10 ms a step (0.5 ms of it dispatch), torch_xla lazy at 16 ms (4 ms forward + 1 ms sync);
    both programs 9.5 and 10 ms on one XLA runtime. Each round moved by `shift`."""
    jitter = [0.99, 1.0, 1.01] * 7

    def row(label, kind, step, phases=()):
        h = HostPhases(len(jitter), step, tuple(Phase(n, s, "timer", "", tuple(s * j for j in jitter))
                                                for n, s in phases)) if host and phases else None
        return Executable(label, kind, 0.1, _timing([(step + shift) * j for j in jitter]), host=h)

    return BenchReport("cpu", (
        (2, row("c/jax.mlir", "stablehlo", 9.5e-3)), (2, row("c/torch-torch_xla.mlir", "stablehlo", 10e-3)),
        (2, row("jax.jit (native)", "jax.jit", 10e-3, (("dispatch", 0.5e-3), ("wait", 9.5e-3)))),
        (2, row("torch_xla lazy tensors", "torch_xla lazy", b_step,
                (("forward", 4e-3), ("sync", 1e-3), ("wait", 11e-3)))),
    ), machine={"processor": "test CPU", "cpus": 2})


def test_the_gap_splits_into_parts_that_add_up_to_it():
    one = answer([_report()], source="test")
    assert one.ratio == pytest.approx(1.6) and one.low < 1.6 < one.high and one.rounds == 1
    assert one.step.gap_s == pytest.approx(6e-3)
    assert one.program.gap_s == pytest.approx(0.5e-3) and one.programs == ("jax", "torch-torch_xla")
    assert one.host.gap_s == pytest.approx(4.5e-3) and one.host.b_s == pytest.approx(5e-3)
    assert one.rest.gap_s == pytest.approx(1e-3)
    for p in (one.step, one.program, one.host, one.rest):
        assert p.low_s <= p.gap_s <= p.high_s
    rounds = answer([_report(0.0), _report(0.2e-3), _report(-0.1e-3)], source="test")
    assert rounds.rounds == 3 and rounds.host.gap_s == pytest.approx(4.5e-3)
    assert rounds.step.gap_s == pytest.approx(rounds.program.gap_s + rounds.host.gap_s + rounds.rest.gap_s)
    text = answer_text(rounds)
    assert text.startswith("torch_xla lazy tensors took 1.6")
    assert "The host's work per step explains +4.50 ms" in text and "75% of the gap" in text
    assert "3 rounds, each a bench in fresh workers" in text and "test CPU (2 cpus)" in text
    assert "| host | 0.500 | 5.00 | +4.50 |" in answer_markdown(rounds) and "<h2 id=\"why\">" in answer_html(rounds)
    assert "<script" not in answer_html(rounds) and "http" not in answer_html(rounds)
    assert json.loads(json.dumps(rounds.as_json()))["parts"][2]["name"] == "host"


def test_rounds_whose_interval_spans_one_are_called_indistinguishable():
    """Two rounds, B 0.9x then 1.1x A: the one-degree-of-freedom interval holds 1, so no "took" sentence."""
    ans = answer([_report(b_step=9e-3), _report(b_step=11e-3)], source="test")
    assert ans.rounds == 2 and ans.low <= 1 <= ans.high
    text = answer_text(ans)
    assert text.startswith("torch_xla lazy tensors and jax.jit (native) are indistinguishable per steady step")
    assert " took " not in text.split(".")[0] and "per round 0.90x, 1.10x" in text


def test_what_the_bench_did_not_measure_is_named_with_its_command():
    ans = answer([_report(host=False)])
    assert ans.host is None and ans.rest is None
    assert "Not measured: the host's work per step (add --host to bench)." in answer_text(ans)


@pytest.mark.slow  # two benches of GPT-2 tiny with both native runtimes and their host phases
def test_why_answers_for_gpt2_tiny_from_two_rounds(cli, tmp_path):
    code, out, err = cli("why", "gpt2", "--size", "tiny", "--rounds", "2", "--runs", "10", "--out", tmp_path / "c",
                         "--json", tmp_path / "w.json")
    assert code == 0, err
    ans = json.loads((tmp_path / "w.json").read_text())
    assert "--baselines jax,torch_xla --runs 10 --host, 2 times" in ans["source"], ans["source"]
    assert ans["rounds"] == 2 and ans["a"] == "jax.jit (native)" and ans["b"] == "torch_xla lazy tensors"
    parts = {p["name"]: p for p in ans["parts"]}
    assert set(parts) == {"step", "program", "host", "rest"}
    # the same programs on one runtime: GPT-2's two captures differ by less than the host's work does
    assert abs(parts["program"]["gap_s"]) < parts["host"]["gap_s"]
    assert parts["step"]["gap_s"] == pytest.approx(parts["program"]["gap_s"] + parts["host"]["gap_s"] +
                                                   parts["rest"]["gap_s"], abs=1e-9)
    assert "The compiled programs explain" in out and "The host's work per step explains" in out
    assert "stackwars-ir bench gpt2 --size tiny" in out
    # two rounds give a t-interval with one degree of freedom: on a busy machine it can span 1, and then
    # the answer must say so (CI's run on a loaded machine did); the sentence follows the interval
    low, high = ans["interval_95"]
    assert low <= ans["ratio"] <= high
    if low <= 1 <= high:
        assert "torch_xla lazy tensors and jax.jit (native) are indistinguishable per steady step" in out
        assert "torch_xla lazy tensors took" not in out
    else:
        assert "torch_xla lazy tensors took" in out and "indistinguishable per steady step" not in out


def test_why_refuses_a_bench_without_both_runtimes(cli, tmp_path):
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps(_report().as_json()))
    code, out, err = cli("why", bench, "--b", "torchax")
    assert code == 2 and "no measured native row 'torchax jit'" in err and len(err.strip().splitlines()) == 1
    assert "stackwars-ir why MODEL --a jax --b torchax" in err  # no capture here names its model
    code, out, err = cli("why", bench)
    assert code == 0 and "torch_xla lazy tensors took 1.6" in out, err
    code, out, err = cli("why", bench, "--runs", "5")  # files were measured already: nothing to ask of them
    assert code == 2 and "--runs asks how a model is benched" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = cli("why", bench, "--rounds", "2")  # each file is a round
    assert code == 2 and "--rounds asks how a model is benched" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # two benches of GPT-2 tiny
def test_the_fix_diff_bench_prints_runs_and_keeps_the_host_phases(cli, tmp_path):
    """issue 75, item 6: `diff A B --bench` on a model's bench (--host, no --profile) suggested
    `bench A.mlir B.mlir --profile`, which has no native rows and so dropped the host phases asked for.
    The fix printed now is the model's bench with --profile added, and the sampling the bench asked for
    (--warmup, --runs, --host RUNS); run as printed, the diff reads it."""
    import re
    import shlex

    caps, first = tmp_path / "caps", tmp_path / "b.json"
    code, _, err = cli("bench", "gpt2", "--size", "tiny", "--baselines", "jax,torch_xla", "--host", "3", "--runs", "5",
                       "--warmup", "1", "--out", caps, "--json", first)
    assert code == 0, err
    # issue 75, item 9: each step with its position, and from the second on the time left
    steps = re.findall(r"stackwars-ir: \[step (\d+) of (\d+), [^\]]* so far(, about [^\]]* left)?\] (\S+)", err)
    assert [(int(k), int(n), what) for k, n, _, what in steps] == \
        [(1, 4, "capturing"), (2, 4, "2"), (3, 4, "jax:"), (4, 4, "torch_xla:")], err
    assert not steps[0][2] and all(left for _, _, left, _ in steps[1:])
    a, b = caps / "gpt2-tiny" / "jax.mlir", caps / "gpt2-tiny" / "torch-torch_xla.mlir"
    code, _, err = cli("diff", a, b, "--bench", first)
    assert code == 2 and "without --profile" in err, err
    fix = re.search(r"\(fix: (stackwars-ir bench .*)\)$", err.strip())[1]
    assert "--profile --host 3" in fix and "--baselines jax,torch_xla" in fix, fix
    assert "--warmup 1 --runs 5" in fix, fix  # the sampling asked for, asked again (adaptive: up to 10 s a row)
    second = tmp_path / "p.json"
    args = shlex.split(fix.replace("FILE", str(second)))[1:]
    code, _, err = cli(*args)
    assert code == 0, err
    steps = re.findall(r"\[step \d+ of \d+, [^\]]*\] (\S+ \S+)", err)
    assert "using the captures of gpt2-tiny" in err  # reused, as --out in the fix says: no capture step
    assert steps == ["2 files,", "jax: compiling", "torch_xla: compiling", "jax.jit (native):", "torch_xla lazy"], err
    code, out, err = cli("diff", a, b, "--bench", second)
    assert code == 1 and "host A" in out and "jax.jit (native): step" in out, err


@pytest.mark.parametrize("sweep", [False, True])
def test_the_printed_fix_reuses_the_captures_where_they_are(tmp_path, sweep):
    """A bench's captures at the adapter's batch sit in OUT/gpt2-tiny, a sweep's in OUT/b2-s16/gpt2-tiny: the fix
    names the folder bench MODEL reads them from, with --batch and --seq only for a sweep's (given
    outside a sweep's folder, --batch would capture the model again elsewhere)."""
    import shutil
    from types import SimpleNamespace

    from conftest import golden
    from stackwars_ir.bench.attach import rerun
    from stackwars_ir.bench.executable import Executable
    from stackwars_ir.bench.result import BenchReport

    out = tmp_path / "caps"
    folder = (out / "b2-s16" if sweep else out) / "gpt2-tiny"
    folder.mkdir(parents=True)
    for stem in ("jax", "torch-torch_xla"):
        for ext in (".mlir", ".json"):
            shutil.copy(golden("gpt2", stem).with_suffix(ext), folder / f"{stem}{ext}")
    bench = BenchReport("cpu", ((2, Executable("jax", "jax.jit", 1.0, None)),))
    result = SimpleNamespace(a=SimpleNamespace(source=str(folder / "jax.mlir")),
                             b=SimpleNamespace(source=str(folder / "torch-torch_xla.mlir")))
    batch = "--batch 2 --seq 16 " if sweep else ""
    assert rerun(bench, result) == (f"stackwars-ir bench gpt2 --size tiny {batch}--baselines jax --out {out} "
                                    "--profile --json FILE")


def test_the_printed_fix_asks_again_for_the_sampling_the_bench_asked_for():
    """A bench run with --warmup 1 --runs 5 (kept in its JSON) is profiled again with the same sampling: its
    fix does not fall back to the adaptive default (up to 10 s a row); a report without the record (an
    older bench's JSON) prints none."""
    from types import SimpleNamespace

    from conftest import golden
    from stackwars_ir.bench.attach import rerun
    from stackwars_ir.bench.executable import Executable
    from stackwars_ir.bench.result import BenchReport
    from stackwars_ir.bench.timing import Asked

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    row = Executable(str(a), "stablehlo", 1.0, None)
    asked = Asked.of(warmup=1, runs=5, host=3)
    kept = BenchReport.from_json(BenchReport("cpu", ((None, row),), asked=asked).as_json())
    assert kept.asked == asked
    result = SimpleNamespace(a=SimpleNamespace(source=str(a)), b=SimpleNamespace(source=str(b)))
    assert rerun(kept, result) == f"stackwars-ir bench {a} {b} --warmup 1 --runs 5 --profile --json FILE"
    old = {k: v for k, v in kept.as_json().items() if k != "asked"}
    assert rerun(BenchReport.from_json(old), result) == f"stackwars-ir bench {a} {b} --profile --json FILE"


def test_why_on_a_bench_without_a_runtime_prints_the_why_that_reuses_its_captures(cli, tmp_path):
    """issue 75, item 6: the fix names the bench's own model, size and captures' folder, by baseline names."""
    import dataclasses
    import shutil

    from conftest import golden

    folder = tmp_path / "caps" / "gpt2-tiny"
    folder.mkdir(parents=True)
    for stem in ("jax", "torch-torch_xla"):
        for ext in (".mlir", ".json"):
            shutil.copy(golden("gpt2", stem).with_suffix(ext), folder / f"{stem}{ext}")
    report = _report()
    rows = tuple((bb, dataclasses.replace(e, label=str(folder / e.label.removeprefix("c/")))
                  if e.kind == "stablehlo" else e) for bb, e in report.rows)
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps(dataclasses.replace(report, rows=rows).as_json()))
    code, _, err = cli("why", bench, "--a", "eager")
    assert code == 2 and (f"(fix: stackwars-ir why gpt2 --size tiny --a eager --b torch_xla --out {tmp_path / 'caps'} "
                          "(it benches both runtimes") in err, err
