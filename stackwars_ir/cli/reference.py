"""Generate docs/cli.md from the CLI's own --help (`make docs`); a test keeps the two in step."""
from __future__ import annotations

def cli_reference() -> str:
    from .commands import main

    # make_context applies the group's context_settings (-h as well as --help), as a real run does.
    ctx = main.make_context("stackwars-ir", [], resilient_parsing=True, terminal_width=80, max_content_width=80)
    out = ["# CLI reference", "", "Generated from `--help` by `make docs` (`python -m stackwars_ir.cli.reference`).", "",
           "```", main.get_help(ctx), "```", ""]
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        sub = cmd.make_context(name, [], parent=ctx, resilient_parsing=True)
        out += [f"## stackwars-ir {name}", "", "```", cmd.get_help(sub), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(cli_reference(), end="")
