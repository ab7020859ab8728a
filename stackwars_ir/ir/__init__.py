"""Parse: StableHLO files -> immutable IR modules, in a crash-isolated worker process; op graphs."""
from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
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


# MLIR keeps every attribute (constant payloads included) in its context for the context's
# life: a worker is replaced once it has read this much, so memory stays bounded.
RECYCLE_BYTES = 512 << 20


class Parser:
    """A parse worker process, restarted after a crash; use as a context manager."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.read = 0  # bytes of input the current worker has parsed

    def __enter__(self) -> "Parser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env.setdefault("JAX_PLATFORMS", "cpu")
        # The worker imports exactly this process's stackwars_ir: `python -m` would put the
        # working directory first on sys.path, and a stackwars_ir folder there (another checkout)
        # would be parsing instead.
        boot = f"import sys; sys.path[:] = {[p for p in sys.path if p]!r}; " \
               "from stackwars_ir.ir.worker import main; main()"
        return subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def parse(self, path: str | Path) -> ParseResult:
        """Every module of one file, or the one-line reason it could not be read."""
        return _result(str(path), [self.request(path)])

    def request(self, path: str | Path, part: tuple = (0, 1)) -> tuple:
        """The worker's reply for one file, or part j of k of it: ("ok", [wire, ...]) or
        ("error", one line)."""
        from .worker import receive, send

        label = str(path)
        if not Path(path).exists():
            return ("error", f"{label}: no such file")
        if Path(path).is_dir():
            return ("error", f"{label}: is a directory, not a StableHLO file")
        if self.read > RECYCLE_BYTES:
            self.close()
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.read += os.path.getsize(path)
        # Test seam: the worker dies as MLIR's native parser does on some malformed files.
        crash_on = os.environ.get("STACKWARS_IR_TEST_CRASH_ON")
        crash = bool(crash_on) and label.endswith(crash_on)
        try:
            send(self.proc.stdin, (label, *part, crash))
            return receive(self.proc.stdout)
        except (EOFError, BrokenPipeError, OSError):
            return ("error", self._crash(label))

    def _crash(self, label: str) -> str:
        code = self.proc.wait()
        self.proc = None
        self.read = 0
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
        self.read = 0


def _result(label: str, replies: list) -> ParseResult:
    """One file's ParseResult from its workers' replies, one per part, in order."""
    for status, payload in replies:
        if status != "ok":
            return ParseResult(label, error=payload)
    first = replies[0][1]
    if len(replies) == 1 or len(first) != 1:  # not shared: a file of several modules is part 0's
        return ParseResult(label, tuple(Module.from_wire(w) for w in first))
    try:
        return ParseResult(label, (Module.from_wire(*(payload[0] for _, payload in replies)),))
    except ValueError as e:  # a bug of ours: still one line
        return ParseResult(label, error=f"{label}: internal error while parsing: {e}")


class _Pool:
    """Idle parse workers, kept for the next load() of this process: a worker costs 0.2 s to
    start (Python, jaxlib, the MLIR context), more than parsing a GPT-2 capture takes."""

    def __init__(self):
        self.idle: list[Parser] = []
        self.lock = threading.Lock()
        atexit.register(self.close)

    def take(self) -> Parser:
        with self.lock:
            return self.idle.pop() if self.idle else Parser()

    def give(self, parser: Parser) -> None:
        with self.lock:
            self.idle.append(parser)

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for parser in idle:
            parser.close()


_POOL = _Pool()


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


# A file this big, with a core to spare, is walked by several workers at once (see _Builder).
# Measured on 2 cores: 15.5 MB 1.8 s -> 1.45 s, 7.7 MB 0.86 s -> 0.68 s; under 1 MB no gain.
# Each worker parses the whole text (and holds it in memory): at most MAX_SHARES of them.
SHARE_BYTES = 2 << 20
MAX_SHARES = 4


def load(paths, jobs: int | None = None) -> list[ParseResult]:
    """Parse every file, in order. Each worker keeps one MLIR context for all its files (a
    context per file costs 10x); several workers (one per core) share the files, and share a
    big file when there are fewer files than cores."""
    with no_gc():
        return _load([str(p) for p in paths], jobs)


def _load(paths: list, jobs: int | None) -> list[ParseResult]:
    jobs = max(1, jobs or os.cpu_count() or 1)
    shares = [1] * len(paths)
    if len(paths) < jobs:
        for i, p in enumerate(paths):
            if os.path.isfile(p) and os.path.getsize(p) >= SHARE_BYTES:
                shares[i] = min(MAX_SHARES, jobs // len(paths))
    tasks = [(i, (j, k)) for i, k in enumerate(shares) for j in range(k)]
    replies: dict = {}
    todo = iter(tasks)
    lock = threading.Lock()

    def drain() -> None:
        parser = _POOL.take()
        try:
            while True:
                with lock:
                    task = next(todo, None)
                if task is None:
                    return
                i, part = task
                replies[i, part[0]] = parser.request(paths[i], part)
        finally:
            _POOL.give(parser)

    workers = min(jobs, len(tasks))
    if workers <= 1:
        drain()
    else:
        threads = [threading.Thread(target=drain, daemon=True) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return [_result(p, [replies[i, j] for j in range(shares[i])]) for i, p in enumerate(paths)]


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
