"""Parity: run each captured module on the XLA CPU backend and compare it with PyTorch eager."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .artifact import Capture

# |captured - eager| <= ATOL + RTOL * |eager|, elementwise, in float32 (documented in docs/capture.md).
RTOL = 1e-3
ATOL = 1e-4


@dataclass(frozen=True)
class Parity:
    """How far one capture's output lies from the PyTorch eager reference."""

    stem: str
    max_abs: float
    max_rel: float
    ok: bool

    def as_json(self) -> dict:
        return {"reference": "torch eager (float32, CPU)", "max_abs_error": self.max_abs,
                "max_rel_error": self.max_rel, "rtol": RTOL, "atol": ATOL, "ok": self.ok}


def argument_values(capture: Capture, weights: dict[str, np.ndarray],
                    inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The arrays to call the captured function with, in its argument order."""
    values = []
    for arg in capture.arguments:
        if arg.kind == "input":
            src = inputs[arg.name]
        elif arg.name in capture.constants:
            src = capture.constants[arg.name]
        else:
            src = weights[arg.name]
        values.append(np.asarray(src).astype(arg.dtype, copy=False).reshape(arg.shape))
    return values


def compare(stem: str, got: np.ndarray, want: np.ndarray) -> Parity:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return Parity(stem, float("inf"), float("inf"), False)
    diff = np.abs(got - want)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(np.abs(want), 1e-6)).max()) if diff.size else 0.0
    ok = bool(np.all(diff <= ATOL + RTOL * np.abs(want)))
    return Parity(stem, max_abs, max_rel, ok)


def check(capture: Capture, weights: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
          reference: np.ndarray, rt=None) -> Parity:
    from ..runtime import runtime

    rt = rt or runtime("cpu")
    exe = rt.compile(capture.text, capture.stem)
    out = rt.run(exe, rt.put(argument_values(capture, weights, inputs)))
    return compare(capture.stem, np.asarray(out[0]), reference)
