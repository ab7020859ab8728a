"""Model Explorer overlays: loaded by Model Explorer itself for every adapter's captures, and shown in its web app."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CAPTURES, ROOT
from stackwars_ir.diff import diff_files
from stackwars_ir.report.explorer import STATUS_COLORS, explorer_graphs, write_explorer


def _pairs():
    """Each adapter's JAX-vs-PyTorch forward pair, and its training-step pair where it has one."""
    out = []
    for d in sorted(CAPTURES.glob("*-tiny")):
        b = d / "torch-torch_xla.mlir"
        out.append((d.name, d / "jax.mlir", b if b.is_file() else d / "torch-torchax.mlir"))
        if (d / "jax-train.mlir").is_file() and (d / "torch-torchax-train.mlir").is_file():
            out.append((d.name + "-train", d / "jax-train.mlir", d / "torch-torchax-train.mlir"))
    return out


def _load_with_model_explorer(path: Path) -> dict:
    """The node-data file as Model Explorer's own types read it (graph id -> GraphNodeData). Its
    Python types say a value is a number; its web app also takes strings (the status and block
    overlays: shown as labels, summed up per layer), which the browser test below loads."""
    import dacite
    from model_explorer.node_data_builder import GraphNodeData

    data = json.loads(path.read_text())
    out = {g: dacite.from_dict(GraphNodeData, v, config=dacite.Config(check_types=False)) for g, v in data.items()}
    for g in out.values():
        assert all(isinstance(r.value, (int, float, str)) for r in g.results.values())
    return out


@pytest.mark.parametrize("name, a, b", _pairs(), ids=[p[0] for p in _pairs()])
def test_every_overlay_entry_names_a_node_model_explorer_shows(tmp_path, name, a, b):
    report = diff_files(a, b)
    result = report.result()
    out = tmp_path / "overlay"
    written = write_explorer(report, result, out)
    assert sorted(p.name for p in written) == sorted(p.name for p in out.iterdir())
    for side, src in (("A", a), ("B", b)):
        graphs = explorer_graphs(src)  # Model Explorer's MLIR adapter, as its web app runs it
        module = getattr(report, side.lower()).module
        for kind in ("status", "block", "delta"):
            loaded = _load_with_model_explorer(out / f"{side}-{src.stem}.{kind}.json")
            assert loaded, (side, kind)
            for graph, data in loaded.items():
                assert graph in graphs, graph
                assert set(data.results) <= set(graphs[graph]), (graph, set(data.results) - set(graphs[graph]))
                if kind == "status":
                    for node, r in data.results.items():
                        assert r.bgColor == STATUS_COLORS[r.value]
        # Every op of an aligned block has a status (a function called from no block has none).
        status = _load_with_model_explorer(out / f"{side}-{src.stem}.status.json")
        blocks = report.blocks
        shown = {(g, n) for g, d in status.items() for n in d.results}
        fn_of = {op_id: (f.name, str(k)) for f in module.funcs for k, op_id in enumerate(f.ops)}
        for d in blocks:
            for op, _ in getattr(d, side.lower()).ops:
                assert fn_of[op.id] in shown, (d.a.label, op)


def test_overlay_colors_the_one_changed_op(tmp_path):
    src = CAPTURES / "gpt2-tiny" / "jax.mlir"
    lines = src.read_text().splitlines(keepends=True)
    lines[157] = lines[157].replace("stablehlo.tanh", "stablehlo.logistic")
    copy = tmp_path / "b.mlir"
    copy.write_text("".join(lines))
    report = diff_files(src, copy)
    write_explorer(report, report.result(), tmp_path / "o")
    status = json.loads((tmp_path / "o" / "B-b.status.json").read_text())
    values = [r["value"] for g in status.values() for r in g["results"].values()]
    assert values.count("changed") == 1 and set(values) == {"matched", "changed"}


def test_overlay_folder_in_the_way_or_explorer_missing_is_one_line(cli, tmp_path):
    a, b = CAPTURES / "mha-tiny" / "jax.mlir", CAPTURES / "mha-tiny" / "torch-torch_xla.mlir"
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    code, out, err = cli("diff", a, b, "--explorer", busy)
    assert code == 2 and err.count("\n") == 1 and "exists and is not an empty folder" in err
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    code, _, err = cli("diff", a, b, "--explorer", busy / "keep.txt")  # a file, not a folder
    assert code == 2 and err.count("\n") == 1 and "exists and is not an empty folder" in err
    # Model Explorer not importable: the same one line, with the install hint, and nothing written.
    hidden = ("import sys; sys.modules['model_explorer'] = None; from stackwars_ir.cli.commands import main; "
              "sys.argv = ['stackwars-ir', 'diff', sys.argv[1], sys.argv[2], '--explorer', sys.argv[3]]; main()")
    r = subprocess.run([sys.executable, "-c", hidden, str(a), str(b), str(tmp_path / "new")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "Model Explorer is not installed" in r.stderr and "pip install ai-edge-model-explorer" in r.stderr
    assert not (tmp_path / "new").exists()
    # An empty folder is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli("diff", a, b, "--explorer", empty)
    assert code == 1, err
    assert (empty / "README.md").is_file() and len(list(empty.iterdir())) == 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.browser
def test_model_explorer_shows_the_overlay_in_chromium(tmp_path):
    from cdp import Browser, chromium

    if not chromium():
        pytest.skip("chromium is not installed (.ci/run installs it)")
    a, b = CAPTURES / "gpt2-tiny" / "jax.mlir", CAPTURES / "gpt2-tiny" / "torch-torch_xla.mlir"
    report = diff_files(a, b)
    write_explorer(report, report.result(), tmp_path / "o")
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "model-explorer"), str(a),
         "--node_data_paths=" + ",".join(str(tmp_path / "o" / f"A-jax.{k}.json") for k in ("block", "delta", "status")),
         "--no_open_in_browser", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        url, deadline = None, time.monotonic() + 90
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            m = re.search(r"http://127\.0\.0\.1:\d+/\?data=\S+", line)
            url = m.group(0) if m else None
        assert url, "Model Explorer did not start"
        with Browser(str(tmp_path / "profile"), 1600, 1000) as br:
            br.open(url)
            # The graph is drawn (WebGL canvas) and our overlay is listed as a node data provider.
            br.wait("document.querySelectorAll('canvas').length > 0 && "
                    "['stackwars-ir op status', 'stackwars-ir block', 'stackwars-ir block op delta']"
                    ".every(t => document.body.innerText.includes(t))", timeout=90)
            br.evaluate("document.querySelector('mat-icon.expand-all').click(); true")
            time.sleep(3)
            for _ in range(5):  # zoom onto the first layer's LayerNorm (the rewritten group)
                br.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": 548, "y": 125, "deltaX": 0,
                                                     "deltaY": -120, "modifiers": 2}, br.session)
                time.sleep(0.2)
            time.sleep(2)
            shot = tmp_path / "explorer.png"
            br.screenshot(shot)
        assert shot.stat().st_size > 20_000
        (ROOT / "out").mkdir(exist_ok=True)
        shutil.copy(shot, ROOT / "out" / "explorer-gpt2-tiny.png")  # for people to look at after CI
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
