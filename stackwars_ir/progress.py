"""Stage progress on a terminal (stderr), silence elsewhere, and the wall time of every stage."""
from __future__ import annotations

import contextlib
import sys
import time


class Stages:
    """Times named stages; prints `... stage` / `done in 1.2 s` lines only when stderr is a terminal."""

    def __init__(self, label: str = "", *, show: bool | None = None):
        self.label = label
        self.show = sys.stderr.isatty() if show is None else show
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str):
        if self.show:
            print(f"[{self.label}] {name} ...", end="", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + took, 3)
            if self.show:
                print(f" {took:.1f} s", file=sys.stderr, flush=True)
