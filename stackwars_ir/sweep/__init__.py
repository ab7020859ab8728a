"""Sweep: model runs end to end, and grids of them as jobs on local workers or Ray.

Version comparisons (regress, bisect) live in stackwars_ir.versions.
"""
from .model_runs import (  # noqa: F401
    requests, bench_model, bench_steps, estimate_model, captured, plan_model, max_batch_model, smallest_slice_model
)
