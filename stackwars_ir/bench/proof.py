"""Proof of work: a timed run's first output compared with the reference output of the same inputs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..common.errors import BenchError

# Norm-wise: max |output - reference| <= ATOL + RTOL * max |reference|. On the CPU this is the
# capture's parity tolerance; XLA's and cuBLAS's GPU matmuls run float32 in TF32 by default
# (10-bit mantissa), so there the evidence asks for agreement to 2% of the output's scale: far
# tighter than any run that skipped work, read stale buffers or computed another function.
TOLERANCE = {"cpu": (1e-4, 1e-3), "gpu": (1e-3, 2e-2), "cuda": (1e-3, 2e-2)}


@dataclass(frozen=True)
class Proof:
    """How the first output of a timed run compares with the reference output."""

    reference: str  # what it was compared with
    max_abs: float | None
    scale: float | None  # max |reference|
    atol: float | None
    rtol: float | None
    ok: bool

    @property
    def summary(self) -> str:
        if self.max_abs is None:
            return self.reference
        return f"{'ok' if self.ok else 'MISMATCH'} {self.max_abs:.2g}"

    def as_json(self) -> dict:
        return {"reference": self.reference, "max_abs_error": self.max_abs, "reference_max_abs": self.scale,
                "atol": self.atol, "rtol": self.rtol, "ok": self.ok}

    @classmethod
    def from_json(cls, d: dict) -> "Proof":
        return cls(d["reference"], d["max_abs_error"], d["reference_max_abs"], d["atol"], d["rtol"], d["ok"])


class Checker:
    """The `inspect` hook of bench.timing.measure: checks the first run's output, keeps the Proof,
    and raises BenchError (the row becomes an error, not a number) when the work was not done."""

    def __init__(self, label: str, reference: np.ndarray | None, backend: str, what: str) -> None:
        self.label, self.reference, self.what = label, reference, what
        self.atol, self.rtol = TOLERANCE.get(backend, TOLERANCE["gpu"])
        self.proof: Proof | None = None

    def __call__(self, output: object) -> None:
        if output is None:
            raise BenchError(f"{self.label}: the timed run returned no output, so nothing proves it did the work",
                             fix="time a function that returns its result")
        got = _numpy(output)
        if self.reference is None:  # synthetic arguments: no reference, but the output must be real
            if not np.all(np.isfinite(got.astype(np.float64))):
                raise BenchError(f"{self.label}: the first run's output holds NaN or Inf")
            self.proof = Proof("none: synthetic arguments (output present and finite)", None, None, None, None, True)
            return
        want = np.asarray(self.reference, dtype=np.float64)
        got = got.astype(np.float64)
        if got.shape != want.shape:
            raise BenchError(f"{self.label}: first output has shape {got.shape}, the reference {want.shape}")
        max_abs = float(np.max(np.abs(got - want))) if got.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        ok = bool(max_abs <= self.atol + self.rtol * scale)  # NaN compares False: not ok
        self.proof = Proof(self.what, max_abs, scale, self.atol, self.rtol, ok)
        if not ok:
            raise BenchError(f"{self.label}: first output differs from {self.what} by up to {max_abs:.3g} "
                             f"(tolerance {self.atol:g} + {self.rtol:g} * {scale:.3g}): the timing is not of "
                             "this computation", fix="check the capture and its sidecar belong together")


def _numpy(output) -> np.ndarray:
    """The first array of an output: a PJRT buffer list, a jax or torch array, or a tuple of them."""
    if isinstance(output, (list, tuple)):
        if not output:
            raise BenchError("the timed run returned an empty output list")
        output = output[0]
    if hasattr(output, "detach"):  # torch, on any device
        return output.detach().cpu().numpy()
    return np.asarray(output)
