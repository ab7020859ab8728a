"""Diff: two StableHLO modules segmented into blocks, aligned, and diffed block by block and op by op."""
from __future__ import annotations

from .result import counter_delta  # noqa: F401
from .analysis import (  # noqa: F401
    EXCERPT_LINES, BlockDiff, Side, DiffReport, diff_modules, source, adapter_roles, diff_files, side_names,
    TRANSCENDENTAL, training_summary, study_summary, source_lines, excerpt
)
from .measured import kernel_blocks, trip_share, unlooped, with_kernels, with_times, with_host  # noqa: F401
