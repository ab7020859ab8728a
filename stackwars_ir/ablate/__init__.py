"""Ablate: B's differences from A rewritten into A's form, one kind at a time, checked and timed.

Or A's blocks transplanted into B instead (ablate.transplant); each variant is checked against B's
outputs and timed against A and B.
"""
from __future__ import annotations

from .result import Ablation, Check, Interval, Variant  # noqa: F401
from .rewrites import REWRITES, CannotApply, Rewrite, apply  # noqa: F401
from .run import ALL, ablate, check_variant, make_variants, rewrite_file, transplant_variants  # noqa: F401
from .transplant import KINDS, Transplanted, is_label, transplant_file  # noqa: F401
