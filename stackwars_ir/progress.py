"""Stage progress on a terminal (stderr), silence elsewhere, and the wall time of every stage."""
from __future__ import annotations

import contextlib
import sys
import threading
import time

# Stages of two threads (capture's parity runs beside the next export) share stderr: a stage's
# `[label] name ...` line stays open until it ends, unless another stage prints meanwhile; then it
# is closed, and its end gets a whole line of its own.
_LOCK = threading.Lock()
_OPEN: list = [None]  # the stage whose line is open


class Stages:
    """Times named stages; prints `[label] stage ... 1.2 s` lines only when stderr is a terminal."""

    def __init__(self, label: str = "", *, show: bool | None = None):
        self.label = label
        self.show = sys.stderr.isatty() if show is None else show
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str, *, hold_ctrl_c: bool = False):
        """Time one stage; with hold_ctrl_c, a Ctrl-C stops the command at the stage's end, not inside it
        (errors.held_interrupts: torch's exporters call Python from C++)."""
        if hold_ctrl_c:
            from .errors import held_interrupts

            with held_interrupts(f"[{self.label}] {name}" if self.label else name), self.stage(name):
                yield
            return
        key = object()
        if self.show:
            self._print(f"[{self.label}] {name} ...", opens=key)
        start = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + took, 3)
            if self.show:
                self._print(f" {took:.1f} s\n", closes=key, whole=f"[{self.label}] {name} ... {took:.1f} s\n")

    @staticmethod
    def _print(text: str, opens=None, closes=None, whole: str = "") -> None:
        with _LOCK:
            if closes is not None and _OPEN[0] is closes:
                sys.stderr.write(text)
            else:
                if _OPEN[0] is not None:
                    sys.stderr.write("\n")
                sys.stderr.write(whole or text)
            _OPEN[0] = opens
            sys.stderr.flush()
