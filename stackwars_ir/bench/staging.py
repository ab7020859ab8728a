"""Argument values of catalogue captures, built here for a stack's worker (it has jax, not torch)."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .. import models
from ..common.files import sidecar_of, values_bytes
from ..ir import load
from .arguments import sidecar_arguments


def staged_values(paths: Iterable[str | Path], folder: Path) -> tuple:
    """(path, .npz) for each capture of a catalogue model that recorded no values of its own: its
    weights, inputs and PyTorch eager's reference rebuilt here, where torch is, for a stack's worker
    (isolate passes them to the task as `staged`; files.read_values reads them there)."""

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
