"""Running elsewhere: a task in a killable worker, in this environment or a version stack's."""
from __future__ import annotations
