"""A page's records kept in the repository, xz-compressed: restored for a sweep, new ones added after.

Restored into a results folder before the sweep resumes there.
"""
from __future__ import annotations

import contextlib
import json
import lzma
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from ..common.files import write_set

XZ = ".xz"  # NAME.json kept as NAME.json.xz; each written whole or not at all (files.write_set)


def restore(kept: Path, records: Path) -> int:
    """Each record under `kept` (NAME.json.xz) that `records` lacks, written there as NAME.json; one
    already there is never overwritten (this machine's own is newer). How many were restored."""
    n = 0
    for src in sorted(Path(kept).glob(f"*.json{XZ}")):
        dst = Path(records) / src.name.removesuffix(XZ)
        if not dst.exists():
            write_set([(dst, lzma.decompress(src.read_bytes()))])
            n += 1
    return n


def keep(records: Path, kept: Path, only: Collection[str] | None = None) -> int:
    """Each finished record under `records` (NAME.json whose "ok" is not false) that `kept` lacks or holds
    otherwise, compressed there; a failed one is not kept, so a later run tries its job again. A record
    is written once and changes only where a job ran again (a timed job on another kind of machine:
    sweep.execute), so the repository holds each version once. `only`: the keys (NAME) of the page's
    jobs, where known: a record of no job of it (an edited model's or an older stack's, left in the
    results folder) is not kept. How many were added or replaced."""
    n = 0
    for src in sorted(Path(records).glob("*.json")):
        if only and src.stem not in only:
            continue
        dst = Path(kept) / (src.name + XZ)
        data = src.read_bytes()
        if json.loads(data).get("ok") is False or (dst.exists() and lzma.decompress(dst.read_bytes()) == data):
            continue
        write_set([(dst, lzma.compress(data, preset=9))])
        n += 1
    return n


@contextlib.contextmanager
def carried(kept: Path | None, records: Path, say: Callable[[str], object] | None = None) -> Iterator[set[str]]:
    """A sweep run between a restore from `kept` into `records` and a keep back (also when it stops on an
    error or Ctrl-C; killed outright, the next run keeps what it finished). Yields a set: the caller
    adds its sweep's keys (SweepReport.records) and only those records are kept; left empty (a run
    stopped before it knew them), every finished one is. `say`: one line for each that moved
    something. `kept` None: neither."""
    only: set[str] = set()
    if kept is None:
        yield only
        return
    n = restore(kept, records)
    if n and say:
        say(f"{n} records restored from {kept}")
    try:
        yield only
    finally:
        n = keep(records, kept, only)
        if n and say:
            say(f"{n} records kept in {kept}")
