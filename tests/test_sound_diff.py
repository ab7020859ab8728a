"""A diff never calls two different programs the same, nor one program in two spellings different.

The programs are the ones of ../shared/bugs/01, 02 and 07 (rewritten from public reports: pytorch/xla#5544,
jax-ml/jax#24648, google-ai-edge/model-explorer#115), inlined so the suite runs without shared/, and
small programs for each kind of difference the op comparison must see (a constant's value, a region's
body, a composite's decomposition, a returned value, an op without a location).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackwars_ir.diff import diff_files

MAIN = "func.func @main(%arg0: tensor<10x10xf32>, %arg1: tensor<10x10xf32>) -> tensor<10x10xf32> {{\n{body}\n}}\n"


def _sin_cos(x: str, y: str) -> str:
    return MAIN.format(body=f"""  %0 = stablehlo.sine {x} : tensor<10x10xf32>
  %1 = stablehlo.cosine {y} : tensor<10x10xf32>
  %2 = stablehlo.add %0, %1 : tensor<10x10xf32>
  return %2 : tensor<10x10xf32>""")


DOT = """func.func public @main(%arg0: tensor<64x64xf16>, %arg1: tensor<64x64xf16>) -> tensor<64x64xf32> {{
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [{p}, {p}]{algorithm} : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}}
"""
ALGORITHM = (", algorithm = <lhs_precision_type = f16, rhs_precision_type = f16, accumulation_type = f32, "
             "lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, "
             "allow_imprecise_accumulation = false>")

MHLO_ADD = """func.func @main(%arg0: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %0 = mhlo.constant dense<1.000000e+04> : tensor<f32>
  %1 = "mhlo.broadcast_in_dim"(%0) {broadcast_dimensions = dense<> : tensor<0xi64>} : (tensor<f32>) -> tensor<3x4x2xf32>
  %2 = mhlo.add %arg0, %1 : tensor<3x4x2xf32>
  return %2 : tensor<3x4x2xf32>
}
"""
STABLEHLO_ADD = """func.func @main(%arg0: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %0 = stablehlo.constant dense<1.000000e+04> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<3x4x2xf32>
  %2 = stablehlo.add %arg0, %1 : tensor<3x4x2xf32>
  return %2 : tensor<3x4x2xf32>
}
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def _changed(result) -> list:
    return [(g.names_a, g.what) for d in result.blocks for g in d.op_diff.groups if g.status == "changed"]


def _diff(tmp_path, a: str, b: str):
    return diff_files(_write(tmp_path, "a.mlir", a), _write(tmp_path, "b.mlir", b)).result()


def test_which_argument_an_op_reads_is_compared(tmp_path, cli):
    """bugs/01: sin(%arg1) + cos(%arg0) against sin(%arg0) + cos(%arg1) computes another function."""
    a = _write(tmp_path, "swapped.mlir", _sin_cos("%arg1", "%arg0"))
    b = _write(tmp_path, "expected.mlir", _sin_cos("%arg0", "%arg1"))
    code, text, err = cli("diff", a, b, "--ops")
    assert code == 1, err
    assert "changed sine: operand 0 reads argument 1 in A, argument 0 in B" in text
    assert "changed cosine: operand 0 reads argument 0 in A, argument 1 in B" in text
    result = diff_files(_write(tmp_path, "both.mlir", _sin_cos("%arg0", "%arg0")), b).result()
    assert result.differs
    assert _changed(result) == [(("stablehlo.cosine",), ("operand 0 reads argument 0 in A, argument 1 in B",))]


def test_commutative_operands_in_either_order_are_the_same(tmp_path):
    a = _sin_cos("%arg0", "%arg1")
    b = a.replace("stablehlo.add %0, %1", "stablehlo.add %1, %0")
    result = _diff(tmp_path, a, b)
    assert not result.differs and _changed(result) == []
    c = a.replace("stablehlo.add %0, %1", "stablehlo.subtract %0, %1")
    d = a.replace("stablehlo.add %0, %1", "stablehlo.subtract %1, %0")
    assert _diff(tmp_path, c, d).differs  # a - b is not b - a


def test_an_attribute_change_is_a_change(tmp_path, cli):
    """bugs/02: DotAlgorithm is kept and compared; a precision change that is printed counts."""
    default = _write(tmp_path, "default.mlir", DOT.format(p="DEFAULT", algorithm=""))
    algorithm = _write(tmp_path, "algorithm.mlir", DOT.format(p="DEFAULT", algorithm=ALGORITHM))
    highest = _write(tmp_path, "highest.mlir", DOT.format(p="HIGHEST", algorithm=""))
    code, text, _ = cli("diff", default, algorithm, "--ops")
    assert code == 1 and "changed dot_general: algorithm - -> #stablehlo.dot_algorithm<" in text
    code, text, _ = cli("diff", default, highest, "--json", "-")
    assert code == 1
    data = json.loads(text[text.index("{"):])
    assert data["differs"] is True
    code, _, _ = cli("diff", default, _write(tmp_path, "same.mlir", DOT.format(p="DEFAULT", algorithm="")))
    assert code == 0


def test_mhlo_and_stablehlo_spellings_of_one_program_are_identical(tmp_path, cli):
    """bugs/07: MHLO is legalized to StableHLO on reading."""
    a, b = _write(tmp_path, "mhlo_add.mlir", MHLO_ADD), _write(tmp_path, "stablehlo_add.mlir", STABLEHLO_ADD)
    code, text, err = cli("diff", a, b, "--ops")
    assert code == 0, text + err
    assert "matched 3, changed 0" in text
    other = _write(tmp_path, "other.mlir", STABLEHLO_ADD.replace("stablehlo.add", "stablehlo.multiply"))
    code, _, _ = cli("diff", a, other)
    assert code == 1


@pytest.mark.parametrize("old, new, what", [
    ("dense<1.000000e-05>", "dense<1.000000e-06>", "value dense<9.99999974E-6> : tensor<f32> -> dense<9.99999997E-7> : tensor<f32>"),
    ("dense<[1.0, 2.0, 3.0, 4.0]>", "dense<[1.0, 2.0, 3.0, 5.0]>",
     "value ...e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32> -> ...e+00, 3.000000e+00, 5.000000e+00]> : tensor<4xf32>"),
])
def test_a_constant_of_another_value_is_a_change(tmp_path, old, new, what):
    """An RMSNorm epsilon of 1e-5 against 1e-6 (a new user's two JAX captures differed only so)."""
    a = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<1.000000e-05> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %3 = stablehlo.add %arg0, %1 : tensor<4xf32>
  %4 = stablehlo.multiply %3, %2 : tensor<4xf32>
  return %4 : tensor<4xf32>
}
"""
    result = _diff(tmp_path, a, a.replace(old, new))
    assert result.differs
    # the constant alone: its readers read the constant paired with theirs
    assert _changed(result) == [(("stablehlo.constant",), (what,))]


def test_one_constant_used_twice_is_two_equal_constants(tmp_path):
    """Two copies of one constant (no CSE on one side) and a splat broadcast against the splat written
    at its shape are the same values."""
    a = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.multiply %arg0, %1 : tensor<4xf32>
  %3 = stablehlo.add %2, %1 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""
    b = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.multiply %arg0, %1 : tensor<4xf32>
  %c = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
  %3 = stablehlo.add %2, %c : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""
    result = _diff(tmp_path, a, b)
    assert _changed(result) == []  # the add reads the same value; B has one more constant, A one fewer use
    assert result.differs  # the op counts differ all the same: constant +1


REDUCE = """func.func @main(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%arg0 init: %0) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>)  {{
    %2 = stablehlo.{op} %a, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }}
  return %1 : tensor<4xf32>
}}
"""


def test_an_op_inside_a_region_is_compared(tmp_path):
    result = _diff(tmp_path, REDUCE.format(op="add"), REDUCE.format(op="maximum"))
    assert result.differs
    assert _changed(result) == [(("stablehlo.reduce",), ("region ops add -1; maximum +1",))]
    assert not _diff(tmp_path, REDUCE.format(op="add"), REDUCE.format(op="add")).differs


COMPOSITE = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.composite "my.gelu" %arg0 {{decomposition = @{name}}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}}
func.func private @{name}(%arg0: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.{op} %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}}
"""


def test_a_composite_is_compared_by_its_decomposition(tmp_path):
    same = _diff(tmp_path, COMPOSITE.format(name="gelu_impl", op="tanh"), COMPOSITE.format(name="other_name", op="tanh"))
    assert not same.differs  # a helper's name is a spelling
    other = _diff(tmp_path, COMPOSITE.format(name="gelu_impl", op="tanh"), COMPOSITE.format(name="gelu_impl", op="logistic"))
    assert other.differs
    assert any("tanh" in g.names_a + g.names_b or "stablehlo.tanh" in g.names_a
               for d in other.blocks for g in d.op_diff.groups), [d.op_diff for d in other.blocks]


def test_a_result_that_is_another_value_is_a_change(tmp_path, cli):
    two = """func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  %1 = stablehlo.cosine %arg0 : tensor<4xf32>
  return {ret} : tensor<4xf32>, tensor<4xf32>
}}
"""
    a = _write(tmp_path, "a.mlir", two.format(ret="%0, %1"))
    b = _write(tmp_path, "b.mlir", two.format(ret="%1, %0"))
    code, text, _ = cli("diff", a, b)
    assert code == 1
    assert "entry function: result 0 is sine (line 2) in A, cosine (line 3) in B" in text


def test_an_op_without_a_location_joins_the_block_it_reads(tmp_path):
    """torch_xla once gave a model's last add an empty location: it read ln_f's ops and only the
    return read it. It goes to ln_f's block, as with its location, not to a block without a name."""
    from conftest import golden
    from stackwars_ir.diff.blocks import segment
    from stackwars_ir.ir import load_single

    src = golden("gpt2", "torch-torch_xla")
    lines = src.read_text().splitlines(keepends=True)
    k = max(i for i, line in enumerate(lines) if "stablehlo.add" in line)  # the last add, returned
    assert "loc(#loc" in lines[k]
    lines[k] = lines[k][:lines[k].rindex("loc(")] + "loc(unknown)\n"
    copy = tmp_path / "stripped.mlir"
    copy.write_text("".join(lines))
    plain, stripped = load_single([src, copy])
    before = [(b.label, b.name, len(b.ops)) for b in segment(plain).blocks]
    after = [(b.label, b.name, len(b.ops)) for b in segment(stripped).blocks]
    assert after == before
    result = diff_files(golden("gpt2", "jax"), copy).result()
    assert all(u.name for u in result.only_b) and all(d.name_b for d in result.blocks)


def test_an_mhlo_op_whose_name_holds_a_digit_is_legalized(tmp_path, cli):
    mhlo = "func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n" \
           "  %0 = mhlo.atan2 %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    code, text, _ = cli("diff", _write(tmp_path, "m.mlir", mhlo),
                        _write(tmp_path, "s.mlir", mhlo.replace("mhlo.atan2", "stablehlo.atan2")))
    assert code == 0, text


CASE = """func.func @main(%i: tensor<i32>, %x: tensor<4xf32>) -> tensor<4xf32> {{
  %r = "stablehlo.case"(%i) ({{
    %0 = stablehlo.{first} %x : tensor<4xf32>
    stablehlo.return %0 : tensor<4xf32>
  }}, {{
    %1 = stablehlo.{second} %x : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }}) : (tensor<i32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}}
"""
CALLED = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @helper(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @helper(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @helper(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %a, %b : tensor<4xf32>
  %1 = stablehlo.tanh %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""
INLINED = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %x, %y : tensor<4xf32>
  %1 = stablehlo.tanh %0 : tensor<4xf32>
  %2 = stablehlo.subtract %1, %x : tensor<4xf32>
  %3 = stablehlo.tanh %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""


def test_found_by_a_new_user(tmp_path):
    """A helper's try as a new user: a case's branches swapped computed another function yet read as the
    same (regions' ops were pooled without their region); a helper inlined by hand read as different;
    an omitted compare_type against its default FLOAT read as different."""
    swapped = _diff(tmp_path, CASE.format(first="sine", second="cosine"), CASE.format(first="cosine", second="sine"))
    assert swapped.differs and not swapped.same_program
    assert not _diff(tmp_path, CALLED, INLINED).differs
    assert _diff(tmp_path, CALLED, INLINED.replace("%1, %x", "%x, %1")).differs
    compare = "func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xi1> {\n" \
              "  %0 = stablehlo.compare LT, %x, %yTYPE : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n" \
              "  return %0 : tensor<4xi1>\n}\n"
    assert not _diff(tmp_path, compare.replace("TYPE", ""), compare.replace("TYPE", ", FLOAT")).differs
    assert _diff(tmp_path, compare.replace("TYPE", ""), compare.replace("TYPE", ", TOTALORDER")).differs
    region = _diff(tmp_path, REDUCE.format(op="add"), REDUCE.format(op="add").replace(
        "stablehlo.add %a, %b", "stablehlo.add %b, %a"))
    assert not region.differs  # commutative, inside a region


def test_an_attribute_on_one_side_only_is_shown_whole(tmp_path, cli):
    """bugs/02: a DotAlgorithm added to a dot_general was cut at 60 characters, before its
    accumulation_type: the change the reader needed was not shown."""
    head = "func.func @main(%a: tensor<4x8xf16>, %b: tensor<8x4xf16>) -> tensor<4x4xf32> {\n"
    dot = ("  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]{} : (tensor<4x8xf16>, tensor<8x4xf16>) "
           "-> tensor<4x4xf32>\n  return %0 : tensor<4x4xf32>\n}}\n")
    algo = (", algorithm = <lhs_precision_type = f16, rhs_precision_type = f16, accumulation_type = f32, "
            "lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, "
            "allow_imprecise_accumulation = false>")
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    a.write_text(head + dot.format(""))
    b.write_text(head + dot.format(algo))
    code, out, err = cli("diff", a, b, "--ops")
    assert code == 1, err
    assert "accumulation_type = f32" in out


@pytest.mark.parametrize("model", ["gpt2-tiny", "bert-tiny"])
def test_a_diff_matched_in_two_processes_is_the_one_process_diff(tmp_path, model):
    """issue 71: a big diff's blocks are matched by the process and a forked child (diff.matcher.FORK_OPS);
    forced at any size (STACKWARS_IR_FORK_OPS=1), the JSON is byte for byte the one process's (torchax's
    captures: a child judging without the parent's pairs changes them; torch_xla's do not show it). Run as a
    whole process: the suite's workers hold threads, in which the matcher never forks."""
    import os
    import subprocess
    import sys

    from stackwars_ir.diff.matcher import FORK_OPS_ENV

    folder = Path(__file__).resolve().parents[1] / "captures" / model
    got = {}
    for n in ("0", "1"):
        out = tmp_path / f"fork-{n}.json"
        done = subprocess.run([sys.executable, "-m", "stackwars_ir.cli", "diff", str(folder / "jax.mlir"),
                               str(folder / "torch-torchax.mlir"), "--ops", "--json", str(out)],
                              env={**os.environ, FORK_OPS_ENV: n}, capture_output=True, text=True)
        assert done.returncode in (0, 1), done.stderr
        got[n] = (out.read_text(), done.stdout)
    assert got["0"] == got["1"]
    assert json.loads(got["1"][0])["blocks"] and "matched" in got["1"][1]


def test_the_matcher_forks_only_beside_no_framework_runtime():
    """A process that loaded JAX (its runtime's threads) is never forked: JAX warns that may deadlock."""
    import os
    import subprocess
    import sys

    code = "from stackwars_ir.diff.matcher import _may_fork; a = _may_fork(); import jax; print(a, _may_fork())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    alone = sys.platform == "linux" and (os.cpu_count() or 1) >= 2  # before jax: it may fork (a 1-core machine never)
    assert done.stdout.split() == [str(alone), "False"], done.stderr[-500:]


def test_a_diff_run_as_the_console_script_leaves_its_values_to_no_cyclic_collection(tmp_path):
    """issue 71: after its output, the console script's diff freezes what it made (gc.freeze), so the
    collection that follows its no-GC section does not walk every value of a big diff (1.0 s of a
    ~110k-op pair's whole process); a caller's own process (click's CliRunner) is left as it was."""
    import gc
    import subprocess
    import sys

    from click.testing import CliRunner

    from stackwars_ir.cli.commands import main as group

    folder = Path(__file__).resolve().parents[1] / "captures" / "gpt2-tiny"
    a, b = str(folder / "jax.mlir"), str(folder / "torch-torchax.mlir")
    code = ("import atexit, gc, sys; atexit.register(lambda: print('frozen', gc.get_freeze_count() > 1000, "
            "file=sys.stderr)); sys.argv = ['stackwars-ir', 'diff', %r, %r]; "
            "from stackwars_ir.cli import main; main()" % (a, b))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode in (0, 1) and "frozen True" in done.stderr, done.stderr[-500:]
    before = gc.get_freeze_count()
    got = CliRunner().invoke(group, ["diff", a, b])
    assert got.exit_code in (0, 1), got.output
    assert gc.get_freeze_count() == before
