"""A sweep's grid (GRID.toml): models x sizes x steps x routes x batches x meshes x targets, as jobs.

Each job is typed (sweep.job_types): a capture, a memory plan, a bench or a diff.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from .. import models
from ..bench.memory import TARGETS, TOPOLOGIES, budgets
from ..bench.native import BASELINES
from ..common.errors import StackwarsError
from ..common.routes import LOCK_EXPORTERS, ROUTES as ALL_ROUTES
from ..common.runtime import BACKENDS
from ..workload import Request
from .job_types import JOB_TIMEOUT, JOB_TYPES, CaptureJob, Cell, Job

COMMANDS = ("capture", "memory", "bench", "diff")
# routes.py: jax, then each PyTorch exporter the lock's environment runs (a sweep's workers are the lock's:
# TorchTPU's route, which needs a stack of its own, is not a sweep's)
ROUTES = ("jax", *LOCK_EXPORTERS)
# Each [[grid]] table's keys: a list is one axis of the product, a scalar holds for every job.
AXES = {"models": "model", "sizes": "size", "steps": "step", "routes": "route", "batches": "batch",
        "seqs": "seq", "meshes": "mesh", "targets": "target", "budgets": "budget", "dtypes": "dtype"}
SCALARS = {"seed": int, "abstract": bool, "scan_layers": bool, "remat": bool, "timeout": (int, float),
           "profile": int, "runs": int, "together": bool, "rounds": int}
DEFAULTS = {"sizes": ["tiny"], "steps": ["forward"], "routes": list(ROUTES), "batches": [None], "seqs": [None],
            "meshes": [""], "targets": ["cpu"], "budgets": [""], "dtypes": ["float32"]}
@dataclass(frozen=True)
class Grid:
    """A parsed GRID.toml: its jobs (every command's, with the captures they read, each once, captures
    first) and the requests the product named that cannot be made (one line each: why)."""

    path: str
    jobs: tuple[Job, ...]
    refused: tuple[tuple[str, str], ...]  # (what the grid asked for, why it cannot be captured)


def read_grid(path: Path) -> Grid:
    """GRID.toml as jobs, or one line naming the file, the table and what is wrong."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise StackwarsError(f"{path}: cannot read the grid: {e.strerror}", fix="give the path of a GRID.toml") from None
    except tomllib.TOMLDecodeError as e:
        raise StackwarsError(f"{path}: not TOML: {e}", fix="see docs/sweep.md for the grid format") from None
    tables = data.get("grid")
    if not isinstance(tables, list) or not tables or set(data) - {"grid", "adapters"}:
        raise StackwarsError(f"{path}: a grid is one or more [[grid]] tables (and `adapters`), nothing else",
                             fix="see docs/sweep.md for the grid format")
    _use_adapters(data.get("adapters", []), Path(path))
    return grid_of(tables, str(path))


def _use_adapters(paths, grid: Path) -> None:
    """The grid's `adapters` (files or folders, relative to the grid file) added to STACKWARS_IR_ADAPTERS
    for this process and its workers, as `--adapters` does."""
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise StackwarsError(f"{grid}: `adapters` must be a list of paths", fix='e.g. adapters = ["../zoo"]')
    if paths:
        import os

        try:
            os.environ[models.ADAPTERS_ENV] = models.adapters_env([grid.parent / p for p in paths])
        except StackwarsError as e:
            raise StackwarsError(f"{grid}: {e.message}", fix="name adapter files or folders relative to the grid file") from None


def grid_of(tables: list[dict], where: str = "grid") -> Grid:
    """The jobs of [[grid]] tables (dicts), in order, each job once."""
    jobs: dict = {}
    refused: dict = {}
    for n, table in enumerate(tables, 1):
        here = f"{where}: [[grid]] #{n}"
        for job in _expand(table, here, refused):
            for j in job.captures() + (() if isinstance(job, CaptureJob) else (job,)):
                jobs.setdefault(_identity(j), j)
    ordered = sorted(jobs.values(), key=lambda j: not isinstance(j, CaptureJob))  # stable: captures first
    return Grid(where, tuple(ordered), tuple(refused.items()))


def _identity(job: Job) -> str:
    return json.dumps({k: v for k, v in job.as_json().items() if k != "timeout"}, sort_keys=True)


def _expand(table: dict, here: str, refused: dict):
    known = set(AXES) | set(SCALARS) | {"commands", "baselines"}
    for k in table:
        if k not in known:
            raise StackwarsError(f"{here}: unknown key {k!r}", fix=f"use one of: {', '.join(sorted(known))}")
    commands = table.get("commands")
    if not isinstance(commands, list) or not commands or any(c not in COMMANDS for c in commands):
        raise StackwarsError(f"{here}: `commands` must list some of {', '.join(COMMANDS)}",
                             fix='e.g. commands = ["capture", "memory"]')
    if "models" not in table:
        raise StackwarsError(f"{here}: no `models`", fix='e.g. models = ["gpt2", "llama"]')
    axes = {}
    for key in AXES:
        values = table.get(key, DEFAULTS.get(key))
        if not isinstance(values, list) or not values:
            raise StackwarsError(f"{here}: `{key}` must be a non-empty list", fix=f'e.g. {key} = [{values!r}]')
        axes[key] = values
    for r in axes["routes"]:
        if r in ALL_ROUTES and r not in ROUTES:
            raise StackwarsError(f"{here}: route {r!r} runs in a version stack of its own ({ALL_ROUTES[r].stack}), "
                                 "and a sweep's workers run the lock's packages",
                                 fix=f"capture it with `capture --exporter {r} --stack NAME` (docs/stacks.md); a sweep "
                                     f"takes {', '.join(ROUTES)}")
        if r not in ROUTES:
            raise StackwarsError(f"{here}: unknown route {r!r}", fix=f"use some of: {', '.join(ROUTES)}")
    _check_targets(axes, commands, here)
    _check_models(axes, here)
    scalars = {}
    for key, kind in SCALARS.items():
        if key in table:
            if not isinstance(table[key], kind) or (kind is int and isinstance(table[key], bool)):
                what = getattr(kind, "__name__", "number")
                raise StackwarsError(f"{here}: `{key}` must be {'an' if what[0] in 'aeiou' else 'a'} {what}",
                                     fix=f"e.g. {key} = {'true' if kind is bool else 1}")
            scalars[key] = table[key]
    timeout = float(scalars.pop("timeout", JOB_TIMEOUT))
    timing = {"baselines": _baselines(table, commands, here), "profile": scalars.pop("profile", 0),
              "runs": scalars.pop("runs", 0), "together": scalars.pop("together", False)}
    if timing["together"] and "bench" not in commands:
        raise StackwarsError(f"{here}: `together` times a table's routes in one bench job, and `commands` has no bench",
                             fix='add "bench" to `commands`, or drop `together`')
    if timing["profile"] and timing["profile"] < 2:
        raise StackwarsError(f"{here}: `profile` must be 0 (none) or at least 2 profiled runs", fix="e.g. profile = 10")
    if "runs" in table and timing["runs"] < 1:
        raise StackwarsError(f"{here}: `runs` = {timing['runs']}: a bench job's steady-state runs per row must be 1 or more",
                             fix="e.g. runs = 20 (as bench --runs), or drop `runs` for adaptive sampling")
    if timing["runs"] and "bench" not in commands:
        raise StackwarsError(f"{here}: `runs` sets a bench job's steady-state runs per row, and `commands` has no bench",
                             fix='add "bench" to `commands`, or drop `runs`')
    rounds = scalars.pop("rounds", 1)
    if rounds < 1 or (rounds > 1 and "bench" not in commands):
        raise StackwarsError(f"{here}: `rounds` times each bench job that many times, each in a fresh worker, and "
                             + ("must be at least 1" if rounds < 1 else "`commands` has no bench"),
                             fix="e.g. rounds = 3 (a ratio's interval across the rounds; docs/sweep.md)")
    fields = dict(scalars)
    for model, size, step, batch, seq, mesh, dtype in itertools.product(
            axes["models"], axes["sizes"], axes["steps"], axes["batches"], axes["seqs"], axes["meshes"],
            axes["dtypes"]):
        base = Request(model, size=size, step=step, batch=batch, seq=seq, mesh=mesh, dtype=dtype, **fields)
        reqs = {}
        for route in axes["routes"]:
            req = dataclasses.replace(base, framework="jax", exporters=()) if route == "jax" else \
                dataclasses.replace(base, framework="torch", exporters=(route,))
            try:
                ok = req.validated()
                ok.stems()
                ok.check_weightless()
                reqs[route] = ok
            except StackwarsError as e:
                refused[f"{model}-{size} {step} {route}" + (f" {mesh}" if mesh else "")] = e.message
        cell = Cell(reqs, axes, timing, timeout, rounds, refused)
        for command in commands:
            yield from JOB_TYPES[command].expand(cell)


def _baselines(table: dict, commands: list, here: str) -> tuple[str, ...]:
    """The table's `baselines` (native runtimes timed with the captures), each name checked."""

    given = table.get("baselines", [])
    if not isinstance(given, list) or not all(isinstance(b, str) for b in given):
        raise StackwarsError(f"{here}: `baselines` must be a list of native runtimes", fix='e.g. baselines = ["jax", "eager"]')
    bad = [b for b in given if b not in BASELINES]
    if bad:
        raise StackwarsError(f"{here}: unknown baseline {bad[0]!r}", fix=f"use some of: {', '.join(BASELINES)}")
    if given and "bench" not in commands:
        raise StackwarsError(f"{here}: `baselines` are timed by bench jobs, and `commands` has no bench",
                             fix='add "bench" to `commands`, or drop `baselines`')
    return tuple(given)


def _check_models(axes: dict, here: str) -> None:
    """Every model in the catalogue and every size one of each model's: a typo is the grid's error,
    not a job."""

    for m in axes["models"]:
        try:
            entry = models.entry(m)
        except StackwarsError as e:
            raise StackwarsError(f"{here}: {e.message}", fix=e.fix) from None
        for size in axes["sizes"]:
            if size not in entry.sizes:
                raise StackwarsError(f"{here}: {m} has no size {size!r}", fix=f"use some of: {', '.join(entry.sizes)}")


def _check_targets(axes: dict, commands: list, here: str) -> None:
    """Every target a compile target (cpu, gpu, tpu-v6e ...), or `tpu` (a bench timing the TPU it runs
    on: memory plans name a TPU generation instead), and every budget one `memory --budget` reads."""

    known = TARGETS if "memory" in commands else (*BACKENDS, *TOPOLOGIES)
    for t in axes["targets"]:
        if t not in known:
            why = " (a memory plan compiles for a TPU generation)" if t == "tpu" else ""
            raise StackwarsError(f"{here}: unknown target {t!r}{why}", fix=f"use some of: {', '.join(known)}")
    for b in axes["budgets"]:
        try:
            budgets(b)
        except StackwarsError as e:
            raise StackwarsError(f"{here}: budget {b!r}: {e.message}", fix=e.fix) from None

