"""The command line: a thin click layer over the library (commands, causes, stack, shell, reference)."""
from .commands import main

__all__ = ["main"]
