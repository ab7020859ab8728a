"""A page's records kept in the repository, xz-compressed: restored for a sweep, new ones added after.

Restored into a results folder before the sweep resumes there; its captures too (keep_captures), so
a page that reads them renders on a fresh machine without capturing again.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
from collections.abc import Callable, Collection, Iterable, Iterator
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


def keep(records: Path, kept: Path, only: Collection[str] | None = None, failed: bool = False) -> int:
    """Each finished record under `records` (NAME.json whose "ok" is not false) that `kept` lacks or holds
    otherwise, compressed there; a failed one is not kept, so a later run tries its job again, unless
    `failed` (a page whose run retries failed jobs anyway: its page then renders them, as here). A record
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
        if (json.loads(data).get("ok") is False and not failed) or \
                (dst.exists() and lzma.decompress(dst.read_bytes()) == data):
            continue
        write_set([(dst, lzma.compress(data, preset=9))])
        n += 1
    return n


@contextlib.contextmanager
def carried(kept: Path | None, records: Path, say: Callable[[str], object] | None = None,
            failed: bool = False) -> Iterator[set[str]]:
    """A sweep run between a restore from `kept` into `records` and a keep back (also when it stops on an
    error or Ctrl-C; killed outright, the next run keeps what it finished). Yields a set: the caller
    adds its sweep's keys (SweepReport.records) and only those records are kept; left empty (a run
    stopped before it knew them), every finished one is (`failed`: the failed ones too, keep). `say`:
    one line for each that moved something. `kept` None: neither."""
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
        n = keep(records, kept, only, failed)
        if n and say:
            say(f"{n} records kept in {kept}")


def keep_captures(records: Iterable, root: Path, kept: Path) -> int:
    """Each finished capture of `records` (sweep Records) whose file under the results folder `root` has
    the bytes its record names (sha256), with its sidecar (.json), compressed under `kept` at the same
    relative path + .xz, where `kept` lacks it or holds other bytes. A capture whose bytes differ from its
    record (made again since) is not kept: a measurement in the records read the recorded bytes. How many
    files were added or replaced. Captures compress about 24x (docs/findings.md's 45: 16 MB, 0.7 MB)."""
    n = 0
    for rec in records:
        sha = rec.capture_sha256() if rec.ok else None
        if not sha:
            continue
        mlir = Path(root) / rec.result.file
        if not mlir.is_file() or hashlib.sha256(mlir.read_bytes()).hexdigest() != sha:
            continue
        for src in (mlir, mlir.with_suffix(".json")):
            if not src.is_file():
                continue
            dst = Path(kept) / (str(src.relative_to(root)) + XZ)
            data = src.read_bytes()
            if dst.exists() and lzma.decompress(dst.read_bytes()) == data:
                continue
            write_set([(dst, lzma.compress(data, preset=9))])
            n += 1
    return n


def restore_captures(kept: Path, root: Path) -> int:
    """Each kept capture file (keep_captures) the results folder `root` lacks, written there; one already
    there is never overwritten. How many were restored."""
    n = 0
    kept = Path(kept)
    for src in sorted(kept.rglob(f"*{XZ}")):
        dst = Path(root) / str(src.relative_to(kept)).removesuffix(XZ)
        if not dst.exists():
            write_set([(dst, lzma.decompress(src.read_bytes()))])
            n += 1
    return n
