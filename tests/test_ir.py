"""Parse: the real StableHLO corpus, our captures, every input form, and bad input."""
from __future__ import annotations

from collections import Counter

import pytest

from conftest import golden
from stackwars_ir.ir import Parser, load, load_one
from stackwars_ir.ir.graph import op_graph
from stackwars_ir.ir.locations import loc_name, provenance, top_name
from stackwars_ir.ir.model import Func, Op, Tensor, Value
from stackwars_ir.ir.stats import module_stats


def test_corpus_parses_at_least_99_percent_and_never_crashes(corpus):
    files = sorted(corpus.rglob("*.mlir"))
    assert len(files) == 2839
    results = load(files)
    ok = [r for r in results if r.ok]
    rate = len(ok) / len(files)
    print(f"corpus parse rate: {len(ok)}/{len(files)} = {rate:.2%}")
    assert rate >= 0.99
    for r in results:
        assert r.ok or (r.error.startswith(str(r.path)) and "internal error" not in r.error), r.error
    parsers = Counter(m.parser for r in ok for m in r.modules)
    assert parsers["iree"] > 0  # the !quant files went through IREE's bindings


def test_a_quantized_file_goes_through_the_same_bindings_whatever_the_worker_read_before(corpus):
    """jaxlib's context parses !quant once a portable artifact has loaded the quant dialect into it
    (measured); a file must not change bindings with what its worker read before (it made the corpus
    test depend on the tests that ran before it)."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from stackwars_ir.ir import parse

    text = (corpus / "quantized" / "abs_shape_float32_20_20_qi8.mlir").read_text()
    assert "!quant." in text
    assert parse._parse_text(text, "q", "q.mlir", 1)[1] == "iree"
    artifact = export.export(jax.jit(lambda x: x + 1))(jnp.ones(3)).mlir_module_serialized
    parse._parse_bytecode(artifact, "portable.mlirbc", (0, 1))  # loads the quant dialect into jaxlib's context
    assert parse._parse_text(text, "q", "q.mlir", 1)[1] == "iree"


def test_quantized_split_file_gives_one_module_per_chunk(corpus):
    path = corpus / "quantized" / "add_qi8.mlir"
    result = load([path])[0]
    assert result.ok, result.error
    chunks = path.read_text().count("\n// -----\n") + 1
    assert len(result.modules) == chunks
    assert result.modules[1].source.endswith("#1")


def test_dynamic_dimensions_are_none(corpus):
    module = next(m for r in load(sorted((corpus / "dynamic").glob("*.mlir"))[:20]) for m in r.modules)
    shapes = [module.values[v].type.shape for v in module.entry.args]
    assert any(None in s for s in shapes)


def test_regions_and_multi_results(corpus):
    files = sorted(corpus.glob("argmax*.mlir"))[:3] + sorted(corpus.glob("sort*.mlir"))[:3]
    modules = [m for r in load(files) for m in r.modules]
    nested = [op for m in modules for op in m.ops if op.parent is not None]
    assert nested, "reduce/sort bodies are walked"
    multi = [op for m in modules for op in m.ops if len(op.results) > 1]
    assert multi, "multi-result ops (%0:2) keep every result"


def test_calls_are_inlined_at_their_call_site():
    module = load_one(golden("gpt2", "jax"))
    assert "_take" in module.func_by_name and module.call_graph["main"]
    gathers = [(op, path) for op, path in module.inlined if op.name == "stablehlo.gather"]
    assert {path for _, path in gathers} == {"wte", "wpe"}  # the call sites' scopes
    assert all(op.func.startswith("_take") for op, _ in gathers)


def test_provenance_from_jax_torchax_and_torch_xla():
    for stem in ("jax", "torch-torchax", "torch-torch_xla"):
        paths = {op.path for op in load_one(golden("gpt2", stem)).ops}
        assert "h.1.attn.c_attn" in paths or "h.1.attn" in paths, stem
        assert "h.0.mlp.c_fc" in paths, stem
    types = {op.module_type for op in load_one(golden("gpt2", "torch-torch_xla")).ops}
    assert {"Conv1D", "LayerNorm", "GPT2Attention"} <= types


@pytest.mark.parametrize("loc, path", [
    ('loc("jit(forward)/h.3/attn/c_attn/dot_general"("a.py":1:2))', "h.3.attn.c_attn"),
    ('loc(callsite("jit(f)/SomeModule/h/3/attn/jit(_take)/gather"("a.py":1:2) at "b.py":3:4))',
     "SomeModule.h.3.attn"),
    ('loc("states[0]")', ""),
    ('loc("a.py":1:2)', ""),
    ("loc(unknown)", ""),
    ('loc(fused["jit(f)/ln_f/add", "x"])', "ln_f"),
    ('loc(fused<"meta">["jit(f)/ln_f/add", "x"])', "ln_f"),
    ('loc(callsite(callsite("jit(f)/q/r/add" at "x":1:1) at "b.py":3:4))', "q.r"),
    ('loc("jit(f)/a\\"b/add")', 'a"b'),
    ("loc(fused[])", ""),
    # XLA joins the op names of an op it made of several with ";" (a dump's folded transpose pair); read
    # as one name the second half's scopes doubled the path (h.0.attn.h.0.attn: a block of its own)
    ('loc("jit(forward)/h.0/attn/transpose;jit(forward)/h.0/attn/transpose")', "h.0.attn"),
    ('loc("jit(f)/h.0/attn/c_attn/add;jit(f)/h.0/attn/c_proj/add")', "h.0.attn"),
    ('loc("jit(f)/h.0/mlp/add;jit(f)/h.1/mlp/add")', "h"),
    ('loc("jit(f)/h.0/mlp/add;x")', ""),
])
def test_location_to_module_path(loc, path):
    """Both readers (Location structure, printed form) give the same provenance."""
    from jaxlib.mlir import ir

    from stackwars_ir.ir.parse import mlir_context

    assert provenance(top_name(loc))[0] == path
    text = f"func.func @main() {{\n  %0 = stablehlo.constant dense<1.0> : tensor<f32> {loc}\n  return\n}}"
    with mlir_context():
        module = ir.Module.parse(text)  # kept: its ops die with it
        op = module.body.operations[0].regions[0].blocks[0].operations[0]
        assert provenance(loc_name(op.location, (ir.NameLoc, ir.CallSiteLoc, ir.FusedLoc)))[0] == path


@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_location_structure_reads_as_the_printed_form(model):
    """The fast structural reader agrees with the printed form on every op of real captures."""
    from jaxlib.mlir import ir

    from stackwars_ir.ir.parse import mlir_context

    kinds = (ir.NameLoc, ir.CallSiteLoc, ir.FusedLoc)
    with mlir_context():
        for stem in ("jax", "torch-torchax", "torch-torch_xla"):
            module = ir.Module.parse(golden(model, stem).read_text())
            seen = []
            module.operation.walk(lambda op: seen.append(op) or ir.WalkResult.ADVANCE)
            assert len(seen) > 40
            for op in seen:
                assert loc_name(op.location, kinds) == top_name(str(op.location)), str(op.location)


def _parts_join_to_the_whole(path) -> int:
    """Parse `path` whole and in 2 and 3 parts (in this process); the joined parts must be the
    whole module, op for op and value for value. Returns the number of ops."""
    from stackwars_ir.ir.model import Module
    from stackwars_ir.ir.parse import parse_wire

    data = path.read_bytes()
    whole = parse_wire(data, str(path))
    for k in (2, 3):
        parts = [parse_wire(data, str(path), (j, k)) for j in range(k)]
        if len(whole) != 1:  # several modules: not shared
            assert parts[0] == whole and not any(parts[1:])
            continue
        joined, ref = Module.from_wire(*(p[0] for p in parts)), Module.from_wire(whole[0])
        assert (joined.funcs, joined.ops, joined.values) == (ref.funcs, ref.ops, ref.values), (path, k)
        assert all(p[0][3] for p in parts[:-1]) or len(ref.ops) < 10, "a part recorded nothing"
    return sum(len(m[3]) for m in whole)


def test_a_module_walked_in_parts_is_the_whole_module(corpus):
    ops = sum(_parts_join_to_the_whole(golden(model, stem)) for model in ("gpt2", "resnet50", "bert")
              for stem in ("jax", "torch-torchax", "torch-torch_xla"))
    files = sorted(corpus.rglob("*.mlir"))[::25]  # regions, calls, dynamic shapes, quantized files
    ops += sum(_parts_join_to_the_whole(f) for f in files)
    assert ops > 4000


def test_load_shares_a_big_file_between_workers(monkeypatch):
    import stackwars_ir.ir.pool as ir_pkg

    path = golden("gpt2", "torch-torchax")
    with Parser() as parser:
        whole = parser.parse(path).modules[0]
    monkeypatch.setattr(ir_pkg, "SHARE_BYTES", 0)
    shared = load([path], jobs=3)[0].modules[0]
    assert (shared.funcs, shared.ops, shared.values) == (whole.funcs, whole.ops, whole.values)


def test_parsed_module_is_made_of_the_ir_types():
    module = load_one(golden("gpt2", "jax"))
    assert all(type(f) is Func and all(type(t) is Tensor for t in f.results) for f in module.funcs)
    assert all(type(op) is Op for op in module.ops)
    assert all(type(v) is Value and type(v.type) is Tensor for v in module.values)
    assert [op.id for op in module.ops] == list(range(len(module.ops)))
    assert [v.id for v in module.values] == list(range(len(module.values)))


TWO_RESULTS = """func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  %1 = stablehlo.multiply %0, %b : tensor<2xf32>
  return %1, %0, %1 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
"""


@pytest.mark.parametrize("model, stem", [("gpt2", "jax"), ("gpt2", "torch-torch_xla"), ("resnet50", "torch-torchax"),
                                         ("", "three results")])
def test_op_graph_is_the_graph_built_edge_by_edge(model, stem, tmp_path):
    """op_graph fills networkx's dicts directly: it must equal the public API's graph."""
    import networkx as nx

    if model:
        module = load_one(golden(model, stem))
    else:
        (tmp_path / "r.mlir").write_text(TWO_RESULTS)
        module = load_one(tmp_path / "r.mlir")
    f = module.entry
    ref = nx.MultiDiGraph(module=module.source, func=f.name)
    source = {}
    for i, vid in enumerate(f.args):
        v = module.values[vid]
        ref.add_node(("arg", i), kind="arg", name=v.name, shape=v.type.shape, dtype=v.type.dtype)
        source[vid] = ("arg", i)
    for op_id in f.ops:
        op = module.ops[op_id]
        ref.add_node(("op", op_id), kind="op", name=op.name, path=op.path, parent=op.parent)
        source.update({vid: ("op", op_id) for vid in op.results})
    uses = [(vid, ("op", o), pos) for o in f.ops for pos, vid in enumerate(module.ops[o].operands)]
    for i, vid in enumerate(f.returns):
        ref.add_node(("result", i), kind="result")
        uses.append((vid, ("result", i), i))
    for vid, dst, pos in uses:
        if vid in source:
            t = module.values[vid].type
            ref.add_edge(source[vid], dst, key=pos, value=vid, shape=t.shape, dtype=t.dtype)
    g = op_graph(module)
    assert nx.utils.graphs_equal(g, ref)
    assert list(g.edges(keys=True, data=True)) == list(ref.edges(keys=True, data=True))
    assert sorted(g.in_edges(keys=True)) == sorted(ref.in_edges(keys=True))
    assert g.graph == ref.graph and g.number_of_edges() >= 7


def test_graph_edges_carry_shape_and_dtype():
    module = load_one(golden("gpt2", "torch-torch_xla"))
    g = op_graph(module)
    assert g.number_of_nodes() == len(module.entry.args) + len(module.entry.ops) + len(module.entry.returns)
    dots = [n for n, d in g.nodes(data=True) if d.get("name") == "stablehlo.dot_general"]
    assert dots
    for _, _, data in g.in_edges(dots[0], data=True):
        assert data["dtype"] == "f32" and len(data["shape"]) >= 2
    assert any(g.out_degree(("arg", i)) for i in range(len(module.entry.args)))


def test_bytecode_parses_like_text(tmp_path):
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    text_path = golden("bert", "jax")
    with jmlir.make_ir_context():
        module = ir.Module.parse(text_path.read_text())
        with open(tmp_path / "bert.mlirbc", "wb") as f:
            module.operation.write_bytecode(f)
    assert load_one(tmp_path / "bert.mlirbc").histogram() == load_one(text_path).histogram()


def test_generic_form_parses_like_pretty(tmp_path):
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    text_path = golden("resnet50", "torch-torch_xla")
    with jmlir.make_ir_context():
        module = ir.Module.parse(text_path.read_text())
        generic = module.operation.get_asm(print_generic_op_form=True)
    assert '"stablehlo.convolution"' in generic
    (tmp_path / "g.mlir").write_text(generic)
    assert load_one(tmp_path / "g.mlir").histogram() == load_one(text_path).histogram()


def test_unknown_dialect_ops_are_kept(tmp_path):
    p = tmp_path / "u.mlir"
    p.write_text('func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n'
                 '  %0 = stablehlo.abs %a : tensor<2xf32>\n'
                 '  %1 = "mydialect.magic"(%0) : (tensor<2xf32>) -> tensor<2xf32>\n'
                 '  return %1 : tensor<2xf32>\n}\n')
    assert load_one(p).histogram() == Counter({"stablehlo.abs": 1, "mydialect.magic": 1})


def test_a_crashing_parser_does_not_take_the_caller_down(monkeypatch, tmp_path):
    good = golden("gemm", "jax")
    bad = tmp_path / "crasher.mlir"
    bad.write_text(good.read_text())
    monkeypatch.setenv("STACKWARS_IR_TEST_CRASH_ON", "crasher.mlir")
    with Parser() as parser:
        first = parser.parse(bad)
        second = parser.parse(good)  # a fresh worker takes over
    assert not first.ok and "crashed" in first.error and "SIGSEGV" in first.error
    assert second.ok


def test_the_worker_runs_this_stackwars_ir_whatever_the_working_directory(monkeypatch, tmp_path):
    """A stackwars_ir folder in the working directory (another checkout) must not be imported
    by the parse worker in place of the caller's own code."""
    import stackwars_ir.ir.pool as ir_pkg

    decoy = tmp_path / "stackwars_ir"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('decoy stackwars_ir imported')\n")
    monkeypatch.chdir(tmp_path)
    ir_pkg._POOL.close()  # a fresh worker, started here
    try:
        assert load_one(golden("gemm", "jax")).histogram()
    finally:
        ir_pkg._POOL.close()


def test_stats_of_a_capture():
    s = module_stats(load_one(golden("gpt2", "jax")))
    assert s.calls > 0 and s.ops_inlined > s.ops_written - 50
    assert dict(s.by_op)["stablehlo.dot_general"] > 0
    assert s.argument_bytes > 0 and s.largest[0][2] >= s.largest[-1][2]


BAD = {
    "missing.mlir": None,
    "empty.mlir": b"",
    "binary.mlir": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
    "words.mlir": b"hello world\n",
    "truncated.mlir": b"func.func @main(%a: tensor<2x",
    "arith.mlir": b"func.func @f(%a: f32) -> f32 {\n  %0 = arith.addf %a, %a : f32\n  return %0 : f32\n}\n",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_gets_one_line_and_exit_2(cli, tmp_path, name):
    path = tmp_path / name
    if BAD[name] is not None:
        path.write_bytes(BAD[name])
    code, out, err = cli("stats", path)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("command", ["bench", "memory"])
def test_a_bad_file_alone_gets_its_error_line_and_no_table_or_json_of_failed_rows(cli, tmp_path, command):
    path, out_json = tmp_path / "words.mlir", tmp_path / "out.json"
    path.write_bytes(BAD["words.mlir"])
    code, out, err = cli(command, path, "--json", out_json)
    errors = [line for line in err.splitlines() if line.startswith("stackwars-ir: error:")]
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(errors) == 1 and str(path) in errors[0] and "FAILED" not in err
    assert not out_json.exists()  # nothing measured: nothing written, as diff and stats write nothing


def test_a_file_cut_short_is_said_so(cli, tmp_path):
    """Cut mid-op, mid-line or before its location aliases, MLIR names only the first symptom."""
    text = golden("gpt2", "jax").read_text()
    lines = text.splitlines(keepends=True)
    for name, cut, words in (("mid-op", text[:20000], "braces never closed"),
                             ("mid-file", "".join(lines[:150]), "braces never closed"),
                             ("aliases", "".join(lines[:-1]), "location aliases its end defines are missing")):
        path = tmp_path / f"{name}.mlir"
        path.write_text(cut)
        code, out, err = cli("stats", path)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert words in err and "the file looks cut short" in err and "copy or export the file again" in err, err


def test_bytecode_cut_short_is_said_so(cli, tmp_path):
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    import io

    with jmlir.make_ir_context():
        module = ir.Module.parse(golden("gpt2", "jax").read_text())
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    path = tmp_path / "cut.mlirbc"
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])
    code, out, err = cli("stats", path)
    assert code == 2 and "the bytecode ends early: the file looks cut short" in err, err
    path.write_bytes(buf.getvalue()[:4] + b"\x7b\x32" + bytes(range(200)))  # MLIR's magic, then noise
    code, out, err = cli("stats", path)
    assert code == 2 and "the file looks corrupt" in err and len(err.strip().splitlines()) == 1, err


def test_an_output_path_that_cannot_be_written_is_one_line_before_any_work(cli, tmp_path):
    """A file where a folder should be, a folder where the file should be, '-' for an output other than
    --json: one line, exit 2, nothing written (not a traceback after the work, with --json already written)."""
    g = golden("gpt2", "jax")
    ok = tmp_path / "ok.json"
    for args, words in ((("diff", g, g, "--json", ok, "--markdown", g / "x.md"), f"{g} is a file"),
                        (("diff", g, g, "--html", tmp_path), "is a folder, not a file"),
                        (("diff", g, g, "--markdown", "-"), "--markdown -: only --json writes to stdout"),
                        (("stats", g, "--json", g / "s.json"), f"{g} is a file"),
                        (("report", g, g, "--html", g / "r.html"), f"{g} is a file"),
                        (("memory", g, "--json", ok, "--markdown", g / "m.md"), f"{g} is a file")):
        code, out, err = cli(*args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and words in err, (args, err)
        assert not ok.exists() and "Traceback" not in err


def test_a_write_that_fails_after_the_work_is_one_line(tmp_path, monkeypatch):
    from stackwars_ir.common.errors import StackwarsError
    from stackwars_ir.common.files import write_set

    folder = tmp_path / "ro"
    folder.mkdir()
    monkeypatch.setattr("tempfile.mkstemp", lambda **kw: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    with pytest.raises(StackwarsError, match="cannot be written: Permission denied"):
        write_set([(folder / "a.json", "{}")])
    assert list(folder.iterdir()) == []


def test_prose_or_a_bare_word_is_said_as_no_op_with_its_line(cli, tmp_path):
    """MLIR's own words for prose were "custom op 'The' is unknown (tried 'builtin.The' as well)"."""
    path = tmp_path / "notes.mlir"
    path.write_text("\n// my notes\nThe quick brown fox\n")
    code, out, err = cli("stats", path)
    assert code == 2 and out == ""
    assert f"{path}:3:1: 'The' is no op (an op is named dialect.op): the line reads 'The quick brown fox'" in err
    path.write_text("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  foo %a\n  return %a : tensor<2xf32>\n}\n")
    code, out, err = cli("stats", path)
    assert code == 2 and f"{path}:2:3: 'foo' is no op" in err and "the line reads 'foo %a'" in err


def test_error_names_file_line_and_column(cli, tmp_path):
    path = tmp_path / "t.mlir"
    path.write_text("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.abs %b : tensor<2xf32>\n"
                    "  return %0 : tensor<2xf32>\n}\n")
    code, _, err = cli("stats", path)
    assert code == 2 and f"{path}:2:" in err


def test_stats_json(cli):
    import json

    code, out, _ = cli("stats", "--json", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"))
    assert code == 0
    data = json.loads(out)
    assert [m["source"].split("/")[-1] for m in data["modules"]] == ["jax.mlir", "torch-torch_xla.mlir"]
    assert data["modules"][1]["histogram"]["stablehlo.batch_norm_training"] == 5


def test_stats_rich_tables_carry_the_same_figures(capsys):
    from stackwars_ir.report.text import stats_rich

    s = module_stats(load_one(golden("gpt2", "torch-torch_xla")))
    stats_rich(s, top=40)
    out = capsys.readouterr().out
    assert "stablehlo.batch_norm_training" in out and f"{s.ops_inlined} with calls inlined" in out


# Bounded resources per input: a memory and a time limit per parse worker.

HOSTILE_CONV = """func.func @main(%a: tensor<2x3x9x10xf32>, %w: tensor<3x3x10x5xf32>) -> tensor<2x3x0x6xf32> {
  %0 = stablehlo.convolution(%a, %w) dim_numbers = [b, f, 0, 1073741000]x[o, i, 0, 1]->[b, f, 0, 1], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x9x10xf32>, tensor<3x3x10x5xf32>) -> tensor<2x3x0x6xf32>
  return %0 : tensor<2x3x0x6xf32>
}
"""


@pytest.fixture
def limits_env(monkeypatch):
    """The CLI's --parse-* options set the environment; this restores it after each test."""
    from stackwars_ir.ir import MEMORY_ENV, TIMEOUT_ENV

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    return monkeypatch


def test_a_hostile_line_stops_at_the_memory_limit_and_the_next_file_is_parsed(cli, tmp_path, limits_env):
    # One line that made MLIR allocate a billion-entry list: 8.5 GB and 12 s before its own error.
    hostile = tmp_path / "conv.mlir"
    hostile.write_text(HOSTILE_CONV)
    code, out, err = cli("stats", hostile, golden("gemm", "jax"))
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"stackwars-ir: error: {hostile}: parsing needed more than the memory limit of 3 GiB")
    assert "--parse-memory" in lines[0] and "STACKWARS_IR_PARSE_MEMORY" in lines[0]
    assert lines[1] == "parsed 1 of 2 files" and "stablehlo.dot_general" in out


def test_a_file_past_the_time_limit_is_stopped_and_the_next_file_is_parsed(cli, tmp_path, limits_env):
    slow = tmp_path / "slow.mlir"
    slow.write_text(golden("gemm", "jax").read_text())
    limits_env.setenv("STACKWARS_IR_TEST_HANG_ON", "slow.mlir")  # the worker never answers for it
    code, out, err = cli("--parse-timeout", "2", "stats", slow, golden("gemm", "jax"))
    assert code == 2
    assert f"{slow}: parsing took longer than the limit of 2 s per file" in err and "--parse-timeout" in err
    assert "parsed 1 of 2 files" in err and "stablehlo.dot_general" in out


def test_diff_refuses_a_missing_file_before_parsing_the_other(cli, tmp_path, limits_env):
    """A path refused outright (no such file, a folder) fails `diff` at once: the other file is not
    parsed first (a 110k-op file took 4.5 s before the one-line error)."""
    slow = tmp_path / "slow.mlir"
    slow.write_text(golden("gemm", "jax").read_text())
    limits_env.setenv("STACKWARS_IR_TEST_HANG_ON", "slow.mlir")  # parsed, it would time out
    for other in (tmp_path / "missing.mlir", tmp_path):
        code, out, err = cli("--parse-timeout", "2", "diff", slow, other)
        assert code == 2 and out == ""
        assert f"{other}: " in err and "parsing took longer" not in err
        assert ("no such file" if other.name == "missing.mlir" else "is a directory") in err


def test_a_raised_memory_limit_is_used_and_bad_limits_get_one_line(cli, limits_env):
    from stackwars_ir.ir import MEMORY_ENV, Limits

    code, out, _ = cli("--parse-memory", "4G", "stats", golden("gemm", "jax"))
    assert code == 0 and Limits.from_env().memory == 4 << 30
    for args, message in ((["--parse-memory", "lots"], "--parse-memory 'lots' is not a size"),
                          (["--parse-memory", "10M"], "below 256M"),
                          (["--parse-timeout", "0"], "--parse-timeout '0' is not a positive number of seconds")):
        code, _, err = cli(*args, "stats", golden("gemm", "jax"))
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    limits_env.setenv(MEMORY_ENV, "x")
    code, _, err = cli("stats", golden("gemm", "jax"))
    assert code == 2 and "STACKWARS_IR_PARSE_MEMORY 'x' is not a size" in err


def test_a_string_that_is_not_utf8_gets_one_line_instead_of_aborting_the_worker(cli, tmp_path):
    # Found by fuzzing: MLIR parses it, then jaxlib's bindings abort reading the location name.
    bad = tmp_path / "loc.mlir"
    bad.write_text(golden("gemm", "jax").read_text().replace('loc("args[0]")', 'loc("\\00\\ff")', 1))
    assert '\\00\\ff' in bad.read_text()
    code, _, err = cli("stats", bad, golden("gemm", "jax"))
    lines = err.strip().splitlines()
    assert code == 2 and "holds bytes that are not UTF-8" in lines[0] and f"{bad}:" in lines[0]
    assert lines[1] == "parsed 1 of 2 files"


def test_stats_names_torch_xla_arguments_from_the_sidecar(cli):
    code, out, _ = cli("stats", golden("gemm", "torch-torch_xla"))
    assert code == 0 and "argument 0 (weight)" in out and "argument 1 (x)" in out


SIZED = """module {
  func.func @main(%a: tensor<64x64xf8E4M3FN>, %b: tensor<64x64xf8E5M2>, %c: tensor<64x64xbf16>, %d: tensor<64x64xi4>,
                  %e: tensor<64x64xcomplex<f32>>, %f: tensor<64x64xi1>, %g: tensor<64x64xf4E2M1FN>,
                  %w: tensor<4x3x3x3xi8>, %x: tensor<1x3x8x8xf32>) -> tensor<64x64xbf16> {
    %0 = stablehlo.uniform_quantize %x : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.uniform<i8:f32, 5.000000e-02>>
    %1 = stablehlo.uniform_quantize %x : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.uniform<i16:f32, 5.000000e-02>>
    return %c : tensor<64x64xbf16>
  }
}
"""


def test_bytes_come_from_the_storage_type(tmp_path):
    """bugs/11: quantized and sub-byte element types were sized at 4 bytes each."""
    from stackwars_ir.ir.model import Tensor, element_bits
    from stackwars_ir.ir.stats import stats_files

    path = tmp_path / "sized.mlir"
    path.write_text(SIZED)
    (s,) = stats_files([path]).modules
    # f8 4096 x2, bf16 8192, i4 2048 (packed), complex<f32> 32768, i1 4096 (a byte, XLA's pred), f4 2048,
    # i8 108, f32 768
    assert s.argument_bytes == 4096 * 2 + 8192 + 2048 + 32768 + 4096 + 2048 + 108 + 768
    assert s.unsized == ()
    q8 = Tensor((1, 3, 8, 8), "!quant.uniform<i8:f32, 5.000000e-02>")
    assert q8.nbytes == 192 and Tensor((1, 3, 8, 8), "!quant.uniform<i16:f32, 0.05>").nbytes == 384
    assert Tensor((4, 3, 3, 3), "!quant.uniform<i8<-127:127>:f32:0, {0.1,0.2,0.3,0.4}>").nbytes == 108
    assert Tensor((3,), "i4").nbytes == 2  # packed, rounded up to a whole byte
    assert Tensor((), "tuple<tensor<2x3xf32>, tensor<i32>>").nbytes == 28
    assert Tensor((), "!stablehlo.token").nbytes == 0
    assert Tensor((4,), "!my.type").nbytes is None and element_bits("!my.type") is None  # never guessed
    for dtype, bits in (("f64", 64), ("f32", 32), ("bf16", 16), ("f16", 16), ("i64", 64), ("ui32", 32),
                        ("i16", 16), ("i8", 8), ("ui8", 8), ("i1", 8), ("f8E4M3FN", 8), ("f8E5M2", 8),
                        ("f8E4M3FNUZ", 8), ("f6E2M3FN", 6), ("f4E2M1FN", 4), ("i4", 4), ("ui4", 4), ("i2", 2),
                        ("complex<f32>", 64), ("complex<f64>", 128), ("index", 64)):
        assert element_bits(dtype) == bits, dtype


def test_an_element_type_of_no_known_size_is_said_not_guessed(tmp_path, cli):
    path = tmp_path / "odd.mlir"
    path.write_text('func.func @main(%a: tensor<4x!my.opaque>) -> tensor<4x!my.opaque> {\n'
                    '  return %a : tensor<4x!my.opaque>\n}\n')
    code, text, err = cli("stats", path)
    assert code == 0, err
    assert "entry arguments: 1, unknown" in text and "no byte size known for: !my.opaque" in text


SLICE_2023 = """module @jit_first_row {
  func.func public @main(%arg0: tensor<4x8xf32>) -> tensor<1x4xf32> {
    %0 = "stablehlo.slice"(%arg0) {limit_indices = dense<[1, 8]> : tensor<2xi64>, start_indices = dense<0> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
    %1 = "stablehlo.transpose"(%arg0) {permutation = dense<[1, 0]> : tensor<2xi64>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %2 = "stablehlo.dot_general"(%0, %1) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<1x8xf32>, tensor<8x4xf32>) -> tensor<1x4xf32>
    return %2 : tensor<1x4xf32>
  }
}
"""
SLICE_2026 = """func.func public @main(%arg0: tensor<4x8xf32>) -> tensor<1x4xf32> {
  %0 = stablehlo.slice %arg0 [0:1, 0:8] : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %1 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<1x8xf32>, tensor<8x4xf32>) -> tensor<1x4xf32>
  return %2 : tensor<1x4xf32>
}
"""


def test_stablehlo_from_before_2024_is_read_as_it_means(tmp_path, cli):
    """bugs/13 (iree-org/iree#16561): integer-array attributes as `dense<...> : tensor<Nxi64>` were refused
    with a fix that sent the user back to StableHLO; they read as today's `array<i64: ...>`."""
    old, new = tmp_path / "slice_2023.mlir", tmp_path / "slice_2026.mlir"
    old.write_text(SLICE_2023)
    new.write_text(SLICE_2026)
    code, text, err = cli("stats", old)
    assert code == 0, err
    code, text, err = cli("diff", old, new)
    assert code == 0 and "verdict: the same program" in text, text + err
    other = tmp_path / "other.mlir"
    other.write_text(SLICE_2026.replace("[0:1, 0:8]", "[1:2, 0:8]"))
    code, _, _ = cli("diff", old, other)
    assert code == 1  # another slice is another program
    # bench and memory compile it as the parser reads it (XLA refused the old attributes)
    code, _, err = cli("bench", old, "--runs", "5")
    assert code == 0, err
    code, _, err = cli("memory", old)
    assert code == 0, err


def test_hlo_types_are_sized_by_their_bits():
    from stackwars_ir.bench.kernels import hlo_bits, result_bytes

    for dtype, bits in (("pred", 8), ("s4", 4), ("u8", 8), ("s32", 32), ("f8e4m3fn", 8), ("f8e5m2", 8),
                        ("f4e2m1fn", 4), ("bf16", 16), ("f16", 16), ("f32", 32), ("f64", 64), ("c64", 64),
                        ("c128", 128), ("token", 0)):
        assert hlo_bits(dtype) == bits, dtype
    assert hlo_bits("opaque") is None
    assert result_bytes("%t = (f32[2]{0}, s4[4]{0}) tuple(%a, %b)") == 10
    assert result_bytes("%x = opaque[4]{0} custom-call()") is None


VHLO_TEXT = """module @jit_module {
  "vhlo.func_v1"() <{arg_attrs = #vhlo.array_v1<[]>, function_type = #vhlo.type_v1<!vhlo.func_v1<(!vhlo.tensor_v1<4x!vhlo.f32_v1>, !vhlo.tensor_v1<4x!vhlo.f32_v1>) -> !vhlo.tensor_v1<4x!vhlo.f32_v1>>>, res_attrs = #vhlo.array_v1<[]>, sym_name = #vhlo.string_v1<"main">, sym_visibility = #vhlo.string_v1<"">}> ({
  ^bb0(%arg0: !vhlo.tensor_v1<4x!vhlo.f32_v1>, %arg1: !vhlo.tensor_v1<4x!vhlo.f32_v1>):
    %0 = "vhlo.add_v1"(%arg0, %arg1) : (!vhlo.tensor_v1<4x!vhlo.f32_v1>, !vhlo.tensor_v1<4x!vhlo.f32_v1>) -> !vhlo.tensor_v1<4x!vhlo.f32_v1>
    "vhlo.return_v1"(%0) : (!vhlo.tensor_v1<4x!vhlo.f32_v1>) -> ()
  }) : () -> ()
}
"""


def test_vhlo_text_reads_as_its_stablehlo(tmp_path, cli):
    """bugs/05 (tenstorrent/tt-mlir#1721): VHLO in text form was refused as 'without any func.func'."""
    vhlo = tmp_path / "vhlo.mlir"
    vhlo.write_text(VHLO_TEXT)
    twin = tmp_path / "twin.mlir"
    twin.write_text("func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %0 = stablehlo.add %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n")
    code, text, err = cli("diff", vhlo, twin)
    assert code == 0 and "verdict: the same program" in text, text + err


def test_an_xla_hlo_dump_is_read_as_a_proto_and_named_as_text(tmp_path, cli):
    """bugs/06 (openxla/xla#20899): an HloModule dump got MLIR's 'custom op HloModule is unknown'. Its
    HloModuleProto form (XLA's dumps with --xla_dump_hlo_as_proto) is read through XLA's importer."""
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(lambda t, i: jnp.take(t, i, axis=0)).lower(jnp.ones((64, 8)), jnp.arange(16))
    proto = tmp_path / "take.hlo.pb"
    proto.write_bytes(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    code, text, err = cli("stats", proto)
    assert code == 0 and "stablehlo.gather" in text, err
    for command in ("bench", "memory"):  # compiled as read ("unexpected character": the proto given to MLIR)
        code, _, err = cli(command, proto)
        assert code == 0, err
    # What --xla_dump_hlo_as_proto writes: an HloProto, the module its field 1 (beside the buffer assignment)
    module = proto.read_bytes()
    size, n = bytearray(), len(module)
    while True:
        size.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    wrapped = tmp_path / "module_0001.jit_take.before_optimizations.hlo.pb"
    wrapped.write_bytes(b"\x0a" + bytes(size) + module)
    code, wrapped_text, err = cli("stats", wrapped)
    assert code == 0 and wrapped_text.replace(str(wrapped), "F") == text.replace(str(proto), "F"), err
    # HLO text (a dump without --xla_dump_hlo_as_proto, compile().as_text()): XLA's own parser in jaxlib
    hlo_text = tmp_path / "take.hlo.txt"
    hlo_text.write_text(lowered.compiler_ir("hlo").as_hlo_text())
    code, text_read, err = cli("stats", hlo_text)
    ops = [[line for line in t.splitlines() if line.startswith("stablehlo.")] for t in (text_read, text)]
    assert code == 0 and ops[0] == ops[1] and ops[0], err  # the same ops (its argument is named `t.1` there)
    code, same, err = cli("diff", hlo_text, proto)
    assert code == 0 and "verdict: the same program" in same, same + err
    for command in ("bench", "memory"):  # compiled as read (XLA got the HLO text as MLIR)
        code, _, err = cli(command, hlo_text)
        assert code == 0, err
    broken = tmp_path / "broken.hlo.txt"
    broken.write_text(lowered.compiler_ir("hlo").as_hlo_text().replace("gather(", "gathr(", 1))
    code, _, err = cli("stats", broken)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "XLA's parser refuses" in err and "Traceback" not in err


def test_torch_xlas_saved_graphs_are_each_a_module(tmp_path, cli):
    """XLA_SAVE_TENSORS_FILE with XLA_SAVE_TENSORS_FMT=hlo: several graphs in one file, each between
    `## BEGIN_GRAPH` and `## END_GRAPH` after its Python frames; each read as a module of its own."""
    import jax
    import jax.numpy as jnp

    graphs = [jax.jit(f).lower(jnp.ones((4, 8))).compiler_ir("hlo").as_hlo_text() for f in (jnp.tanh, jnp.sum)]
    saved = tmp_path / "graphs.txt.0"
    saved.write_text("".join(f"[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n  forward (model.py:12)\n\n"
                             f"Root Hashes: (abc{k})\n\n## BEGIN_GRAPH\n{g}\nGraph Hash: {k}f00\n\n## END_GRAPH\n\n"
                             for k, g in enumerate(graphs)))
    code, out, err = cli("stats", saved)
    assert code == 0, err
    assert f"== {saved}#0" in out and f"== {saved}#1" in out and "stablehlo.tanh" in out and "stablehlo.reduce" in out
    code, _, err = cli("diff", saved, saved)  # which graph: said, with how to pick one
    assert code == 2 and "holds 2 modules: #0 (" in err and f"give one as {saved}#K" in err, err
    code, out, err = cli("diff", f"{saved}#0", f"{saved}#1")
    assert code == 1 and f"A = {saved}#0" in out and "tanh" in out, err
    code, _, err = cli("diff", f"{saved}#0", f"{saved}#2")
    assert code == 2 and "there is no #2" in err, err
    code, _, err = cli("bench", saved, "--runs", "2")  # compiles one module: says which to give
    assert code == 2 and "holds 2 HLO modules, and this command compiles one" in err and f"{saved}#K" in err, err
    for command in ("stats", "bench", "memory"):  # FILE#K: that graph alone, compiled as read
        code, out, err = cli(command, f"{saved}#1", *(("--runs", "2") if command == "bench" else ()))
        assert code == 0 and f"{saved}#1" in out + err, err
        if command == "stats":
            assert "stablehlo.reduce" in out and "stablehlo.tanh" not in out, out
    code, _, err = cli("bench", f"{saved}#2", "--runs", "2")
    assert code == 2 and "there is no #2" in err and "Traceback" not in err, err


def test_a_split_file_compiles_the_module_picked_and_refuses_to_guess(tmp_path, cli):
    """A file of modules split by `// -----` (mlir-opt's -split-input-file): FILE#K compiles module K;
    FILE alone is one line saying how to pick (it compiled the whole text before, which XLA refused)."""
    two = tmp_path / "two.mlir"
    two.write_text("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %0 = stablehlo.tanh %arg0 : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n// -----\n"
                   "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %0 = stablehlo.exponential %arg0 : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n")
    from stackwars_ir.ir import compile_input

    _, text = compile_input(f"{two}#1")
    assert "exponential" in text and "tanh" not in text
    code, out, err = cli("bench", f"{two}#1", "--runs", "2")
    assert code == 0 and "two.mlir#1" in out, err
    code, _, err = cli("bench", two, "--runs", "2")
    assert code == 2 and f"give one as {two}#K, K from 0 to 1" in err and len(err.strip().splitlines()) >= 1, err
    code, _, err = cli("memory", f"{two}#3")
    assert code == 2 and "there is no #3" in err, err


# Weights kept as a resource blob (MLIR's `dense_resource`): the blob is the 4-byte alignment, then 1.0, 2.0.
RESOURCE = """module @res {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %c = stablehlo.constant dense_resource<w> : tensor<2xf32>
    %0 = stablehlo.add %x, %c : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F00000040"
    }
  }
#-}
"""


def test_a_resource_blob_is_inlined_and_an_elided_one_named():
    from stackwars_ir.common.resources import inline

    done = inline(RESOURCE)
    assert done.inlined == 1 and done.elided == ()
    assert 'stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>' in done.text and "{-#" not in done.text
    elided = inline(RESOURCE.split("{-#")[0])
    assert elided.inlined == 0 and elided.elided == ((3, "w"),) and elided.text == RESOURCE.split("{-#")[0]
    assert inline("func.func @f() {}").text == "func.func @f() {}"


def test_weights_in_a_resource_blob_diff_by_value_and_run(cli, tmp_path):
    """issue 78: `dense_resource` constants were refused by bench and memory ("Only dense elements attr
    are supported") even with the blob in the file, and the diff compared their keys, not their values."""
    res, plain = tmp_path / "res.mlir", tmp_path / "plain.mlir"
    res.write_text(RESOURCE)
    plain.write_text(RESOURCE.split("{-#")[0].replace("dense_resource<w>", "dense<[1.0, 2.0]>"))
    other = tmp_path / "other.mlir"
    other.write_text(RESOURCE.replace("00000040", "00004040"))  # 2.0 -> 3.0 under the same key
    elided = tmp_path / "elided.mlir"
    elided.write_text(RESOURCE.split("{-#")[0])
    code, out, err = cli("diff", res, plain)
    assert code == 0 and "the same program" in out, (out, err)
    code, out, err = cli("diff", res, other)
    assert code == 1 and "changed constant" in out, (out, err)
    code, out, err = cli("diff", elided, res)  # values unknown on one side: never "the same"
    assert code == 1 and "elided" in out, (out, err)
    code, out, err = cli("bench", res, "--runs", "5")
    assert code == 0, err
    code, out, err = cli("bench", elided)
    assert code == 2 and "elided.mlir:3: constant dense_resource<w> has no blob in the file" in err, err
    assert "Traceback" not in err and len([x for x in err.splitlines() if "error:" in x]) == 1


def test_bytecode_with_a_resource_blob_diffs_by_value_and_runs(cli, tmp_path):
    """The same as text, written as MLIR bytecode (the blob in its resource section). bench of any
    bytecode file also failed on the CPU ("a bytes-like object is required": the LAPACK check read
    the bytes as text)."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    paths = {}
    with jmlir.make_ir_context():
        for name, text in (("res", RESOURCE), ("other", RESOURCE.replace("00000040", "00004040"))):
            paths[name] = tmp_path / f"{name}.mlirbc"
            with open(paths[name], "wb") as f:
                ir.Module.parse(text).operation.write_bytecode(f)
    plain = tmp_path / "plain.mlir"
    plain.write_text(RESOURCE.split("{-#")[0].replace("dense_resource<w>", "dense<[1.0, 2.0]>"))
    code, out, err = cli("diff", paths["res"], plain)
    assert code == 0 and "the same program" in out, (out, err)
    code, out, err = cli("diff", paths["res"], paths["other"])
    assert code == 1 and "dense<[1.000000e+00, 3.000000e+00]>" in out, (out, err)
    code, out, err = cli("bench", paths["res"], "--runs", "5")
    assert code == 0, err


def test_a_module_xla_optimized_is_told_from_one_it_did_not_and_its_kernels_read_as_dumped(tmp_path):
    """issue 74, item 2: an after_optimizations module (`is_scheduled=true`) gives its own kernels, with
    each fusion's module path from its metadata; a module before optimizations gives none."""
    import jax
    import jax.numpy as jnp

    from stackwars_ir.bench.kernels import DUMPED, dumped_kernels
    from stackwars_ir.ir import optimized_hlo_text

    def f(x):
        with jax.named_scope("mlp"):
            return jnp.tanh(x @ x.T).sum()

    lowered = jax.jit(f).lower(jnp.ones((8, 8)))
    before, after = lowered.compiler_ir("hlo").as_hlo_text(), lowered.compile().as_text()
    assert optimized_hlo_text(before.encode()) is None and optimized_hlo_text(after.encode()) == after
    assert optimized_hlo_text(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()) is None
    dumped = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    dumped.write_text(after)
    kernels = dumped_kernels(dumped)
    assert kernels.backend == DUMPED and kernels.kernels and any(k.path == "mlp" for k in kernels.kernels)
    plain = tmp_path / "before.txt"
    plain.write_text(before)
    assert dumped_kernels(plain) is None


def test_stats_and_diff_say_what_a_file_was_and_how_it_was_read(tmp_path, cli):
    """issue 74: the JSON says what the file was and how it was converted (VHLO, MHLO, XLA HLO, pre-2024)."""
    import json

    import jax
    import jax.numpy as jnp

    lowered = jax.jit(jnp.tanh).lower(jnp.ones((4,)))
    files = {"hlo.txt": (lowered.compiler_ir("hlo").as_hlo_text(), "XLA HLO text, parsed by XLA's HLO parser"),
             "mlir": (lowered.as_text(), None)}
    for suffix, (text, said) in files.items():
        path = tmp_path / f"f.{suffix}"
        path.write_text(text)
        code, _, err = cli("stats", path, "--json", tmp_path / "s.json")
        assert code == 0, err
        read = json.loads((tmp_path / "s.json").read_text())["modules"][0]["read_from"]
        assert read.startswith(said) if said else read == "StableHLO"
        out = cli("stats", path)[1]
        assert (f"read from: {said}" in out) if said else ("read from" not in out)
    code, out, err = cli("diff", tmp_path / "f.hlo.txt", tmp_path / "f.mlir", "--json", tmp_path / "d.json")
    assert code in (0, 1), err
    sides = json.loads((tmp_path / "d.json").read_text())
    assert sides["a"]["read_from"].startswith("XLA HLO text") and sides["b"]["read_from"] == "StableHLO"
    assert "; read from XLA HLO text" in out.splitlines()[0] and "read from" not in out.splitlines()[1]


def test_an_xla_modules_deprecated_dot_reads_as_the_dot_general_jax_wrote(tmp_path, cli):
    """A user's dump diffed against the StableHLO it came from: XLA's importer writes `dot` for a plain
    matmul, JAX's lowering `dot_general`; the same program must not diff as changed (a new user's trial)."""
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(lambda x, w: jnp.tanh(x @ w).sum()).lower(jnp.ones((4, 8)), jnp.ones((8, 8)))
    (tmp_path / "a.mlir").write_text(lowered.as_text(debug_info=True))
    (tmp_path / "a.hlo.pb").write_bytes(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    code, out, err = cli("diff", tmp_path / "a.mlir", tmp_path / "a.hlo.pb", "--ops")
    assert code == 0 and "verdict: the same program" in out and "dot_general -> dot" not in out, out + err


def test_the_fast_old_attribute_and_mhlo_checks_answer_as_their_regexes_do(corpus):
    """ir.parse finds pre-2024 attributes and MHLO ops from each literal `dense<` or `mhlo.` (60x faster
    on a 15 MB module); the whole patterns are the specification, over the corpus and random strings."""
    import random

    from stackwars_ir.ir import parse

    def same(text: str) -> bool:
        return (parse.has_old_attr(text) == bool(parse._OLD_ATTR.search(text))
                and parse.has_mhlo_op(text) == bool(parse._MHLO_OP.search(text)))

    cases = ["x = dense<[0, 1]> : tensor<2xi64>", "x =\n dense<1> : tensor<3xi1>", "= dense<0> : tensor<2xi64>",
             "%0 = stablehlo.constant dense<0> : tensor<2xi64>", "_ = dense<> : tensor<0xi64>",
             "%0 = mhlo.add %a, %b", "  mhlo.return %0", '"mhlo.add" (%a)', "{mhlo.sharding = \"{replicated}\"}",
             "mhlo.frontend_attributes = {}", "x\n\n  mhlo.return", "xmhlo.add", '= "mhlo.add"(', "=mhlo.mhlo.add"]
    assert [parse.has_old_attr(c) for c in cases[:5]] == [True, True, False, False, True]
    assert [parse.has_mhlo_op(c) for c in cases[5:]] == [True, True, True, False, False, True, False, True, True]
    assert all(same(c) for c in cases)
    for path in sorted(corpus.rglob("*.mlir"))[::10]:
        assert same(path.read_text(errors="replace")), path
    words = ["mhlo.", "add", "=", " ", "\n", '"', "(", "x", "dense<", ">", ":", "tensor<", "2xi64>", "4xi1>", "0, 1", "é"]
    rng = random.Random(0)
    for _ in range(20000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        assert same(text), repr(text)
