"""Versions: one program under two stacks (regress), the first release that changes it (bisect).

The stacks are library stacks (stackwars_ir.isolate.stacks); regress and bisect judge by the same metrics
(versions.metric).
"""
from __future__ import annotations
