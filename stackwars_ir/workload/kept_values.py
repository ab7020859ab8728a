"""A catalogue capture's rebuilt weights, inputs and reference, kept on disk between processes.

Rebuilding them imports torch and the model's library and runs the model (a bench worker of GPT-2
tiny: about 8 s of its 11 s, docs/benchmarks.md); they are a function of the request, the adapter's
and the workload's code and the versions of the libraries that make them, which the key holds.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from .. import models
from ..common.files import values_bytes
from .request import Request

ENV = "STACKWARS_IR_VALUES"  # the folder; "off": rebuilt every time, nothing kept
FORMAT = 1
MAX_ENTRY_BYTES = 64 << 20  # larger values are rebuilt each time: a base-size model would fill a disk
MAX_BYTES = 1 << 30  # the folder's whole size: the entries read least recently go first
LIBRARIES = ("numpy", "torch", "torchvision", "transformers")  # what computes the values and the reference
_CODE = Path(__file__).resolve().parent  # the workload's code (seeding, perturbation, the training step)


def folder() -> Path | None:
    """Where kept values live: $STACKWARS_IR_VALUES, else ~/.cache/stackwars-ir/values (never the
    repository); None with STACKWARS_IR_VALUES=off."""
    given = os.environ.get(ENV, "")
    if given.lower() == "off":
        return None
    return Path(given) if given else Path.home() / ".cache" / "stackwars-ir" / "values"


def key(req: Request) -> str:
    """sha256 of what the values are a function of: the request (its routes aside), the code that makes them (every
    adapter file beside the catalogue's, the model's own adapter file, the workload package) and the
    versions of Python and the libraries that compute them."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    code = hashlib.sha256()
    entry = models.entry(req.model)
    files = sorted(Path(models.__file__).resolve().parent.glob("*.py")) + sorted(_CODE.glob("*.py"))
    if entry.path and Path(entry.path).resolve().parent != Path(models.__file__).resolve().parent:
        files.append(Path(entry.path))  # a user's adapter file (or TOML table)
    for f in files:
        code.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    # The values do not depend on the routes a request names: a bench of its captures and jax.jit's
    # native forward share them.
    values_of = dataclasses.replace(req, framework="torch", exporters=())
    what = {"format": FORMAT, "request": repr(values_of), "code": code.hexdigest(), "python": sys.version,
            "libraries": {name: version(name) for name in LIBRARIES}}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def read(req: Request) -> tuple[dict, dict, np.ndarray] | None:
    """(weights, inputs, reference) kept for `req`, each dict in the order it was kept; None where
    nothing is kept (or the entry cannot be read: it is then made again)."""
    where = folder()
    if where is None:
        return None
    path = where / f"{key(req)}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        os.utime(path)  # read recently: pruned last
    except (OSError, ValueError, KeyError):
        return None
    weights = {n[2:]: a for n, a in arrays.items() if n.startswith("w:")}
    inputs = {n[2:]: a for n, a in arrays.items() if n.startswith("i:")}
    if "reference" not in arrays:
        return None
    return weights, inputs, arrays["reference"]


def keep(req: Request, weights: dict, inputs: dict, reference: np.ndarray) -> None:
    """Keep (weights, inputs, reference) for `req` (written whole or not at all); values numpy cannot
    store as they are (bfloat16 and other extension types) or over MAX_ENTRY_BYTES are not kept."""
    where = folder()
    if where is None:
        return
    arrays = [(f"w:{n}", np.asarray(a)) for n, a in weights.items()] + \
        [(f"i:{n}", np.asarray(a)) for n, a in inputs.items()] + [("reference", np.asarray(reference))]
    if any(a.dtype.isbuiltin != 1 for _, a in arrays) or sum(a.nbytes for _, a in arrays) > MAX_ENTRY_BYTES:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{key(req)}.npz"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(values_bytes(arrays))
        os.replace(tmp, path)
        _prune(where)
    except OSError:  # a read-only or full disk: the values are made again next time, nothing else changes
        return


def _prune(where: Path) -> None:
    """Remove the entries read least recently until the folder holds at most MAX_BYTES."""
    entries = sorted(where.glob("*.npz"), key=lambda p: p.stat().st_mtime)
    total = sum(p.stat().st_size for p in entries)
    for p in entries:
        if total <= MAX_BYTES:
            break
        total -= p.stat().st_size
        p.unlink(missing_ok=True)
