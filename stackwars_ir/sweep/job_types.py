"""Each kind of sweep job (capture, memory, bench, diff): its fields, its run, its typed result."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterator, NamedTuple

from .. import models
from ..bench.memory import MemoryReport, budgets
from ..bench.native import baselines_asked
from ..bench.planning import plan_files
from ..bench.result import BenchReport
from ..bench.run import bench_files, estimate_files
from ..bench.timing import Asked
from ..common.errors import StackwarsError
from ..common.files import read_sidecar
from ..common.routes import EXPORTERS
from ..common.targets import is_tpu
from ..diff import diff_files
from ..diff.result import DiffResult
from ..workload import Request
from ..workload.shapes import weight_bytes, weight_copies
from .model_runs import bench_model

JOB_TIMEOUT = 1800.0  # seconds a job may run unless its grid says `timeout`


@dataclass(frozen=True)
class Job:
    """One unit of a sweep: a command on one route's capture of a request (diff: on two routes'). Each
    command is its own type with the fields it reads: CaptureJob, MemoryJob, BenchJob, DiffJob."""

    command: ClassVar[str] = ""  # capture, memory, bench, diff
    # What the other commands' jobs hold, empty here (a record's JSON names them for every job):
    target: ClassVar[str] = ""
    budget: ClassVar[str] = ""
    against: ClassVar[Request | None] = None
    round: ClassVar[int] = 0  # a timed bench's round (BenchJob); every other job is run once
    request: Request  # validated; one route (framework "jax", or "torch" with one exporter), or for
    # a bench with baselines or `together` every route of the table (framework "both", or "torch")
    timeout: float = JOB_TIMEOUT

    @property
    def route(self) -> str:
        return "+".join(route_of(r) for r in split_routes(self.request))

    @property
    def timed(self) -> bool:
        """Whether the job measures time on the machine it runs on (a bench job, not a TPU estimate):
        the executors run it alone, so no other job's compile shares its cores."""
        return False

    @property
    def label(self) -> str:
        """What a person reads in the progress lines: `memory llama-8b jax-train-fsdp8 b1 s128 tpu-v6e`."""
        r = self.request
        name = f"{r.model}-{r.size} {'+'.join(r.stems())}"
        if self.against is not None:
            name += f" vs {self.against.stems()[0]}"
        return " ".join(x for x in (self.command, name, f"b{r.batch} s{r.seq}", self.target) if x)

    def as_json(self) -> dict:
        return {"command": self.command, "request": _request_json(self.request), "target": self.target,
                "budget": self.budget, "timeout": self.timeout,
                **({"against": _request_json(self.against)} if self.against is not None else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Job":
        """The job of `d`, as the type of its command."""
        kind = JOB_TYPES.get(d.get("command"))
        if kind is None:
            raise ValueError(f"not a sweep job's command: {d.get('command')!r}")
        return kind.from_fields(_request_from(d["request"]), float(d.get("timeout", JOB_TIMEOUT)), d)

    @classmethod
    def from_fields(cls, request: Request, timeout: float, d: dict) -> "Job":
        return cls(request, timeout)

    def key(self, stack: dict) -> str:
        """The job's identity: its request (every field) and the stack that computes it (versions, the
        capture revision; libtpu for a TPU target) and its models' adapter files (an edited config is
        another job), hashed; the timeout is how long to wait, not what is computed."""
        what = {k: v for k, v in self.as_json().items() if k != "timeout"}
        what["adapters"] = _adapter_hashes(r.model for r in (self.request, self.against) if r is not None)
        if not is_tpu(self.target):  # libtpu computes only the TPU targets' jobs
            stack = {k: v for k, v in stack.items() if k != "libtpu"}
        text = json.dumps({"job": what, "stack": stack}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def captures(self) -> tuple["Job", ...]:
        """The capture jobs of every route the job reads, each its own (shared with other jobs)."""
        reqs = split_routes(self.request) + (split_routes(self.against) if self.against is not None else ())
        return tuple(CaptureJob(r, self.timeout) for r in reqs)

    def memory_request(self) -> int:
        """Bytes of host memory the job may take at most, as a scheduler asks for them: a process with
        jax and torch imported, and for a capture with weights three copies of them (workload.shapes),
        twice again for a training step's gradients and moments."""
        base = 3 << 30
        if self.request.abstract:
            return base

        weights = max(weight_bytes(r) for r in (self.request, self.against) if r is not None)
        return base + weights * weight_copies(self.request)

    def device(self) -> str:
        """The accelerator the job must run on ("" for any CPU): a bench job times the backend it names,
        a memory plan for `gpu` compiles on a GPU client (the TPU targets' plans are compile-only)."""
        return ""

    @classmethod
    def result_type(cls) -> type:
        """The type of the job's result (with `from_json`): what its record reads back as."""
        raise NotImplementedError

    def run(self, files: list[Path], root: Path, progress: Callable[[str], object] | None = None) -> tuple:
        """(result, error or None) of the job on the capture files it reads (`files`, under the results
        folder `root`): the result of its type, an error where part of it failed."""
        raise NotImplementedError

    @classmethod
    def expand(cls, cell: "Cell") -> Iterator["Job"]:
        """The jobs of this type one cell of the grid asks for (the grid's `commands` name the types)."""
        raise NotImplementedError


@dataclass(frozen=True)
class CaptureRecord:
    """A capture job's result: the file (relative to the results folder), its sha256 and size, its
    parity (the sidecar's) and the seconds of each stage."""

    file: str
    sha256: str | None
    bytes: int
    parity: dict | None
    seconds: dict

    def as_json(self) -> dict:
        return {"file": self.file, "sha256": self.sha256, "bytes": self.bytes, "parity": self.parity,
                "seconds": self.seconds}

    @classmethod
    def from_json(cls, d: dict) -> "CaptureRecord":
        return cls(d["file"], d.get("sha256"), int(d["bytes"]), d.get("parity"), d.get("seconds") or {})


@dataclass(frozen=True)
class CaptureJob(Job):
    """A capture of one route of the request (shared by the jobs that read it)."""

    command: ClassVar[str] = "capture"

    @classmethod
    def result_type(cls) -> type:
        return CaptureRecord

    @classmethod
    def expand(cls, cell: "Cell") -> Iterator["Job"]:
        return (cls(req, cell.timeout) for req in cell.reqs.values())

    def run(self, files: list[Path], root: Path, progress: Callable[[str], object] | None = None) -> tuple:
        data = read_sidecar(files[0]).data
        return CaptureRecord(str(files[0].relative_to(root)), data.get("sha256"), files[0].stat().st_size,
                             data.get("parity"), (data.get("run") or {}).get("seconds", {})), None


@dataclass(frozen=True, kw_only=True)
class MemoryJob(Job):
    """A memory plan of the request's capture compiled for `target`, read against `budget`."""

    command: ClassVar[str] = "memory"
    target: str  # the compile target (cpu, gpu, a TPU generation)
    budget: str = ""  # the budgets the plan is read against ("v6e-1", "16G")

    def device(self) -> str:
        return "gpu" if self.target == "gpu" else ""

    @classmethod
    def from_fields(cls, request: Request, timeout: float, d: dict) -> "MemoryJob":
        return cls(request, timeout, target=d.get("target", ""), budget=d.get("budget", ""))

    @classmethod
    def result_type(cls) -> type:
        return MemoryReport

    @classmethod
    def expand(cls, cell: "Cell") -> Iterator["Job"]:
        return (cls(req, cell.timeout, target=t, budget=b) for req in cell.reqs.values()
                for t in cell.axes["targets"] for b in cell.axes["budgets"])

    def run(self, files: list[Path], root: Path, progress: Callable[[str], object] | None = None) -> tuple:
        report = plan_files(files, self.target, budgets(self.budget), timeout=self.timeout, progress=progress)
        return report, "; ".join(p.error for p in report.failed) or None


@dataclass(frozen=True, kw_only=True)
class BenchJob(Job):
    """The request's captures timed on the `target` backend (a TPU generation: estimated), with
    `baselines` (bench.native's runtimes) in the same job and `profile` profiled runs."""

    command: ClassVar[str] = "bench"
    target: str  # the backend (cpu, gpu, tpu) or a TPU generation to estimate for
    # native runtimes (bench.native: jax, eager ...) timed in the same job as every route's
    # capture of the request (framework "both"), as `bench MODEL --baselines` times them
    baselines: tuple[str, ...] = ()
    profile: int = 0  # profiled runs after the steady state (bench --profile), 0: none
    runs: int = 0  # exactly this many steady-state runs per row (bench --runs), 0: adaptive
    # which of the table's `rounds` this is: the same bench again in a fresh worker, its records the
    # independent runs a page takes a ratio's interval across (runstats.rounds_ratio); 0 is the first
    round: int = 0

    @property
    def timed(self) -> bool:
        return not is_tpu(self.target)

    @property
    def asked(self) -> Asked:
        """The sampling asked of every worker that times this job (bench's --profile and --runs)."""
        return Asked(runs=self.runs or None, profile=self.profile)

    @property
    def label(self) -> str:
        return super().label + (f" round {self.round + 1}" if self.round else "")

    def device(self) -> str:
        return self.target if self.target in ("gpu", "tpu") else ""

    def as_json(self) -> dict:
        # only where set: the keys of jobs without them stay what they were
        return {**super().as_json(), **({"baselines": list(self.baselines)} if self.baselines else {}),
                **({"profile": self.profile} if self.profile else {}), **({"runs": self.runs} if self.runs else {}),
                **({"round": self.round} if self.round else {})}

    @classmethod
    def from_fields(cls, request: Request, timeout: float, d: dict) -> "BenchJob":
        return cls(request, timeout, target=d.get("target", ""), baselines=tuple(d.get("baselines", ())),
                   profile=int(d.get("profile", 0)), runs=int(d.get("runs", 0)), round=int(d.get("round", 0)))

    @classmethod
    def result_type(cls) -> type:
        return BenchReport

    @classmethod
    def expand(cls, cell: "Cell") -> Iterator["Job"]:
        """Each route's capture timed on each target; with `baselines`, every route and the native
        runtimes in one job; with `together`, every route in one job (a TPU target: each estimated
        alone); each repeated `rounds` times."""
        timing, targets = cell.timing, cell.axes["targets"]
        paired = _routes_together(cell.reqs) if timing["together"] else None
        if not timing["baselines"]:
            for req in cell.reqs.values():
                yield from _rounds((cls(req, cell.timeout, target=t, profile=0 if is_tpu(t) else timing["profile"],
                                        runs=0 if is_tpu(t) else timing["runs"])
                                    for t in targets if paired is None or is_tpu(t)), cell.rounds)
            if paired is not None:
                yield from _rounds((cls(paired, cell.timeout, target=t, profile=timing["profile"], runs=timing["runs"])
                                    for t in targets if not is_tpu(t)), cell.rounds)
        else:
            yield from _rounds(_bench_together(cell.reqs, targets, timing, cell.timeout, cell.refused), cell.rounds)

    def run(self, files: list[Path], root: Path, progress: Callable[[str], object] | None = None) -> tuple:
        """Its captures timed on one runtime (a TPU target: estimated); with baselines, every route's
        capture and the native runtimes in one job, as `bench MODEL` times them (bench_model), with the
        peaks; its profiled runs and steady runs, the grid's `profile` and `runs`, asked of every worker that
        times."""

        if is_tpu(self.target):
            report = estimate_files(files, self.target, self.timeout, progress=progress)
        elif not self.baselines:
            report = bench_files(files, self.target, self.timeout, with_peaks=False, progress=progress,
                                 asked=self.asked)
        else:
            report = bench_model(self.request, batches=(self.request.batch,), baselines=self.baselines,
                                 out_dir=Path(root) / "captures", backend=self.target, timeout=self.timeout,
                                 show=False, progress=progress, asked=self.asked)
        return report, "; ".join(e.error for e in report.failed) or None


@dataclass(frozen=True, kw_only=True)
class DiffJob(Job):
    """The request's capture diffed against the `against` request's (JAX's against a PyTorch route's)."""

    command: ClassVar[str] = "diff"
    against: Request

    def __post_init__(self):
        if self.against is None:  # the base class's None would otherwise pass for its default
            raise TypeError("a diff job needs the request it diffs against (`against`)")

    @classmethod
    def from_fields(cls, request: Request, timeout: float, d: dict) -> "DiffJob":
        return cls(request, timeout, against=_request_from(d["against"]))

    @classmethod
    def result_type(cls) -> type:
        return DiffResult

    @classmethod
    def expand(cls, cell: "Cell") -> Iterator["Job"]:
        return (cls(a, cell.timeout, against=b) for a, b in _pairs(cell.reqs))

    def run(self, files: list[Path], root: Path, progress: Callable[[str], object] | None = None) -> tuple:
        return diff_files(*files).result("first_of_role"), None


JOB_TYPES = {kind.command: kind for kind in (CaptureJob, MemoryJob, BenchJob, DiffJob)}


class Cell(NamedTuple):
    """One point of a grid's axes (model, size, step, batch, seq, mesh, dtype) as the job types expand
    it: its validated request per route, the grid's axes and timing table, each job's timeout
    (seconds), the bench rounds, and where a route's refusal is written."""

    reqs: dict  # route -> Request
    axes: dict
    timing: dict
    timeout: float
    rounds: int
    refused: dict  # "model-size step route" -> why


def _adapter_hashes(names) -> dict:
    """Each model's adapter, by the sha256 of its text: a Python adapter's file; a data entry's own table
    of its .toml file (a file of many models: editing one model's table makes that model's jobs new
    ones, not every model's of the file)."""
    import tomllib

    out = {}
    for n in sorted(set(names)):
        path = Path(models.entry(n).path)
        text = path.read_bytes()
        if path.suffix == ".toml":
            text = json.dumps({"data entry": tomllib.loads(text.decode())[n]}, sort_keys=True).encode()
        out[n] = hashlib.sha256(text).hexdigest()[:16]
    return out


def route_of(req: Request) -> str:
    return "jax" if req.framework == "jax" else req.exporters[0]


def split_routes(req: Request) -> tuple[Request, ...]:
    """One request per route of `req` (framework "both": JAX's, then each exporter's; "torch" with
    several exporters: each exporter's)."""
    if req.framework == "jax" or (req.framework == "torch" and len(req.exporters) == 1):
        return (req,)
    jax = (dataclasses.replace(req, framework="jax", exporters=()),) if req.framework == "both" else ()
    return jax + tuple(dataclasses.replace(req, framework="torch", exporters=(e,)) for e in req.exporters)


def _request_json(req: Request) -> dict:
    return {f.name: list(v) if isinstance(v, tuple) else v for f in dataclasses.fields(Request)
            for v in (getattr(req, f.name),)}


def _request_from(d: dict) -> Request:
    names = {f.name for f in dataclasses.fields(Request)}
    return Request(**{k: tuple(v) if k == "exporters" else v for k, v in d.items() if k in names})


def _rounds(jobs, rounds: int):
    """Each bench job, and for a timed one its later rounds (a TPU estimate is computed, not measured:
    once is enough)."""
    for job in jobs:
        yield job
        if job.timed:
            yield from (dataclasses.replace(job, round=k) for k in range(1, rounds))


def _bench_together(reqs: dict, targets: list, timing: dict, timeout: float, refused: dict):
    """With `baselines`: one bench job per target timing JAX's capture, each PyTorch route's and the
    native runtimes in one worker (as `bench MODEL` does), so their ratios come from one run."""

    jax, torch = reqs.get("jax"), [e for e in EXPORTERS if e in reqs]
    if not reqs:
        return  # every route named under "Not jobs" already
    r = next(iter(reqs.values()))
    what = f"{r.model}-{r.size} {r.step} bench with baselines" + (f" {r.mesh}" if r.mesh else "")
    if jax is None or not torch:
        refused[what] = "it times JAX's capture and a PyTorch route's beside the native runtimes, and has " \
                        f"only {', '.join(reqs)}'s"
        return
    both = _routes_together(reqs)
    try:
        baselines = baselines_asked(timing["baselines"], jax.step, jax.program, jax.mesh)
    except StackwarsError as e:
        refused[what] = e.message
        return
    for t in targets:
        if is_tpu(t):  # estimates time no native runtime
            yield from (BenchJob(r, timeout, target=t) for r in reqs.values())
        else:
            yield BenchJob(both, timeout, target=t, baselines=baselines, profile=timing["profile"], runs=timing["runs"])


def _routes_together(reqs: dict) -> Request | None:
    """With `together`: one request for every route of the table that can take it, so one bench job
    compiles them all and times them in one worker, their steady runs taking turns (as `bench A B`
    does): their ratio is not the drift of the machine between two processes. None for one route."""
    torch = tuple(e for e in EXPORTERS if e in reqs)
    if len(reqs) < 2:
        return None
    if "jax" in reqs:
        return dataclasses.replace(reqs["jax"], framework="both", exporters=torch)
    return dataclasses.replace(reqs[torch[0]], framework="torch", exporters=torch)


def _pairs(reqs: dict):
    """The diffs a grid asks for: JAX's capture against each PyTorch route's; without JAX, the first
    PyTorch route's (torch_xla's) against each other's."""
    if "jax" in reqs:
        return [(reqs["jax"], reqs[r]) for r in EXPORTERS if r in reqs]
    torch = [r for r in EXPORTERS if r in reqs]
    return [(reqs[torch[0]], reqs[r]) for r in torch[1:]]
