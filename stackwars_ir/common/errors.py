"""One exception family for every stage; the CLI turns it into a one-line message and exit code 2."""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from sys import UnraisableHookArgs
    from types import FrameType
    from typing import NoReturn

# Exit codes, shared by every command (diff uses all three, as diff(1) does).
EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class StackwarsError(Exception):
    """A problem the user can fix: the message names the file, the cause and the fix."""

    def __init__(self, message: str, *, fix: str | None = None, location: str | None = None) -> None:
        self.message = message
        self.fix = fix
        self.location = location
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.location}: {self.message}" if self.location else self.message
        if self.fix:
            text += f" (fix: {self.fix})"
        return " ".join(text.split())


class MissingExtra(StackwarsError):
    """A framework package is not importable."""

    def __init__(self, package: str, err: Exception | None = None) -> None:
        detail = f": {err}" if err else ""
        super().__init__(
            f"cannot import {package}{detail}",
            fix="install the pinned stack with `make setup` (pip install -r requirements.lock -e .)",
        )


class ParseError(StackwarsError):
    """An input file is not a StableHLO module we can read."""


class CaptureError(StackwarsError):
    """Exporting a model failed."""


class ParityError(StackwarsError):
    """Two captures of the same model compute different results (exit code 1: the files are written)."""

    exit_code = EXIT_DIFFERENT


class PartialCapture(CaptureError):
    """Some routes asked for were captured and written, others were not (each said why): exit code 1.
    `result` holds what was written (capture.CaptureSet)."""

    exit_code = EXIT_DIFFERENT

    def __init__(self, message: str, result: object = None, **kw: str | None) -> None:
        super().__init__(message, **kw)
        self.result = result


class BenchError(StackwarsError):
    """An executable could not be compiled or run."""


# Ctrl-C, remembered: Python raises KeyboardInterrupt wherever the main thread is, and when that is
# a callback whose exceptions are ignored (jax's gc callback, measured) the interrupt is lost and the
# command runs on. The CLI's handler sets this as well; writers check it before they publish files.
INTERRUPTED = {"flag": False}


def on_sigint(signum: int, frame: FrameType | None) -> NoReturn:
    INTERRUPTED["flag"] = True
    raise KeyboardInterrupt


def on_unraisable(unraisable: UnraisableHookArgs,
                  _default: Callable[[UnraisableHookArgs], object] = __import__("sys").unraisablehook) -> None:
    """A Ctrl-C raised where Python ignores exceptions (jax's gc callback, a __del__) printed
    "Exception ignored" and a traceback, and was lost. Print nothing; raise SIGINT again: its handler
    runs in the main thread, outside the callback, and stops the command there."""
    import os
    import signal
    import threading

    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        INTERRUPTED["flag"] = True
        # From another thread, 10 ms on: raised here, the handler would run inside this hook.
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()
        return
    _default(unraisable)


def check_interrupted() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C arrived, even one a callback swallowed."""
    if INTERRUPTED["flag"]:
        raise KeyboardInterrupt


@contextlib.contextmanager
def held_interrupts(what: str) -> Iterator[None]:
    """A context in which a Ctrl-C waits for the block's end, then raises KeyboardInterrupt there.

    For torch's exporters: they run Python callbacks from C++ (dynamo's frame hook, the dispatcher's
    Python modes), and a KeyboardInterrupt raised inside one can cross a C++ frame that cannot carry
    it: the process aborted (measured once in a CI run: exit -6, "terminate called after throwing an
    instance of 'python_error'", instead of 130). A second Ctrl-C raises at once. Outside the main
    thread, or where SIGINT is not Python's or the CLI's handler (ignored in a worker), it does nothing.
    """
    import os
    import signal
    import threading

    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or \
            previous not in (on_sigint, signal.default_int_handler):
        yield
        return
    asked = []

    def hold(signum, frame):
        if previous is on_sigint:
            INTERRUPTED["flag"] = True  # writers publish nothing from here on
        if asked:
            raise KeyboardInterrupt
        asked.append(signum)
        # os.write, not sys.stderr: the handler may run inside a write to sys.stderr
        os.write(2, f"stackwars-ir: stopping after {what} (Ctrl-C again stops now)\n".encode())

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    except BaseException:
        if asked:  # the stage failed after a Ctrl-C: still an interrupt (130), not its error
            raise KeyboardInterrupt
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if asked:
        raise KeyboardInterrupt
