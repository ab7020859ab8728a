"""Generate docs/cli.md from the CLI's own --help (`make docs`); a test keeps the two in step."""
from __future__ import annotations

import click


def cli_reference() -> str:
    from .cli import main

    ctx = click.Context(main, info_name="stackwars-ir", terminal_width=80, max_content_width=80)
    out = ["# CLI reference", "", "Generated from `--help` by `make docs` (`python -m stackwars_ir.docs`).", "",
           "```", main.get_help(ctx), "```", ""]
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        sub = click.Context(cmd, info_name=name, parent=ctx)
        out += [f"## stackwars-ir {name}", "", "```", cmd.get_help(sub), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(cli_reference(), end="")
