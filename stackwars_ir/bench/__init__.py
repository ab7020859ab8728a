"""Bench: files compiled and timed in a killable worker; memory plans; kernels and host time per block.

Or a workload's native runtimes, timed the same way beside its captures.
"""
from __future__ import annotations

from .arguments import sidecar_arguments, signature_arguments  # noqa: F401
from .executable import BENCH_FORMAT, RESIDENT_METHOD, Executable, machine, roofline  # noqa: F401
from .timed import add_in_place, hlo_stats, peaks, time_module, time_modules  # noqa: F401
