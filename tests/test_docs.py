"""Docs cannot fall behind the CLI: every command has help, and docs/cli.md is what --help says."""
from __future__ import annotations

import click
import pytest

from conftest import ROOT
from stackwars_ir.cli.commands import main
from stackwars_ir.cli.reference import cli_reference

COMMANDS = main.list_commands(click.Context(main))


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_and_docs(name):
    cmd = main.get_command(click.Context(main), name)
    assert cmd.help and len(cmd.help.strip()) > 20, f"{name} has no help text"
    for param in cmd.params:
        if isinstance(param, click.Option):
            assert param.help, f"{name} {param.opts[0]} has no help"
    assert f"## stackwars-ir {name}" in (ROOT / "docs" / "cli.md").read_text()


def test_cli_reference_is_current():
    assert (ROOT / "docs" / "cli.md").read_text() == cli_reference(), "run `make docs`"


def test_readme_commands_exist():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_help_is_instant_without_frameworks():
    import subprocess
    import sys

    code = ("import sys, stackwars_ir.cli.commands as c\n"
            "from click.testing import CliRunner\n"
            "CliRunner().invoke(c.main, ['--help'])\n"
            "bad = [m for m in ('jax', 'torch', 'flax', 'transformers') if m in sys.modules]\n"
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# What each command's help says it prints, and the marker of that part in what it really prints: a
# help text promising a part the output lacks (or the reverse, once added here) fails.
OUTPUT_SHAPES = {
    "stats": (("{gemm}",), {"Op histogram by op": "op  ", "and dialect": "dialect", "functions": "functions:",
                            "arguments": "entry arguments:", "largest tensors": "largest tensors"}),
    "diff": (("{gemm}", "{gemm_xla}"), {"block by block": "block ", "name what differs": "whole module, ops B - A",
                                        "Align": "aligned "}),
    "bench": (("{gemm}", "{gemm_xla}", "--runs", "10"),
              {"compile time": "compile ms", "first run": "first ms", "second run": "second ms",
               "steady state (median, p10-p90)": "steady ms", "the proof": "output", "cost and memory analysis":
               "XLA plan: arguments", "fusions": "fusions", "roofline": "bound by", "verdict per pair": "verdict:"}),
    "memory": (("{gemm}", "--budget", "t4"), {"arguments": "arguments", "outputs": "outputs", "aliased": "aliased",
                                               "temporaries": "temporaries", "generated code": "code",
                                               "planned peak": "peak", "--budget": "t4 ("}),
    "models": ((), {"adapters": "gpt2", "sizes": "tiny", "input shapes": "batch "}),
}


@pytest.mark.parametrize("name", sorted(OUTPUT_SHAPES))
def test_each_command_prints_what_its_help_says(cli, name):
    from conftest import golden

    args, parts = OUTPUT_SHAPES[name]
    files = {"gemm": golden("gemm", "jax"), "gemm_xla": golden("gemm", "torch-torch_xla")}
    help_text = " ".join(main.get_command(click.Context(main), name).help.split())
    code, out, err = cli(name, *[a.format(**files) for a in args])
    assert code in (0, 1), err
    for promised, marker in parts.items():
        assert promised in help_text, f"{name} --help no longer says {promised!r}: update OUTPUT_SHAPES"
        assert marker in out, f"{name} --help promises {promised!r}, its output has no {marker!r}"
