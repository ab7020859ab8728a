"""One sweep job run to its record in a fresh process, and the records on disk.

The process: `python -m stackwars_ir.sweep.jobs`.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Collection, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..bench.compare import SPREAD_TARGET
from ..bench.executable import Executable
from ..bench.memory import MemoryReport
from ..bench.result import BenchReport
from ..bench.timing import QUIET, SLOWED, machine_probe
from ..common.errors import StackwarsError
from ..common.files import code_commit, dump_json, host, versions, write_atomic
from ..common.wire import die_with_parent
from ..diff.result import DiffResult
from ..workload import CAPTURE_REVISION
from .job_types import CaptureRecord, Job
from .model_runs import captured

_T = TypeVar("_T")  # relative's: the JSON value it is given and returns
RECORD_FORMAT = 1


def stack() -> dict:
    """What computes a job besides its request: the packages' versions (libtpu's where installed) and
    the capture revision. A job keyed by another stack is another job."""
    from importlib import metadata

    out = {k: v for k, v in versions().items() if v}
    try:
        out["libtpu"] = metadata.version("libtpu")
    except metadata.PackageNotFoundError:
        pass
    return {**out, "capture_revision": CAPTURE_REVISION}


@dataclass(frozen=True)
class Record:
    """A finished job as its result file holds it: the job, its stack, whether it succeeded, its
    one-line error, the command's result (typed: the job's `result_type()`, parsed once when the
    record is read; None where the job left none) and how long it took (seconds)."""

    key: str
    job: Job
    stack: dict
    ok: bool
    error: str
    result: CaptureRecord | MemoryReport | BenchReport | DiffResult | None
    seconds: float
    host: dict

    def as_json(self) -> dict:
        return {"format": RECORD_FORMAT, "key": self.key, "job": self.job.as_json(), "stack": self.stack,
                "ok": self.ok, "error": self.error, "result": {} if self.result is None else self.result.as_json(),
                "seconds": round(self.seconds, 3), "host": self.host}

    def sources(self) -> frozenset[str]:
        """The sha256 of every capture file the job's result says it read (a bench's StableHLO rows, a
        memory report's plans, a diff's two sides); empty for a capture, or a result that names none."""
        r = self.result
        if isinstance(r, BenchReport):
            shas = {e.sha256 for _, e in r.rows}
        elif isinstance(r, MemoryReport):
            shas = {p.sha256 for p in r.plans}
        elif isinstance(r, DiffResult):
            shas = {r.a.sha256, r.b.sha256}
        else:
            shas = set()
        return frozenset(s for s in shas if s)

    def capture_sha256(self) -> str | None:
        """The sha256 of the file a capture record names; None for a record that kept no capture result
        (a failed capture, a record written by hand, one from before captures named their bytes)."""
        r = self.result
        return (r.sha256 or None) if isinstance(r, CaptureRecord) else None

    def bench_rows(self) -> list[Executable]:
        """The rows a bench record timed (its executables and baselines, a failed one's too); [] for
        another job or a bench that left no result."""
        return [e for _, e in self.result.rows] if isinstance(self.result, BenchReport) else []

    def spreads(self) -> list[float]:
        """The steady-state spread of each row the record timed (a bench's executables and baselines),
        as its JSON keeps it (4 decimals)."""
        return [round(e.timing.spread, 4) for e in self.bench_rows() if e.timing is not None] if self.job.timed else []

    @property
    def noisy(self) -> bool:
        """A timed record not taken on a quiet machine: the probe before it read QUIET or more
        (bench.timing.machine_noise), or one of its rows spread more than the bench's target."""

        return self.ok and self.job.timed and ((self.host.get("noise") or 0) >= QUIET or
                                               any(s > SPREAD_TARGET for s in self.spreads()))

    def processor(self) -> tuple:
        """The kind of machine the record ran on: probe chains are compared within one kind only."""
        return self.host.get("processor"), self.host.get("cpus"), self.host.get("machine")

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        if d.get("format") != RECORD_FORMAT:
            raise ValueError(f"format {d.get('format')!r}, this version reads {RECORD_FORMAT}")
        job = Job.from_json(d["job"])
        result = job.result_type().from_json(d["result"]) if d.get("result") else None
        return cls(d["key"], job, d["stack"], bool(d["ok"]), d.get("error") or "", result, float(d["seconds"]),
                   d.get("host") or {})


def slowed(records: Iterable[Record]) -> list[Record]:
    """The timed records whose probe chain ran SLOWED times the fastest chain or more among the
    records from the same kind of processor: a load that slows every core evenly (all of them busy)
    leaves the probe's spread quiet and shows only here. Against the sweep's own fastest, so a sweep
    timed wholly under one even load is not caught (its figures are still comparable with each other)."""

    timed = [r for r in records if r.ok and r.job.timed and r.host.get("probe_ms")]
    fastest: dict = {}
    for r in timed:
        fastest[r.processor()] = min(fastest.get(r.processor(), r.host["probe_ms"]), r.host["probe_ms"])
    return [r for r in timed if r.host["probe_ms"] >= SLOWED * fastest[r.processor()]]


def noisy_keys(records: Collection[Record]) -> set[str]:
    """The keys of the records a noisy machine measured: noisy by their own probe or rows
    (Record.noisy) or slowed against the others (slowed)."""
    return {r.key for r in records if r.noisy} | {r.key for r in slowed(records)}


def record_path(root: Path, key: str) -> Path:
    return Path(root) / "jobs" / f"{key}.json"


def read_record(root: Path, key: str) -> Record | None:
    """The finished record of `key` under `root`, or None (never run, or a file this version cannot read)."""
    try:
        return Record.from_json(json.loads(record_path(root, key).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(root: Path, record: Record) -> Record:
    """Write RECORD under ROOT; the record as it reads back (its keys in the file's order, so a page
    rendered now and one rendered later from the folder are the same)."""

    path = record_path(root, record.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dump_json(record.as_json())
    write_atomic(path, text)
    return Record.from_json(json.loads(text))


def records(root: Path) -> list[Record]:
    """Every record under `root`, in the order of their keys (a folder may hold several grids' jobs)."""
    out = []
    for path in sorted((Path(root) / "jobs").glob("*.json")):
        try:
            out.append(Record.from_json(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def run_job(job: Job, root: Path, key: str, stack_: dict, progress: Callable[[str], object] | None = None) -> Record:
    """Run `job` in this process; its captures go under root/captures. A failure is a record with
    the one-line error, never an exception."""

    t0 = time.perf_counter()
    noise = {}
    pin_platform(job)
    try:
        here = stack()
        if here != stack_:
            changed = sorted(k for k in set(here) | set(stack_) if here.get(k) != stack_.get(k))
            raise StackwarsError(f"this worker's stack differs from the sweep's in {', '.join(changed)}",
                                 fix="install the same lock on every node (make setup, make setup-ray)")
        if job.timed:  # how steady the machine was right before it timed anything (bench.timing)

            spread, median = machine_probe()  # the chain's median too, to compare runs by
            noise = {"noise": round(spread, 4), "probe_ms": round(median * 1e3, 3)}
        result, error = _run(job, Path(root), progress)
    except StackwarsError as e:
        result, error = None, e.one_line()
    except Exception as e:  # the job's, whatever it is: recorded, the sweep goes on
        result, error = None, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    # When and by which code: a page rendered from records names their dates and commits (issue 53).
    finished = {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": code_commit()}
    return Record(key, job, stack_, not error, relative(error or "", Path(root)), result, time.perf_counter() - t0,
                  host() | noise | finished)


def pin_platform(job: Job, env: MutableMapping[str, str] = os.environ) -> None:
    """Keep a job off the accelerators it does not use (call before jax is imported; each job is a
    fresh process). A capture, a diff or a CPU or TPU-target plan runs on jax's CPU client alone: on
    a GPU node each such worker would otherwise start a CUDA client that takes 75% of the GPU's
    memory (jax preallocates), and on a TPU VM the first to start a TPU client holds the chips, so the
    job that times them would find them taken. A GPU job that times nothing (a memory plan)
    preallocates nothing, so plans beside each other fit."""
    device = job.device()
    if device == "":
        env["JAX_PLATFORMS"] = "cpu"
    elif device == "gpu" and not job.timed:
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def captures_dir(root: Path) -> Path:
    return Path(root) / "captures"


def capture_files(job: Job, root: Path, progress: Callable[[str], object] | None = None) -> list[Path]:
    """The capture files `job` reads (captured now unless the same request is on disk: sweep.captured)."""

    reqs = [job.request] + ([job.against] if job.against is not None else [])
    return [f for r in reqs for f in captured(r, captures_dir(root), sweep=True, progress=progress)]


def _run(job: Job, root: Path, progress):
    """The job's result as its record holds it (its paths relative to the results folder: read back
    from that JSON, so a record run here and one read from disk are the same value), and its error."""
    report, error = job.run(capture_files(job, root, progress), Path(root), progress)
    return job.result_type().from_json(relative(report.as_json(), root)), error


def relative(data: _T, root: Path) -> _T:
    """`data` with the results folder's absolute path taken out of every string (records are published)."""
    prefix = str(Path(root).resolve()) + os.sep
    if isinstance(data, dict):
        return {k: relative(v, root) for k, v in data.items()}
    if isinstance(data, list):
        return [relative(v, root) for v in data]
    if isinstance(data, str):
        return data.replace(prefix, "").replace(str(root) + os.sep, "")
    return data


def ray_job(payload: dict) -> tuple[dict, str]:
    """A job run as a Ray task (sweep.execute): its record's JSON and its progress lines."""
    lines: list = []
    record = run_job(Job.from_json(payload["job"]), Path(payload["root"]), payload["key"], payload["stack"],
                     progress=lines.append)
    return record.as_json(), "\n".join(lines)


def main() -> None:
    """A worker process: a job's JSON on stdin, its record's JSON on the real stdout; everything the
    frameworks print goes to stderr (the job's log)."""

    die_with_parent()  # a killed sweep's jobs are run again on resume
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a framework's prints must not end up in the record
    d = json.load(sys.stdin)
    record = run_job(Job.from_json(d["job"]), Path(d["root"]), d["key"], d["stack"],
                     progress=lambda m: print(m, file=sys.stderr, flush=True))
    out.write(json.dumps(record.as_json()))
    out.flush()


if __name__ == "__main__":
    main()
