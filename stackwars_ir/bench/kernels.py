"""What runs: the kernels XLA compiles a module to, each traced back to the module path it came from.

The kernels are its optimized HLO's entry instructions, and those of its loops' bodies.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.runtime import runtime
from ..common.targets import is_tpu
from ..diff import DiffReport, with_kernels as attach
from ..diff.result import DiffResult
from ..ir import compile_input, load, optimized_hlo_text, picked
from ..ir.locations import provenance
from ..isolate.stacks import Stack
from ..isolate.task import Isolated, Task, default_max_memory, row, started
from .planning import check_target, compiler_for, most_partitions

# Entry instructions that move or name data rather than compute: not kernels.
_NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([\w\-]+)\(")


@dataclass(frozen=True)
class Kernel:
    """One instruction of the optimized entry computation: a fusion (XLA's kernel) or an op left
    unfused (a custom call, a dot, a sort, ...), with the module path of the op it was made from
    (XLA keeps each op's location name as metadata op_name)."""

    name: str
    opcode: str  # fusion, custom-call, dot, ...
    path: str  # module path read from its metadata ("" when it has none)
    phase: str = ""
    inner: str = ""  # the fusion a `call` of a parallel computation runs on several threads
    bytes: int = 0  # a collective's result on each device (its per-partition shape), else 0
    # Inside a while loop's body (or condition): the while instruction's name and how many times the
    # kernel runs per call of the module (the trip counts XLA knows, multiplied through nested loops;
    # 0 where XLA does not know one).
    loop: str = ""
    trips: int = 0
    # The other module paths whose ops the fusion also computes (its fused computation's instructions'
    # metadata): XLA:GPU folds a residual add into the next norm's kernel, so the add's block has no
    # kernel of its own there and its time is counted in the norm's (docs/diff.md "On a GPU").
    spans: tuple[str, ...] = ()

    @property
    def collective(self) -> str:
        """all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute ("-start" halves
        of asynchronous ones counted as the collective), or ""."""
        kind = self.opcode.removesuffix("-start")
        return kind if kind in COLLECTIVES else ""

    def as_json(self) -> dict:
        return {"name": self.name, "opcode": self.opcode, "path": self.path, "phase": self.phase,
                **({"inner": self.inner} if self.inner else {}), **({"bytes": self.bytes} if self.bytes else {}),
                **({"loop": self.loop, "trips": self.trips} if self.loop else {}),
                **({"spans": list(self.spans)} if self.spans else {})}


# What XLA's SPMD partitioner inserts between a sharded program's devices.
COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
def hlo_bits(dtype: str) -> int | None:
    """Bits per element of an HLO primitive type (`pred` 8, `s4` 4, `f8e4m3fn` 8, `bf16` 16, `c64` 64,
    `token` 0); None for one not known."""
    if dtype == "pred":
        return 8
    if dtype == "token":
        return 0
    m = re.fullmatch(r"(?:[su]|bf|c)(\d+)|f(\d+)(?:e\d+m\d+\w*)?", dtype)
    return int(m.group(1) or m.group(2)) if m else None


def result_bytes(line: str) -> int | None:
    """The bytes of an instruction's result as its optimized HLO line types it (`f32[64,16]{1,0}`, or
    a tuple of them), on one device; sub-byte types packed; None when a type's size is not known."""
    head = line.split("=", 1)[1] if "=" in line else line
    head = head.split("(", 1)[0] if not head.lstrip().startswith("(") else head.split(")", 1)[0]
    total = 0
    for dtype, dims in re.findall(r"\b([a-z][a-z0-9]*)\[([\d,]*)\]", head):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        bits = hlo_bits(dtype)
        if bits is None:
            return None
        total += -(-n * bits // 8)
    return total


def _entry(hlo_text: str) -> str:
    return hlo_text[hlo_text.index("\nENTRY "):] if "\nENTRY " in hlo_text else ""


def entry_instructions(hlo_text: str) -> Iterator[tuple[str, str]]:
    """(line, opcode) of each instruction of an optimized HLO module's entry computation, in order."""
    return _instructions(_entry(hlo_text))


def _instructions(computation: str):
    """(line, opcode) of each instruction of a computation's text (its header line first)."""
    for line in computation.splitlines()[1:]:
        if line.strip() == "}":
            return
        m = _INSTRUCTION.match(line)
        if m:
            yield line, m.group(1)


def _computation(hlo_text: str, name: str) -> str:
    """The text of the computation `name` (a while's body or condition), from its header line; "" if absent."""
    at = hlo_text.find(f"\n%{name} (")
    return hlo_text[at + 1:] if at >= 0 else ""


_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def fusion_kind(name: str) -> str:
    """A fusion's name without XLA's numbering (`loop_add_fusion.3` -> `loop_add_fusion`): what compares
    across two compiles."""
    return re.sub(r"\.\d+$", "", name)


def kernels_of(hlo_text: str) -> list[Kernel]:
    """The kernels of an optimized HLO module (its text), in the entry computation's order. An entry
    `call` of a `parallel_*` computation (how torch_xla's XLA build splits a loop fusion across
    threads) is a kernel running that fusion (`inner`), with the fusion's opcode and module path;
    its runtime's events name the call (the whole kernel) and, inside it, the fusion on each thread."""
    roots = _parallel_roots(hlo_text) if "to_apply=%parallel_" in hlo_text else {}
    return _kernels_in(hlo_text, entry_instructions(hlo_text), roots, "", 1, 0)


def _kernels_in(hlo_text: str, instructions, roots: dict, loop: str, runs: int, depth: int) -> list[Kernel]:
    """The kernels of one computation's instructions; a `while` is a kernel of its own (what its
    runtime event holds beyond its body's kernels: the loop's bookkeeping), followed by the kernels of
    its condition and body, each marked with the loop and how many times it runs (`runs`: the
    enclosing loops' trips multiplied, 0 when one is unknown)."""
    out = []
    for line, opcode in instructions:
        if opcode in _NOT_KERNELS:
            continue
        called = re.search(r"to_apply=%(parallel_[\w.\-]+)", line) if opcode == "call" else None
        if called and called.group(1) in roots:
            root = roots[called.group(1)]
            k = _kernel(root, _INSTRUCTION.match(root).group(1))
            out.append(Kernel(_name(line), k.opcode, k.path, k.phase, inner=k.name,
                              loop=loop, trips=runs if loop else 0))
            continue
        k = _kernel(line, opcode)
        if opcode == "fusion" and (called := re.search(r"calls=%([\w.\-]+)", line)):
            k = dataclasses.replace(k, spans=_spans(_computation(hlo_text, called.group(1)), k.path))
        out.append(dataclasses.replace(k, loop=loop, trips=runs) if loop else k)
        if opcode == "while" and depth < 8:
            trips = int(m.group(1)) if (m := _TRIPS.search(line)) else 0
            for part, extra in (("condition", 1), ("body", 0)):
                name = re.search(part + r"=%([\w.\-]+)", line)
                if name:
                    inner = runs * (trips + extra) if trips else 0
                    out += _kernels_in(hlo_text, _instructions(_computation(hlo_text, name.group(1))), roots,
                                       k.name, inner, depth + 1)
    return out


def _name(line: str) -> str:
    return line.split("=", 1)[0].strip().removeprefix("ROOT").strip().lstrip("%")


def _kernel(line: str, opcode: str) -> Kernel:
    path, phase = _origin(line)
    size = (result_bytes(line) or 0) if opcode.removesuffix("-start") in COLLECTIVES else 0
    return Kernel(_name(line), opcode, path, phase, bytes=size)


def _origin(line: str) -> tuple[str, str]:
    """(module path, phase) an instruction's metadata op_name names; ("", "") without one."""

    meta = re.search(r'op_name="((?:[^"\\]|\\.)*)"', line)
    if not meta:
        return "", ""
    text = meta.group(1).encode().decode("unicode_escape")  # HLO escapes the name as C strings do
    path, _, phase = provenance(text)  # no module for torch_xla's own op scopes (`aten__lerp.28/aten__lerp`)
    return path, phase


# Inside a fusion, instructions that only index or lay out their operands: they compute nothing of
# the block whose path they carry.
_MOVES = {"parameter", "constant", "bitcast", "reshape", "broadcast", "transpose", "copy", "slice", "tuple",
          "get-tuple-element", "iota"}


def _spans(computation: str, own: str) -> tuple[str, ...]:
    """The module paths of a fused computation's computing instructions other than `own`, in order of first use."""
    seen: dict = {}
    for line, opcode in _instructions(computation):
        if opcode in _MOVES:  # a view of its input (torch_xla's reshape for batch_norm_training): no work
            continue
        path = _origin(line)[0]
        if path and path != own:
            seen.setdefault(path, None)
    return tuple(seen)


def _parallel_roots(hlo_text: str) -> dict:
    """Each `parallel_*` computation's ROOT instruction line, by the computation's name."""
    out, current = {}, None
    for line in hlo_text.splitlines():
        if line.startswith("%parallel_"):
            current = line[1:].split(" ", 1)[0]
        elif current and line.lstrip().startswith("ROOT ") and _INSTRUCTION.match(line):
            out[current] = line
            current = None
        elif line.startswith("}"):
            current = None
    return out


@dataclass(frozen=True)
class Kernels:
    """The kernels one file compiled to on one backend, or why it did not compile."""

    path: str
    backend: str
    kernels: tuple = ()
    error: str | None = None


def compile_kernels(path: Path, backend: str = "cpu") -> Kernels:
    """Compile one StableHLO file on `backend` (nothing is run) and list its kernels (a bench worker
    job: XLA compiles under the worker's time and memory limits)."""

    (result,) = load([path])
    if not result.ok:
        return Kernels(str(path), backend, error=result.error)
    data, text = compile_input(path)
    started()
    try:
        if is_tpu(backend):  # compile-only for a TPU slice (libtpu), as memory plans it

            exe = compiler_for(backend).compile(text, str(path))
        else:
            exe = runtime(backend).compile(text, str(path))
    except StackwarsError as e:
        return Kernels(str(path), backend, error=e.one_line())
    return Kernels(str(path), backend, tuple(k for m in exe.hlo_modules() for k in kernels_of(m.to_string())))


DUMPED = "as dumped: the file's own optimized HLO"  # Kernels.backend of a module XLA optimized elsewhere


def dumped_kernels(path: str | Path) -> Kernels | None:
    """The kernels of a module XLA has already optimized (an XLA dump's `*.after_optimizations.hlo.pb`
    or `.txt`, from the user's machine and backend: a TPU's included), read from the file itself with
    each fusion's module path from its metadata, nothing compiled here; None for any other file."""

    file, part = picked(path)
    try:
        text = optimized_hlo_text(Path(file).read_bytes(), part)
    except OSError:
        return None
    return Kernels(str(path), DUMPED, tuple(kernels_of(text))) if text else None


def kernels_of_files(paths: Sequence[str | Path], backend: str = "cpu", timeout: float | None = 300,
                     max_memory: int | None = None, progress: Callable[[str], object] | None = None,
                     stack: Stack | None = None) -> list[Kernels]:
    """Kernels of each file, each compiled in a bench worker (killed past its time or memory limit) of
    `stack`'s environment (its XLA; None, this one's); a module XLA optimized already (dumped_kernels)
    read as it is, not compiled again."""

    out = []
    with Isolated(max_memory or default_max_memory(), most_partitions(paths) if backend == "cpu" else 1,
                  stack=stack) as worker:
        for p in paths:
            dumped = dumped_kernels(p)
            if dumped is not None:
                out.append(dumped)
                continue
            if progress:
                progress(f"{p}: compiling for {backend} (nothing runs) to count its kernels ...")
            out.append(worker.run(Task(compile_kernels, (Path(p), backend), str(p), row(Kernels, str(p), backend)),
                                  timeout))
    return out


def block_kernels(report: DiffReport, result: DiffResult, files: Sequence[str | Path],
                  progress: Callable[[str], object] | None = None, target: str = "cpu") -> DiffResult:
    """The diff result with each block's kernel counts (and, sharded, collectives), both files compiled
    in a worker for `target`: XLA's CPU backend, or a TPU generation through libtpu (compile-only); a
    file that does not compile is one line."""

    if target != "cpu":
        check_target(target)
    ka, kb = kernels_of_files(files, target, progress=progress)
    for k in (ka, kb):
        if k.error:
            raise StackwarsError(k.error, fix="drop --kernels to diff without compiling")
    return attach(report, result, ka, kb)
