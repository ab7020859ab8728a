"""The bench worker: compiles and times executables in a child process, so a hung or runaway one can be killed.

Protocol on stdin/stdout: length-prefixed pickles (both ends run the same Python and code).
Job: a `Job` (below): time a file, time files side by side (their steady-state runs taking turns),
time a request's native baseline, plan a file's memory, or count a file's kernels.
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
from dataclasses import dataclass
from pathlib import Path

from ..wire import die_with_parent, receive_bytes, send_bytes

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


@dataclass(frozen=True)
class Job:
    """One job for the bench worker. kind: "file" (time paths[0]), "files" (time paths side by side),
    "baseline" (time `request`'s native runtime `name`), "profile" (profile that runtime's steady
    runs: bench.native.profile_baseline, in a worker of its own), "memory" (plan paths[0] for
    `target`, `measure` it too), "kernels" (compile paths[0] and count its kernels per block),
    "estimate" (compile paths[0] for the TPU `backend` names and read its kernels' estimates),
    "capture" (a stack's captures of `request` and their parity, from `data`: capture.capture_here),
    "capture_abstract" (the same from shapes: capture.abstract.abstract_jax; no parity)."""

    kind: str
    paths: tuple[str, ...] = ()
    backend: str | None = None  # the runtime's platform; the compile target for "memory"
    timeout: float | None = None
    request: object = None  # workload.Request, for "baseline"
    name: str = ""  # the baseline, for "baseline"
    measure: bool = False  # for "memory"
    data: object = None  # "capture": (weights, inputs, reference, buffer names, state); "capture_abstract": parts
    values: tuple = ()  # (path, .npz) pairs: argument values the parent built for a stack's worker (staged_values)

    @property
    def label(self) -> str:
        return self.name if self.kind in ("baseline", "profile", "capture", "capture_abstract") else \
            ", ".join(self.paths)

    def failed(self, message: str):
        """The row for this job when it did not finish: an Executable (a list of them for "files"), a
        MemoryPlan, or Kernels, carrying the error."""
        if self.kind == "memory":
            from .memory import MemoryPlan

            return MemoryPlan(self.label, self.backend, error=message)
        if self.kind == "kernels":
            from .kernels import Kernels

            return Kernels(self.label, self.backend, error=message)
        if self.kind == "profile":
            from ..errors import BenchError

            return BenchError(message)
        if self.kind in ("capture", "capture_abstract"):
            from ..errors import CaptureError

            return CaptureError(message)
        from . import Executable

        if self.kind == "files":  # each file's row, with the one error that stopped them all
            return [Executable(path, "stablehlo", None, None, error=message) for path in self.paths]
        return Executable(self.label, "stablehlo" if self.kind in ("file", "estimate") else self.name, None, None,
                          error=message)


def _run(job: Job):
    try:
        if job.values:
            from ..files import stage_values

            stage_values(dict(job.values))
        if job.kind == "capture":  # a stack's captures (capture.run with a stack)
            from ..capture import capture_here

            weights, inputs, reference, buffers, state, exact = job.data
            started()
            return capture_here(job.request, weights, inputs, reference, buffers, state, exact)
        if job.kind == "capture_abstract":  # the same from shapes (capture.abstract.abstract_parts)
            from ..capture.abstract import abstract_jax
            from ..progress import Stages

            started()
            return abstract_jax(job.request, *job.data, lambda what: Stages(what, show=False))
        if job.kind == "memory":
            from .memory import plan_file

            return plan_file(Path(job.paths[0]), job.backend, job.measure)
        if job.kind == "kernels":
            from .kernels import compile_kernels

            return compile_kernels(Path(job.paths[0]), job.backend)
        if job.kind == "estimate":
            from .estimate import estimate_file

            return estimate_file(Path(job.paths[0]), job.backend)
        if job.kind == "file":
            from .run import bench_one

            return bench_one(Path(job.paths[0]), job.backend, job.timeout)
        if job.kind == "files":
            from .run import bench_group

            return bench_group([Path(p) for p in job.paths], job.backend, job.timeout)
        if job.kind == "profile":
            from .native import profile_baseline
            from .timing import Sampling

            return profile_baseline(job.request, job.name, Sampling.of().profile, job.backend)
        from .native import run_baselines

        return run_baselines(job.request, (job.name,), job.timeout, job.backend)[0]
    except Exception as e:  # a bug of ours, or a framework failure: still one row
        from ..errors import StackwarsError

        message = e.one_line() if isinstance(e, StackwarsError) else \
            f"{job.label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        return job.failed(message)


def main() -> None:
    global _NOTIFY
    # Ctrl-C reaches the whole process group: the caller handles it and ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
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


def max_memory(text: str | None, timeout: float | None = None) -> int | None:
    """--max-memory in bytes (default: 3/4 of this machine's), after checking --timeout."""
    from ..ir import parse_bytes

    check_timeout(timeout)
    return parse_bytes(text, "--max-memory") if text else default_max_memory()


def default_max_memory() -> int | None:
    """Three quarters of this machine's memory: a runaway compile fails alone, the machine stays up."""
    from ..files import host_memory

    total = host_memory()
    return total * 3 // 4 if total else None


class Isolated:
    """Runs bench jobs in a worker process under a time and a memory limit; a context manager."""

    def __init__(self, max_memory: int | None = None, host_devices: int = 1):
        from ..stacks import active

        self.max_memory = max_memory
        self.host_devices = host_devices  # CPU devices the worker's jax has (a sharded module's partitions)
        self.proc: subprocess.Popen | None = None
        self.stack = active()  # another stack's environment runs the worker (stacks.using), or this one
        self._staging = None

    def __enter__(self) -> "Isolated":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and self.proc is not None and self.proc.poll() is None:
            self._kill()  # interrupted (Ctrl-C) or failed: the worker's measurement is not wanted
        self.close()

    def _start(self) -> subprocess.Popen:
        cmd = [sys.executable, "-c", f"import sys; sys.path[:] = {[p for p in sys.path if p]!r}; "
               "from stackwars_ir.bench.worker import main; main()"]
        env = dict(os.environ)
        if self.stack is not None:  # its own interpreter and packages, this project's code copied in
            from ..stacks import worker_command

            cmd, env = worker_command(self.stack, "from stackwars_ir.bench.worker import main; main()")
        if self.host_devices > 1 and "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", ""):
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={self.host_devices}"
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def run(self, job, timeout: float | None):
        """The worker's reply for `job`, or a row (Executable, MemoryPlan) with the error that stopped it."""
        if self.stack is not None and job.kind in ("file", "files", "memory"):
            from ..errors import StackwarsError

            try:
                job = self._staged(job)
            except StackwarsError as e:
                return job.failed(e.one_line())
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
                    return job.failed((
                        f"{job.label}: timed out: {phase} took longer than {budget} and was stopped; "
                        "the others were measured"))
                used = _rss(self.proc.pid)
                if self.max_memory and used > self.max_memory:
                    self._kill()
                    return job.failed((
                        f"{job.label}: used {used / 2**30:.1f} GiB, more than --max-memory "
                        f"{self.max_memory / 2**30:.1f} GiB, and was stopped (fix: raise --max-memory)"))
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            self.proc = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            return job.failed(f"{job.label}: the bench worker died ({how}) while compiling or running it")

    def _staged(self, job: Job) -> Job:
        """The job with the argument values of each of its captures built here, where the adapters'
        PyTorch models are: a stack's worker has jax, not torch (staged_values)."""
        import dataclasses
        import tempfile

        if self._staging is None:
            self._staging = tempfile.TemporaryDirectory(prefix="stackwars-values-")
        return dataclasses.replace(job, values=staged_values(job.paths, Path(self._staging.name)))

    def _kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self._staging is not None:
            self._staging.cleanup()
            self._staging = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None


def staged_values(paths, folder: Path) -> tuple:
    """(path, .npz) for each capture of a catalogue model that recorded no values of its own: its
    weights, inputs and PyTorch eager's reference rebuilt here, where torch is, for a stack's worker
    (files.stage_values reads them there)."""
    from stackwars_ir import models

    from . import sidecar_arguments
    from ..files import sidecar_of, values_bytes
    from ..ir import load

    out = []
    for path in paths:
        side, _ = sidecar_of(Path(path))
        if side is None or side.abstract or (side.values or {}).get("file") or side.model not in models.catalog():
            continue
        (parsed,) = load([path])
        if not parsed.ok:
            continue  # the worker says why, in its own words
        arrays, reference = sidecar_arguments(parsed.modules[0], side)
        npz = folder / f"values-{len(list(folder.iterdir()))}.npz"  # never reused: the worker keeps each name
        import numpy as np

        npz.write_bytes(values_bytes([(f"arg{j}", a) for j, a in enumerate(arrays)] +
                                     [("reference", np.asarray(reference))]))
        out.append((str(path), str(npz)))
    return tuple(out)
