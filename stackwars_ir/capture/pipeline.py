"""A capture run end to end: the workload prepared, each route exported, parity-checked and written.

A route is exported here or in a version stack's worker.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import models
from ..common import files
from ..common.errors import CaptureError, ParityError, PartialCapture, StackwarsError
from ..common.files import distribution_version
from ..common.progress import Stages
from ..common.routes import PACKAGE, ROUTES
from ..common.runtime import host_devices, runtime
from ..ir import load_single
from ..ir.scopes import AUTO_PROVENANCE, named_alike, path_coverage
from ..isolate.stacks import Stack
from ..isolate.task import Isolated, Task, started
from ..workload import Exact, Request, float64_output, keep_prepared, prepare
from ..workload.request import stem
from ..workload.shapes import check_fits
from ..workload.train import TrainState, register_torch_xla, train_state
from . import artifact, lowerings, parity, train
from .abstract import capture_abstract, stack_abstract_jax
from .artifact import Capture
from .export_errors import route_failure
from .jax_capture import capture_jax
from .localize import first_divergence
from .lowering import placement
from .sanitize import absolute_paths, relativize
from .sidecar import recorded_values_of, sidecar_contents
from .torch_capture import capture_torch_xla_lazy, export_program, spmd


@dataclass(frozen=True)
class CaptureSet:
    """What one `capture` run wrote: the files, and each capture's parity against PyTorch eager."""

    model: str
    size: str
    files: tuple[Path, ...]
    parity: tuple[parity.Parity, ...]
    skipped: tuple[str, ...] = ()  # routes asked for and not captured, each with why
    warnings: tuple[str, ...] = ()  # what the files hold that a diff will not read as the user expects
    failed: tuple[str, ...] = ()  # routes `--exporter all` tried and could not capture, each with why

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.parity)


def run(req: Request, out_dir: Path, *, force: bool = False, show: bool | None = None,
        stack: Stack | None = None) -> CaptureSet:
    """Capture, check parity, then write every file (atomically); raise ParityError after writing.
    `stack` (stacks.Stack; None or the lock's: this process's packages): every side the request names
    lowered (and parity-checked) by that stack's packages (its jax; its torch, torch_xla and torchax
    where it holds them), in a worker of that stack's environment (isolate), from the weights,
    inputs, reference and training state built here."""
    from ..models import _contract as contract

    req = req.validated()
    entry = models.entry(req.model)
    stack = None if stack is None or stack.is_lock else stack
    if stack is not None:
        _check_stack_request(req, stack)
    else:
        _check_here(req)
    with contract.blame(entry):  # the adapter's own exceptions: one line, its file and line
        if not req.mesh:
            return _run(req, out_dir, force, show, stack)

        if not req.abstract:
            host_devices(req.mesh_spec.devices)  # the parity run: the mesh on this host's CPU devices
        if req.framework != "jax" and "torch_xla" in req.exporters:
            spmd(req.mesh_spec.devices)
        return _run(req, out_dir, force, show)  # each lowering places its arguments (lowering.placement)


def in_stack(req: Request, stack: Stack, task: Callable[..., object], args: tuple):
    """`task(req, *args)` run by a worker of `stack`'s environment (its jax, torch, torch_xla, torchax):
    what it returns, or its CaptureError raised here."""

    sides = "jax" if req.framework == "jax" else " + ".join(req.stems(req.frameworks()))
    label = f"{req.model}-{req.size} {sides} (stack {stack.name})"
    with Isolated(None, stack=stack) as worker:
        got = worker.run(Task(task, (req, *args), label, CaptureError, keep_prepared), None)
    if isinstance(got, Exception):
        raise got
    return got


def stack_capture(req: Request, weights: dict[str, np.ndarray], inputs: dict[str, np.ndarray], reference: np.ndarray,
                  buffers: frozenset[str], state: TrainState | None = None, exact: Exact | None = None) -> list:
    """A stack's worker's task: capture_here, its time limit started once its inputs are here."""

    started()
    return capture_here(req, weights, inputs, reference, buffers, state, exact)


def _check_here(req: Request) -> None:
    """A route that runs in a version stack of its own (TorchTPU: its torch is not the lock's) is
    refused in one line where this process cannot import its package."""

    for e in req.exporters if req.framework != "jax" else ():
        route = ROUTES[e]
        if route.stack and distribution_version(PACKAGE[e]) is None:
            raise StackwarsError(f"--exporter {e} runs in a version stack of its own: {route.stack}",
                                 fix="stackwars-ir stack add torch-tpu torch==2.13.0 torch-tpu==0.2.0 xla-cpu-pjrt==0.0.1 "
                                     "jax==0.12.0.1 jaxlib==0.12.0.1, then add --stack torch-tpu (docs/stacks.md)")


def _check_stack_request(req: Request, stack) -> None:
    """What a stack captures: a forward or training step on one device; the JAX side from weights or
    shapes, the PyTorch side (from weights) where the stack holds torch and the exporters' packages."""
    if req.mesh:
        raise StackwarsError(f"capture --stack {stack.name}: a stack captures on one device (no --mesh yet)",
                             fix=f"stackwars-ir capture {req.model} --stack {stack.name}, without --mesh")
    if req.framework == "jax":
        return
    if req.abstract:
        raise StackwarsError(f"capture --stack {stack.name} --abstract: from shapes a stack lowers the JAX twin "
                             "alone (a PyTorch side is exported from weights)",
                             fix=f"stackwars-ir capture {req.model} --abstract --framework jax --stack {stack.name}")
    missing = [p for p in ("torch", *req.exporters) if not stack.versions.get(p)]
    if missing:
        raise StackwarsError(f"capture --stack {stack.name}: no PyTorch side in this stack: it holds no "
                             f"{', '.join(missing)}",
                             fix=f"--framework jax, or a PyTorch stack: stackwars-ir stack add NAME torch==V "
                                 f"torch_xla==V torchax==V jax==V jaxlib==V")
    for e in req.exporters:
        if e in stack.broken:
            raise StackwarsError(f"capture --stack {stack.name}: {e} does not import in this stack ({stack.broken[e]})",
                                 fix="use another --exporter (docs/stacks.md: which torchax runs)")


def capture_here(req: Request, weights: dict[str, np.ndarray], inputs: dict[str, np.ndarray], reference: np.ndarray,
                 buffers: frozenset[str], state: TrainState | None = None, exact: Exact | None = None) -> list:
    """Each capture the request names and its parity, made in this process (a stack's worker calls
    this with the weights, inputs, reference or training state its parent built with its torch): the
    PyTorch side's model is built here, by this process's torch, and given those weights."""

    adapter, label = models.adapter(req.model), f"{req.model}-{req.size}"
    frameworks = req.frameworks()
    model = _model_of(req, adapter, weights) if "torch" in frameworks else _Buffers(buffers)
    if state is None:
        caps = _capture_all(req, frameworks, adapter, model, weights, inputs, label, False)
    else:
        if "torch" in frameworks and "torch_xla" in req.exporters:
            register_torch_xla()
        caps = _capture_train(req, frameworks, adapter, model, state, label, False)
    checked = []
    for cap in caps:
        if isinstance(cap, NotCaptured):
            checked.append(cap)
            continue
        stages = Stages(f"{label} {cap.stem}", show=False)
        with stages.stage("parity (compile + run on XLA CPU)"):
            result = parity.check(cap, weights, inputs, reference, runtime("cpu"), exact) if state is None else \
                parity.check_train(cap, state, runtime("cpu"))
        checked.append((dataclasses.replace(cap, seconds={**cap.seconds, **stages.seconds}), result))
    return checked


def _model_of(req: Request, adapter, weights):
    """The adapter's PyTorch model built by this process's torch, every parameter and buffer set to
    `weights` (the parent's, built by its own torch: the same model in both stacks)."""
    import torch

    torch.manual_seed(req.seed)
    model = adapter.torch_model(req.size)
    tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    if set(tensors) != set(weights):
        raise CaptureError(f"{req.model}: this stack's model has other tensors than the parent's "
                           f"({len(tensors)} against {len(weights)})",
                           fix="pin the same transformers in both stacks (stack add pins this process's)")
    with torch.no_grad():
        for name, t in tensors.items():
            t.copy_(torch.from_numpy(np.asarray(weights[name])))
    return model


@dataclass(frozen=True)
class _Buffers:
    """What _capture_all reads of a PyTorch model on the JAX side alone: its buffers' names."""

    names: frozenset

    def named_buffers(self):
        return ((n, None) for n in self.names)


def _run(req: Request, out_dir: Path, force: bool, show: bool | None, stack=None) -> CaptureSet:
    frameworks = req.frameworks()
    stems = req.stems(frameworks)
    targets = [p for s in stems for p in req.paths(out_dir, s)]
    artifact.refuse_existing(targets, force)

    label = f"{req.model}-{req.size}"
    if req.abstract:
        return _run_abstract(req, frameworks, out_dir, label, show, stack)

    check_fits(req)  # an 8B model's weights, materialized three times, do not fit: say --abstract
    prep = Stages(label, show=show)
    with prep.stage("build torch model"):
        w = prepare(req)
        adapter, model, weights, inputs, reference = w.adapter, w.model, w.weights, w.inputs, w.reference
    state = exact = None
    if req.train:
        if "torch" in frameworks and "torch_xla" in req.exporters:
            register_torch_xla()  # before the eager steps' backward
        with prep.stage("two torch eager training steps"):
            state = train_state(req, model, inputs, reference)
    else:
        with prep.stage("torch eager in float64"):
            exact = float64_output(model, inputs)
    if stack is not None:
        with prep.stage(f"{' + '.join(frameworks)} capture + parity in stack {stack.name}"):
            made = in_stack(req, stack, stack_capture, (weights, inputs, reference,
                                                        frozenset(k for k, _ in model.named_buffers()), state,
                                                        None if req.train else exact))
            made, failed = _split(made)
            checked = [(dataclasses.replace(cap, extra={**cap.extra, "stack": stack}), result)
                       for cap, result in made]
        checked = _localized(req, adapter, model, weights, inputs, checked, prep)
        return _write(req, out_dir, checked, stems, weights, inputs, reference, state, frameworks, failed)
    if state is not None:
        captures = _capture_train(req, frameworks, adapter, model, state, label, show)
    else:
        captures = _capture_all(req, frameworks, adapter, model, weights, inputs, label, show)

    rt = runtime("cpu")

    def check(cap: Capture) -> tuple[Capture, parity.Parity]:
        stages = Stages(f"{label} {cap.stem}", show=show)
        with stages.stage("parity (compile + run on XLA CPU)"):
            try:
                result = parity.check(cap, weights, inputs, reference, rt, exact) if state is None else \
                    parity.check_train(cap, state, rt)
            except StackwarsError:
                raise
            except Exception as e:  # XLA refused to run it: one line, nothing written
                first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
                raise CaptureError(f"{cap.stem}: the parity run on XLA CPU failed: {type(e).__name__}: {first}",
                                   fix="report this capture as a bug in stackwars-ir") from e
        return dataclasses.replace(cap, seconds={**prep.seconds, **cap.seconds, **stages.seconds}), result

    # Each capture's parity check runs in a second thread beside the next capture's export: XLA's
    # compile keeps both cores busy, an export mostly one (GPT-2 base training, docs/benchmarks.md).
    # Every check ends before any write: a failure leaves no partial set behind.
    failed = []
    with ThreadPoolExecutor(1, thread_name_prefix="parity") as pool:
        pending = []
        try:
            for cap in captures:
                if isinstance(cap, NotCaptured):
                    failed.append(cap)
                    continue
                pending.append(pool.submit(check, cap))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        checked = sorted((f.result() for f in pending), key=lambda c: stems.index(c[0].stem))
    checked = _localized(req, adapter, model, weights, inputs, checked, prep)
    return _write(req, out_dir, checked, stems, weights, inputs, reference, state, frameworks, failed)


def _localized(req: Request, adapter, model, weights, inputs, checked, prep: Stages) -> list:
    """Each suspect or differing JAX twin with the first module whose output leaves the model's
    (localize.py: the twin run eagerly beside PyTorch, module by module). The PyTorch routes run the
    model itself: what differs there is the route's lowering, not a module's code."""

    out = []
    for cap, result in checked:
        if cap.framework == "jax" and (result.suspect or not result.ok) and hasattr(adapter, "jax_model"):
            with prep.stage(f"{cap.stem}: where the twin diverges"), contract_blame(req):
                found = first_divergence(adapter, req.size, model, weights, inputs, parity.NOISE_MULTIPLE)
            result = dataclasses.replace(result, diverges=found.words() if found else
                                         "no module's output (the difference lies outside the modules both "
                                         "sides name alike, or in the backward)")
        out.append((cap, result))
    return out


def contract_blame(req: Request) -> AbstractContextManager[None]:
    """The adapter's own exceptions as one line naming its file and line (models/_contract.py)."""
    from ..models import _contract as contract

    return contract.blame(models.entry(req.model))


def _write(req, out_dir, checked, stems, weights, inputs, reference, state, frameworks, failed=()) -> CaptureSet:
    """Write every checked capture as one set (none when one has a machine path left in it). Routes
    `--exporter all` could not capture (`failed`): the others written, then PartialCapture (exit 1)
    naming each; none captured at all: CaptureError, nothing written."""
    if failed and not checked:
        if len({f.error.one_line() for f in failed}) == 1:  # torch.export's failure: every route's
            raise failed[0].error
        raise CaptureError(f"{req.model}-{req.size}: no route captured: " + "; ".join(f.line() for f in failed))
    _refuse_absolute_paths([cap for cap, _ in checked])
    results = [result for _, result in checked]
    routes = {r.stem: r.ok for r in results} if not all(r.ok for r in results) else None
    contents = [f for cap, result in checked
                for f in sidecar_contents(cap, req, state.inputs if state else inputs, result, out_dir, state,
                                   recorded_values_of(cap, req, weights, inputs, reference, state), routes)]
    with files.locked_folder(Path(out_dir) / f"{req.model}-{req.size}"):
        files.write_set(contents)
    written = [path for path, _ in contents]
    outcome = CaptureSet(req.model, req.size, tuple(written), tuple(results), _skipped(req, frameworks),
                         scope_warnings(written), tuple(f.line() for f in failed))
    missing = "".join(f"; {f.line()}" for f in failed)
    if not outcome.ok:
        raise ParityError(f"{req.model}-{req.size}: {_verdicts(results)}{missing}; files written for inspection")
    if failed:
        raise PartialCapture(f"{req.model}-{req.size}: {len(failed)} of {len(failed) + len(results)} routes not "
                             f"captured{missing}; the others written", result=outcome)
    return outcome


def scope_warnings(written: Iterable[Path | str]) -> tuple[str, ...]:
    """A JAX twin whose ops name the PyTorch side's modules far less often than the PyTorch side's
    own ops carry paths (under half as often): its diff pairs fewer blocks, or pairs them by
    structure, and shows no module names; the fix is in the twin."""

    mlir = [Path(p) for p in written if str(p).endswith(".mlir")]
    jax = [p for p in mlir if p.name.startswith("jax")]
    torch = [p for p in mlir if p.name.startswith("torch-")]
    if not jax or not torch:
        return ()
    try:
        a, b = load_single([jax[0], torch[0]])
    except StackwarsError:
        return ()
    alike, theirs = named_alike(a, b), path_coverage(b)
    if theirs < AUTO_PROVENANCE or alike >= 0.5 * theirs:
        return ()
    return (f"{jax[0].name}: {alike:.0%} of the JAX twin's ops carry a PyTorch module path of "
            f"{torch[0].name} ({theirs:.0%} of its own ops carry one), so diff pairs fewer blocks, by "
            f"structure where under {AUTO_PROVENANCE:.0%}, and without module names; run each twin module's "
            f"ops under jax.named_scope(its PyTorch attribute name), nested as the modules are: "
            f"models._nnx.Scoped does (docs/adapters.md)",)


def _verdicts(results) -> str:
    """Every route's verdict in one line: each that differs, where it differs most, and those that agree."""
    bad, good = [p for p in results if not p.ok], [p.stem for p in results if p.ok]
    said = "; ".join(" ".join(p.line().split()) for p in bad)
    return f"{len(bad)} of {len(results)} routes differ from PyTorch eager: {said}" + \
        (f"; within tolerance: {', '.join(good)}" if good else "")


def _skipped(req: Request, frameworks) -> tuple[str, ...]:
    if req.framework == "both" and "jax" not in frameworks:
        e = models.entry(req.model)
        if e.data is not None:
            return (f"jax: not captured: {req.model} is a model of {Path(e.path).name}, data for the PyTorch routes "
                    "(no JAX twin)",)
        return (f"jax: not captured: {Path(e.path).name} defines no jax_model(size, weights)",)
    return ()


def _refuse_absolute_paths(captures) -> None:
    """Captures are published: a path of this machine left in one stops the whole set."""
    for cap in captures:
        leftover = absolute_paths(cap.text)
        if leftover:
            raise CaptureError(f"{cap.stem}: absolute path {leftover[0]!r} left in the capture",
                               fix="report this as a bug in stackwars-ir's path sanitizer")


def _abstract_in(stack, req, label: str, show):
    """capture_abstract's `elsewhere`: the JAX side from shapes, made in a version stack's worker."""

    def made(parts):
        with Stages(label, show=show).stage(f"jax capture (abstract) in stack {stack.name}"):
            cap = in_stack(req, stack, stack_abstract_jax, parts)
        return dataclasses.replace(cap, extra={**cap.extra, "stack": stack})

    return made


def _run_abstract(req, frameworks, out_dir: Path, label: str, show, stack=None) -> CaptureSet:
    """Captures from shapes alone, written with a sidecar that says parity was not checked."""

    captures, inputs = capture_abstract(req, frameworks, lambda what: Stages(f"{label} {what}", show=show),
                                        _abstract_in(stack, req, label, show) if stack is not None else None)
    captures = [_named(c, req) for c in captures]
    _refuse_absolute_paths(captures)
    contents = [f for cap in captures for f in sidecar_contents(cap, req, inputs, None, out_dir)]
    with files.locked_folder(Path(out_dir) / f"{req.model}-{req.size}"):
        files.write_set(contents)
    return CaptureSet(req.model, req.size, tuple(p for p, _ in contents), (), _skipped(req, frameworks))


def _capture_all(req, frameworks, adapter, model, weights, inputs, label, show):
    """Each forward capture, as soon as it is made."""

    if "jax" in frameworks:
        cap = capture_jax(adapter, req.size, weights, inputs, Stages(f"{label} jax", show=show),
                          scan=req.scan_layers, remat=req.remat, buffers={k for k, _ in model.named_buffers()},
                          placement=placement(req))
        yield _named(cap, req)
    if "torch" not in frameworks:
        return

    entry, ep, unexported = models.entry(req.model), None, None
    for exporter in req.exporters:
        try:
            if ROUTES[exporter].lazy and (req.scan_layers or req.mesh):  # torch.export traces neither: lazy tensors
                cap = capture_torch_xla_lazy(model, inputs, Stages(f"{label} torch_xla", show=show), entry.layers,
                                             scan=req.scan_layers, mesh=req.mesh_spec,
                                             tensor_parallel=entry.tensor_parallel)
            else:
                if ep is None and unexported is None:
                    exp = Stages(f"{label} torch", show=show)
                    try:
                        ep = export_program(model, inputs, exp, entry)
                    except CaptureError as e:
                        unexported = e
                if unexported is not None:
                    raise unexported
                stages = Stages(f"{label} {exporter}", show=show)
                stages.seconds.update(exp.seconds)
                cap = _lowered(exporter, ep, inputs, stages, req, entry)
        except CaptureError as e:
            if len(req.exporters) == 1:
                raise
            yield NotCaptured(stem("torch", exporter, req.step, req.program), e)  # --exporter all: the next route
            continue
        yield _named(cap, req)


def _lowered(exporter: str, ep, inputs, stages: Stages, req: Request, entry) -> Capture:
    """`exporter`'s capture of torch.export's program; its failure at the model's line (export_errors)."""
    from ..models import _contract as contract

    try:
        return lowerings.forward(exporter)(ep, inputs, stages, placement=placement(req))
    except CaptureError as e:
        cause = e.__cause__
        if cause is None or isinstance(cause, StackwarsError) or not str(e).startswith(f"{exporter} export failed"):
            raise
        raise route_failure(exporter, cause, ep, contract.adapter_path(entry)) from cause


class NotCaptured(NamedTuple):
    """A route `--exporter all` tried and could not capture, with why (the others are still captured)."""

    stem: str
    error: CaptureError

    def line(self) -> str:
        return f"{self.stem}: not captured: {self.error.one_line()}"


def _split(items) -> tuple[list, list]:
    """Captures (or checked captures) apart from the routes that were not captured."""
    items = list(items)
    return [i for i in items if not isinstance(i, NotCaptured)], [i for i in items if isinstance(i, NotCaptured)]


def _capture_train(req, frameworks, adapter, model, state, label, show):
    """Each training capture, as soon as it is made: JAX's, torchax's, then torch_xla's, so that
    the exports that run Python on one core (JAX's, torchax's) overlap a parity compile on two."""

    if "jax" in frameworks:
        cap = train.capture_jax_train(adapter, req.size, state, Stages(f"{label} jax train", show=show),
                                      scan=req.scan_layers, remat=req.remat, placement=placement(req))
        yield _named(cap, req)
    if "torch" in frameworks:
        entry = models.entry(req.model)
        for exporter in sorted(req.exporters, key=lambda e: bool(ROUTES[e].lazy)):  # the lazy step's Python last
            stages = Stages(f"{label} {exporter} train", show=show)
            yield _named(lowerings.train_step(exporter)(model, state, stages, req, entry), req)


def _named(cap: Capture, req: Request) -> Capture:
    """The capture as written: its text free of this machine's paths, its stem saying the layers' program."""
    return dataclasses.replace(cap, text=relativize(cap.text), stem_suffix=cap.stem_suffix + req.program)
