"""bench --target tpu-v6e: each kernel's time estimated from the TPU compiler's own cost model (no TPU), and diff --bench splitting the estimated gap by block."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from conftest import golden

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
# The optimized HLO libtpu 0.0.42.1 compiled captures/gpt2-tiny/jax.mlir to for a v6e chip
# (stackwars_ir.bench.planning.Compiler("tpu-v6e"), hlo_modules()[0].to_string()).
TPU_HLO = Path(__file__).parent / "data" / "gpt2-tiny-jax.tpu-v6e.hlo"


def test_every_kernel_gets_the_compilers_cycles_or_a_labelled_bound_and_nothing_is_left_out():
    from stackwars_ir.bench.estimate import CHIPS, estimate_hlo
    from stackwars_ir.bench.kernels import kernels_of

    text = TPU_HLO.read_text()
    chip = CHIPS["tpu-v6e"]
    p = estimate_hlo(text, chip)
    x = p.estimate
    assert [k.name for k in p.kernels] == [k.name for k in kernels_of(text)]
    entry = text[text.index("\nENTRY "):]
    cycles = [int(c) for c in re.findall(r'"estimated_cycles":"(\d+)"', entry)]
    assert x["estimated"] == len(cycles) and x["estimated_s"] == pytest.approx(sum(cycles) / chip.clock_hz)
    assert x["estimated"] + x["bounded"] + x["async"] + x["free"] == x["kernels"] == len(p.kernels)
    assert {k.how for k in p.kernels} <= {"estimate", "bound", "async", "free"}
    assert x["serial_s"] == pytest.approx(sum(k.seconds for k in p.kernels))
    assert p.wall_s == max(x["serial_s"], x["async_bound_s"]) and p.runs == 0 and "not measured" in p.note
    # The embedding's gather reads a few rows of its table: its bound is its rows, not the table.
    gather = next(k for k in p.kernels if k.name == "gather_fusion")
    assert gather.how == "bound" and gather.path == "wte"
    rows, table = 32 * 64 * 4, 512 * 64 * 4  # f32[32,64] gathered from wte f32[512,64]
    assert 2 * rows / chip.hbm_bytes_per_s <= gather.seconds < 3 * rows / chip.hbm_bytes_per_s < table / chip.hbm_bytes_per_s
    assert chip.clock_hz == pytest.approx(1.75e9, rel=0.01)
    assert CHIPS["tpu-v5e"].clock_hz == pytest.approx(1.5e9, rel=0.01)  # v5e's known 1.5 GHz: the rule holds


def test_bench_target_refuses_what_it_cannot_do_in_one_line(cli):
    a = golden("gpt2", "jax")
    for args, words in ((("--target", "tpu-v4"), "no estimates for it"),
                        (("--target", "tpu-v6e", "--runs", "3"), "--runs times runs here"),
                        (("--target", "tpu-v6e", "--profile"), "--profile times runs here")):
        code, out, err = cli("bench", a, *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # captures and compiles models (issue 52: every such test is marked)
@pytest.mark.skipif(not HAS_LIBTPU, reason="needs libtpu (`make setup-tpu`)")
def test_bench_target_then_diff_bench_splits_the_estimated_gap_by_block(cli, tmp_path):
    from stackwars_ir.bench.run import BenchReport

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    bench, diff = tmp_path / "e.json", tmp_path / "d.json"
    code, out, err = cli("bench", a, b, "--target", "tpu-v6e", "--json", bench)
    assert code == 0, err
    assert "ESTIMATES, NOT MEASUREMENTS" in out and "Google publishes no clock" in out
    report = BenchReport.from_json(json.loads(bench.read_text()))
    assert report.backend == "tpu-v6e" and all(e.ok and e.timing is None and e.profile.estimate for _, e in report.rows)
    code, out, err = cli("diff", a, b, "--bench", bench, "--json", diff)
    assert code == 1, err
    assert "ESTIMATES for the TPU v6e, not measurements" in out
    time = json.loads(diff.read_text())["metrics"]["time"]
    for side in ("a", "b"):
        t = time[side]
        assert t["estimate"]["target"] == "TPU v6e"
        blocks = sum(blk["metrics"]["time"][side] for blk in json.loads(diff.read_text())["blocks"])
        assert blocks + t["unattributed_s"] + t["unaligned_s"] == pytest.approx(t["kernels_sum_s"])
        assert t["unattributed_s"] == 0 or t["unattributed"]  # what no block claims is named
    assert time["a"]["unattributed_s"] < 0.1 * time["a"]["kernels_sum_s"]  # JAX's kernels keep their paths


def test_the_estimate_table_is_two_sided_kernels_ratio_bounded_kernels_and_a_sensitivity_line():
    """Issue 54 item 6: beside the run's ratio, the kernels' sum's; the bounded kernels by opcode with
    their bytes; and how far a floor per bounded kernel moves each ratio."""
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.estimate import CHIPS, FLOORS_S, bounded_by_opcode, estimate_hlo, floored_serial
    from stackwars_ir.bench.run import BenchReport
    from stackwars_ir.report.text import estimate_text

    text = TPU_HLO.read_text()
    # The same module with every compiler estimate doubled: its kernels' sum is known from the first's.
    doubled = re.sub(r'"estimated_cycles":"(\d+)"', lambda m: f'"estimated_cycles":"{2 * int(m.group(1))}"', text)
    chip = CHIPS["tpu-v6e"]
    a, b = estimate_hlo(text, chip), estimate_hlo(doubled, chip)
    x = a.estimate
    expected = (2 * x["estimated_s"] + x["bound_s"]) / x["serial_s"]
    assert b.estimate["serial_s"] / x["serial_s"] == pytest.approx(expected)
    groups = bounded_by_opcode(a)
    assert sum(n for _, n, _, _ in groups) == x["bounded"] and sum(s for _, _, s, _ in groups) == \
        pytest.approx(x["bound_s"])
    assert all(nbytes == pytest.approx(s * chip.hbm_bytes_per_s) for _, _, s, nbytes in groups)
    low, high = (floored_serial(a, f) for f in FLOORS_S)
    assert x["serial_s"] <= low <= high and high >= x["estimated_s"] + x["bounded"] * FLOORS_S[1]
    rows = tuple((2, Executable(name, "stablehlo", 1.0, None, profile=p)) for name, p in (("a.mlir", a), ("b.mlir", b)))
    out = estimate_text(BenchReport("cpu", rows))
    assert "kernels vs first" in out and f"{expected:.2f}x" in out
    assert "bounded kernels (no compiler estimate" in out and groups[0][0] in out
    assert "sensitivity:" in out and f"{floored_serial(b, FLOORS_S[1]) / high:.2f}x" in out
