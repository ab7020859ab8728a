"""StableHLO files parsed with the real MLIR bindings in a pool of isolated workers.

Each file is parsed under a memory and a time limit.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import ParseError, StackwarsError
from ..common.wire import end_worker
from .model import Func, Module, Op, Tensor, Value
from .parse import compile_form
from .worker import receive, send

__all__ = ["Func", "Module", "Op", "Tensor", "Value", "Limits", "Parser", "ParseResult", "compile_input", "load",
           "load_one", "load_single", "parse_bytes", "picked"]


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

# What one parse worker may use: its whole address space (so also its resident memory) and the
# wall time of one file. A hostile line (a dimension number near 2^30 makes MLIR build a
# billion-entry list) otherwise takes 8.5 GB and 12 s before its error. A worker idles at about
# 0.5 GB of address space; the largest files measured in docs/parse.md stay far below the default.
MEMORY_ENV, TIMEOUT_ENV = "STACKWARS_IR_PARSE_MEMORY", "STACKWARS_IR_PARSE_TIMEOUT"
DEFAULT_MEMORY = 3 << 30
DEFAULT_SECONDS = 60.0
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_bytes(text: str, what: str = "--parse-memory") -> int:
    """`3G`, `512MiB`, `2.5gb` or plain bytes (binary units: 1G = 2^30 bytes)."""
    t = str(text).strip().lower().replace(" ", "")
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    try:
        value = float(num) * _UNITS[unit]
    except (ValueError, KeyError):
        raise StackwarsError(f"{what} {text!r} is not a size", fix="e.g. 3G, 512M or 3221225472") from None
    if value < (256 << 20):
        raise StackwarsError(f"{what} {text!r} is below 256M, too little to start a parse worker",
                             fix="e.g. 3G") from None
    return int(value)


@dataclass(frozen=True)
class Limits:
    """The memory (bytes of address space) and time (seconds per file) of one parse worker."""

    memory: int = DEFAULT_MEMORY
    seconds: float = DEFAULT_SECONDS

    @classmethod
    def from_env(cls) -> "Limits":
        memory = os.environ.get(MEMORY_ENV)
        seconds = os.environ.get(TIMEOUT_ENV)
        return cls(parse_bytes(memory, MEMORY_ENV) if memory else DEFAULT_MEMORY,
                   _seconds(seconds, f"{TIMEOUT_ENV}={seconds!r}") if seconds is not None else DEFAULT_SECONDS)


def limits_env(memory: str | None, seconds: str | None) -> dict[str, str]:
    """The environment that sets --parse-memory and --parse-timeout for this process and its parse
    workers, each checked here (one line for a bad value)."""
    env = {MEMORY_ENV: str(parse_bytes(memory))} if memory is not None else {}
    if seconds is not None:
        _seconds(seconds, f"--parse-timeout {seconds!r}")
        env[TIMEOUT_ENV] = seconds
    return env


def _seconds(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise StackwarsError(f"{what} is not a positive number of seconds", fix="e.g. 60")
    return value


def _human(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"




class Parser:
    """A parse worker process, restarted after a crash; use as a context manager."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.from_env()
        self.proc: subprocess.Popen | None = None
        self.stderr = None  # the worker's stderr, a temporary file: how it died, when it dies
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
        # The worker limits its own address space first thing: a preexec_fn would force a plain
        # fork() of this (multithreaded, once jax is imported) process, which can deadlock.
        boot = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({self.limits.memory}, " \
               f"{self.limits.memory})); import sys; sys.path[:] = {[p for p in sys.path if p]!r}; " \
               "from stackwars_ir.ir.worker import main; main()"
        if self.stderr is not None:
            self.stderr.close()
        self.stderr = tempfile.TemporaryFile()
        return subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=self.stderr, env=env)

    def parse(self, path: str | Path) -> ParseResult:
        """Every module of one file, or the one-line reason it could not be read."""
        return _result(str(path), [self.request(path)])

    def request(self, path: str | Path, part: tuple = (0, 1)) -> tuple:
        """The worker's reply for one file, or part j of k of it: ("ok", [wire, ...]) or
        ("error", one line)."""

        label = str(path)
        refusal = refused(path)
        if refusal is not None:
            return ("error", refusal)
        if self.read > RECYCLE_BYTES:
            self.close()
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.read += os.path.getsize(path)
        # Test seams: the worker dies as MLIR's native parser does on some malformed files, or hangs.
        seam = None
        for kind in ("crash", "hang"):
            suffix = os.environ.get(f"STACKWARS_IR_TEST_{kind.upper()}_ON")
            if suffix and label.endswith(suffix):
                seam = kind
        try:
            send(self.proc.stdin, (label, *part, seam))
            if not self._reply_within(self.limits.seconds):
                return ("error", self._timed_out(label))
            status, payload = receive(self.proc.stdout)
            if status == "memory":  # the worker is replaced: MLIR may be half-way through an allocation
                self.proc.kill()
                self._forget()
                return ("error", self._over_memory(label))
            return status, payload
        except (EOFError, BrokenPipeError, OSError):
            return ("error", self._crash(label))

    def _reply_within(self, seconds: float) -> bool:
        """Wait until the worker starts its reply (or dies); False after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                return True

    def _timed_out(self, label: str) -> str:
        self.proc.kill()
        self._forget()
        return (f"{label}: parsing took longer than the limit of {self.limits.seconds:g} s per file and was "
                f"stopped (fix: raise it with --parse-timeout SECONDS or {TIMEOUT_ENV})")

    def _over_memory(self, label: str) -> str:
        return (f"{label}: parsing needed more than the memory limit of {_human(self.limits.memory)} per parse "
                f"worker and was stopped (fix: raise it with --parse-memory SIZE or {MEMORY_ENV}, e.g. 8G)")

    def _forget(self) -> None:
        self.proc.wait()
        self.proc = None
        self.read = 0

    def _died_of_memory(self) -> bool:
        if self.stderr is None:
            return False
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 4096))
        tail = self.stderr.read().decode(errors="replace")
        return any(s in tail for s in ("out of memory", "bad_alloc", "MemoryError", "Cannot allocate memory"))

    def _crash(self, label: str) -> str:
        code = self.proc.wait()
        memory = self._died_of_memory()
        self._forget()
        if memory:
            return self._over_memory(label)
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return (f"{label}: MLIR's parser or its Python bindings crashed on this file ({how}); the file is "
                "malformed (fix: check it with stablehlo-opt, or re-export it)")

    def close(self) -> None:
        if self.proc is not None:
            end_worker(self.proc, 5)
            self.proc = None
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None
        self.read = 0


def refused(path: str | Path) -> str | None:
    """The one line that refuses a path before any parse (no such file, a folder, a capture's JSON
    sidecar), or None for a file to parse."""
    label = str(path)
    if not Path(path).exists():
        return (f"{label}: no such file (fix: check the path; `stackwars-ir capture MODEL` writes its "
                "captures under captures/MODEL-SIZE/ (--out), `bench MODEL` and `memory MODEL` theirs "
                "under out/captures/)")
    if Path(path).is_dir():
        return _folder_error(label, Path(path))
    if Path(path).suffix == ".json":
        twin = Path(path).with_suffix(".mlir")
        hint = f"did you mean {twin}?" if twin.exists() else "give the .mlir file it describes"
        return f"{label}: is a JSON file (a capture sidecar?), not StableHLO (fix: {hint})"
    return None


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
        limits = Limits.from_env()
        with self.lock:
            stale = [p for p in self.idle if p.limits != limits]  # started under other limits
            self.idle = [p for p in self.idle if p.limits == limits]
            parser = self.idle.pop() if self.idle else Parser(limits)
        for p in stale:
            p.close()
        return parser

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
def no_gc() -> Iterator[None]:
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


def _dumped(folder: Path) -> dict:
    """An XLA dump folder's (`--xla_dump_to=DIR`) modules before optimizations: {module_NNNN.NAME: its
    file} (the HloModuleProto where both it and the text were dumped)."""
    import re

    dumped: dict = {}
    for f in folder.glob("module_*.before_optimizations.*"):
        m = re.match(r"(module_\d+\..+)\.before_optimizations\.(hlo\.pb|txt)$", f.name)
        if m and (m.group(1) not in dumped or m.group(2) == "hlo.pb"):
            dumped[m.group(1)] = f
    return dumped


def dump_module(folder: Path, name: str) -> Path:
    """The file of module NAME in an XLA dump folder, before optimizations: NAME as XLA names the module
    (`jit_forward`, what jax names after the function jitted) or with its number (`module_0003.jit_forward`).
    ParseError naming the modules there when none or several match."""
    dumped = _dumped(folder)
    hits = [f for key, f in dumped.items() if key == name or key.split(".", 1)[1] == name]
    if len(hits) == 1:
        return hits[0]
    names = sorted({key.split(".", 1)[1] for key in dumped})
    shown = ", ".join(names[:8]) + (f", and {len(names) - 8} more" if len(names) > 8 else "")
    if not hits:
        raise ParseError(f"{folder}#{name}: the dump folder holds no module {name!r}"
                         + (f" (its modules: {shown})" if dumped else " (it holds no module_*.before_optimizations file)"),
                         fix=f"give {folder}#NAME with one of its modules' names" if dumped else
                         "dump with XLA_FLAGS=--xla_dump_to=DIR (add --xla_dump_hlo_as_proto for .hlo.pb files)")
    raise ParseError(f"{folder}#{name}: {len(hits)} modules of the dump are named {name!r}: "
                     + ", ".join(sorted(h.name.split(".before_optimizations")[0] for h in hits)),
                     fix=f"give one with its number, e.g. {folder}#{hits[0].name.split('.before_optimizations')[0]}")


def _folder_error(label: str, folder: Path) -> str:
    """One line for a folder given as a file: an XLA dump's (`--xla_dump_to=DIR`) modules listed, largest
    first, the largest's file named as the one to give; else name the .mlir files in it."""
    dumped = _dumped(folder)
    if not dumped:
        files = sorted(p.name for p in folder.iterdir() if p.suffix in (".mlir", ".mlirbc") and p.is_file())
        if files:
            shown = ", ".join(files[:3]) + (f", and {len(files) - 3} more" if len(files) > 3 else "")
            return f"{label}: is a directory, not a StableHLO file (fix: name the files in it: {shown})"
        return (f"{label}: is a directory holding no .mlir or .mlirbc file and no XLA dump (fix: give a StableHLO "
                "file, or a folder dumped with XLA_FLAGS=--xla_dump_to=DIR)")
    order = sorted(dumped.values(), key=lambda f: -f.stat().st_size)
    shown = ", ".join(f"{f.name.split('.before_optimizations')[0]} ({f.stat().st_size / 1024:,.0f} KiB)"
                      for f in order[:4]) + (f", and {len(order) - 4} more" if len(order) > 4 else "")
    return (f"{label}: an XLA dump folder of {len(order)} modules, largest first: {shown} (fix: give the module of "
            f"the function you jitted by its name, {label}#jit_NAME (e.g. {label}#"
            f"{order[0].name.split('.before_optimizations')[0].split('.', 1)[1]}, the largest), or its file; "
            "JAX's own helpers (jit__normal, jit_convert_element_type, ...) are dumped beside it)")


def picked(path: str | Path) -> tuple[str, int | None]:
    """(FILE, K) of `FILE#K` (module K of a file of several) where FILE is a file and PATH is not one;
    (its file, None) of `DIR#NAME`, module NAME of an XLA dump folder (dump_module: ParseError where
    none or several match); (PATH, None) otherwise."""
    import re

    p = str(path)
    m = re.fullmatch(r"(.+)#(\d+)", p)
    if m and not os.path.exists(p) and os.path.isfile(m.group(1)):
        return m.group(1), int(m.group(2))
    m = re.fullmatch(r"(.+)#([^#/]+)", p)
    if m and not os.path.exists(p) and os.path.isdir(m.group(1)):  # DIR#NAME: a dump folder's module by name
        return str(dump_module(Path(m.group(1)), m.group(2))), None
    return p, None


def load(paths: Iterable[str | Path], jobs: int | None = None,
         ready: Callable[[int, ParseResult], object] | None = None) -> list[ParseResult]:
    """Parse every file, in order; `FILE#K` is module K of FILE alone (its source FILE#K). Each worker
    keeps one MLIR context for all its files (a context per file costs 10x); several workers (one
    per core) share the files, and share a big file when there are fewer files than cores.
    `ready(i, result)`: called in this thread as each file's result arrives, while the workers go on
    with the others (a caller's own work on the first file then overlaps the parse of the last)."""
    picks, refused = [], {}
    for i, p in enumerate(paths):
        try:
            picks.append(picked(p))
        except ParseError as e:  # DIR#NAME of a module the dump does not hold
            picks.append((str(p), None))
            refused[i] = ParseResult(str(p), error=e.one_line())
    parsed = [i for i in range(len(picks)) if i not in refused]

    def arrived(j: int, result: ParseResult) -> ParseResult:
        i = parsed[j]
        f, k = picks[i]
        result = result if k is None else _module_k(result, f"{f}#{k}", k)
        if ready is not None:
            ready(i, result)
        return result

    if ready is not None:
        for i, result in refused.items():
            ready(i, result)
    with no_gc():
        results = _load([picks[i][0] for i in parsed], jobs, arrived)
    by_index = dict(zip(parsed, results))
    return [refused[i] if i in refused else by_index[i] for i in range(len(picks))]


def _holds(result: ParseResult) -> str:
    """`F: holds N modules: #0 (12 ops), #1 (3 ops)`: what a file of several modules holds."""
    n = len(result.modules)
    shown = ", ".join(f"#{j} ({sum(m.histogram().values()):,} ops)" for j, m in enumerate(result.modules[:6]))
    return f"{result.path}: holds {n} module{'s' if n != 1 else ''}: {shown}" + (", ..." if n > 6 else "")


def _module_k(result: ParseResult, label: str, k: int) -> ParseResult:
    if not result.ok:
        return result
    if k < len(result.modules):
        return ParseResult(label, (result.modules[k],))
    return ParseResult(label, error=f"{_holds(result)}; there is no #{k} (fix: give one as {result.path}#K, K from 0 "
                       f"to {len(result.modules) - 1})")


def compile_input(path: str | Path) -> tuple[bytes, str | bytes]:
    """(the file's bytes, its module in the form XLA's compile takes: parse.compile_form) of FILE or
    FILE#K. OSError for a file that cannot be read; ParseError as compile_form."""

    file, k = picked(path)
    data = Path(file).read_bytes()
    return data, compile_form(data, str(path), part=k)


def _load(paths: list, jobs: int | None, arrived: Callable[[int, ParseResult], ParseResult]) -> list[ParseResult]:
    """Each file's ParseResult, in order, as `arrived(i, result)` returns it (called in this thread as each
    file's last part comes back)."""
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
    done: queue.Queue = queue.Queue()  # a file index as each reply comes back, None as each drain ends

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
                done.put(i)
        finally:
            _POOL.give(parser)
            done.put(None)

    results: dict = {}

    def collect(i: int) -> None:
        if i not in results and all((i, j) in replies for j in range(shares[i])):
            results[i] = arrived(i, _result(paths[i], [replies[i, j] for j in range(shares[i])]))

    workers = min(jobs, len(tasks))
    if workers <= 1:
        drain()
    else:
        threads = [threading.Thread(target=drain, daemon=True) for _ in range(workers)]
        for t in threads:
            t.start()
        ended = 0
        while ended < workers:
            i = done.get()
            if i is None:
                ended += 1
            else:
                collect(i)
        for t in threads:
            t.join()
    for i in range(len(paths)):
        collect(i)
    return [results[i] for i in range(len(paths))]


def load_single(paths: Iterable[str | Path], ready: Callable[[int, Module], object] | None = None) -> list[Module]:
    """The one module of each file, parsed side by side; `FILE#K` picks module K of a file of several
    (split by `// -----`, HLO modules, torch_xla's saved graphs: read as FILE#0, FILE#1, ...);
    ParseError for the first that fails. `ready(i, module)`: called as each file's module arrives (as
    load's), for each file read as one module."""

    def one(i: int, result: ParseResult) -> None:
        if result.ok and len(result.modules) == 1:
            ready(i, result.modules[0])

    paths = list(paths)
    for p in paths:  # a path refused outright fails the call before any other file is parsed
        file, _ = picked(p)
        refusal = refused(file)
        if refusal is not None:
            raise ParseError(refusal)

    modules = []
    for result in load(paths, ready=one if ready is not None else None):
        if not result.ok:
            raise ParseError(result.error)
        if len(result.modules) != 1:
            raise ParseError(_holds(result), fix=f"give one as {result.path}#K (e.g. {result.path}#{len(result.modules) - 1})")
        modules.append(result.modules[0])
    return modules


def load_one(path: str | Path) -> Module:
    """The single module of one file; ParseError otherwise."""
    return load_single([path])[0]
