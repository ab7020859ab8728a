"""What runs: the kernels XLA compiles a module to (its optimized HLO's entry instructions), each traced back to the module path it came from."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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

    def as_json(self) -> dict:
        return {"name": self.name, "opcode": self.opcode, "path": self.path, "phase": self.phase}


def kernels_of(hlo_text: str) -> list[Kernel]:
    """The kernels of an optimized HLO module (its text), in the entry computation's order."""
    from ..ir.locations import provenance

    entry = hlo_text[hlo_text.index("\nENTRY "):] if "\nENTRY " in hlo_text else ""
    out = []
    for line in entry.splitlines()[1:]:
        if line.strip() == "}":
            break
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        opcode = m.group(1)
        if opcode in _NOT_KERNELS:
            continue
        name = line.split("=", 1)[0].strip().removeprefix("ROOT").strip().lstrip("%")
        path, phase = "", ""
        meta = re.search(r'op_name="((?:[^"\\]|\\.)*)"', line)
        if meta:
            text = meta.group(1).encode().decode("unicode_escape")  # HLO escapes the name as C strings do
            path, _, phase = provenance(text)
        out.append(Kernel(name, opcode, path, phase))
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
    from ..errors import StackwarsError
    from ..ir import load
    from ..runtime import runtime
    from .worker import started

    (result,) = load([path])
    if not result.ok:
        return Kernels(str(path), backend, error=result.error)
    data = Path(path).read_bytes()
    text = data if str(path).endswith(".mlirbc") else data.decode(errors="replace")
    started()
    try:
        exe = runtime(backend).compile(text, str(path))
    except StackwarsError as e:
        return Kernels(str(path), backend, error=e.one_line())
    return Kernels(str(path), backend, tuple(k for m in exe.hlo_modules() for k in kernels_of(m.to_string())))


def kernels_of_files(paths, backend: str = "cpu", timeout: float | None = 300, max_memory: int | None = None,
                     progress=None) -> list[Kernels]:
    """Kernels of each file, each compiled in a bench worker (killed past its time or memory limit)."""
    from .worker import Isolated, Job, default_max_memory

    out = []
    with Isolated(max_memory or default_max_memory()) as worker:
        for p in paths:
            if progress:
                progress(f"{p}: compiling on the XLA {backend} backend to count its kernels ...")
            out.append(worker.run(Job("kernels", (str(p),), backend), timeout))
    return out


def block_kernels(report, result, files, progress=None):
    """The diff result with each block's kernel counts, both files compiled in a worker on XLA's CPU
    backend; a file that does not compile is one line."""
    from ..diff import with_kernels as attach
    from ..errors import StackwarsError

    ka, kb = kernels_of_files(files, "cpu", progress=progress)
    for k in (ka, kb):
        if k.error:
            raise StackwarsError(k.error, fix="drop --kernels to diff without compiling")
    return attach(report, result, ka, kb)
