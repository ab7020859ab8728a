"""The command line: a thin click layer over the library (commands, causes, stack, shell, reference)."""


def main() -> None:
    """The console script `stackwars-ir` (and `python -m stackwars_ir.cli`): commands.main, run by
    shell.console."""
    from .commands import main as group
    from .shell import console

    console(group)


__all__ = ["main"]
