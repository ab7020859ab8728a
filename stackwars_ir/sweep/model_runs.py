"""Model runs: a model captured at each batch (or captures reused), then timed, estimated or planned.

Also the largest batch that fits, and the smallest slice.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..bench import machine, peaks
from ..bench.estimate import check_chip
from ..bench.memory import DEVICES, MAX_BATCH_LIMIT, Budget, MemoryReport, SmallestSlice, search_max_batch, slice_chips
from ..bench.native import baselines_asked
from ..bench.planning import check_target, plan_files, target_versions
from ..bench.run import BenchReport, baseline_steps, bench_baselines, bench_files, crossover, estimate_files, file_steps
from ..bench.timing import Asked
from ..capture import run
from ..common.errors import StackwarsError
from ..common.files import read_sidecar, versions
from ..common.progress import planned, start
from ..common.routes import WEIGHTLESS, weightless
from ..common.runtime import runtime
from ..common.targets import TPUS, is_tpu, names
from ..workload import CAPTURE_REVISION, Request
from ..workload.mesh import Mesh


def _own_folders(model, batches, fields) -> bool:
    """A sweep (batches, or a sequence length given) keeps each batch and sequence length in its own folder."""
    seq = model.seq if isinstance(model, Request) else fields.get("seq")
    return tuple(batches) != (None,) or bool(seq)


def requests(model: str | Request, batches: Iterable[int | None], **fields: object) -> list[Request]:
    """The request at each batch size (None: the adapter's), each checked before any work starts: a
    Request, or a model name and Request fields (size, seq, exporters, step ...)."""
    return [dataclasses.replace(_as_request(model, fields), batch=b).validated() for b in batches]


def _as_request(model: str | Request, fields: dict) -> Request:
    """`model` itself, or the Request of a model name and Request fields."""
    if isinstance(model, Request):
        return model
    return Request(model, **{k: tuple(v) if k == "exporters" else v for k, v in fields.items()})


def bench_model(model: str | Request, *, batches: Sequence[int | None] = (None,),
                baselines: str | Sequence[str] = ("jax", "eager"), out_dir: Path = Path("captures"),
                backend: str | None = None, timeout: float | None = None, show: bool | None = None,
                max_memory: int | None = None, progress: Callable[[str], object] | None = None,
                asked: Asked | None = None, **fields: object) -> BenchReport:
    """Capture MODEL (reusing captures already on disk) at each batch size and time everything;
    `step="train"`: its training step, beside the native runtimes' own training loops. `asked`: the
    user's sampling (bench.timing.Asked)."""

    # Every request checked, and a missing backend found, before any capture: each fails in one line.
    todo = requests(model, batches, **fields)
    if todo[0].framework != "both":
        raise StackwarsError(f"bench MODEL times both frameworks; got --framework {todo[0].framework}",
                             fix="use --framework both, or bench the capture files directly")
    steps = bench_steps(model, batches=batches, baselines=baselines, out_dir=out_dir, asked=asked, **fields)
    baselines = _baselines(todo[0], baselines)
    rt = runtime(backend)
    rows = []

    sweep = _own_folders(model, batches, fields)
    with planned(progress, steps):
        for req in todo:
            files = captured(req, out_dir, sweep=sweep, show=show, progress=progress)
            report = bench_files(files, backend, timeout, with_peaks=False, max_memory=max_memory, progress=progress,
                                 asked=asked)
            rows += [(req.batch, e) for _, e in report.rows]
            rows += [(req.batch, e) for e in bench_baselines(req, baselines, backend, timeout, max_memory, progress,
                                                             asked)]
    return BenchReport(rt.platform, tuple(rows), peaks(rt), machine(), crossover(rows, todo[0].exporters), asked)


def bench_steps(model: str | Request, *, batches: Sequence[int | None] = (None,),
                baselines: str | Sequence[str] = ("jax", "eager"), out_dir: Path = Path("captures"),
                asked: Asked | None = None, **fields: object) -> list[str]:
    """The steps (progress.Steps kinds) bench_model takes with these arguments: at each batch, the
    capture where its files are not on disk yet, the files' timing (and --rounds), each native
    runtime's timing (and --profile)."""

    todo, sweep = requests(model, batches, **fields), _own_folders(model, batches, fields)
    names, out = _baselines(todo[0], baselines), []
    for req in todo:
        out += ["capture"] * _needs_capture(req, _folder(req, out_dir, sweep))
        out += file_steps(asked) + baseline_steps(names, req.step, asked)
    return out


def _baselines(req, baselines) -> tuple:
    """The native runtimes asked (bench.native.baselines_asked) for this request's step and layers."""

    layers = ("-scan" if req.scan_layers else "") + ("-remat" if req.remat else "")
    return baselines_asked(baselines, req.step, layers, mesh=req.mesh)


def estimate_model(model: str | Request, target: str, *, batches: Sequence[int | None] = (None,),
                   out_dir: Path = Path("captures"), timeout: float | None = None, show: bool | None = None,
                   max_memory: int | None = None, progress: Callable[[str], object] | None = None,
                   **fields: object) -> BenchReport:
    """MODEL captured (or its captures reused) at each batch size, every capture compiled for a TPU
    generation (`target`) and its kernels' time estimated (bench.run.estimate_files): no run."""

    check_chip(target)
    todo = requests(model, batches, **fields)
    rows = []
    for req in todo:
        files = captured(req, out_dir, sweep=_own_folders(model, batches, fields), show=show, progress=progress)
        rows += [(req.batch, e) for _, e in estimate_files(files, target, timeout, max_memory, progress).rows]
    return BenchReport(target, tuple(rows), {}, estimate_files((), target).machine)


def captured(req: Request, out_dir: Path, *, sweep: bool, show: bool | None = None,
             progress: Callable[[str], object] | None = None) -> list[Path]:
    """The capture files of `req` (JAX's, then each exporter's), captured unless the same request
    is on disk already, written by this capture revision; a sweep keeps each batch and sequence
    length in its own folder."""

    folder = _folder(req, out_dir, sweep)
    files = [req.paths(folder, s)[0] for s in req.stems()]
    if _needs_capture(req, folder):
        start(progress, "capture", f"capturing {req.model}-{req.size} at batch {req.batch} into {folder} ...")
        run(req, folder, force=True, show=show)
    elif progress:
        progress(f"using the captures of {req.model}-{req.size} at batch {req.batch} in {folder}")
    return files


def _folder(req, out_dir: Path, sweep: bool) -> Path:
    """Where `req`'s captures go: a sweep's batch and sequence length in a folder of their own."""
    return Path(out_dir) / f"b{req.batch}-s{req.seq}" if sweep else Path(out_dir)


def _needs_capture(req, folder: Path) -> bool:
    """Whether some file of `req` is missing from `folder`, or is not the capture `req` would write."""
    return not all(f.exists() and _same_request(f, req) for f in (req.paths(folder, s)[0] for s in req.stems()))


def _same_request(path: Path, req) -> bool:
    """Whether the capture at `path` is the one `req` would write: its sidecar describes it and the
    request, this capture revision wrote it (an older one may differ: see CAPTURE_REVISION), and
    the same packages lowered it (a file another lock's jax or torch wrote is another program: a
    sweep keyed by this stack must not compile it under this stack's name), and its parity did not
    fail (a failed capture's files are kept for inspection: reused, a retried job would plan a
    computation parity refused)."""

    try:
        side = read_sidecar(path)
    except (StackwarsError, OSError, ValueError):
        return False
    if side is None:
        return False
    wrote = {k: v for k, v in (side.data.get("versions") or {}).items() if v}
    # A capture that failed parity is written for inspection, not for use: it is captured again.
    failed = (side.data.get("parity") or {}).get("ok") is False
    return (side.seed, side.batch, side.seq, side.step, side.abstract, side.dtype, side.capture_revision) == \
        (req.seed, req.batch, req.seq, req.step, req.abstract, req.dtype, CAPTURE_REVISION) and \
        wrote == {k: v for k, v in versions().items() if v} and not failed


def plan_model(model: str | Request, *, batches: Sequence[int | None] = (None,),
               out_dir: Path = Path("out") / "captures", target: str = "cpu", budgets_: Sequence[Budget] = (),
               measure: bool = False, max_memory: int | None = None, timeout: float | None = None,
               show: bool | None = None, progress: Callable[[str], object] | None = None,
               **fields: object) -> MemoryReport:
    """MODEL captured (or its captures reused) at each batch size, every capture planned for `target`."""

    todo = requests(model, batches, **fields)
    check_target(target, measure)  # a missing libtpu fails before any capture
    files = []
    for req in todo:
        files += captured(req, out_dir, sweep=_own_folders(model, batches, fields), show=show, progress=progress)
    return plan_files(files, target, budgets_, measure, max_memory, timeout, progress)


def max_batch_model(model: str | Request, *, budgets_: Sequence[Budget], limit: int = MAX_BATCH_LIMIT,
                    batches: Sequence[int] = (), measure: bool = False, progress: Callable[[str], object] | None = None,
                    **kw: object) -> MemoryReport:
    """--max-batch: MODEL's executables compiled at the batches the search asks for, from abstract
    captures (shapes only: the IR is the one a capture with weights gives, and no batch is run), so
    torch_xla, which has no route without weights, is left out (torchax by default)."""

    if batches or measure:
        raise StackwarsError("--max-batch chooses the batches itself and runs nothing", fix="drop --batch and --measure")
    if not budgets_:
        raise StackwarsError("--max-batch searches for the largest batch that fits a budget, and none was given",
                             fix="add --budget, e.g. --budget v6e-1 or --budget 16G")
    names = {f.name for f in dataclasses.fields(Request)}
    model = _as_request(model, {"exporters": WEIGHTLESS[:1], **{k: v for k, v in kw.items() if k in names}})
    run = {k: v for k, v in kw.items() if k not in names}
    (routes, left), framework = weightless(model.exporters), model.framework
    if framework in ("torch", "both") and not routes:
        if framework == "torch":
            raise StackwarsError(f"--max-batch compiles abstract captures, and {left[0]} has none (its lazy "
                                 "tensors hold data)", fix=f"use --exporter {WEIGHTLESS[0]}")
        framework = "jax"
    if progress and left and framework != "jax":
        progress(f"--max-batch: {', '.join(left)} left out (it has no capture without weights)")
    base = dataclasses.replace(model, exporters=routes or WEIGHTLESS[:1], framework=framework, abstract=True)
    plans: dict[int, dict] = {}
    every = []

    def probe(batch: int) -> dict:
        if batch not in plans:
            report = plan_model(base, batches=(batch,), budgets_=budgets_, progress=progress, **run)
            plans[batch] = {p.name: p for p in report.plans}
            every.extend(report.plans)
        return plans[batch]

    found = search_max_batch(probe, list(probe(1)), budgets_, limit)

    # The table shows the plans on either side of each boundary; every compile is in the searches.
    shown = {(m.name, b) for m in found for b in (1, m.largest, (m.largest or 0) + 1) if b}
    target = run.get("target", "cpu")
    plans_shown = sorted((p for p in every if (p.name, p.batch) in shown or not p.ok), key=lambda p: (p.name, p.batch or 0))
    return MemoryReport(target, tuple(plans_shown), tuple(budgets_), machine(), target_versions(target), found)


def smallest_slice_model(model: str | Request, *, budgets_: Sequence[Budget], target: str,
                         progress: Callable[[str], object] | None = None, **kw: object) -> MemoryReport:
    """--chips: MODEL captured abstractly on a mesh of each slice size of `target` in turn (the fsdp axis
    taking the chips the request's other mesh axes leave) and compiled for it, until every executable's
    per-chip plan fits every budget (default: one chip of the target)."""

    check_target(target)
    if not is_tpu(target):
        raise StackwarsError("--chips searches the slices of a TPU generation",
                             fix=f"add --target {TPUS[0].name} (or {names(TPUS[1:])})")
    fields = {f.name for f in dataclasses.fields(Request)}
    model = _as_request(model, {"exporters": WEIGHTLESS[:1], **{k: v for k, v in kw.items() if k in fields}})
    run = {k: v for k, v in kw.items() if k not in fields}
    kept, left = weightless(model.exporters)
    routes = kept or WEIGHTLESS[:1]
    if progress and left and model.framework != "jax":
        progress(f"--chips: {', '.join(left)} left out (it has no capture without weights); {routes[0]} instead")
    model = dataclasses.replace(model, exporters=routes)
    chip = f"{target[4:]}-1"
    budgets_ = tuple(budgets_) or (Budget(chip, DEVICES[chip] << 30),)
    others = [(a, n) for a, n in (Mesh.parse(model.mesh).axes if model.mesh else ()) if a != "fsdp"]
    rest = 1
    for _, n in others:
        rest *= n
    found: dict = {}  # (name, budget) -> chips
    probes: dict = {}  # name -> [(chips, mesh, need)]
    every, errors = [], {}
    for chips in slice_chips(target):
        if chips % rest:
            continue
        axes = ([("fsdp", chips // rest)] if chips // rest > 1 else []) + others
        mesh = ",".join(f"{a}={n}" for a, n in axes)
        req = dataclasses.replace(model, mesh=mesh, abstract=True)
        report = plan_model(req, budgets_=budgets_, target=target, progress=progress, **run)
        every.extend(report.plans)
        for p in report.plans:
            name = p.name[:-len(Mesh.parse(mesh).stem)] if mesh else p.name
            if not p.ok:
                errors.setdefault(name, p.error)
                continue
            probes.setdefault(name, []).append((chips, mesh or "one chip", p.peak_bytes + p.code_bytes))
            for b in budgets_:
                if (name, b) not in found and p.peak_bytes + p.code_bytes <= b.bytes:
                    found[(name, b)] = chips
        if all((n, b) in found for n in probes for b in budgets_) and probes:
            break
    slices = tuple(SmallestSlice(n, b, found.get((n, b)), tuple(probes.get(n, ())), errors.get(n))
                   for n in sorted(set(probes) | set(errors)) for b in budgets_)
    return MemoryReport(target, tuple(every), budgets_, machine(), target_versions(target), slices=slices)
