"""Running elsewhere: a `Task` in a killable worker process, under a time and a memory limit.

A `Task` is a stage's own function and its arguments; its worker runs in this environment or a
version stack's.

Protocol on stdin/stdout: length-prefixed pickles (both ends run the same Python and code). The
parent sends a `Task`; the worker replies ("started",) when the task says its inputs are ready and
its compile begins (`started()`), then the task's return value, or a `Failed` with the one line that
stopped it, which the parent turns into the task's own failure row (`Task.failed`).

The parent side (`Isolated`) waits for each reply under a wall-time limit (SETUP_S to prepare the
inputs, then the task's timeout + GRACE_S to compile and run) and a resident-memory limit; past
either it kills the worker, reports that task's row, and starts a fresh worker for the next one.
XLA's compile and run are native code that Python cannot interrupt: killing the process is the only
way to stop one that will not finish. A task is a function of the stage that owns it (pickled by
reference), so this module imports no stage above it and no stage imports a switch of kinds.
"""
from __future__ import annotations

import functools
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..common.errors import StackwarsError
from ..common.files import host_memory
from ..common.runtime import quiet_libtpu
from ..common.wire import die_with_parent, end_worker, receive_bytes, send_bytes
from ..ir import parse_bytes
from .stacks import Stack, worker_command

SETUP_S = 300.0  # imports, building the model's weights and reference (a base model: seconds)
GRACE_S = 10.0  # beyond --timeout: the run in flight when the budget ends, and the reply
BOOT = "from stackwars_ir.isolate.task import main; main()"
_NOTIFY = None  # in a worker: tells the parent the task's inputs are ready (set by main)


def started() -> None:
    """Called by a task when its inputs are ready and its compile starts (no-op in-process): the
    parent's time limit for the compile and runs begins now."""
    if _NOTIFY is not None:
        _NOTIFY()


def _send(stream, obj) -> None:
    send_bytes(stream, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True)
class Failed:
    """The worker's reply for a task that raised (or could not be loaded): its one line."""

    message: str


def _with_error(kind, args, keywords, message: str):
    return kind(*args, error=message, **keywords)


def row(kind: Callable[..., object], *args: object, **keywords: object) -> Callable[[str], object]:
    """A task's failure row: `kind(*args, **keywords, error=message)` (an Executable, a MemoryPlan ...),
    picklable."""
    return functools.partial(_with_error, kind, args, keywords)


def _ignore(message: str) -> None:
    return None


@dataclass(frozen=True)
class Task:
    """One function to run in a worker: `fn(*args)`, module-level (pickled by reference, so the worker
    imports the module that owns it). label: what progress and errors call it. failed(message): the
    row the task becomes when it does not finish (an exception instance is returned, for the caller to
    raise). setup: run once per worker before the first task that names it (workload.keep_prepared).
    values: (path, .npz) pairs, argument values the parent built for a stack's worker, passed to `fn` as
    its keyword `staged` (a dict)."""

    fn: Callable
    args: tuple = ()
    label: str = ""
    failed: Callable[[str], object] = _ignore
    setup: Callable | None = None
    values: tuple = ()
    stage: tuple[str, ...] = ()  # capture files whose argument values a stack's worker needs (Isolated's stager)


def _one_line(task: Task, e: BaseException) -> str:
    return e.one_line() if isinstance(e, StackwarsError) else \
        f"{task.label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"


def _run(task: Task, done: set):
    try:
        if task.setup is not None and task.setup not in done:
            task.setup()
            done.add(task.setup)
        if task.values:  # the parent's values for a stack's worker, passed as the task's `staged`
            return task.fn(*task.args, staged=dict(task.values))
        return task.fn(*task.args)
    except Exception as e:  # a bug of ours, or a framework failure: still one row
        return Failed(_one_line(task, e))


def main() -> None:
    """The worker: tasks from stdin, replies on stdout, until the parent closes its end (or dies)."""
    global _NOTIFY
    # Ctrl-C reaches the whole process group: the caller handles it and ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()

    quiet_libtpu()  # a worker started by a script, not the CLI, would print libtpu's start-up errors
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the reply stream
    _NOTIFY = lambda: _send(stdout, ("started",))  # noqa: E731
    done: set = set()
    while True:
        try:
            data = receive_bytes(stdin)
        except EOFError:
            return
        try:
            task = pickle.loads(data)
        except Exception as e:  # its module does not import here (a stack without torch): one row
            _send(stdout, Failed(f"the worker could not load the task: {type(e).__name__}: {str(e)[:200]}"))
            continue
        _send(stdout, _run(task, done))


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check_timeout(timeout: float | None) -> None:
    """--timeout: a positive number of seconds, or none."""
    if timeout is not None and not timeout > 0:
        raise StackwarsError(f"--timeout {timeout:g} must be a positive number of seconds", fix="e.g. --timeout 60")


def max_memory(text: str | None, timeout: float | None = None) -> int | None:
    """--max-memory in bytes (default: 3/4 of this machine's), after checking --timeout."""

    check_timeout(timeout)
    return parse_bytes(text, "--max-memory") if text else default_max_memory()


def default_max_memory() -> int | None:
    """Three quarters of this machine's memory: a runaway compile fails alone, the machine stays up."""

    total = host_memory()
    return total * 3 // 4 if total else None


class Isolated:
    """Runs tasks in a worker process under a time and a memory limit; a context manager.
    stack: the version stack whose environment runs the worker (None or the lock: this one). host_devices: CPU devices the worker's jax has (a sharded module's
    partitions). stager(paths, folder): for a stack's worker, the argument values of a task's `stage`
    files built here, where the adapters' PyTorch models are (bench.staging.staged_values)."""

    def __init__(self, max_memory: int | None = None, host_devices: int = 1, *, stack: Stack | None = None,
                 stager: Callable[[tuple[str, ...], Path], tuple[tuple[str, str], ...]] | None = None) -> None:
        self.max_memory = max_memory
        self.host_devices = host_devices
        self.proc: subprocess.Popen | None = None
        self.stack = None if stack is None or stack.is_lock else stack
        self.stager = stager
        self._staging = None

    def __enter__(self) -> "Isolated":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and self.proc is not None and self.proc.poll() is None:
            self._kill()  # interrupted (Ctrl-C) or failed: the worker's measurement is not wanted
        self.close()

    def command(self) -> tuple[list, dict]:
        """The worker's command line and environment."""
        cmd = [sys.executable, "-c", f"import sys; sys.path[:] = {[p for p in sys.path if p]!r}; {BOOT}"]
        env = dict(os.environ)
        if self.stack is not None:  # its own interpreter and packages, this project's code copied in

            cmd, env = worker_command(self.stack, BOOT)
        if self.host_devices > 1 and "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", ""):
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={self.host_devices}"
        return cmd, env

    def _start(self) -> subprocess.Popen:
        cmd, env = self.command()
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def run(self, task: Task, timeout: float | None):
        """The worker's reply for `task`, or its failure row with the error that stopped it."""
        reply = self._reply(task, timeout)
        return task.failed(reply.message) if isinstance(reply, Failed) else reply

    def _reply(self, task: Task, timeout: float | None):
        if self.stack is not None and task.stage and self.stager is not None:
            try:
                task = self._staged(task)
            except StackwarsError as e:
                return Failed(e.one_line())
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        deadline = time.monotonic() + SETUP_S
        phase = "preparing its inputs"
        try:
            _send(self.proc.stdin, task)
            while True:
                wait = max(0.0, min(0.2, deadline - time.monotonic()))
                ready, _, _ = select.select([self.proc.stdout], [], [], wait)
                if ready:
                    reply = pickle.loads(receive_bytes(self.proc.stdout))
                    if reply == ("started",):
                        phase = "compile and runs"
                        deadline = time.monotonic() + (timeout + GRACE_S if timeout else float("inf"))
                        continue
                    return reply
                if time.monotonic() >= deadline:
                    self._kill()
                    budget = f"--timeout {timeout:g} s + {GRACE_S:g} s" if phase != "preparing its inputs" \
                        else f"{SETUP_S:g} s"
                    return Failed(f"{task.label}: timed out: {phase} took longer than {budget} and was stopped; "
                                  "the others were measured")
                used = _rss(self.proc.pid)
                if self.max_memory and used > self.max_memory:
                    self._kill()
                    return Failed(f"{task.label}: used {used / 2**30:.1f} GiB, more than --max-memory "
                                  f"{self.max_memory / 2**30:.1f} GiB, and was stopped (fix: raise --max-memory)")
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            self.proc = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            return Failed(f"{task.label}: the worker died ({how}) while compiling or running it")

    def _staged(self, task: Task) -> Task:
        import dataclasses
        import tempfile
        from pathlib import Path

        if self._staging is None:
            self._staging = tempfile.TemporaryDirectory(prefix="stackwars-values-")
        return dataclasses.replace(task, values=self.stager(task.stage, Path(self._staging.name)))

    def _kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self._staging is not None:
            self._staging.cleanup()
            self._staging = None
        if self.proc is not None:
            end_worker(self.proc, 10)
            self.proc = None
