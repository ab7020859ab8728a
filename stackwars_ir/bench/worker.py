"""The bench worker: compiles and times executables in a child process, so a hung or runaway one can be killed.

Protocol on stdin/stdout: length-prefixed pickles (both ends run the same Python and code).
Job: ("file", path, backend, timeout), ("files", paths, backend, timeout) (timed side by side,
their steady-state runs taking turns), ("baseline", request, name, backend, timeout),
("memory", path, target, measure) or ("kernels", path, backend).
Replies: ("started",) when the inputs are ready and the compile begins, then the Executable it
measured (a list of them for "files"), or for "memory" the MemoryPlan (errors included, as their `error`).

The parent side (`Isolated`) waits for each reply under a wall-time limit (SETUP_S to prepare the
inputs, then the job's timeout + GRACE_S to compile and run) and a resident-memory limit; past
either it kills the worker, reports that executable, and starts a fresh worker for the next job. XLA's compile and run are native code that Python cannot interrupt: killing the
process is the only way to stop one that will not finish.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..wire import receive_bytes, send_bytes

SETUP_S = 300.0  # imports, building the model's weights and reference (a base model: seconds)
GRACE_S = 10.0  # beyond --timeout: the run in flight when the budget ends, and the reply
_NOTIFY = None


def started() -> None:
    """Called by the bench code when the inputs are ready and the compile starts (no-op in-process)."""
    if _NOTIFY is not None:
        _NOTIFY()


def _send(stream, obj) -> None:
    send_bytes(stream, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(stream):
    return pickle.loads(receive_bytes(stream))


def _label(job) -> str:
    if job[0] == "files":
        return ", ".join(map(str, job[1]))
    return str(job[1]) if job[0] in ("file", "memory", "kernels") else job[2]


def _failed(job, message: str):
    """The row for a job that did not finish: an Executable, or a MemoryPlan for a memory job."""
    if job[0] == "memory":
        from .memory import MemoryPlan

        return MemoryPlan(_label(job), job[2], error=message)
    if job[0] == "kernels":
        from .kernels import Kernels

        return Kernels(_label(job), job[2], error=message)
    from . import Executable

    if job[0] == "files":  # each file's row, with the one error that stopped them all
        return [Executable(str(path), "stablehlo", None, None, error=message) for path in job[1]]
    return Executable(_label(job), _kind(job), None, None, error=message)


def _kind(job) -> str:
    return "stablehlo" if job[0] in ("file", "files") else job[2]


def _run(job):
    try:
        if job[0] == "memory":
            from .memory import plan_file

            _, path, target, measure = job
            return plan_file(Path(path), target, measure)
        if job[0] == "kernels":
            from .kernels import compile_kernels

            _, path, backend = job
            return compile_kernels(Path(path), backend)
        if job[0] == "file":
            from .run import bench_one

            _, path, backend, timeout = job
            return bench_one(Path(path), backend, timeout)
        if job[0] == "files":
            from .run import bench_group

            _, paths, backend, timeout = job
            return bench_group([Path(p) for p in paths], backend, timeout)
        from .native import run_baselines

        _, req, name, backend, timeout = job
        return run_baselines(req, (name,), timeout, backend)[0]
    except Exception as e:  # a bug of ours, or a framework failure: still one row
        from ..errors import StackwarsError

        message = e.one_line() if isinstance(e, StackwarsError) else \
            f"{_label(job)}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        return _failed(job, message)


def main() -> None:
    global _NOTIFY
    # Ctrl-C reaches the whole process group: the caller handles it and ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the reply stream
    _NOTIFY = lambda: _send(stdout, ("started",))  # noqa: E731
    from ..workload import keep_prepared

    keep_prepared()  # within one worker, each model's weights and reference are built once
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return
        _send(stdout, _run(job))


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
        from ..errors import StackwarsError

        raise StackwarsError(f"--timeout {timeout:g} must be a positive number of seconds", fix="e.g. --timeout 60")


def default_max_memory() -> int | None:
    """Three quarters of this machine's memory: a runaway compile fails alone, the machine stays up."""
    from ..files import host_memory

    total = host_memory()
    return total * 3 // 4 if total else None


class Isolated:
    """Runs bench jobs in a worker process under a time and a memory limit; a context manager."""

    def __init__(self, max_memory: int | None = None):
        self.max_memory = max_memory
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Isolated":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and self.proc is not None and self.proc.poll() is None:
            self._kill()  # interrupted (Ctrl-C) or failed: the worker's measurement is not wanted
        self.close()

    def _start(self) -> subprocess.Popen:
        boot = f"import sys; sys.path[:] = {[p for p in sys.path if p]!r}; " \
               "from stackwars_ir.bench.worker import main; main()"
        return subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=dict(os.environ))

    def run(self, job, timeout: float | None):
        """The worker's reply for `job`, or a row (Executable, MemoryPlan) with the error that stopped it."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        deadline = time.monotonic() + SETUP_S
        phase = "preparing its inputs"
        try:
            _send(self.proc.stdin, job)
            while True:
                wait = max(0.0, min(0.2, deadline - time.monotonic()))
                ready, _, _ = select.select([self.proc.stdout], [], [], wait)
                if ready:
                    reply = _receive(self.proc.stdout)
                    if reply == ("started",):
                        phase = "compile and runs"
                        deadline = time.monotonic() + (timeout + GRACE_S if timeout else float("inf"))
                        continue
                    return reply
                if time.monotonic() >= deadline:
                    self._kill()
                    budget = f"--timeout {timeout:g} s + {GRACE_S:g} s" if phase != "preparing its inputs" \
                        else f"{SETUP_S:g} s"
                    return _failed(job, (
                        f"{_label(job)}: timed out: {phase} took longer than {budget} and was stopped; "
                        "the others were measured"))
                used = _rss(self.proc.pid)
                if self.max_memory and used > self.max_memory:
                    self._kill()
                    return _failed(job, (
                        f"{_label(job)}: used {used / 2**30:.1f} GiB, more than --max-memory "
                        f"{self.max_memory / 2**30:.1f} GiB, and was stopped (fix: raise --max-memory)"))
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            self.proc = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            return _failed(job, f"{_label(job)}: the bench worker died ({how}) while compiling or running it")

    def _kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
