"""benchmarks/gpu_check.py (issue 77): the GPU check's CPU dry run, so the script is known to work before a GPU is lent."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow  # two benches of GPT-2 tiny with every native runtime (the measured rounds are the host records)
def test_the_gpu_checks_dry_run_predicts_and_measures_every_runtime_in_one_small_folder(tmp_path, monkeypatch):
    out = tmp_path / "gpu-check"
    # The pipeline, not torch.compile's first call: its second round may load the first's compiled graph
    monkeypatch.setenv("STACKWARS_IR_COMPILE_CACHE", "warm")
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--dry-run", "--models", "gpt2", "--rounds", "2",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert files == ["measured.json", "prediction.md"]  # at most 8: the page and its records alone
    measured = json.loads((out / "measured.json").read_text())
    assert len(measured["gpt2"]) == 2 and not any(r.get("error") for r in measured["gpt2"])
    text = (out / "prediction.md").read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| gpt2 |")]
    assert [r.split(" | ")[1] for r in rows] == ["jax.jit", "torchax jit", "torch eager", "torch.compile"]
    for r in rows:  # host and kernels with their intervals across the 2 rounds, a range, a verdict
        cells = r.strip("| ").split(" | ")
        assert "[" in cells[2] and "[" in cells[3] and "-" in cells[4] and "[" in cells[5], r
        assert cells[6] == "inside" or "x the serial prediction" in cells[6] or "below the overlapped" in cells[6], r
    assert "measured on **" in text and "(cpu, tiny size)" in text


def test_a_bench_that_would_end_past_the_budget_is_not_begun(tmp_path, capsys):
    from gpu_check import measure

    got = measure(["gpt2"], 2, "tiny", "cpu", tmp_path, None, budget_s=0.0)
    assert got == {"gpt2": []} and "not begun: the budget (0 s) would run out" in capsys.readouterr().err
