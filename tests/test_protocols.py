"""The study's timing protocols (bench.protocols): compiles per step in fresh processes, host work with the device idle, and the page that scores them (study.protocols)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _fresh(workload: str, framework: str, name: str, size: str = "narrow") -> dict:
    """One protocol measured in a process of its own (its compiles are that process's first)."""
    code = ("import json, sys; from stackwars_ir.bench.protocols import measure; "
            f"print(json.dumps(measure({workload!r}, {size!r}, {framework!r}, {name!r}, steady=3).as_json()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PJRT_DEVICE": "CPU"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("framework, name, compiles", [
    ("pytorch", "eval", [1, 0, 0]),
    # The parameters' initialization, pending on the device, is a graph of its own at step 1; the next step
    # reads them as device data: a second graph compiled at step 2, the study's pattern (issue 72).
    ("pytorch", "built-on-device", [1, 1, 0]),
    # AdamW creates its state in the first step: step 2's graph differs from step 1's.
    ("pytorch", "adamw", [1, 1, 0]),
    ("jax", "eval", [1, 0, 0]),
])
def test_a_protocols_compiles_per_step_in_a_fresh_process(framework, name, compiles):
    got = _fresh("gemm", framework, name)
    assert got["error"] == ""
    assert got["compiles"] == compiles
    assert len(got["first"]) == 3 and len(got["trace"]) == len(got["launch"]) == len(got["wait"]) == 3
    assert all(t > 0 for t in got["trace"]) and all(w >= 0 for w in got["wait"])
    assert got["calibration"]["python loop"] > 0 and got["conditions"]["processor"]


def test_jaxs_train_mode_carries_its_key_and_running_statistics_without_compiling_again():
    """ResNet-50's BatchNorm statistics and the dropout key go in and come back each step; fed back, they
    have the same types, so steps 2 and 3 compile nothing (a carried value of another type would)."""
    got = _fresh("resnet50", "jax", "train-mode")
    assert got["error"] == "" and got["compiles"] == [1, 0, 0]
    from stackwars_ir.bench.protocols import protocol

    assert protocol("pytorch", "train-mode").partner == "train-mode"


def test_an_unknown_protocol_is_refused_by_name():
    from stackwars_ir.bench.protocols import protocol

    with pytest.raises(ValueError, match="no protocol pytorch/nonesuch .*pytorch/eval"):
        protocol("pytorch", "nonesuch")


def test_the_narrow_size_keeps_the_base_models_layers_and_heads():
    from stackwars_ir.models import catalog

    for name, keys in (("gpt2", ("n_layer", "n_head")), ("bert", ("num_hidden_layers", "num_attention_heads")),
                       ("resnet50", ("depths",))):
        sizes = catalog()[name].sizes
        assert all(sizes["narrow"][k] == sizes["base"][k] for k in keys), name


def _record(folder: Path, w: str, fw: str, proto: str, r: int, host: float, wait: float = 0.0, compiles=(1, 0, 0),
            size: str = "narrow", loaded: bool = False, trace: float | None = None) -> None:
    t = host if trace is None else trace
    d = {"workload": w, "size": size, "framework": fw, "protocol": proto, "compiles": list(compiles),
         "first": [1.0, 0.1, 0.1], "trace": [t] * 5, "launch": [host - t] * 5, "wait": [wait] * 5,
         "calibration": {"python loop": 0.01, "torch dispatch": 0.0003, "jax dispatch": 0.001},
         "conditions": {"processor": "Test CPU", "cpus": 2, "python": "3.12", "system": "Linux", "load average": 0.5},
         "error": "", "round": r, "made": {"date": "2026-11-29", "commit": "abc1234"}}
    name = f"{w}-{size}-{fw}-{proto}-r{r}{'-loaded' if loaded else ''}.json"
    (folder / name).write_text(json.dumps(d))


def test_ratios_pair_rounds_and_carry_their_interval(tmp_path):
    from study.protocols import protocols_section

    for r, (pt, jx) in enumerate([(0.010, 0.001), (0.012, 0.001), (0.011, 0.001)], 1):
        _record(tmp_path, "gpt2", "pytorch", "eval", r, pt, compiles=(2, 1, 0))
        _record(tmp_path, "gpt2", "jax", "eval", r, jx)
    text = "\n".join(protocols_section(tmp_path, tmp_path / "none", ["gpt2"]))
    row = next(ln for ln in text.splitlines() if ln.startswith("| eval | not waited |"))
    mean = math.exp(sum(math.log(v) for v in (10, 12, 11)) / 3)
    assert row.startswith(f"| eval | not waited | {mean:.1f}x [")
    assert "| GPT-2 small | yes | 2, 1, 0 |" in text  # the study's GPT-2 recompiles at step 2, and so does this
    assert "**eval** (closest variant: waited): pattern yes; ratios no: GPT-2 small off by 2.8" in text
    assert "**adamw**: pattern cannot be told (no run); ratios: fewer than two pairs" in text
    assert "- Ratios within 2x of the study's on all of the models (GPT-2 small): no protocol." in text
    assert "- Compiling again at step 2 on every model, as the study's second runs imply: eval." in text
    assert "Test CPU, 2 cpus" in text and "2026-11-29 (commit abc1234)" in text

    from page_claims import claims

    assert claims(text, "findings-host.md") == []


def test_a_ratio_table_cell_without_an_interval_fails_page_claims():
    from page_claims import claims

    page = ("| protocol | variant | GPT-2 small |\n|---|---|---|\n| **the study** | | **39.4x** |\n"
            "| eval | waited | 12.0x (1 round) |\n| eval | not waited | 12.0x [13.0-14.0] |\n")
    found = claims(page, "findings-host.md")
    assert any("without an interval" in c for c in found) and any("outside its own interval" in c for c in found)
    assert len(found) == 2  # the study's own row is its published figure


def test_one_host_factor_is_recovered_from_cells_that_follow_it():
    from study.protocols import fit_factor

    cells = [(h, d, 2.0 * h + d) for h, d in ((0.001, 0.0005), (0.02, 0.0001), (0.004, 0.002))]
    f, fit, worst = fit_factor(cells)
    assert f == pytest.approx(2.0, rel=0.01) and fit == pytest.approx(1.0, abs=0.01) and worst < 1.01


def test_the_load_section_says_whether_idle_and_loaded_rounds_overlap(tmp_path):
    from study.protocols import protocols_section

    for r, (idle, busy) in enumerate([(0.030, 0.060), (0.031, 0.062), (0.029, 0.061)], 1):
        _record(tmp_path, "gpt2", "pytorch", "eval", r, idle, size="base")
        _record(tmp_path, "gpt2", "pytorch", "eval", r, busy, size="base", loaded=True)
        _record(tmp_path, "gpt2", "pytorch", "eval", r, 0.010)
        _record(tmp_path, "gpt2", "jax", "eval", r, 0.001)
    text = "\n".join(protocols_section(tmp_path, tmp_path / "none", ["gpt2"]))
    assert "the intervals do not overlap: the load multiplies host work by 2.0" in text and "Python loop 10.0 ms" in text
    assert "Paused" not in text  # no paused rounds there
    assert "| GPT-2 small | pytorch eval |" in text  # base against narrow


def test_an_older_stacks_records_are_compared_with_the_locks_and_kept_apart(tmp_path):
    from study.protocols import load_runs, protocols_section

    for r, (lock, old) in enumerate([(0.010, 0.020), (0.011, 0.021), (0.012, 0.023)], 1):
        _record(tmp_path, "gpt2", "pytorch", "eval", r, lock)
        _record(tmp_path, "gpt2", "jax", "eval", r, 0.001)
        d = json.loads((tmp_path / f"gpt2-narrow-pytorch-eval-r{r}.json").read_text())
        d.update(stack="torch-old", trace=[old] * 5, conditions=dict(d["conditions"], torch="2.0.0"))
        (tmp_path / f"gpt2-narrow-pytorch-eval-r{r}-stack-torch-old.json").write_text(json.dumps(d))
    assert [r.median("host") for r in load_runs(tmp_path)[("gpt2", "narrow", "pytorch", "eval", "idle")]] == \
        pytest.approx([0.010, 0.011, 0.012])  # the stack's records are not the lock's rounds
    text = "\n".join(protocols_section(tmp_path, tmp_path / "none", ["gpt2"]))
    assert "### An older stack: torch-old (torch 2.0.0)" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| GPT-2 small | narrow | pytorch eval |"))
    assert "| the stack slower |" in row and "| 1.9" in row
    assert "not interleaved" in text


def test_an_older_stack_is_compared_with_the_locks_rounds_run_beside_it_when_there_are_some(tmp_path):
    """python -m study.run.protocols --stack runs the lock's same job right after each of the stack's
    (records marked `beside`): those rounds, not the lock's of another time, are the ratio's other side."""
    from study.protocols import load_runs, protocols_section

    for r, (lock, beside, old) in enumerate([(0.010, 0.020, 0.020), (0.011, 0.021, 0.021), (0.012, 0.023, 0.023)], 1):
        _record(tmp_path, "gpt2", "pytorch", "eval", r, lock)
        _record(tmp_path, "gpt2", "jax", "eval", r, 0.001)
        d = json.loads((tmp_path / f"gpt2-narrow-pytorch-eval-r{r}.json").read_text())
        (tmp_path / f"gpt2-narrow-pytorch-eval-r{r}-beside-torch-old.json").write_text(
            json.dumps(dict(d, beside="torch-old", trace=[beside] * 5)))
        d.update(stack="torch-old", trace=[old] * 5, conditions=dict(d["conditions"], torch="2.0.0"))
        (tmp_path / f"gpt2-narrow-pytorch-eval-r{r}-stack-torch-old.json").write_text(json.dumps(d))
    runs = load_runs(tmp_path)
    assert len(runs[("gpt2", "narrow", "pytorch", "eval", "idle")]) == 3  # the beside rounds are kept apart
    assert len(runs[("gpt2", "narrow", "pytorch", "eval", "beside torch-old")]) == 3
    text = "\n".join(protocols_section(tmp_path, tmp_path / "none", ["gpt2"]))
    assert "the rounds interleaved" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| GPT-2 small | narrow | pytorch eval |"))
    assert "| indistinguishable |" in row and "| 1.000x" in row  # against the idle rounds it would read 1.9x slower


def _bench_host_record(folder: Path, r: int, condition: str, forward: float, sync: float) -> None:
    """A record of the previous page's protocol (study/run/protocols.py run_previous): the kept
    GPT-2 base bench report's shape, torch_xla lazy's steady forward and sync set to the given seconds."""
    import lzma

    kept = ROOT / "benchmarks" / "records" / "host-protocols" / "gpt2-base-bench-host-r1-idle.json.xz"
    d = json.loads(lzma.decompress(kept.read_bytes()))
    row = next(e for e in d["bench"]["results"] if e["kind"] == "torch_xla lazy")
    for ph in row["host"]["phases"]:
        if not ph.get("parent"):
            ph["seconds"] = {"forward": forward, "sync": sync}.get(ph["name"], ph["seconds"])
    d.update(round=r, condition=condition)
    (folder / f"gpt2-base-bench-host-r{r}-{condition}.json").write_text(json.dumps(d))


def test_the_previous_pages_protocol_in_rounds_is_judged_idle_against_loaded(tmp_path):
    from study.protocols import _previous_lines, previous_rounds

    for r, f in enumerate((0.010, 0.011, 0.012), 1):
        _bench_host_record(tmp_path, r, "idle", f, 0.002)
        _bench_host_record(tmp_path, r, "loaded", 2 * f, 0.004)
    got = previous_rounds(tmp_path)
    assert [x[1] for x in got["idle"]] == pytest.approx([0.010, 0.011, 0.012])
    assert len(got["loaded"]) == 3
    (line,) = _previous_lines(tmp_path, None, 0.0094)
    assert "the load multiplies it by 2.000x [2.000-2.000] (rounds paired)" in line
    assert "forward 11.0 [8.746-13.8] + sync 2.000" in line and "lies below that interval, its mean 1.380x the record" in line
    assert load_runs_of(tmp_path) == {}  # never read as a step protocol's record


def load_runs_of(folder):
    from study.protocols import load_runs

    return load_runs(folder)
