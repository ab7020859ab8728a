"""Module stats: op histograms by op and dialect, functions, arguments, parameter bytes, big tensors."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..common.files import argument_names
from .model import Module
from .pool import load

STATS_FORMAT = 1


@dataclass(frozen=True)
class ModuleStats:
    """What `stackwars-ir stats` shows for one module. Histograms count the entry function with
    every func.call inlined (helpers such as JAX's @_take counted at their call sites)."""

    source: str
    parser: str
    functions: tuple  # (name, visibility, op count as written)
    ops_written: int  # ops in the file, each function once
    ops_inlined: int
    calls: int
    by_op: tuple  # (op name, count), most frequent first
    by_dialect: tuple
    arguments: int
    argument_bytes: int | None  # None when a dimension is dynamic
    largest: tuple  # (tensor type text, what it is, bytes), largest first
    loops: tuple = ()  # each while's trip count (None: not fixed by the IR), in program order
    ops_executed: int | None = None  # inlined ops weighted by how often they run; None: a loop's count unknown
    by_op_executed: tuple = ()  # (op name, executions per run), most frequent first; () without loops
    unsized: tuple = ()  # element types no byte size is known for (their tensors' bytes are None, never a guess)
    form: str = ""  # what the file was, where it was not StableHLO as written (ir.Module.form)

    def as_json(self) -> dict:
        return {
            "format": STATS_FORMAT, "source": self.source, "parser": self.parser,
            "functions": [{"name": n, "visibility": v, "ops": c} for n, v, c in self.functions],
            "ops_written": self.ops_written, "ops_inlined": self.ops_inlined, "calls": self.calls,
            "histogram": dict(self.by_op), "dialects": dict(self.by_dialect),
            "arguments": self.arguments, "argument_bytes": self.argument_bytes,
            "largest_tensors": [{"type": t, "what": w, "bytes": b} for t, w, b in self.largest],
            "loops": list(self.loops), "ops_executed": self.ops_executed,
            "histogram_executed": dict(self.by_op_executed), "unsized_types": list(self.unsized),
            "read_from": self.form or "StableHLO",
        }

    @classmethod
    def from_json(cls, d: dict) -> "ModuleStats":
        if d.get("format") != STATS_FORMAT:
            raise ValueError(f"format {d.get('format')!r}, this version reads {STATS_FORMAT}")
        return cls(d["source"], d["parser"], tuple((f["name"], f["visibility"], f["ops"]) for f in d["functions"]),
                   d["ops_written"], d["ops_inlined"], d["calls"], tuple(d["histogram"].items()),
                   tuple(d["dialects"].items()), d["arguments"], d.get("argument_bytes"),
                   tuple((t["type"], t["what"], t["bytes"]) for t in d["largest_tensors"]), tuple(d.get("loops") or ()),
                   d.get("ops_executed"), tuple((d.get("histogram_executed") or {}).items()),
                   tuple(d.get("unsized_types") or ()),
                   "" if d.get("read_from", "StableHLO") == "StableHLO" else d["read_from"])


@dataclass(frozen=True)
class StatsReport:
    """`stackwars-ir stats` of several files: each parsed module's stats, and one line per file that
    could not be parsed."""

    files: int
    modules: tuple  # ModuleStats
    errors: tuple  # str

    @property
    def failed(self) -> tuple:
        return self.errors

    def as_json(self) -> dict:
        return {"modules": [s.as_json() for s in self.modules], "errors": list(self.errors)}

    @classmethod
    def from_json(cls, d: dict) -> "StatsReport":
        modules = tuple(ModuleStats.from_json(m) for m in d["modules"])
        return cls(len(modules) + len(d["errors"]), modules, tuple(d["errors"]))


def stats_files(paths: Iterable[str | Path]) -> StatsReport:
    """Parse every file (in workers, under the parse limits) and take each module's stats, naming
    arguments from a capture's sidecar."""

    results = load(paths)
    return StatsReport(len(results), tuple(module_stats(m, arg_names=argument_names(r.path))
                                           for r in results if r.ok for m in r.modules),
                       tuple(r.error for r in results if not r.ok))


def module_stats(module: Module, top: int = 5, arg_names: dict | None = None) -> ModuleStats:
    """`arg_names`: argument index -> name (a capture's sidecar), for arguments whose location has none."""
    hist = module.histogram(inlined=True)
    dialects = Counter()
    for name, n in hist.items():
        dialects[name.split(".", 1)[0]] += n
    entry = module.entry
    arg_types = [module.values[v].type for v in entry.args]
    sizes = [t.nbytes for t in arg_types]
    return ModuleStats(
        source=module.source, parser=module.parser,
        functions=tuple((f.name, f.visibility, len(f.ops)) for f in module.funcs),
        ops_written=sum(1 for o in module.ops if not o.name.endswith(".return")),
        ops_inlined=sum(hist.values()),
        calls=sum(1 for op, _ in module.inlined if op.name == "func.call"),
        by_op=tuple(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_dialect=tuple(sorted(dialects.items(), key=lambda kv: (-kv[1], kv[0]))),
        arguments=len(entry.args),
        argument_bytes=None if any(s is None for s in sizes) else sum(sizes),
        largest=_largest(module, top, arg_names or {}),
        unsized=_unsized(module),
        form=module.form,
        **_executed(module, sum(hist.values())),
    )


def _executed(module: Module, inlined: int) -> dict:
    """The loops' trip counts and the op counts weighted by them (a module without loops: each op once)."""
    loops = module.loop_trips
    if not loops:
        return {"ops_executed": inlined}
    hist = module.executed_histogram()
    if hist is None:
        return {"loops": loops}
    return {"loops": loops, "ops_executed": sum(hist.values()),
            "by_op_executed": tuple(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))}


def _unsized(module: Module) -> tuple:
    """The element types of the entry function's arguments and the module's results that have no known
    byte size (ir.model.element_bits), sorted."""
    types = {module.values[v].type for v in module.entry.args}
    types |= {module.values[v].type for op in module.ops for v in op.results}
    return tuple(sorted({t.dtype for t in types if t.numel is not None and t.nbytes is None}))


def _largest(module: Module, top: int, arg_names: dict) -> tuple:
    seen = []
    entry = module.entry
    for i, vid in enumerate(entry.args):
        v = module.values[vid]
        name = v.name or arg_names.get(i)
        seen.append((v.type, f"argument {i}" + (f" ({name})" if name else "")))
    for op, _ in module.inlined:
        for vid in op.results:
            seen.append((module.values[vid].type, f"result of {op.name}"))
    ranked = sorted(((t.nbytes, str(t), what) for t, what in seen), key=lambda x: -(x[0] or 0))
    out, shown = [], set()
    for size, text, what in ranked:
        if (text, what) in shown:
            continue
        shown.add((text, what))
        out.append((text, what, size))
        if len(out) == top:
            break
    return tuple(out)
