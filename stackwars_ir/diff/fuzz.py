"""Fuzzing: seeded mutations of StableHLO files, fed through parse and the analyses.

The mutations are byte-level and syntax-aware.
"""
from __future__ import annotations

import random
import re
import resource
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..ir import Parser, no_gc
from ..ir.stats import module_stats
from .blocks import segment

# Numbers that break assumptions: zero, negatives, int32/int64 edges, sizes no machine holds.
INTERESTING = (0, 1, -1, 2, 7, 255, 65535, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 10**12, 1073741000)
ELEMENT_TYPES = ("f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "ui32", "f8E4M3FN", "complex<f32>",
                 "index", "!quant.uniform<i8:f32, 0.1:3>", "tuple<f32>", "f32f32", "")
_SHAPE = re.compile(r"tensor<((?:[0-9?]+x)+)")
_DIMS = re.compile(r"((?:dims|dimensions|dim_numbers|contracting_dims|batching_dims|permutation|window_dimensions|"
                   r"window_strides|padding|offset_dims|collapsed_slice_dims|start_index_map|slice_sizes|"
                   r"start_indices|limit_indices|strides|broadcast_dimensions|index_vector_dim|feature_index|"
                   r"batch_group_count|feature_group_count|iota_dimension|dimension)\s*=\s*[^\n]{0,80}?)(-?\d+)")
_INT_ATTR = re.compile(r"(-?\d+)(\s*:\s*i(?:32|64))")
_ELEM = re.compile(r"(?<=x)(f32|f16|bf16|f64|i1|i8|i32|i64|ui32|ui8)(?=>)")
_DENSE = re.compile(r"dense<[^>]{0,200}>\s*:\s*tensor<[^>]*>")
_LOC = re.compile(r'loc\((?:"[^"\n]{0,200}"|#loc\d*|unknown)\)')


@dataclass(frozen=True)
class FuzzInput:
    """One mutated input: where it came from and how, reproducible from (seed, index)."""

    index: int
    source: str
    mutations: tuple[str, ...]
    data: bytes = field(repr=False)


def _sub_one(pattern: re.Pattern, text: str, rng: random.Random, make) -> str | None:
    hits = list(pattern.finditer(text))
    if not hits:
        return None
    m = rng.choice(hits)
    return text[:m.start()] + make(m) + text[m.end():]


def _number(rng: random.Random) -> str:
    return str(rng.choice(INTERESTING) if rng.random() < 0.8 else rng.randint(-5, 5000))


def _mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """One syntax-aware mutation; returns (new text, its name)."""
    kind = rng.choice(("shape", "dims", "int_attr", "type", "truncate", "nesting", "duplicate_line",
                       "delete_line", "location", "splat", "dense"))
    new = None
    if kind == "shape":
        def shape(m):
            dims = m.group(1).split("x")[:-1]
            dims[rng.randrange(len(dims))] = _number(rng).lstrip("-") if rng.random() < 0.9 else "-1"
            return "tensor<" + "x".join(dims) + "x"
        new = _sub_one(_SHAPE, text, rng, shape)
    elif kind == "dims":
        new = _sub_one(_DIMS, text, rng, lambda m: m.group(1) + _number(rng))
    elif kind == "int_attr":
        new = _sub_one(_INT_ATTR, text, rng, lambda m: _number(rng) + m.group(2))
    elif kind == "type":
        new = _sub_one(_ELEM, text, rng, lambda m: rng.choice(ELEMENT_TYPES))
    elif kind == "truncate":
        new = text[:rng.randrange(len(text) + 1)]
    elif kind == "nesting":
        depth = rng.choice((2, 50, 500, 5000))
        opener, closer = rng.choice((("(", ")"), ("{", "}"), ("[", "]"), ("tensor<", ">"), ("loc(", ")")))
        at = rng.randrange(len(text) + 1)
        new = text[:at] + opener * depth + (closer * depth if rng.random() < 0.5 else "") + text[at:]
    elif kind in ("duplicate_line", "delete_line"):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        lines[i:i + 1] = [lines[i]] * (2 if kind == "duplicate_line" else 0)
        new = "\n".join(lines)
    elif kind == "location":
        deep = "loc(callsite(" * 200 + 'loc("x")' + " at unknown))" * 200
        new = _sub_one(_LOC, text, rng, lambda m: rng.choice(
            ('loc("' + "a/" * 20000 + '")', "loc(#loc999999)", 'loc(fused["a", "b"])', deep, "loc(",
             'loc("\\00\\ff")', "loc(unknown)")))
    elif kind == "splat":
        n = rng.choice((1, 10**6, 10**9, 2**31, 10**12))
        new = _sub_one(_DENSE, text, rng, lambda m: f"dense<1.0> : tensor<{n}xf32>")
    elif kind == "dense":
        n = rng.choice((3, 1000, 100000))
        body = ", ".join("1.5" for _ in range(n))
        new = _sub_one(_DENSE, text, rng, lambda m: rng.choice(
            (f"dense<[{body}]> : tensor<{n + rng.choice((0, 1))}xf32>", 'dense<"0xDEADBEEF"> : tensor<1000xf32>',
             f"dense<[{body}]> : tensor<2x{n}xf32>")))
    return (new if new is not None else text), kind


def _mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = rng.choice(("flip", "insert", "delete", "nul", "utf8"))
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b) + 1)
        if kind == "flip" and b:
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif kind == "insert":
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif kind == "delete":
            del b[i:i + rng.randint(1, 64)]
        elif kind == "nul":
            b[i:i] = b"\x00"
        else:
            b[i:i] = rng.choice((b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82"))
    return bytes(b), f"bytes:{kind}"


def inputs(sources: list[Path], count: int, seed: int = 0, max_source_bytes: int = 200_000) -> Iterator[FuzzInput]:
    """`count` mutated inputs (1-3 mutations each, a fifth of them at the byte level), seeded."""
    rng = random.Random(seed)
    texts = []
    for p in sorted(sources):
        if p.stat().st_size <= max_source_bytes:
            texts.append((p.name, p.read_bytes()))
    if not texts:
        raise ValueError("no source files to mutate")
    for index in range(count):
        name, data = texts[rng.randrange(len(texts))]
        applied = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            if rng.random() < 0.2:
                data, what = _mutate_bytes(data, rng)
            else:
                text, what = _mutate_text(data.decode(errors="surrogateescape"), rng)
                data = text.encode(errors="surrogateescape")
            applied.append(what)
        yield FuzzInput(index, name, tuple(applied), data)


@dataclass
class FuzzReport:
    """What a fuzz run saw: outcomes by kind, failures (our bugs), worst time and memory."""

    inputs: int = 0
    outcomes: Counter = field(default_factory=Counter)  # parsed / rejected / native crash / limit: memory / ...
    failures: list = field(default_factory=list)  # (FuzzInput, what went wrong): tracebacks, bad messages
    worst_seconds: float = 0.0
    worst_input: str = ""
    peak_worker_rss: int = 0  # bytes, the largest parse worker (all workers have exited)
    peak_parent_rss: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [f"inputs: {self.inputs}", *(f"{k}: {v}" for k, v in sorted(self.outcomes.items())),
                f"failures (tracebacks, internal errors, malformed messages): {len(self.failures)}",
                f"worst single input: {self.worst_seconds:.2f} s ({self.worst_input})",
                f"peak memory: parse worker {self.peak_worker_rss / 2**20:.0f} MiB, "
                f"caller {self.peak_parent_rss / 2**20:.0f} MiB", f"wall time: {self.seconds:.0f} s"]


def _check_message(error: str, label: str) -> str | None:
    """What is wrong with an error line, or None: it must be one line naming the file, no traceback."""
    if "\n" in error:
        return "error message spans lines"
    if "Traceback" in error or "internal error" in error:
        return "internal error"
    if not error.startswith(label):
        return "error does not name the file"
    return None


def run(sources: list[Path], count: int, seed: int = 0, keep: Path | None = None,
        progress: Callable[[FuzzReport], object] | None = None) -> FuzzReport:
    """Feed `count` mutated inputs through parse, stats and segmentation, one at a time."""

    report = FuzzReport()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, Parser() as parser:
        path = Path(d) / "input.mlir"
        for item in inputs(sources, count, seed):
            path.write_bytes(item.data)
            t0 = time.perf_counter()
            problem = None
            try:
                result = parser.parse(path)
                if result.ok:
                    with no_gc():
                        for module in result.modules:
                            module_stats(module)
                            segment(module, "auto")
                    report.outcomes["parsed"] += 1
                else:
                    problem = _check_message(result.error, str(path))
                    err = result.error
                    kind = ("limit: memory" if "memory limit" in err else "limit: time" if "took longer" in err
                            else "native crash, contained" if "crashed" in err else "rejected with one line")
                    report.outcomes[kind] += 1
            except Exception:  # a traceback of ours: the thing fuzzing is for
                problem = "traceback: " + traceback.format_exc(limit=3).replace("\n", " | ")[-400:]
            dt = time.perf_counter() - t0
            if dt > report.worst_seconds:
                report.worst_seconds, report.worst_input = dt, f"#{item.index} {item.source} {'+'.join(item.mutations)}"
            if problem:
                report.failures.append((item, problem))
                if keep is not None:
                    keep.mkdir(parents=True, exist_ok=True)
                    (keep / f"{seed}-{item.index}-{item.source}").write_bytes(item.data)
            report.inputs += 1
            if progress and report.inputs % 1000 == 0:
                progress(report)
    report.seconds = time.perf_counter() - t_start
    report.peak_worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    report.peak_parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return report
