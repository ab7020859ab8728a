"""Parse: StableHLO files -> immutable IR modules, in a crash-isolated worker process; op graphs."""
from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ParseError
from .model import Func, Module, Op, Tensor, Value

__all__ = ["Func", "Module", "Op", "Tensor", "Value", "Parser", "ParseResult", "load", "load_one", "load_single"]


@dataclass(frozen=True)
class ParseResult:
    """One input file: its modules, or the one-line reason it could not be read."""

    path: str
    modules: tuple = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Parser:
    """A parse worker process, restarted after a crash; use as a context manager."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Parser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env.setdefault("JAX_PLATFORMS", "cpu")
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return subprocess.Popen([sys.executable, "-m", "stackwars_ir.ir.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def parse(self, path: str | Path) -> ParseResult:
        from .worker import receive, send

        label = str(path)
        if not Path(path).exists():
            return ParseResult(label, error=f"{label}: no such file")
        if Path(path).is_dir():
            return ParseResult(label, error=f"{label}: is a directory, not a StableHLO file")
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        try:
            send(self.proc.stdin, label)
            status, payload = receive(self.proc.stdout)
        except (EOFError, BrokenPipeError, OSError):
            return ParseResult(label, error=self._crash(label))
        if status == "ok":
            return ParseResult(label, tuple(Module.from_wire(w) for w in payload))
        return ParseResult(label, error=payload)

    def _crash(self, label: str) -> str:
        code = self.proc.wait()
        self.proc = None
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return (f"{label}: MLIR's parser crashed on this file ({how}); the file is malformed "
                "(fix: check it with stablehlo-opt, or re-export it)")

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            self.proc = None


@contextlib.contextmanager
def no_gc():
    """Pause the cyclic GC while 100,000s of long-lived IR tuples are made (they hold no cycles)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load(paths, jobs: int | None = None) -> list[ParseResult]:
    """Parse every file, in order. Each worker keeps one MLIR context for all its files (a
    context per file costs 10x); with several files, one worker per core shares the work."""
    with no_gc():
        return _load(list(paths), jobs)


def _load(paths: list, jobs: int | None) -> list[ParseResult]:
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(paths)))
    if jobs == 1:
        with Parser() as parser:
            return [parser.parse(p) for p in paths]
    import queue
    import threading

    todo: queue.Queue = queue.Queue()
    for item in enumerate(paths):
        todo.put(item)
    results: list = [None] * len(paths)

    def drain() -> None:
        with Parser() as parser:
            while True:
                try:
                    i, p = todo.get_nowait()
                except queue.Empty:
                    return
                results[i] = parser.parse(p)

    threads = [threading.Thread(target=drain, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def load_single(paths) -> list[Module]:
    """The one module of each file, parsed side by side; ParseError for the first that fails."""
    modules = []
    for result in load(paths):
        if not result.ok:
            raise ParseError(result.error)
        if len(result.modules) != 1:
            raise ParseError(f"{result.path}: holds {len(result.modules)} modules (split by // -----)",
                             fix="give a file with one module")
        modules.append(result.modules[0])
    return modules


def load_one(path: str | Path) -> Module:
    """The single module of one file; ParseError otherwise."""
    return load_single([path])[0]
