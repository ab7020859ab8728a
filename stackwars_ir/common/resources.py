"""Weights kept as `dense_resource` blobs: inlined as dense constants, or named where elided.

A blob the file holds is inlined; one it lacks is named.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

# `dense_resource<key>` and, at the end of the file, the blobs: {-# dialect_resources: { builtin: { key: "0x..." } } #-}
_USE = re.compile(r"dense_resource<([\w.$-]+)>")
_SECTION = re.compile(r"\{-#(.*?)#-\}", re.DOTALL)
_BLOB = re.compile(r'([\w.$-]+)\s*:\s*"0x([0-9A-Fa-f]*)"')
ELIDED = "__elided__"  # the key MLIR prints for a blob it left out (--mlir-elide-resource-strings-if-larger)


class Inlined(NamedTuple):
    """A module's text with its blobs written as dense constants, and the keys it names without a blob."""

    text: str
    inlined: int  # constants whose blob was in the file
    elided: tuple[tuple[int, str], ...]  # (line, key) of each constant whose blob is not


def inline(text: str) -> Inlined:
    """`text` with each `dense_resource<key>` whose blob the file holds written `dense<"0x...">` (the blob's
    bytes after its 4-byte alignment header, MLIR's hex form of the same elements), the blobs' section
    dropped; a constant whose blob is absent (elided when printed, or never written) is left as it is and
    listed with its line. Text without `dense_resource<` is returned untouched."""
    if "dense_resource<" not in text:
        return Inlined(text, 0, ())
    blobs = {}
    for section in _SECTION.finditer(text):
        if "dialect_resources" in section.group(1):
            blobs.update((k, v[8:]) for k, v in _BLOB.findall(section.group(1)) if len(v) >= 8)
    elided, count = [], 0

    def write(m: re.Match) -> str:
        nonlocal count
        data = blobs.get(m.group(1))
        if data is None or m.group(1) == ELIDED:
            elided.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
            return m.group(0)
        count += 1
        return f'dense<"0x{data}">'

    body = _SECTION.sub(lambda s: "" if "dialect_resources" in s.group(1) else s.group(0), text) if blobs else text
    # line numbers counted on the original text: the section only ever follows the module
    out = _USE.sub(write, body)
    return Inlined(out, count, tuple(elided))


def elided_words(source: str, elided: Sequence[tuple[int, str]]) -> str:
    """One line naming the first constant whose blob the file lacks, and how many there are."""
    line, key = elided[0]
    more = f" (and {len(elided) - 1} more)" if len(elided) > 1 else ""
    return (f"{source}:{line}: constant dense_resource<{key}> has no blob in the file{more}: its values were "
            "elided when the module was printed")


ELIDED_FIX = ("save the module with its dialect_resources blobs (print it without eliding large resources, "
              "or write it as bytecode)")
