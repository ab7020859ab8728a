"""ablate: each rewrite's IR exactly, every rewrite and transplant keeping the outputs of the golden captures it applies to, a wrong one caught, and the command's answers."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import CAPTURES, golden

BN = """func.func @main(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %o: tensor<3xf32>) -> tensor<2x3xf32> {
  %y, %m, %v = "stablehlo.batch_norm_training"(%x, %s, %o) {epsilon = 1.0e-05 : f32, feature_index = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3xf32>
}
"""
BN_SPELLED = """\
%cst = stablehlo.constant dense<2.000000e+00> : tensor<3xf32>
%cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
%0 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
%1 = stablehlo.divide %0, %cst : tensor<3xf32>
%2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
%3 = stablehlo.subtract %arg0, %2 : tensor<2x3xf32>
%4 = stablehlo.multiply %3, %3 : tensor<2x3xf32>
%cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
%5 = stablehlo.reduce(%4 init: %cst_1) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
%6 = stablehlo.divide %5, %cst : tensor<3xf32>
%cst_2 = stablehlo.constant dense<9.99999974E-6> : tensor<3xf32>
%7 = stablehlo.add %6, %cst_2 : tensor<3xf32>
%8 = stablehlo.rsqrt %7 : tensor<3xf32>
%9 = stablehlo.multiply %8, %arg1 : tensor<3xf32>
%10 = stablehlo.broadcast_in_dim %9, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
%11 = stablehlo.multiply %3, %10 : tensor<2x3xf32>
%12 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
%13 = stablehlo.add %11, %12 : tensor<2x3xf32>
return %13 : tensor<2x3xf32>"""

FLAT = """func.func @main(%x: tensor<2x4x8xf32>, %w: tensor<8x5xf32>) -> tensor<2x4x5xf32> {
  %0 = stablehlo.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x5xf32>) -> tensor<8x5xf32>
  %2 = stablehlo.reshape %1 : (tensor<8x5xf32>) -> tensor<2x4x5xf32>
  return %2 : tensor<2x4x5xf32>
}
"""
FLAT_KEPT = """\
%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [2] x [0] : (tensor<2x4x8xf32>, tensor<8x5xf32>) -> tensor<2x4x5xf32>
%1 = stablehlo.reshape %0 : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
%2 = stablehlo.reshape %1 : (tensor<8x5xf32>) -> tensor<2x4x5xf32>
return %2 : tensor<2x4x5xf32>"""

# A weight gradient: x^T dy over the flattened batch and sequence (a contracting dimension merged
# alike on both operands), and a product whose contracting dimension only one side merged (kept).
GRAD = """func.func @main(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x5xf32>, %h: tensor<2x4x2x3xf32>, %w: tensor<6x5xf32>) -> (tensor<8x5xf32>, tensor<8x5xf32>) {
  %0 = stablehlo.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.reshape %dy : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [0] x [0] : (tensor<8x8xf32>, tensor<8x5xf32>) -> tensor<8x5xf32>
  %3 = stablehlo.reshape %h : (tensor<2x4x2x3xf32>) -> tensor<8x6xf32>
  %4 = stablehlo.dot_general %3, %w, contracting_dims = [1] x [0] : (tensor<8x6xf32>, tensor<6x5xf32>) -> tensor<8x5xf32>
  return %2, %4 : tensor<8x5xf32>, tensor<8x5xf32>
}
"""
GRAD_KEPT = """\
%0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [0, 1] x [0, 1] : (tensor<2x4x8xf32>, tensor<2x4x5xf32>) -> tensor<8x5xf32>
%1 = stablehlo.reshape %arg2 : (tensor<2x4x2x3xf32>) -> tensor<2x4x6xf32>
%2 = stablehlo.dot_general %1, %arg3, contracting_dims = [2] x [0] : (tensor<2x4x6xf32>, tensor<6x5xf32>) -> tensor<2x4x5xf32>
%3 = stablehlo.reshape %2 : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
return %0, %3 : tensor<8x5xf32>, tensor<8x5xf32>"""

EMB = """func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %c = stablehlo.constant dense<[0, 1, 2]> : tensor<3xui32>
  %0 = "stablehlo.gather"(%t, %c) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<10x4xf32>, tensor<3xui32>) -> tensor<3x4xf32>
  %1 = stablehlo.convert %i : (tensor<3xi64>) -> tensor<3xui32>
  %2 = "stablehlo.gather"(%t, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<10x4xf32>, tensor<3xui32>) -> tensor<3x4xf32>
  return %0, %2 : tensor<3x4xf32>, tensor<3x4xf32>
}
"""
EMB_TAKE = """\
%0 = stablehlo.iota dim = 0 : tensor<3xui32>
%1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<10x4xf32>, tensor<3xui32>) -> tensor<3x4xf32>
%c = stablehlo.constant dense<0> : tensor<3xi64>
%2 = stablehlo.compare LT, %arg1, %c : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
%c_0 = stablehlo.constant dense<10> : tensor<3xi64>
%3 = stablehlo.add %arg1, %c_0 : tensor<3xi64>
%4 = stablehlo.select %2, %3, %arg1 : tensor<3xi1>, tensor<3xi64>
%5 = "stablehlo.gather"(%arg0, %4) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
return %1, %5 : tensor<3x4xf32>, tensor<3x4xf32>"""


# The other way round (A flattens, B does not): JAX's rank-3 product, its weight gradient and a
# batched attention product, each merged as torch_xla writes them.
KEPT = """func.func @main(%x: tensor<2x4x8xf32>, %w: tensor<8x5xf32>, %dy: tensor<2x4x5xf32>, %q: tensor<2x3x4x8xf32>, %k: tensor<2x3x6x8xf32>) -> (tensor<2x4x5xf32>, tensor<8x5xf32>, tensor<2x3x4x6xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<2x4x8xf32>, tensor<8x5xf32>) -> tensor<2x4x5xf32>
  %1 = stablehlo.dot_general %x, %dy, contracting_dims = [0, 1] x [0, 1] : (tensor<2x4x8xf32>, tensor<2x4x5xf32>) -> tensor<8x5xf32>
  %2 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>) -> tensor<2x3x4x6xf32>
  return %0, %1, %2 : tensor<2x4x5xf32>, tensor<8x5xf32>, tensor<2x3x4x6xf32>
}
"""
KEPT_MERGED = """\
%0 = stablehlo.reshape %arg0 : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
%1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x5xf32>) -> tensor<8x5xf32>
%2 = stablehlo.reshape %1 : (tensor<8x5xf32>) -> tensor<2x4x5xf32>
%3 = stablehlo.reshape %arg0 : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
%4 = stablehlo.reshape %arg2 : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
%5 = stablehlo.dot_general %3, %4, contracting_dims = [0] x [0] : (tensor<8x8xf32>, tensor<8x5xf32>) -> tensor<8x5xf32>
%6 = stablehlo.reshape %arg3 : (tensor<2x3x4x8xf32>) -> tensor<6x4x8xf32>
%7 = stablehlo.reshape %arg4 : (tensor<2x3x6x8xf32>) -> tensor<6x6x8xf32>
%8 = stablehlo.dot_general %6, %7, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<6x4x8xf32>, tensor<6x6x8xf32>) -> tensor<6x4x6xf32>
%9 = stablehlo.reshape %8 : (tensor<6x4x6xf32>) -> tensor<2x3x4x6xf32>
return %2, %5, %9 : tensor<2x4x5xf32>, tensor<8x5xf32>, tensor<2x3x4x6xf32>"""


def _body(text: str) -> str:
    """The entry function's ops, locations dropped, one per line."""
    lines = [re.sub(r"\s*loc\([^()]*(\([^()]*\))?[^()]*\)", "", x).strip() for x in text.splitlines()]
    start = next(i for i, x in enumerate(lines) if x.startswith("func.func")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("source, rewrite, expected", [(BN, "norm", BN_SPELLED), (FLAT, "flatten", FLAT_KEPT),
                                                       (GRAD, "flatten", GRAD_KEPT), (EMB, "embedding", EMB_TAKE)])
def test_each_rewrite_writes_the_other_form_exactly(tmp_path, source, rewrite, expected):
    from stackwars_ir.ablate import rewrite_file

    path = tmp_path / "b.mlir"
    path.write_text(source)
    text, (done,) = rewrite_file(path, (rewrite,))
    assert _body(text) == expected
    assert done.sites >= 1


def test_flatten_runs_the_other_way_where_only_a_flattens(tmp_path):
    """flatten reversed writes torch_xla's form exactly; on GPT-2 (torch_xla as A, JAX as B) the
    variant keeps B's outputs and the diff's flattening difference shrinks."""
    from stackwars_ir.ablate import check_variant, make_variants, rewrite_file

    path = tmp_path / "b.mlir"
    path.write_text(KEPT)
    text, (done,) = rewrite_file(path, ("flatten",), ("flatten",))
    assert _body(text) == KEPT_MERGED and done.sites == 3 and done.rewrite == "flatten (reverse)"
    a, b = golden("gpt2", "torch-torch_xla"), golden("gpt2", "jax")
    variants, skipped = make_variants(a, b, tmp_path / "v", ("flatten",))
    (v,) = variants
    assert list(v.sites) == ["flatten (reverse)"] and v.sites["flatten (reverse)"] >= 10
    check = check_variant(b, Path(v.path))
    assert check.ok, check
    before, after = v.findings["flattening"]
    assert after < before, v.findings


def _pairs():
    """Every golden PyTorch capture beside its JAX twin (forward and training step)."""
    for b in sorted(CAPTURES.glob("*/torch-*.mlir")):
        a = b.parent / ("jax-train.mlir" if b.stem.endswith("-train") else "jax.mlir")
        if a.exists():
            yield pytest.param(a, b, id=f"{b.parent.name}/{b.stem}")


@pytest.mark.parametrize("a, b", list(_pairs()))
def test_every_rewrite_keeps_the_outputs_and_removes_only_its_findings(tmp_path, a, b):
    """On every golden capture a rewrite applies to: the variant computes B's outputs within B's
    parity tolerance on B's own weights and inputs, the findings it aims at drop, and no other
    finding of A against B appears or goes."""
    from stackwars_ir.ablate import check_variant, make_variants

    variants, skipped = make_variants(a, b, tmp_path)
    for v in variants:
        assert v.error is None, v.error
        check = check_variant(b, Path(v.path))
        assert check.ok and check.error is None, (v.name, check)
        assert "capture" in check.arguments  # B's own weights, not synthetic ones
        # no finding of any block appears or goes (whole-module ones are listed: a spelled-out norm's
        # rsqrt now counts among the backward's transcendental ops, which the training summary says)
        assert [f for f in v.findings_new if "(module)" not in f] == [], (v.name, v.findings_new)
        assert all(after <= before for before, after in v.findings.values()), (v.name, v.findings)
    if b.stem == "torch-torch_xla" and b.parent.name in ("gpt2-tiny", "bert-tiny", "gpt_neo-tiny", "vit-tiny"):
        by = {v.name: v for v in variants}
        assert by["norm"].findings["high_level batch_norm_training"] == (5, 0)
        assert by["flatten"].findings["flattening"][1] == 0
        assert "all" in by
    if b.stem == "torch-torch_xla-train" and b.parent.name in ("gpt2-tiny", "bert-tiny", "gpt_neo-tiny", "vit-tiny"):
        # the backward's norms: torch_xla's batch_norm_grad, named by the diff and spelled out by the rewrite
        norm = next(v for v in variants if v.name == "norm")
        assert norm.findings["high_level batch_norm_grad"] == (5, 0)
        assert norm.findings["high_level batch_norm_training"] == (5, 0)


def test_a_wrong_rewrite_is_caught_by_the_output_check_and_never_timed(tmp_path, monkeypatch, cli):
    """The norm rewrite with the variance's epsilon dropped (a deliberate bug) fails the check against
    B's outputs: the variant is reported as failed, exit 2, and only A and B are timed."""
    from stackwars_ir.ablate import ablate
    from stackwars_ir.ablate import rewrites

    monkeypatch.setattr(rewrites, "float_of", lambda attr: 0.0)
    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    abl = ablate(a, b, tmp_path, only=("norm",), rounds=1)
    (v,) = abl.variants
    assert v.check is not None and not v.check.ok and v.check.max_abs > v.check.atol
    assert not v.timed and v.change is None
    assert len(abl.steady_a) == 1 and len(abl.steady_b) == 1


def test_ablate_command_reports_each_variant_and_a_saved_result_renders(tmp_path, cli):
    from stackwars_ir.ablate import Ablation

    out = tmp_path / "variants"
    code, stdout, stderr = cli("ablate", golden("ffn", "jax"), golden("ffn", "torch-torch_xla"), "--out", out,
                               "--only", "all", "--rounds", "1", "--json", tmp_path / "a.json", "--markdown",
                               tmp_path / "a.md", "--html", tmp_path / "a.html")
    assert code == 0, stderr
    assert "flatten" in stdout and "1 round: no interval" in stdout
    data = json.loads((tmp_path / "a.json").read_text())
    abl = Ablation.from_json(data)
    assert Ablation.from_json(abl.as_json()) == abl
    (v,) = abl.variants
    assert v.name == "flatten" and v.check.ok and v.timed and v.findings["flattening"][1] == 0
    assert set(abl.skipped) == {"norm", "embedding"}
    side = json.loads((out / "torch-torch_xla.flatten.json").read_text())
    assert side["ablation"]["rewrites"] == ["flatten"] and side["stablehlo"] == "torch-torch_xla.flatten.mlir"
    assert "flatten" in (tmp_path / "a.md").read_text()
    assert "<table>" in (tmp_path / "a.html").read_text()
    # the diff of A against the variant reads it with its sidecar, and finds no flattening left
    code, stdout, _ = cli("diff", golden("ffn", "jax"), out / "torch-torch_xla.flatten.mlir")
    assert "take a flattened input ([" not in stdout
    code, _, stderr = cli("report", golden("ffn", "jax"), golden("ffn", "torch-torch_xla"), "-o",
                          tmp_path / "r.html", "--ablation", tmp_path / "a.json")
    assert code == 0, stderr
    assert "What each difference costs" in (tmp_path / "r.html").read_text()
    code, _, stderr = cli("report", golden("gemm", "jax"), golden("gemm", "torch-torch_xla"), "-o",
                          tmp_path / "r2.html", "--ablation", tmp_path / "a.json")
    assert code == 2 and "ablates other files" in stderr and not (tmp_path / "r2.html").exists()
    assert f"(fix: stackwars-ir ablate {golden('gemm', 'jax')} {golden('gemm', 'torch-torch_xla')} --json FILE " \
           "(the report's files, in its order), or drop --ablation)" in stderr
    # one file the same, the other not, or the two swapped: still other files
    for pair in ((golden("ffn", "jax"), golden("ffn", "torch-torchax")),
                 (golden("ffn", "torch-torch_xla"), golden("ffn", "jax"))):
        code, _, stderr = cli("report", *pair, "-o", tmp_path / "r3.html", "--ablation", tmp_path / "a.json")
        assert code == 2 and "ablates other files" in stderr and not (tmp_path / "r3.html").exists()
    md = (tmp_path / "a.md").read_text().splitlines()
    table = [line for line in md if line.startswith("|")]
    assert len({line.replace("\\|", "").count("|") for line in table}) == 1  # one cell count on every row
    assert "Infinity" not in (tmp_path / "a.json").read_text()  # strict JSON: one round has no interval


def test_nothing_to_ablate_says_so_and_exits_0(tmp_path, cli):
    code, stdout, stderr = cli("ablate", golden("gemm", "jax"), golden("gemm", "torch-torch_xla"), "--out", tmp_path)
    assert code == 0, stderr
    assert "nothing to ablate" in stdout
    assert not list(tmp_path.iterdir())
    # a rewrite runs only where the diff names its difference: never to make B less like A
    b = golden("bert", "torch-torch_xla")
    code, stdout, stderr = cli("ablate", b, b, "--out", tmp_path)
    assert code == 0 and "nothing to ablate" in stdout and "the diff names no such difference" in stdout
    assert not list(tmp_path.iterdir())


def test_the_check_takes_equal_infinities_as_equal(tmp_path):
    """An output that is +inf in both programs is no error; a finite value turned infinite is one."""
    from stackwars_ir.ablate import check_variant

    src = ("func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
           "  %c = stablehlo.constant dense<[1.0, 0.0, 2.0]> : tensor<3xf32>\n"
           "  %y = stablehlo.constant dense<0.0> : tensor<3xf32>\n"
           "  %0 = stablehlo.divide %c, %DIVISOR : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n")
    b, same, other = tmp_path / "b.mlir", tmp_path / "same.mlir", tmp_path / "other.mlir"
    b.write_text(src.replace("DIVISOR", "y"))  # inf, nan, inf
    same.write_text(src.replace("DIVISOR", "y"))
    other.write_text(src.replace("DIVISOR", "c"))  # 1, nan, 1: finite where B is infinite
    assert check_variant(b, same).ok
    assert not check_variant(b, other).ok


def test_a_variant_check_tells_its_worker_the_compile_started_before_compiling(tmp_path, monkeypatch):
    """In a worker, a task's time before started() is under the 300 s setup limit (isolate.SETUP_S),
    after it under the user's --timeout; check_variant compiles and runs two programs (a base model's
    training step: minutes on 2 cores), so it says started once its inputs are read, before any compile."""
    import stackwars_ir.ablate.run as ablate_run

    events = []
    real = ablate_run.runtime

    class Spy:
        def __init__(self, rt):
            self.rt = rt

        def compile(self, *a, **k):
            events.append("compile")
            return self.rt.compile(*a, **k)

        def __getattr__(self, name):
            return getattr(self.rt, name)

    monkeypatch.setattr(ablate_run, "started", lambda: events.append("started"))
    monkeypatch.setattr(ablate_run, "runtime", lambda platform: Spy(real(platform)))
    b = tmp_path / "b.mlir"
    b.write_text("func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
                 "  %0 = stablehlo.add %x, %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n")
    assert ablate_run.check_variant(b, b).ok
    assert events == ["started", "compile", "compile"]


def test_bad_input_is_one_line_and_exit_2(tmp_path, cli):
    code, _, stderr = cli("ablate", tmp_path / "missing.mlir", golden("gpt2", "torch-torch_xla"), "--out", tmp_path)
    assert code == 2 and "missing.mlir" in stderr and "Traceback" not in stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main( {\n")
    code, _, stderr = cli("ablate", golden("gpt2", "jax"), bad, "--out", tmp_path / "o")
    assert code == 2 and "bad.mlir" in stderr and "Traceback" not in stderr and not (tmp_path / "o").exists()
    code, _, stderr = cli("ablate", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), "--only", "layout")
    assert code == 2 and "--only layout" in stderr and "norm" in stderr


def _record(change_b, variants_change: dict):
    """An ablation record as study/run/ablations.py keeps one: B's and each variant's steady
    seconds per round (3 rounds), their ratios and shares computed as ablate computes them."""
    from stackwars_ir.ablate import Ablation, Check, Variant
    from stackwars_ir.ablate.run import mean_interval, ratio_interval

    a = (0.100, 0.101, 0.099)
    b = tuple(x * r for x, r in zip(a, change_b))
    gap = ratio_interval([y / x for x, y in zip(a, b)])
    variants = []
    for name, factors in variants_change.items():
        steady = tuple(y * f for y, f in zip(b, factors))
        share = None if gap.holds(1.0) else mean_interval([(y - s) / (y - x) for x, y, s in zip(a, b, steady)])
        variants.append(Variant(name, f"v/{name}.mlir", (name,), {name: 5}, {"stablehlo.reduce": 10},
                                {"stablehlo.batch_norm_training": 5}, Check(1e-6, 1e-4, 1e-3, True, 1, "capture sidecar"),
                                {"flattening": (24, 0)}, (), steady, ratio_interval([s / y for s, y in zip(steady, b)]),
                                share))
    return Ablation("A.mlir", "B.mlir", tuple(variants), 3, a, b, gap, {}, {"processor": "x", "cpus": 2}, "cpu",
                    ("0" * 64, "1" * 64))


def test_the_ablations_page_says_what_the_intervals_support(tmp_path):
    """A claim whose variants' intervals all hold 1 is worded indistinguishable; one that moved is named
    with its interval; the page passes page_claims; --render's page needs nothing but the records."""
    import sys

    from study.ablations import ablations_page, ablations_summary, record_name

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from page_claims import claims

    still = {"norm": (1.01, 0.99, 1.0), "flatten": (0.999, 1.002, 1.0), "embedding": (1.0, 1.0, 1.001)}
    moved = dict(still, norm=(0.80, 0.81, 0.79))
    for (model, step), record in ((("gpt2", "forward"), _record((1.0, 1.01, 0.99), still)),
                                  (("bert", "forward"), _record((1.3, 1.31, 1.29), moved))):
        (tmp_path / record_name(model, step)).write_text(json.dumps(record.as_json()))
    page = ablations_page(tmp_path)
    assert claims(page, "page") == []
    norm = next(line for line in page.splitlines() if line.startswith("**LayerNorm**"))
    assert "changed torch_xla's steady time in 1 of 2" in norm and "BERT forward: faster (V/B 0.800" in norm
    flat = next(line for line in page.splitlines() if line.startswith("**Flattening**"))
    assert "indistinguishable from no change in all 2 programs" in flat
    assert "withheld (B / A holds 1)" in page  # GPT-2's gap holds 1: no share of it
    assert "+87% (95% interval" in page  # BERT's norm variant: (1.3 - 1.04) / 0.3 of the gap, round by round
    assert "as the study's claim predicts" in norm  # the variant was faster where it moved
    summary = "\n".join(ablations_summary(tmp_path))  # docs/findings.md's section 13
    assert claims(summary, "summary") == [] and norm in summary and flat in summary
    assert ablations_summary(tmp_path / "none") == [
        "No ablation records: `make findings-ablations` measures them (docs/findings-ablations.md)."]


def test_target_estimates_each_variant_or_refuses_in_one_line(tmp_path, cli):
    """--target tpu-v6e: with libtpu, A, B and the variant compiled for the v6e and the compiler's
    estimate of one run shown beside the times, labelled as an estimate; without it, one line and
    exit 2 before anything is written."""
    import importlib.util

    args = ("ablate", golden("ffn", "jax"), golden("ffn", "torch-torch_xla"), "--out", tmp_path / "v", "--rounds", "1",
            "--only", "flatten", "--target", "tpu-v6e", "--json", tmp_path / "a.json")
    code, stdout, stderr = cli(*args)
    if importlib.util.find_spec("libtpu") is None:
        assert code == 2 and "libtpu" in stderr and "Traceback" not in stderr
        assert not (tmp_path / "v").exists() and not (tmp_path / "a.json").exists()
        return
    assert code == 0, stderr
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["target"] == "tpu-v6e" and data["estimate_a_s"] > 0 and data["estimate_b_s"] > 0
    assert data["variants"][0]["estimate_s"] > 0
    assert "estimated" in stdout and "not measured" in stdout


# ---------------------------------------------------------------------------------------------- transplant


def _transplanted(tmp_path, a, b, kind):
    """transplant_file's variant written beside a copy of B's sidecar (as ablate writes it)."""
    from stackwars_ir.ablate import transplant_file

    text, done = transplant_file(a, b, kind)
    v = tmp_path / f"{b.stem}.block-{kind}.mlir"
    v.write_text(text)
    return v, done


def _findings_by_block(a, b) -> dict:
    from stackwars_ir.diff import diff_files

    return {blk.label: sorted((f.kind, f.side) for f in blk.findings) for blk in diff_files(a, b).result().blocks}


@pytest.mark.parametrize("kind", ["norm", "attention", "mlp", "embedding"])
def test_a_transplant_puts_a_blocks_in_b_and_keeps_b_outputs(tmp_path, kind):
    """GPT-2's torch_xla forward with JAX's blocks of one kind: every differing block of the kind
    transplanted, B's outputs kept on B's own weights, the diff of A against the variant finding
    those blocks the same op for op, and every other block's findings as they were."""
    from stackwars_ir.ablate import check_variant
    from stackwars_ir.diff import diff_files

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    v, done = _transplanted(tmp_path, a, b, kind)
    assert done.blocks == done.differing >= 1 and done.skipped == (), done
    check = check_variant(b, v)
    assert check.ok and "capture" in check.arguments, check
    moved = Counter()
    for d in diff_files(a, v).blocks:
        if d.label in done.labels:  # A's ops, and those reading B's values in A's shapes and types
            assert all(n > 0 for n in d.delta.values()), (d.label, dict(d.delta))
            # the one finding left: B's i64 token ids converted to the i32 A's lookup reads
            assert all(f.kind == "converts" and "stablehlo.convert" in done.adapters for f in d.findings), d.findings
            moved.update(d.delta)
    assert dict(moved) == done.adapters
    assert set(done.adapters) <= {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.convert"}
    before = _findings_by_block(a, b)
    got = _findings_by_block(a, v)
    assert {k: x for k, x in got.items() if k not in done.labels} == \
        {k: x for k, x in before.items() if k not in done.labels and k in got}


def test_a_transplant_of_one_block_and_of_a_training_step(tmp_path):
    """One block by its label moves that block alone; in a training step the forward blocks move
    and each backward block that reads what B's forward does not keep is listed with why."""
    from stackwars_ir.ablate import check_variant

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    v, done = _transplanted(tmp_path, a, b, "mlp[1]#0")
    assert done.blocks == done.differing == 1 and done.labels == ("mlp[1]#0",)
    assert check_variant(b, v).ok
    a, b = golden("gpt2", "jax-train"), golden("gpt2", "torch-torch_xla-train")
    v, done = _transplanted(tmp_path, a, b, "mlp")
    assert done.labels == ("mlp[0]#0", "mlp[1]#0") and done.differing == 4
    assert [label for label, _ in done.skipped] == ["mlp[1]#0 (backward)", "mlp[0]#0 (backward)"]
    assert all("no value of B holds" in why for _, why in done.skipped)
    assert check_variant(b, v).ok


def test_a_transplant_that_reads_the_wrong_values_is_caught_by_the_check(tmp_path, monkeypatch):
    """A transplant that takes any value of the right size for what A's block reads (a deliberate bug:
    a LayerNorm's scale read from its offset) fails the output check against B."""
    import numpy as np

    from stackwars_ir.ablate import check_variant, transplant

    def careless(src, want, atol, rtol):
        return tuple(range(src.ndim)) if src.shape == want.shape and src.dtype == want.dtype else None

    monkeypatch.setattr(transplant, "reading", careless)
    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    v, done = _transplanted(tmp_path, a, b, "norm")
    check = check_variant(b, v)
    assert not check.ok and check.max_abs > check.atol
    assert np.isfinite(check.max_abs)


def test_reading_finds_a_transpose_a_reshape_and_an_integer_convert():
    import numpy as np

    from stackwars_ir.ablate.transplant import reading

    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 4)).astype(np.float32)
    assert reading(w, w.T.copy(), 1e-4, 1e-3) == (1, 0)  # a weight stored transposed
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    assert reading(x, x.reshape(6, 4), 1e-4, 1e-3) == (0, 1, 2)  # flattened: a reshape, no transpose
    assert reading(x, (x + 1e-6).astype(np.float32), 1e-4, 1e-3) == (0, 1, 2)  # within tolerance
    assert reading(x, x * 1.01, 1e-4, 1e-3) is None  # 1% off: not the same value
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert reading(ids, ids.astype(np.int32), 1e-4, 1e-3) == (0, 1)  # i64 read as i32: a convert
    assert reading(ids, ids.astype(np.float32), 1e-4, 1e-3) is None  # never between integers and floats
    assert reading(x, x.astype(np.float64), 1e-4, 1e-3) is None  # nor between float widths
    mask = np.where(np.tril(np.ones((4, 4))) > 0, 0.0, -np.inf).astype(np.float32)
    assert reading(mask, mask.copy(), 1e-4, 1e-3) == (0, 1)  # equal infinities are equal
    assert reading(mask, mask.T.copy(), 1e-4, 1e-3) == (1, 0)
    assert reading(mask, np.where(mask < 0, -1e9, 0.0).astype(np.float32), 1e-4, 1e-3) is None


def test_ablate_block_command_transplants_and_refuses_in_one_line(tmp_path, cli):
    from stackwars_ir.ablate import Ablation

    a, b = golden("ffn", "jax"), golden("ffn", "torch-torch_xla")
    code, stdout, stderr = cli("ablate", a, b, "--block", "mlp", "--block", "norm", "--out", tmp_path / "v",
                               "--rounds", "1", "--profile", "2", "--json", tmp_path / "a.json", "--markdown",
                               tmp_path / "a.md")
    assert code == 0, stderr
    abl = Ablation.from_json(json.loads((tmp_path / "a.json").read_text()))
    assert Ablation.from_json(abl.as_json()) == abl
    (v,) = abl.variants  # --block alone: no rewrite
    assert v.name == "block-mlp" and v.rewrites == ("block mlp",) and v.sites == {"block mlp": 1}
    assert v.check.ok and v.timed and v.findings["in mlp blocks"][1] == 0
    assert "no aligned norm block differs" in abl.skipped["block norm"]
    side = json.loads((tmp_path / "v" / "torch-torch_xla.block-mlp.json").read_text())
    assert side["ablation"]["rewrites"] == ["block mlp"]
    assert "block-mlp" in stdout and "block-mlp" in (tmp_path / "a.md").read_text()
    # --profile: the kernel time of the block it changed, B's beside the variant's
    assert [label for label, _, _ in v.block_times] == ["mlp#0"] and all(t > 0 for t in v.kernel_s)
    assert all(tb > 0 and tv > 0 for _, tb, tv in v.block_times)
    assert "kernel time per run (--profile, ms, B -> V)" in stdout
    code, _, stderr = cli("ablate", a, b, "--block", "layer", "--out", tmp_path / "w")
    assert code == 2 and "--block layer" in stderr and "attention" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "w").exists()
    # files without their sidecars: no weights both sides share, so no transplant (said, exit 0)
    for p in (a, b):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    code, stdout, stderr = cli("ablate", tmp_path / a.name, tmp_path / b.name, "--block", "mlp", "--out", tmp_path / "x")
    assert code == 0, stderr
    assert "nothing to ablate" in stdout and "synthetic" in stdout
