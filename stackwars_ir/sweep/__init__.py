"""Sweep: model runs end to end, grids of them as jobs on local workers or Ray, and version comparisons (regress, bisect)."""
from .model_runs import (  # noqa: F401
    requests, bench_model, bench_steps, estimate_model, captured, plan_model, max_batch_model, smallest_slice_model
)
