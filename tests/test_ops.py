"""Op-level diff inside aligned blocks: exact changes found and nothing else, rewritten groups across frameworks."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import golden
from stackwars_ir.diff import diff_files
from stackwars_ir.diff.matcher import match_ops
from stackwars_ir.diff.ops import fold_patterns
from stackwars_ir.diff.result import DiffResult
from stackwars_ir.report.sentences import op_pattern


def _edit_line(src, dst, line_no: int, old: str, new: str) -> None:
    lines = src.read_text().splitlines(keepends=True)
    assert old in lines[line_no - 1], lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    dst.write_text("".join(lines))


def _groups(result):
    return [(d.label, g) for d in result.blocks for g in d.op_diff.groups]


def test_a_capture_against_itself_matches_every_op():
    result = diff_files(golden("gpt2", "jax"), golden("gpt2", "jax")).result()
    assert _groups(result) == []
    assert all(d.op_diff.count("matched") == d.op_diff.ops_a == d.op_diff.ops_b for d in result.blocks)


@pytest.mark.parametrize("model, stem, line_no, old, new, what", [
    # another op (tanh for GELU's logistic) in a forward pass
    ("gpt2", "jax", 158, "stablehlo.tanh", "stablehlo.logistic", "op tanh -> logistic"),
    # one attribute (a comparison's direction) in a training step, inside the attention's backward
    ("bert", "jax-train", 196, "compare EQ", "compare GE", "comparison_direction EQ -> GE"),
])
def test_one_op_changed_is_reported_and_nothing_else(tmp_path, model, stem, line_no, old, new, what):
    src = golden(model, stem)
    copy = tmp_path / "edited.mlir"  # no sidecar: it no longer matches the file; roles come from A's
    _edit_line(src, copy, line_no, old, new)
    result = diff_files(src, copy).result()
    groups = _groups(result)
    assert len(groups) == 1, groups
    label, g = groups[0]
    assert g.status == "changed" and what in g.what
    assert len(g.ops_a) == len(g.ops_b) == 1
    assert g.lines_a == g.lines_b == (line_no,)  # the very line that was edited
    assert sum(d.op_diff.count("changed") for d in result.blocks) == 1


def test_gpt2_norms_are_rewritten_groups_and_flattening_reshapes_only_in_pytorch():
    result = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")).result()
    layers = sorted({d.layer for d in result.blocks if d.layer})
    assert layers == [(0,), (1,)]
    for d in result.blocks:
        if not d.layer:
            continue
        if d.role == "norm":  # batch_norm_training (torch_xla) for the mean/variance math JAX spells out
            rewritten = [g for g in d.op_diff.groups if g.status == "rewritten"]
            assert len(rewritten) == 1, d.label
            g = rewritten[0]
            assert "stablehlo.batch_norm_training" in g.names_b and "stablehlo.batch_norm_training" not in g.names_a
            assert {"stablehlo.reduce", "stablehlo.rsqrt"} <= set(g.names_a)
        if d.role == "mlp":  # PyTorch flattens [2,16,64] to [32,64] around each dot_general
            only_b = [g for g in d.op_diff.groups if g.status == "only_b"]
            assert only_b and all(set(g.names_b) == {"stablehlo.reshape"} for g in only_b)
            dots = [g for g in d.op_diff.groups if g.status == "changed" and g.names_a == ("stablehlo.dot_general",)]
            assert len(dots) == 2 and all(any(w.startswith("result type 2x16x") for w in g.what) for g in dots)
    # Folded: the norm rewrite is said once for all layers.
    lines = [op_pattern(p, result.names) for p in fold_patterns(result.blocks)]
    norm = [x for x in lines if x.startswith("norm#0, in 2 of 2 layers: rewritten")]
    assert len(norm) == 1 and "batch_norm_training" in norm[0], lines


def test_rewritten_group_holds_region_ops_with_their_reduce():
    report = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"))
    d = next(d for d in report.blocks if d.a.role == "norm" and d.a.layer)
    ids_a = [op.id for op, _ in d.a.ops if not op.name.endswith("return")]
    od = match_ops(report.a.module, ids_a, report.b.module, [op.id for op, _ in d.b.ops])
    status_a, _ = od.status_of()
    ops = report.a.module.ops
    for i in ids_a:  # every op has a status, a reduce body's add that of its reduce
        assert i in status_a
        if ops[i].parent is not None and ops[i].parent in status_a:
            assert status_a[i] == status_a[ops[i].parent]


def test_op_diff_survives_json_and_format_2_still_reads(tmp_path):
    result = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torchax")).result()
    data = json.loads(json.dumps(result.as_json()))
    assert data["format"] == 4
    back = DiffResult.from_json(data)
    assert [d.op_diff for d in back.blocks] == [d.op_diff for d in result.blocks]
    assert back.interface == result.interface and back.differs == result.differs
    counts = data["blocks"][0]["op_diff"]["counts"]
    assert set(counts) == {"matched", "changed", "rewritten", "only_a", "only_b"}
    old = dict(data, format=2)
    for b in old["blocks"]:
        del b["op_diff"]
    assert all(d.op_diff is None for d in DiffResult.from_json(old).blocks)


def test_diff_ops_prints_every_block_with_its_lines(cli):
    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    code, text, err = cli("diff", a, b, "--ops")
    assert code == 1, err
    assert "op level (ops of A; only B: ops of B): matched" in text
    assert "--- norm[0]#0" in text and "--- mlp[1]#0" in text
    assert "rewritten: jax " in text and "= torch-torch_xla " in text and "batch_norm_training" in text
    assert "      B lines " in text
    short = cli("diff", a, b)[1]
    assert "--- norm[0]#0" not in short and "norm#0, in 2 of 2 layers: rewritten" in short


def test_training_step_op_diff_pairs_most_ops():
    result = diff_files(golden("gpt2", "jax-train"), golden("gpt2", "torch-torchax-train")).result()
    a_ops = sum(d.op_diff.ops_a for d in result.blocks)
    paired = sum(d.op_diff.count("matched") + d.op_diff.count("changed") for d in result.blocks)
    assert a_ops and paired / a_ops > 0.3, (paired, a_ops)


def test_copy_with_sidecar_keeps_roles(tmp_path):
    src = golden("bert", "jax")
    shutil.copy(src, tmp_path / "jax.mlir")
    shutil.copy(src.with_suffix(".json"), tmp_path / "jax.json")
    result = diff_files(src, tmp_path / "jax.mlir").result()
    assert _groups(result) == [] and not result.only_a and not result.only_b
