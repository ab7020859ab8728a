"""Every command a fix suggests names a real command and only its options (issue 75, item 6)."""
from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _literal(node) -> str | None:
    """A fix's text: a string, an f-string with each {value} as X, or their concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else left + right
    return None


def _fixes() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "stackwars_ir").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "fix" and (text := _literal(node.value)):
                out.append((f"{path.relative_to(ROOT)}:{node.value.lineno}", text))
    return out


def command_mistakes(fixes) -> list[str]:
    """Each `stackwars-ir WORD --option ...` in a fix whose WORD is no command (but near one) or whose
    option that command does not take."""
    import click

    from stackwars_ir.cli.commands import main

    ctx, bad = click.Context(main), []
    names = list(main.list_commands(ctx))
    for where, text in fixes:
        for m in re.finditer(r"stackwars-ir ([a-z]+)((?: [^,;()]*)?)", text):
            cmd = main.get_command(ctx, m.group(1))
            if cmd is None:  # prose ("which stackwars-ir reads"), unless it is a mistyped command
                if difflib.get_close_matches(m.group(1), names, cutoff=0.75):
                    bad.append(f"{where}: no command {m.group(1)!r}: {text}")
                continue
            if isinstance(cmd, click.Group) and m.group(2).split():
                cmd = cmd.get_command(ctx, m.group(2).split()[0]) or cmd
            opts = {o for p in cmd.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
            bad += [f"{where}: {m.group(1)} takes no {o}: {text}"
                    for o in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(2)) if o not in opts]
    return bad


def test_every_suggested_command_is_one_the_cli_takes():
    fixes = _fixes()
    assert len(fixes) > 100  # the walk found the fixes
    assert command_mistakes(fixes) == []


def test_the_check_sees_a_wrong_option_and_a_mistyped_command():
    found = command_mistakes([("x.py:1", "stackwars-ir bench A B --profiles --json FILE"),
                              ("x.py:2", "stackwars-ir benhc A B"), ("x.py:3", "which stackwars-ir reads")])
    assert found == ["x.py:1: bench takes no --profiles: stackwars-ir bench A B --profiles --json FILE",
                     "x.py:2: no command 'benhc': stackwars-ir benhc A B"]
