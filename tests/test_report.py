"""Report: the HTML is self-contained, escapes what comes from IR files, and renders in Chromium."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, golden

HOSTILE = "<img src=x onerror=alert`1`>"  # no "/" or "(": it survives as a scope name


def _hostile_capture(tmp_path):
    """A real capture whose locations carry markup, in a scope name and a file name."""
    text = golden("gemm", "jax").read_text()
    text = re.sub(r'loc\("jit\(forward\)/dot_general"', f'loc("jit(forward)/{HOSTILE}/dot_general"', text)
    path = tmp_path / "hostile.mlir"
    path.write_text(text)
    assert HOSTILE in text
    return path


def test_html_is_self_contained(cli, tmp_path):
    out = tmp_path / "r.html"
    code, stdout, _ = cli("report", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), "--html", out)
    assert code == 0 and str(out) in stdout
    html = out.read_text()
    assert "<svg" in html and "batch_norm_training" in html
    for fetch in ('src="http', "src='http", 'href="http', "@import", "<link", 'src="//'):
        assert fetch not in html


def test_ir_text_is_escaped(cli, tmp_path):
    path = _hostile_capture(tmp_path)
    out = tmp_path / "r.html"
    code, _, err = cli("report", path, golden("gemm", "torch-torch_xla"), "-o", out)
    assert code == 0, err
    html = out.read_text()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert`1`&gt;" in html  # shown, as text


def test_diff_html_option(cli, tmp_path):
    out = tmp_path / "d.html"
    code, _, _ = cli("diff", golden("bert", "jax"), golden("bert", "torch-torchax"), "--html", out)
    assert code == 1 and "<svg" in out.read_text()


def test_bad_bench_file(cli, tmp_path):
    bad = tmp_path / "bench.json"
    bad.write_text("{}")
    out = tmp_path / "r.html"
    code, _, err = cli("report", golden("gemm", "jax"), golden("gemm", "jax"), "--bench", bad, "-o", out)
    assert code == 2 and "no 'results'" in err and not out.exists()


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run_chromium(*args, cwd):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", "--disable-sync", f"--user-data-dir={cwd}/profile",
             "--enable-logging=stderr", "--v=0"]
    return subprocess.run([_chromium(), *flags, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.browser
def test_report_renders_in_headless_chromium(tmp_path):
    if not _chromium():
        pytest.skip("chromium is not installed (.ci/run installs it)")
    from stackwars_ir.bench.run import bench_files
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report import write_outputs

    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    from stackwars_ir.bench.memory import budgets
    from stackwars_ir.bench.planning import plan_files

    bench = bench_files([a, b], "cpu", timeout=20, with_peaks=False)
    memory = plan_files([a, b], "cpu", budgets("600K,1M"), timeout=60)
    page = tmp_path / "report.html"
    write_outputs(diff_files(a, b).result(), html_path=page, bench=bench, memory=memory)
    dom = _run_chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    rendered = int(re.search(r'data-rendered="(\d+)"', body).group(1))
    assert rendered > 50, "the script ran and counted the chart bars"
    assert "data-errors" not in body
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    shot = tmp_path / "report.png"
    _run_chromium("--window-size=1400,2400", f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 10_000
    (ROOT / "out").mkdir(exist_ok=True)
    shutil.copy(shot, ROOT / "out" / "report-gpt2-tiny.png")  # for people to look at after CI


def test_the_report_states_each_sides_own_inputs_and_its_full_command(cli, tmp_path):
    bench = tmp_path / "b.json"
    assert cli("bench", golden("gpt2", "jax"), "--json", bench)[0] == 0
    out = tmp_path / "r.html"
    code, _, err = cli("report", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), "-o", out,
                       "--bench", bench, "--mode", "structure")
    assert code == 0, err
    html = out.read_text()
    jax_row, torch_row = re.findall(r"<tr><td>[^<]*</td><td><code>[^<]*</code>.*?</tr>", html)[:2]
    assert "input_ids int32[2, 16]" in jax_row and "input_ids int64[2, 16]" in torch_row
    assert f"--bench {bench} --mode structure</code>" in html and f"--html {out}" in html
    timings = html[html.index('<h2 id="timings">'):]  # roofline and memory beside the timings
    assert "XLA memory plan" in timings and re.search(r"\d+% of the (memory|compute) bound", timings)


def test_the_report_charts_a_memory_plan_of_its_own_files(cli, tmp_path):
    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    plans = tmp_path / "m.json"
    assert cli("memory", a, b, "--budget", "100K,t4", "--json", plans)[0] == 0
    data = json.loads(plans.read_text())
    out = tmp_path / "r.html"
    code, _, err = cli("report", a, b, "-o", out, "--memory", plans)
    assert code == 0, err
    html = out.read_text()
    section = html[html.index('<h2 id="memory">'):]
    # One stacked bar per executable: arguments, outputs, temporaries (code is 0 B on the CPU backend).
    bars = re.findall(r'<rect class="bar"[^>]*><title>([^<]*)</title>', section)
    assert {t.split(":")[0] for t in bars} == {"jax.mlir (batch 2)", "torch-torch_xla.mlir (batch 2)"}
    assert sum(t.split(": ")[1].startswith("arguments") for t in bars) == 2
    for e in data["executables"]:  # the table carries the plan's own figures and each budget's verdict
        assert "OOM, needs" in section and "fits, " in section
        assert human(e["peak_bytes"]) in section
    assert "--memory" in html[html.index("Regenerate"):]
    # A plan of other files is refused, and nothing is written.
    other = tmp_path / "other.json"
    assert cli("memory", golden("bert", "jax"), "--json", other)[0] == 0
    out2 = tmp_path / "r2.html"
    code, _, err = cli("report", a, b, "-o", out2, "--memory", other)
    assert code == 2 and "planned other files (jax.mlir)" in err and not out2.exists()
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": []}')
    code, _, err = cli("report", a, b, "-o", out2, "--memory", bad)
    assert code == 2 and "no 'executables'" in err and len(err.strip().splitlines()) == 1
    bad.write_text('{"target": "cpu", "executables": [{"label": "x"}]}')
    code, _, err = cli("report", a, b, "-o", out2, "--memory", bad)
    assert code == 2 and "not a stackwars-ir memory JSON file this version reads (no field 'target')" in err
    assert len(err.strip().splitlines()) == 1 and not out2.exists()


def human(n):
    from stackwars_ir.common.textfmt import human_bytes

    return human_bytes(n)


def test_a_saved_diff_renders_the_same_report_without_the_mlir_files(cli, tmp_path):
    a, b = tmp_path / "a" / "jax.mlir", tmp_path / "b" / "torch-torch_xla.mlir"
    for src, dst in ((golden("gpt2", "jax"), a), (golden("gpt2", "torch-torch_xla"), b)):
        dst.parent.mkdir()
        shutil.copy(src, dst)
        shutil.copy(src.with_suffix(".json"), dst.with_suffix(".json"))
    plans, timings = tmp_path / "m.json", tmp_path / "b.json"
    assert cli("memory", a, b, "--budget", "t4", "--json", plans)[0] == 0
    assert cli("bench", a, b, "--runs", "3", "--warmup", "0", "--json", timings)[0] == 0
    assert cli("diff", a, b, "--json", tmp_path / "d.json")[0] == 1
    assert cli("report", a, b, "-o", tmp_path / "direct.html", "--memory", plans, "--bench", timings)[0] == 0
    for f in (a, b, a.with_suffix(".json"), b.with_suffix(".json")):
        f.unlink()
    code, _, err = cli("report", "--from", tmp_path / "d.json", "-o", tmp_path / "saved.html", "--memory", plans,
                       "--bench", timings)
    assert code == 0, err
    assert '<h2 id="timings">' in (tmp_path / "saved.html").read_text()

    def body(path):  # all but the regenerate line, which names the command that made each
        return re.sub(r"Regenerate: <code>.*?</code>", "", path.read_text())

    assert body(tmp_path / "saved.html") == body(tmp_path / "direct.html")
    # The report renders typed results read back from the JSON, which they write again unchanged.
    from stackwars_ir.bench.memory import MemoryReport
    from stackwars_ir.bench.run import BenchReport

    for kind, path in ((BenchReport, timings), (MemoryReport, plans)):
        saved = json.loads(path.read_text())
        assert json.loads(json.dumps(kind.from_json(saved).as_json())) == saved, kind
    assert "report --from" in (tmp_path / "saved.html").read_text()
    # The saved result keeps what the renderings need: provenance, excerpts, records with op ids.
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["format"] == 4 and data["a"]["provenance"]["model"] == "gpt2" and data["a"]["sha256"]
    block = next(x for x in data["blocks"] if x["findings"])
    assert block["excerpt_a"] and block["op_ids_a"] and block["findings"][0]["kind"] and block["findings"][0]["text"]
    assert "auto:" in data["a"]["mode_reason"] and "covered" in data["alignment"]["reason"]


def test_bad_saved_diffs_are_one_line(cli, tmp_path):
    out = tmp_path / "r.html"
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": 1, "blocks": [], "alignment": {}}))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": 2, "blocks": [{"label": "x"}], "alignment": {}}))
    for args, words in [(("--from", tmp_path / "none.json"), "not a readable diff JSON"),
                        (("--from", old), "format 1"),
                        (("--from", broken), "missing or malformed field"),
                        (("--from", old, golden("gemm", "jax")), "not both"),
                        ((golden("gemm", "jax"),), "two files")]:
        code, _, err = cli("report", *args, "-o", out)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not out.exists()


def test_excerpts_are_the_files_own_lines_with_their_numbers(cli, tmp_path):
    a, b = golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")
    out = tmp_path / "r.html"
    assert cli("report", a, b, "-o", out)[0] == 0
    html = out.read_text()
    import html as html_lib

    files = [a.read_text().splitlines(), b.read_text().splitlines()]
    pres = re.findall(r"<pre>(.*?)</pre>", html.split('<h2 id="excerpts">')[1], flags=re.S)
    shown = []
    for k, pre in enumerate(pres):  # A's column, then B's, block after block
        for line in html_lib.unescape(re.sub(r"<[^>]+>", "", pre)).splitlines():
            m = re.match(r"L(\d+): (.*)", line)
            if m:
                shown.append(m.groups())
                # each line as its file writes it, the location dropped
                assert files[k % 2][int(m.group(1)) - 1].strip().startswith(m.group(2).strip()), line
    assert shown
    # The evidence the study points at keeps its attributes: batch norm's epsilon and feature index.
    norms = [t for _, t in shown if "stablehlo.batch_norm" in t]
    assert norms and all("epsilon" in t and "feature_index" in t for t in norms)
    block = re.search(r'<a href="#(ir-[^"]+)">', html)
    assert block and f'id="{block.group(1)}"' in html  # the block table links to its IR


def test_graph_view_has_every_block_and_its_data_is_inert(cli, tmp_path):
    path = _hostile_capture(tmp_path)
    twin = tmp_path / "twin.mlir"
    shutil.copy(path, twin)
    out = tmp_path / "r.html"
    assert cli("report", path, twin, "-o", out)[0] == 0
    html = out.read_text()
    assert "<img src=x" not in html
    data = re.search(r'<script type="application/json" id="blockdata">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and ">" not in data
    blocks = json.loads(data)["blocks"]
    assert len(blocks) == html.count('<g class="blk"') > 0
    assert any(HOSTILE in (b["name_a"] + "".join(b["excerpt_a"])) for b in blocks)  # the data is the text itself


@pytest.mark.browser
def test_graph_view_click_shows_the_blocks_op_diff_and_ir_in_chromium(tmp_path):
    from cdp import Browser, chromium

    if not chromium():
        pytest.skip("chromium is not installed (.ci/run installs it)")
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report import write_outputs

    page = tmp_path / "report.html"
    report = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"))
    result = report.result()
    write_outputs(result, html_path=page)
    with Browser(str(tmp_path / "profile"), 1400, 1100) as br:
        br.open(page.as_uri())
        assert int(br.wait("document.body && document.body.dataset.graphBlocks")) == len(result.blocks)
        k = next(i for i, d in enumerate(result.blocks) if d.role == "norm" and d.layer)
        br.evaluate(f"document.querySelector('svg.graph g.blk[data-i=\"{k}\"]')"
                    ".dispatchEvent(new MouseEvent('click', {bubbles: true})); true")
        assert br.wait("document.body.dataset.shown") == result.blocks[k].label
        panel = br.evaluate("document.getElementById('blockpanel').innerText")
        assert "rewritten: jax" in panel and "batch_norm_training" in panel
        assert "L" in panel and "stablehlo.batch_norm_training" in panel  # torch_xla's IR lines, side by side
        assert br.evaluate("document.body.dataset.errors || ''") == ""
        br.evaluate("document.getElementById('graph').scrollIntoView(); true")
        br.screenshot(tmp_path / "graph.png")
    assert (tmp_path / "graph.png").stat().st_size > 20_000
    (ROOT / "out").mkdir(exist_ok=True)
    shutil.copy(tmp_path / "graph.png", ROOT / "out" / "report-graph-gpt2-tiny.png")


def test_graph_view_too_large_says_so_and_keeps_the_table():
    from dataclasses import replace

    from stackwars_ir.diff import diff_files
    from stackwars_ir.report.graph import GRAPH_LIMIT, graph_view
    from stackwars_ir.report.html_report import diff_html

    result = diff_files(golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")).result()
    big = replace(result, blocks=result.blocks * (GRAPH_LIMIT // len(result.blocks) + 1), flow_a=(), flow_b=())
    view = graph_view(big)
    assert "too many for the graph view" in view and "<svg" not in view
    page = diff_html(big)
    assert "Block alignment" in page and page.count("<tr><td>") >= len(big.blocks)
