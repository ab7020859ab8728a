"""The IR model: small immutable values for a parsed StableHLO module, its functions, ops and values."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from .loops import executions, loops_of

# Bits per element of the types MLIR spells plainly; the others are read from their spelling
# (element_bits): quantized types by their storage type, complex by twice their part's.
_BITS = {"f64": 64, "f32": 32, "tf32": 32, "bf16": 16, "f16": 16, "index": 64, "i1": 8}
_INT = re.compile(r"(?:[su]?i|ui)(\d+)")  # i8, si32, ui4 (i1 is a byte: XLA's pred)
_FLOAT = re.compile(r"f(\d+)E\d+M\d+\w*")  # f8E4M3FN, f6E2M3FN, f4E2M1FN, f8E8M0FNU
_QUANT = re.compile(r"!quant\.\w+<([su]?i\d+|u\d+)")  # !quant.uniform<i8:f32, ...>: its storage type


def element_bits(dtype: str) -> int | None:
    """Bits one element of `dtype` (as MLIR spells it) is stored in: quantized types by their storage
    type (`!quant.uniform<i8:f32, 0.05>` 8), sub-byte integers and floats at their width (i4 and
    f4E2M1FN 4: packed, as XLA stores them on TPU; XLA:CPU holds each in a byte), i1 as a byte (XLA's
    pred); None for a type with no known size (a tuple or token is sized by Tensor.nbytes)."""
    hit = _BITS.get(dtype)
    if hit is not None:
        return hit
    if dtype.startswith("complex<") and dtype.endswith(">"):
        part = element_bits(dtype[8:-1])
        return None if part is None else 2 * part
    for pattern in (_INT, _FLOAT):
        m = pattern.fullmatch(dtype)
        if m:
            return int(m.group(1))
    m = _QUANT.match(dtype)
    if m:
        return int(re.search(r"\d+", m.group(1)).group())
    return None


def storage_type(dtype: str) -> str:
    """The element type a quantized type is stored in (`!quant.uniform<i8:f32, 0.05>` i8; `u8` as ui8);
    any other type as it is."""
    m = _QUANT.match(dtype)
    if not m:
        return dtype
    return "ui" + m.group(1)[1:] if m.group(1).startswith("u") and not m.group(1).startswith("ui") else m.group(1)


def _type_bytes(text: str) -> int | None:
    """Bytes of a printed type: `tensor<2x3xf32>` 24, a tuple the sum of its elements, a token 0; None
    for a dynamic shape or an element type of no known size."""
    text = text.strip()
    if text.startswith("tuple<") and text.endswith(">"):
        total = 0
        for part in _top_level(text[6:-1]):
            size = _type_bytes(part)
            if size is None:
                return None
            total += size
        return total
    if text in ("!stablehlo.token", "!mhlo.token", "token"):
        return 0
    if text.startswith("tensor<") and text.endswith(">"):
        body = text[7:-1]
        dims, elem = [], body
        while True:
            m = re.match(r"(\?|\d+)x", elem)
            if not m:
                break
            dims.append(None if m.group(1) == "?" else int(m.group(1)))
            elem = elem[m.end():]
        return Tensor(tuple(dims), elem).nbytes
    bits = element_bits(text)
    return None if bits is None else -(-bits // 8)


def _top_level(text: str) -> list:
    """`text` split at its commas outside any <...>."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    return parts


# Tensor, Op and Value are NamedTuples: immutable like frozen dataclasses, but several times
# cheaper to build (a module has 100,000s of them); the parse worker sends them as plain tuples.


def _is_scalar(dtype: str) -> bool:
    return not dtype.startswith(("tuple<", "!stablehlo.token", "!mhlo.token", "token"))


class Tensor(NamedTuple):
    """A value's type: shape (None for a dynamic dimension) and element type as MLIR spells it."""

    shape: tuple
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int | None:
        n = 1
        for d in self.shape:
            if d is None:
                return None
            n *= d
        return n

    @property
    def nbytes(self) -> int | None:
        """Bytes the tensor is stored in (element_bits: a quantized type by its storage type, a
        sub-byte type packed, rounded up to a whole byte); a tuple the sum of its elements, a token
        0; None for a dynamic shape or an element type of no known size, never a guess."""
        if not self.shape and not _is_scalar(self.dtype):
            return _type_bytes(self.dtype)  # a tuple, a token: the parser keeps its whole type
        n = self.numel
        bits = element_bits(self.dtype)
        return None if n is None or bits is None else -(-n * bits // 8)

    def __str__(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{dims}x{self.dtype}" if dims else self.dtype


class Op(NamedTuple):
    """One operation. Values are integers indexing Module.values; attrs keep what the analyses read."""

    id: int
    name: str  # "stablehlo.dot_general"
    func: str  # the function it sits in
    parent: int | None  # the op whose region holds it (the reduce of a reduce body), else None
    operands: tuple  # value ids
    results: tuple  # value ids
    attrs: tuple  # ((name, python value), ...)
    path: str  # provenance normalized to a module path ("h.3.attn.c_attn"), "" when unknown
    module_type: str = ""  # the PyTorch module class, where the location says (torch_xla)
    phase: str = ""  # a training step's "forward" (under jvp) or "backward" (under transpose); "" otherwise

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0] if "." in self.name else ""

    def attr(self, key: str, default: object = None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def __repr__(self) -> str:
        return f"Op({self.id}, {self.name}, path={self.path!r})"


class Value(NamedTuple):
    """An SSA value: its type, and either the op producing it or the function argument it is."""

    id: int
    type: Tensor
    producer: int | None  # op id; for a region's block argument, the op holding the region; None: a function argument
    arg_index: int | None = None  # position among its block's arguments (a function's, or a region's)
    name: str = ""  # argument name from its location (torch_xla, jax `states[3]`), else ""


class Func(NamedTuple):
    name: str
    visibility: str  # "public" | "private"
    args: tuple  # value ids of the entry block's arguments
    results: tuple  # Tensor of each result
    ops: tuple  # op ids, in order, nested region ops included
    returns: tuple = ()  # value ids the function returns
    arg_shardings: tuple = ()  # each argument's sharding as written (sdy or mhlo); () when none has one
    donated: tuple = ()  # (argument index, output index it becomes, or -1: a donor XLA may reuse) per donated argument


@dataclass(frozen=True)
class Module:
    """A parsed module. `source` is the file (and `#k` for the k-th module of a `// -----` file)."""

    source: str
    funcs: tuple = field(repr=False)
    ops: tuple = field(repr=False)
    values: tuple = field(repr=False)
    parser: str = "jaxlib"  # which MLIR bindings parsed it: "jaxlib" or "iree" (quantized types)
    form: str = ""  # what the file was, where it was not StableHLO as written (parse.FORM_*: MHLO, VHLO, XLA HLO)

    def __str__(self) -> str:
        return f"Module({self.source}: {len(self.funcs)} functions, {len(self.ops)} ops)"

    @classmethod
    def from_wire(cls, *parts: tuple) -> "Module":
        """A module from the parse worker's plain-tuple form (see builder.py: build), which
        marshal sends across the pipe several times faster than pickle sends NamedTuples.

        Several parts (a module walked by several workers) are joined in order: their ops and
        values are consecutive runs of the module's, and the last part has every function.
        """
        source, parser, funcs = parts[-1][:3]
        new = tuple.__new__
        ops: list = []
        values: list = []
        for part in parts:
            tensors = [new(Tensor, t) for t in part[5]]
            if (part[3] and part[3][0][0] != len(ops)) or (part[4] and part[4][0][0] != len(values)):
                raise ValueError(f"{source}: parse parts do not join (ops from {part[3][0][0]}, "
                                 f"values from {part[4][0][0] if part[4] else '-'})")
            ops += [new(Op, o) for o in part[3]]
            values += [new(Value, (i, tensors[t], p, a, n)) for i, t, p, a, n in part[4]]
        funcs = (new(Func, (*f[:3], tuple(new(Tensor, t) for t in f[3]), *f[4:])) for f in funcs)
        form = parts[-1][6] if len(parts[-1]) > 6 else ""
        return cls(source, tuple(funcs), tuple(ops), tuple(values), parser, form)

    @cached_property
    def func_by_name(self) -> dict:
        return {f.name: f for f in self.funcs}

    @cached_property
    def entry(self) -> Func:
        """The public `main`, else the first public function, else the first function."""
        if "main" in self.func_by_name:
            return self.func_by_name["main"]
        public = [f for f in self.funcs if f.visibility == "public"]
        return (public or list(self.funcs))[0]

    def type_of(self, value_id: int) -> Tensor:
        return self.values[value_id].type


    @cached_property
    def uses(self) -> list:
        """The def-use index, with Value.producer its use-def half: for each value id, the
        (op id, operand position) of every op that reads it, in program order. Built once, read by
        the differ's structural segmentation and bench's synthetic arguments (the op graph keeps
        its own map: it leaves regions' block arguments out)."""
        out: list = [()] * len(self.values)  # most values have one use: tuples, grown as found
        for op in self.ops:
            i = op.id
            for pos, vid in enumerate(op.operands):
                out[vid] += ((i, pos),)
        return out

    @cached_property
    def nested(self) -> dict:
        """op id -> the ids of every op inside its regions (nested ones too, terminators included), in
        program order; only ops that hold regions are keys. The parser numbers an op's nested ops
        right after it, so each is a run of consecutive ids."""
        out: dict = {}
        for op in self.ops:
            p = op.parent
            while p is not None:
                out.setdefault(p, []).append(op.id)
                p = self.ops[p].parent
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def scratch(self) -> dict:
        """A place for an analysis to keep what it derives from this module once (the differ's op
        signatures), as cached properties keep theirs: the module itself never changes."""
        return {}

    @cached_property
    def arg_functions(self) -> dict:
        """value id -> the name of the function it is an argument of (every function's, not regions')."""
        return {vid: f.name for f in self.funcs for vid in f.args}

    @cached_property
    def only_sites(self) -> dict:
        """function name -> its one call (a func.call or composite op), for functions called from
        exactly one place: their arguments are that call's operands."""
        sites: dict = {}
        for op in self.ops:
            if op.name == "func.call" or op.name.endswith(".composite"):
                for callee in callees(op):
                    sites.setdefault(callee, []).append(op)
        return {f: ops[0] for f, ops in sites.items() if len(ops) == 1}

    def through_calls(self, vid: int) -> int:
        """The value a function's argument is at its one call site (followed through nested helpers);
        any other value as it is."""
        for _ in range(32):
            v = self.values[vid]
            if v.producer is not None or v.arg_index is None or vid in self.entry_args:
                return vid
            site = self.only_sites.get(self.arg_functions.get(vid))
            if site is None or v.arg_index >= len(site.operands):
                return vid
            vid = site.operands[v.arg_index]
        return vid

    def through_returns(self, vid: int) -> int:
        """The value a call's result is inside its callee (what the callee returns there, followed
        through nested calls and helpers' arguments); any other value as it is."""
        for _ in range(32):
            v = self.values[vid]
            if v.producer is None:
                return vid
            op = self.ops[v.producer]
            if not (op.name == "func.call" or op.name.endswith(".composite")) or vid not in op.results:
                return vid
            f = self.func_by_name.get(next(iter(callees(op)), None))
            k = op.results.index(vid)
            if f is None or k >= len(f.returns):
                return vid
            vid = self.through_calls(f.returns[k])
        return vid

    @cached_property
    def entry_args(self) -> frozenset:
        """The value ids of the entry function's arguments."""
        return frozenset(self.entry.args)

    @cached_property
    def call_graph(self) -> dict:
        """caller -> sorted callees (func.call), the call graph of the module."""
        graph = {f.name: set() for f in self.funcs}
        for op in self.ops:
            for callee in callees(op):
                graph.setdefault(op.func, set()).add(callee)
        return {k: tuple(sorted(v)) for k, v in graph.items()}

    @cached_property
    def inlined(self) -> tuple:
        """The entry function's ops with every func.call expanded in place.

        Each item is (op, path): a callee's op inherits the call site's path when it has none
        of its own. The call ops themselves stay, so "a call to @take" remains visible.
        """
        return self._inlined[0]

    @cached_property
    def inlined_phases(self) -> tuple:
        """The training phase of each item of `inlined` (a callee's op inherits its call site's)."""
        return self._inlined[1]

    @cached_property
    def inlined_depths(self) -> tuple:
        """The call depth of each item of `inlined` (0: the entry function's own ops)."""
        return self._inlined[2]

    @cached_property
    def _inlined(self) -> tuple:
        out: list = []
        phases: list = []
        depths: list = []
        self._expand(self.entry.name, "", "", out, phases, depths, ())
        return tuple(out), tuple(phases), tuple(depths)

    def _expand(self, func: str, site_path: str, site_phase: str, out: list, phases: list, depths: list,
                stack: tuple) -> None:
        f = self.func_by_name.get(func)
        if f is None or func in stack:  # external declaration or recursion: nothing to inline
            return
        for op_id in f.ops:
            op = self.ops[op_id]
            path = op.path or site_path
            phase = op.phase or site_phase
            out.append((op, path))
            phases.append(phase)
            depths.append(len(stack))
            for callee in callees(op):
                self._expand(callee, path, phase, out, phases, depths, stack + (func,))

    @cached_property
    def loops(self) -> dict:
        """while op id -> ir.loops.Loop: its regions and, for a counted loop, its trip count."""

        return loops_of(self)

    @cached_property
    def loop_trips(self) -> tuple:
        """The trip count of each while the entry function runs (calls inlined), in program order;
        None for one the IR does not fix."""
        loops = self.loops
        return tuple(loops[op.id].trips for op, _ in self.inlined if op.id in loops)

    @cached_property
    def executions(self) -> tuple:
        """How often each item of `inlined` runs per call (ir.loops.executions); None inside a
        loop whose trip count the IR does not fix."""

        return executions(self)

    def executed_histogram(self) -> Counter | None:
        """The inlined histogram weighted by how often each op runs; None when a loop's trip count
        is unknown."""
        hist: Counter = Counter()
        for (op, _), n in zip(self.inlined, self.executions):
            if op.name in _STRUCTURAL:
                continue
            if n is None:
                return None
            hist[op.name] += n
        return hist

    def histogram(self, inlined: bool = True) -> Counter:
        ops = (op for op, _ in self.inlined) if inlined else iter(self.ops)
        return Counter(op.name for op in ops if op.name not in _STRUCTURAL)


def callees(op: Op) -> tuple:
    """The functions an op runs in its place: a func.call's callee, a stablehlo.composite's
    decomposition, a custom call's called computations (as printed: `[@a, @b]`)."""
    name = op.name
    if name == "func.call":
        return (op.attr("callee"),)
    if name.endswith(".composite"):
        d = op.attr("decomposition")
        return (d,) if d else ()
    if name.endswith(".custom_call"):
        called = op.attr("called_computations")
        if isinstance(called, str) and "@" in called:
            return tuple(x.strip(" []@\"") for x in called.split(",") if x.strip(" []"))
    return ()


# Ops that only structure the IR: not counted in histograms.
_STRUCTURAL = frozenset({"func.return", "stablehlo.return", "mhlo.return", "sdy.return", "func.func", "builtin.module"})
