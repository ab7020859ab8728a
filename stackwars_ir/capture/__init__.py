"""Capture: export one model, on one set of weights, from JAX and PyTorch to StableHLO, parity-checked."""
from ..workload import CAPTURE_REVISION, EXPORTERS, FRAMEWORKS, STEPS, Request  # noqa: F401 (the request, for capture's callers)
from .artifact import Capture  # noqa: F401
from .pipeline import CaptureSet, capture_here, run, scope_warnings  # noqa: F401
