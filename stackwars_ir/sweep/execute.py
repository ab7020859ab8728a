"""A sweep run: a grid's jobs on local worker processes or a Ray cluster, each finished job a file.

A run is resumable: a job whose record is there is not run again.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from ..bench.planning import check_target
from ..common.errors import StackwarsError
from ..common.files import host, host_memory
from ..common.targets import is_tpu
from ..common.textfmt import human_bytes
from .grid import Grid
from .job_types import CaptureJob, Job
from .jobs import Record, noisy_keys, ray_job, read_record, relative, stack, write_record
from .jobs import records as read_records

GRACE_S = 120.0  # a worker's start (imports) and its capture, past the job's own timeout
NOT_RUN = "not run yet (run the sweep without --render)"


@dataclass(frozen=True)
class SweepReport:
    """What a sweep run did: every job of the grid with its record (this run's or an earlier one's),
    how many were finished before it started, how many it ran, and how long it took."""

    grid: str
    root: str
    executor: str  # "local, 2 workers" or "ray at ADDRESS, N CPUs"
    records: tuple[Record, ...]  # one per job of the grid, in the grid's order
    reused: int  # finished before this run: not recomputed
    ran: int
    refused: tuple[tuple[str, str], ...]
    seconds: float

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.records if not r.ok and r.error != NOT_RUN]

    @property
    def pending(self) -> list[Record]:
        """The grid's jobs with no record yet (`--render` of a sweep not finished)."""
        return [r for r in self.records if r.error == NOT_RUN]

    def as_json(self) -> dict:
        return {"format": 1, "grid": self.grid, "executor": self.executor, "jobs": len(self.records),
                "reused": self.reused, "ran": self.ran, "failed": len(self.failed), "not_run": len(self.pending),
                "seconds": round(self.seconds, 1),
                "refused": [{"what": w, "why": y} for w, y in self.refused],
                "records": [r.as_json() for r in self.records]}

    @classmethod
    def from_json(cls, d: dict, root: str = "") -> "SweepReport":
        """A `sweep --json` file's report, each record typed (Record.result); `root`: its results folder."""
        if d.get("format") != 1:
            raise ValueError(f"format {d.get('format')!r}, this version reads 1")
        return cls(d["grid"], root, d["executor"], tuple(Record.from_json(r) for r in d["records"]), int(d["reused"]),
                   int(d["ran"]), tuple((x["what"], x["why"]) for x in d.get("refused") or ()), float(d["seconds"]))


def run_sweep(grid: Grid, root: Path, *, jobs: int | None = None, ray: str | None = None,
              retry_failed: bool = False, retry_noisy: bool = False, render_only: bool = False,
              progress: Callable[[str], object] | None = None) -> SweepReport:
    """Every job of `grid` whose record is not under `root` yet (a failed one again with
    `retry_failed`, a timed one taken on a noisy machine with `retry_noisy`: jobs.noisy_keys), captures
    first; each record written as its job finishes, so a killed sweep resumes where it stopped.
    `ray`: "local" (a Ray instance started here), "auto" or an address (a running cluster); a Ray
    already initialized in this process is used as it is. `render_only`: run nothing, read what is
    there."""
    root = Path(root)
    here = stack()
    keys = [j.key(here) for j in grid.jobs]
    t0 = time.perf_counter()
    found = {k: r for k in keys if (r := read_record(root, k)) is not None}
    loud = noisy_keys(found.values()) if retry_noisy else set()
    gone = set() if render_only else captures_gone(found.values(), root) | _timed_elsewhere(found)
    done = {k: r for k, r in found.items() if (r.ok or not retry_failed) and k not in loud | gone}
    if render_only:  # a finished job that read other bytes than its capture now holds is not rendered as done
        _stale(grid.jobs, keys, here, found, done, set(), None, progress)
    todo = [(j, k) for j, k in zip(grid.jobs, keys) if k not in done]
    if render_only:
        executor, ran = "none (rendered from the results)", 0
    else:
        _check_targets(j for j, _ in todo)
        root.mkdir(parents=True, exist_ok=True)
        pool = _Ray(ray, jobs) if ray else _Local(jobs)
        executor = pool.name
        clock = _Clock(len(keys), len(done), todo, pool.width, progress)
        try:
            plan = phases(todo)
            for n, (batch, alone) in enumerate(plan):
                if n == 1:  # the captures made: a finished job that read other bytes runs again, in its phase
                    stale = _stale(grid.jobs, keys, here, found, done, gone, clock, progress)
                    batch += [(j, k) for j, k in stale if not j.timed]
                    plan[2][0][:] = sorted(plan[2][0] + [(j, k) for j, k in stale if j.timed],
                                           key=lambda jk: jk[0].round)
                runnable = []
                for job, key in batch:
                    blocked = _failed_capture(job, here, root, done)
                    if blocked:
                        rec = write_record(root, Record(key, job, here, False, blocked, None, 0.0, {}))
                        done[key] = rec
                        clock.finished(rec)
                    else:
                        runnable.append((job, key))
                for rec in pool.run(runnable, root, here, alone):
                    rec = write_record(root, rec)
                    done[rec.key] = rec
                    clock.finished(rec)
        finally:
            pool.close()
        ran = clock.ran
    records = tuple(done.get(k) or Record(k, j, here, False, NOT_RUN, None, 0.0, {}) for j, k in zip(grid.jobs, keys))
    return SweepReport(grid.path, str(root), executor, records, len(keys) - ran if not render_only else
                       len(keys) - len(todo), ran, grid.refused, time.perf_counter() - t0)


def other_stacks(report: SweepReport) -> tuple[tuple[str, int], ...]:
    """Why jobs of the grid have no record (`--render` of a folder made elsewhere): for the jobs not run
    yet whose job has a finished record under another stack in the results folder, what differs
    (`libtpu 0.0.24 there, none here`: a TPU target's job keyed by a libtpu this environment lacks) and
    how many jobs, most first. Jobs with no record under any stack are not counted."""
    pending = report.pending
    if not pending:
        return ()

    def what(job: Job) -> str:
        return json.dumps({k: v for k, v in job.as_json().items() if k != "timeout"}, sort_keys=True)

    def computing(job: Job, stack_: dict) -> dict:
        return stack_ if is_tpu(job.target) else {k: v for k, v in stack_.items() if k != "libtpu"}

    there: dict = {}
    for rec in read_records(Path(report.root)):
        if rec.ok:
            there.setdefault(what(rec.job), computing(rec.job, rec.stack))
    counts: dict = {}
    for rec in pending:
        other = there.get(what(rec.job))
        if other is None:
            continue
        here = computing(rec.job, rec.stack)
        words = "; ".join(f"{k} {other.get(k) or 'none'} there, {here.get(k) or 'none'} here"
                          for k in sorted(set(other) | set(here)) if other.get(k) != here.get(k))
        if words:
            counts[words] = counts.get(words, 0) + 1
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _stale(jobs, keys: list, here: dict, found: dict, done: dict, gone: set, clock: "_Clock | None",
           progress: Callable[[str], object] | None) -> list:
    """The finished jobs that read other bytes than a capture's record now names (sha256): what they
    measured is not what the folder holds, so they run again. A job's result names the bytes it read
    (Record.sources); one that names none is judged by the captures made again in this run whose
    bytes differ from their previous record's. A capture is deterministic for one stack and code, but
    its locations name the model code's lines: an edit of models/*.py (2026-11-30: the twins' dropout,
    ab48b39) moves them, and the six JAX captures of docs/findings.md's sweep came out with other
    bytes; without this, a resumed page paired them with benches of the old ones, also where an
    earlier run made the captures again and stopped before the jobs that read them."""
    changed = {k for k in gone if k in found and found[k].ok and isinstance(found[k].job, CaptureJob)
               and k in done and done[k].ok and done[k].capture_sha256() != found[k].capture_sha256()}

    def read_other(job, rec) -> bool:
        read = rec.sources() if rec.ok else frozenset()
        for c in job.captures():
            now = done.get(c.key(here))
            if now is None or not now.ok or not now.capture_sha256():
                continue
            if (now.capture_sha256() not in read) if read else (c.key(here) in changed):  # its result's, else this run's
                return True
        return False

    stale = [(j, k) for j, k in zip(jobs, keys) if k in done and not isinstance(j, CaptureJob)
             and read_other(j, done[k])]
    if not stale:
        return []
    for job, key in stale:
        del done[key]
        if clock is not None:
            clock.again(job)
    if progress:
        progress(f"sweep: {len(stale)} finished job(s) read other bytes than their captures now hold; "
                 + ("they run again" if clock is not None else "not rendered: run the sweep again"))
    return stale


def phases(todo: list) -> list[tuple[list, bool]]:
    """The jobs to run in turn: the captures, the other jobs that time nothing, then the timed ones
    (Job.timed), which run one at a time with nothing beside them (bool: alone), so no compile shares
    the cores a measurement runs on and every timed job sees the same machine; round by round (a
    grid's `rounds`), so each round of every job is taken before any job's next and a drift of the
    machine moves every job's round alike."""
    captures = [(j, k) for j, k in todo if isinstance(j, CaptureJob)]
    untimed = [(j, k) for j, k in todo if not isinstance(j, CaptureJob) and not j.timed]
    timed = sorted(((j, k) for j, k in todo if j.timed), key=lambda jk: jk[0].round)
    return [(captures, False), (untimed, False), (timed, True)]


def captures_gone(records: Iterable[Record], root: Path) -> set[str]:
    """The keys of the finished capture jobs whose file is no longer under `root` (a results folder kept
    without its captures: its records alone, published or carried to another machine), or holds other
    bytes than the record names (sha256: a file restored or written by something else): a resumed sweep
    captures them again before any job that reads them (and runs again what read other bytes: _stale)."""
    def there(r: Record) -> bool:
        if r.result is None:  # a capture that kept no result names no file: captured again
            return False
        f = Path(root) / r.result.file
        sha = r.capture_sha256()
        return f.is_file() and (not sha or hashlib.sha256(f.read_bytes()).hexdigest() == sha)

    return {r.key for r in records if r.ok and isinstance(r.job, CaptureJob) and not there(r)}


def _timed_elsewhere(found: dict) -> set[str]:
    """The finished timed jobs measured on another kind of machine than this one (records restored from
    the repository, sweep.kept, or a results folder carried over): a time is a measurement of the machine
    it ran on, so they are timed again here, and a page's rounds never mix two kinds of processor."""

    h = host()
    here = (h.get("processor"), h.get("cpus"), h.get("machine"))
    return {k for k, r in found.items() if r.ok and r.job.timed and r.processor() != here}


def _check_targets(jobs) -> None:
    """Before any job starts: a TPU target's compiles need libtpu here (a worker's stack is this one's)."""

    for target in sorted({j.target for j in jobs if is_tpu(j.target)}):
        check_target(target)


def _failed_capture(job: Job, here: dict, root: Path, done: dict) -> str:
    """Why `job` cannot run: a capture it reads failed (its record's error), or ""."""
    if isinstance(job, CaptureJob):
        return ""
    for cap in job.captures():
        rec = done.get(cap.key(here)) or read_record(root, cap.key(here))
        if rec is not None and not rec.ok:
            return f"its capture failed: {rec.error}"
    return ""


class _Clock:
    """Progress lines: counts, the job's time, and an ETA from this run's jobs so far, kind by kind (a
    capture takes seconds, a timed bench minutes): the jobs of a kind not run yet are counted, not guessed."""

    def __init__(self, total: int, reused: int, todo: list, width: int, progress):
        self.total, self.count, self.ran, self.failed = total, reused, 0, 0
        self.width, self.progress = max(1, width), progress
        self.pending: dict[tuple, int] = {}
        for job, _ in todo:
            self.pending[_kind(job)] = self.pending.get(_kind(job), 0) + 1
        self.took: dict[tuple, list[float]] = {}
        if progress:
            progress(f"sweep: {total} jobs, {reused} finished before (not recomputed), {len(todo)} to run")

    def again(self, job: Job) -> None:
        """A finished job to run again (it read a capture made again with other bytes)."""
        self.count -= 1
        self.pending[_kind(job)] = self.pending.get(_kind(job), 0) + 1

    def finished(self, rec: Record) -> None:
        self.count += 1
        self.ran += 1
        self.failed += not rec.ok
        kind = _kind(rec.job)
        self.pending[kind] = self.pending.get(kind, 1) - 1
        self.took.setdefault(kind, []).append(rec.seconds)
        if self.progress:
            state = "ok" if rec.ok else f"FAILED: {rec.error}"
            self.progress(f"[{self.count}/{self.total}] {rec.job.label}: {rec.seconds:.1f} s, {state}"
                          f" ({self.failed} failed; {self.eta()})")

    def eta(self) -> str:
        """`about 4 min left`, `about 4 min left, and 15 bench cpu jobs not estimated yet` (none of their kind
        has run in this sweep), or `none left`. Untimed jobs share the workers; timed ones run alone."""
        seconds, unknown = 0.0, {}
        for kind, n in self.pending.items():
            if n <= 0:
                continue
            if self.took.get(kind):
                mean = sum(self.took[kind]) / len(self.took[kind])
                seconds += n * mean / (1 if kind[1] else self.width)
            else:
                unknown[kind] = n
        if not any(n > 0 for n in self.pending.values()):
            return "none left"
        if not unknown:
            return f"about {_duration(seconds)} left"
        rest = ", ".join(f"{n} {kind[0]}{' ' + kind[2] if kind[2] else ''} job{'s' * (n != 1)}"
                         for kind, n in sorted(unknown.items())) + " not estimated yet"
        return f"about {_duration(seconds)} left, and {rest}" if seconds >= 0.5 else rest


def _kind(job: Job) -> tuple:
    """What a job's time is estimated from: its command, whether it is timed (alone) and its target."""
    return job.command, job.timed, job.target


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def default_jobs() -> int:
    """Local workers: one per core, no more than the memory holds at 4 GiB each (a worker with jax
    and torch imported and a tiny capture)."""

    mem = host_memory() or (8 << 30)
    return max(1, min(os.cpu_count() or 1, mem // (4 << 30)))


def memory_need(job: Job) -> tuple[int | None, str]:
    """The job's memory request (Job.memory_request), or (None, why) where its model cannot even be
    built on the meta device (an adapter's error): that job fails, the others go on."""
    try:
        return job.memory_request(), ""
    except StackwarsError as e:
        return None, e.message


OVER_MEMORY = "not run here: "


def over_memory(need: int, memory: int) -> str:
    """Why a job that asks for more memory than this machine has is not started (it would be killed
    part-way, or take the machine down with it)."""

    return (f"{OVER_MEMORY}it asks for {human_bytes(need)} of host memory (a worker with jax and torch, and a "
            f"capture's weights three times over, six for a training step's gradients and moments), more than "
            f"this machine's {human_bytes(memory)}; a machine with more memory, or an abstract capture, can plan it")


class _Local:
    """Each job in its own worker process (`python -m stackwars_ir.sweep.jobs`: process-wide state a
    capture sets, torch_xla's SPMD mode or the host's device count, never leaks into the next job),
    `jobs` at once, and no job started while the memory the running ones asked for (Job.memory_request)
    and its own pass this machine's."""

    def __init__(self, jobs: int | None):
        self.width = jobs or default_jobs()
        if self.width < 1:
            raise StackwarsError(f"--jobs {jobs}: needs at least one worker", fix="e.g. --jobs 2")
        self.name = f"local, {self.width} worker{'s' if self.width > 1 else ''}"
        self.memory = host_memory() or 0
        self.lock = threading.Condition()
        self.held = 0

    def run(self, todo: list, root: Path, here: dict, alone: bool = False):
        needs = {}
        for job, key in todo:  # here, not in the threads: two threads importing transformers at once race
            needs[key], why = memory_need(job)
            if not why and self.memory and needs[key] > self.memory:
                why, needs[key] = over_memory(needs[key], self.memory), None
            if why:
                yield Record(key, job, here, False, why, None, 0.0, {})
        with ThreadPoolExecutor(1 if alone else self.width) as ex:
            futures = {ex.submit(self._one, job, key, root, here, needs[key]) for job, key in todo
                       if needs[key] is not None}
            while futures:
                finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                for f in finished:
                    yield f.result()

    def _one(self, job: Job, key: str, root: Path, here: dict, need: int) -> Record:
        need = need if self.memory else 0
        with self.lock:
            self.lock.wait_for(lambda: self.held == 0 or self.held + need <= self.memory)
            self.held += need
        try:
            return _in_worker(job, key, root, here)
        finally:
            with self.lock:
                self.held -= need
                self.lock.notify_all()

    def close(self) -> None:
        pass


def _in_worker(job: Job, key: str, root: Path, here: dict) -> Record:
    """Run `job` in a fresh worker process, its stderr in root/logs/KEY.log; a worker that dies or
    runs past the job's timeout (+ GRACE_S) is a failed record saying so."""
    log = Path(root) / "logs" / f"{key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"job": job.as_json(), "root": str(Path(root).resolve()), "key": key, "stack": here})
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "stackwars_ir.sweep.jobs"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            out, _ = proc.communicate(payload, timeout=job.timeout + GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return Record(key, job, here, False, f"ran past its timeout ({job.timeout:.0f} s + {GRACE_S:.0f} s to "
                          "start); raise `timeout` in the grid", None, time.perf_counter() - t0, {})
    try:
        return Record.from_json(json.loads(out))
    except (ValueError, KeyError, TypeError):
        tail = relative(_last_line(log), root)  # records are published: no path of this machine
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        if proc.returncode == -9:  # nothing here sends SIGKILL but a timeout, handled above, and the kernel
            how += ", killed: most likely out of memory"
        return Record(key, job, here, False, f"its worker died ({how}){': ' + tail if tail else ''} "
                      f"(log: logs/{key}.log)", None, time.perf_counter() - t0, {})


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


class _Ray:
    """Each job a Ray task in a fresh worker process (max_calls=1), asking for one CPU, its memory
    (Job.memory_request) and the device it times (num_gpus=1, or the custom resource TPU); a job
    no node can hold fails at once, in one line, instead of waiting forever."""

    def __init__(self, address: str, jobs: int | None):
        try:
            import ray
        except ImportError:
            raise StackwarsError("--ray needs Ray, which is not installed", fix="make setup-ray") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            if address == "local":
                ray.init(num_cpus=jobs or default_jobs(), include_dashboard=False, log_to_driver=False)
                self.started = True
            else:
                try:
                    ray.init(address=address, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise StackwarsError(f"--ray {address}: no Ray cluster there ({' '.join(str(e).split())[:200]})",
                                         fix="start one (ray start --head), or use --ray local") from None
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        self.nodes = nodes
        cpus = sum(n.get("CPU", 0) for n in nodes)
        self.width = int(cpus) or 1
        devices = "".join(f", {n:g} {r}{'s' if n != 1 else ''}" for r in ("GPU", "TPU")
                          for n in (sum(node.get(r, 0) for node in nodes),) if n)
        self.name = f"ray, {len(nodes)} node{'s' if len(nodes) != 1 else ''}, {cpus:g} CPUs{devices}"
        self.remote = ray.remote(max_calls=1, max_retries=0)(_ray_entry)

    def _options(self, job: Job) -> tuple[dict, str]:
        """The task's resource request, or why no node of the cluster can hold it; a timed job asks for
        every CPU of the largest node, so it runs on a node alone."""
        memory, why = memory_need(job)
        if why:
            return {}, why
        cpus = max((n.get("CPU", 1) for n in self.nodes), default=1) if job.timed else 1
        opts = {"num_cpus": cpus, "memory": memory}
        from ..models import ADAPTERS_ENV

        if os.environ.get(ADAPTERS_ENV):  # --adapters: the same files on every node (their paths)
            opts["runtime_env"] = {"env_vars": {ADAPTERS_ENV: os.environ[ADAPTERS_ENV]}}
        device = job.device()
        if device == "gpu":
            opts["num_gpus"] = 1
        elif device == "tpu":
            opts["resources"] = {"TPU": 1}
        need = {"CPU": cpus, "memory": opts["memory"], **({"GPU": 1} if device == "gpu" else {}),
                **({"TPU": 1} if device == "tpu" else {})}
        if not any(all(n.get(r, 0) >= v for r, v in need.items()) for n in self.nodes):
            short = [r for r in need if not any(n.get(r, 0) >= need[r] for n in self.nodes)]
            what = ", ".join(f"{need[r] / 2**30:.1f} GiB of memory" if r == "memory" else f"a {r}" for r in short)
            return opts, f"no node of the Ray cluster has {what} for it"
        return opts, ""

    def run(self, todo: list, root: Path, here: dict, alone: bool = False):
        """The jobs as Ray tasks (`alone`: timed ones, each holding a node's CPUs: _options)."""
        pending = {}
        for job, key in todo:
            opts, why = self._options(job)
            if why:
                yield Record(key, job, here, False, why, None, 0.0, {})
                continue
            payload = {"job": job.as_json(), "root": str(Path(root).resolve()), "key": key, "stack": here}
            pending[self.remote.options(**opts).remote(payload)] = (job, key)
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            job, key = pending.pop(ready[0])
            try:
                data, lines = self.ray.get(ready[0])
                rec = Record.from_json(data)
            except Exception as e:  # the task's worker died: the job failed, the sweep goes on
                rec = Record(key, job, here, False, f"its Ray task failed: {type(e).__name__}: "
                             f"{' '.join(str(e).split())[:200]}", None, 0.0, {})
                lines = ""
            log = Path(root) / "logs" / f"{key}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(lines + "\n")
            yield rec

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _ray_entry(payload: dict):
    return ray_job(payload)

