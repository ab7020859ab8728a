"""Regress: one program under two stacks (or two files), what changed per block, judged by thresholds.

Per block: IR, kernels, time and memory; the thresholds are versions.metric's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..bench.kernels import fusion_kind, kernels_of_files
from ..bench.planning import plan_files
from ..bench.run import file_task, group_task
from ..bench.staging import staged_values
from ..bench.timing import Asked
from ..capture import run
from ..common.errors import StackwarsError
from ..common.runstats import deciles, rounds_ratio
from ..diff import diff_files, with_kernels, with_times
from ..diff.block import PHASE_LABEL
from ..ir.parse import mlir_context
from ..isolate.stacks import Stack
from ..isolate.task import Isolated, default_max_memory
from ..workload import Request
from .metric import KERNELS, MEMORY, STEADY, Change


@dataclass(frozen=True)
class Thresholds:
    """What counts as a regression (B against A): steady time up by more than `time` (the 95% interval's
    low end past it, so noise alone does not), the memory plan's peak up by more than `memory`, a
    block compiled to more than `kernels` extra kernels."""

    time: float = 0.10
    memory: float = 0.10
    kernels: int = 0

    def as_json(self) -> dict:
        return {"time": self.time, "memory": self.memory, "kernels": self.kernels}

    @classmethod
    def from_json(cls, d: dict) -> "Thresholds":
        return cls(float(d["time"]), float(d["memory"]), int(d["kernels"]))


@dataclass(frozen=True)
class BlockChange:
    """One aligned block: its ops, kernels and profiled time on each side, and what changed in its ops."""

    label: str
    ops: tuple  # (A, B)
    kernels: tuple | None = None  # (A, B) kernels XLA compiled the block to
    fusions: tuple | None = None  # (A names, B names) of the block's fusions
    time: tuple | None = None  # (A, B) seconds per run, profiled
    changes: tuple = ()  # the op-level diff in words
    gap_95: tuple | None = None  # the time's B - A 95% interval over the profiled runs (diff.with_times)
    # The two programs compute the same (the diff's verdict), yet this block's ops differ: the two spellings
    # (locations, a helper inlined) put ops into other blocks; no change of what is computed
    placement: bool = False

    @property
    def ir_changed(self) -> bool:
        """Its StableHLO changed: ops added, removed or changed (a callee's renumbering is not a change, nor
        an op that the other spelling puts into another block of the same program: `placement`)."""
        return not self.placement and (bool(self.changes) or self.ops[0] != self.ops[1])

    @property
    def compiled_changed(self) -> bool:
        """XLA compiled it differently: another number of kernels, or other kinds of fusion."""
        return (self.kernels is not None and self.kernels[0] != self.kernels[1]) or \
            (self.fusions is not None and self.fusions[0] != self.fusions[1])

    @property
    def changed(self) -> bool:
        return self.ir_changed or self.compiled_changed

    @property
    def time_within_noise(self) -> bool:
        return self.gap_95 is not None and self.gap_95[0] <= 0.0 <= self.gap_95[1]

    def as_json(self) -> dict:
        return {"label": self.label, "ops": list(self.ops), "kernels": _list(self.kernels),
                "fusions": [list(f) for f in self.fusions] if self.fusions else None,
                "time_s": _list(self.time), "changes": list(self.changes), "changed": self.changed,
                "ir_changed": self.ir_changed, "compiled_changed": self.compiled_changed,
                "time_gap_95": _list(self.gap_95), "time_within_noise": self.time_within_noise,
                "placement": self.placement}

    @classmethod
    def from_json(cls, d: dict) -> "BlockChange":
        return cls(d["label"], tuple(d["ops"]), _tuple(d.get("kernels")),
                   tuple(tuple(f) for f in d["fusions"]) if d.get("fusions") else None, _tuple(d.get("time_s")),
                   tuple(d.get("changes") or ()), _tuple(d.get("time_gap_95")), bool(d.get("placement")))


def _list(t):
    return list(t) if t is not None else None


def _tuple(t):
    return tuple(t) if t is not None else None


@dataclass(frozen=True)
class Regression:
    """B against A: each side's stack and file, the blocks, whole-program time and memory, and the
    thresholds passed."""

    a: dict  # {"stack", "file", "versions", "sha256"}
    b: dict
    blocks: tuple  # BlockChange, in A's program order
    time: dict | None  # {"a", "b" (median s), "ratio" (B/A), "low", "high"} or {"error"}
    memory: dict | None  # {"a", "b" (peak bytes), "temp_a", "temp_b"} or {"error"}
    kernels: dict | None  # {"a", "b"}: kernels of the whole program
    unaligned: tuple = ()  # blocks on one side only: "A: label (n ops)"
    thresholds: Thresholds = field(default_factory=Thresholds)
    breaches: tuple = ()
    # the diff's verdict that the two whole programs compute the same (diff.result.DiffResult.same_program);
    # None in a result made before it was kept
    same_program: bool | None = None

    @property
    def regressed(self) -> bool:
        return bool(self.breaches)

    def as_json(self) -> dict:
        return {"format": 1, "a": self.a, "b": self.b, "blocks": [b.as_json() for b in self.blocks],
                "unaligned": list(self.unaligned), "time": self.time, "memory": self.memory,
                "kernels": self.kernels, "thresholds": self.thresholds.as_json(),
                "breaches": list(self.breaches), "regressed": self.regressed, "same_program": self.same_program}

    @classmethod
    def from_json(cls, d: dict) -> "Regression":
        """A `regress --json` file's result (its `regressed` is recomputed from the breaches)."""
        if d.get("format", 1) != 1:
            raise ValueError(f"format {d.get('format')!r}, this version reads 1")
        return cls(d["a"], d["b"], tuple(BlockChange.from_json(b) for b in d["blocks"]), d.get("time"),
                   d.get("memory"), d.get("kernels"), tuple(d.get("unaligned") or ()),
                   Thresholds.from_json(d["thresholds"]), tuple(d.get("breaches") or ()), d.get("same_program"))


# A and B each timed this many times, taking turns, each round in a fresh worker process: a slow stretch
# of the machine hits both, and no one process's placement (its core, its memory layout) weighs on a whole
# side. The ratio's interval is taken across the rounds (runstats.rounds_ratio), so more rounds narrow it.
# The default of regress --rounds.
ROUNDS = 5


def regress_files(file_a: Path, file_b: Path, stack_a: Stack, stack_b: Stack,
                  thresholds: Thresholds = Thresholds(), *, timing: bool = True, calibrate: bool = False,
                  rounds: int = ROUNDS, progress: Callable[[str], object] | None = None) -> Regression:
    """A compiled, timed and planned by stack_a's XLA, B by stack_b's; their IR diffed block by block.
    `rounds` (3 or more): A and B are timed in this many rounds, a fresh worker each, the B/A interval
    taken across them. `calibrate` (CI mode): A is first timed against a copy of itself, the way A and B
    are timed (in one worker, or taking turns), and the time threshold is widened by the noise that A/A
    shows. ValueError: fewer than 3 rounds."""
    if rounds < 3:
        raise ValueError(f"rounds={rounds}: an interval across rounds needs 3 or more")

    report = diff_files(file_a, file_b)
    result = report.result()
    kernels = []
    for f, s in ((file_a, stack_a), (file_b, stack_b)):
        (k,) = kernels_of_files([f], progress=progress, stack=s)
        if k.error:
            raise StackwarsError(k.error, fix="regress files that compile on both stacks")
        kernels.append(k)
    result = with_kernels(report, result, *kernels)
    time = memory = None
    if timing:
        calibration = _calibration(file_a, stack_a, same_xla(stack_a, stack_b), progress, rounds) if calibrate else None
        *rows, medians = _timed_pair((file_a, stack_a), (file_b, stack_b), progress, rounds)
        time = _time(rows, medians)
        if calibration is not None and "error" not in time:
            time["calibration"] = calibration
        if all(r.ok and r.profile is not None for r in rows):
            result = with_times(report, result, rows[0].profile, rows[1].profile)
    plans = []
    for f, s in ((file_a, stack_a), (file_b, stack_b)):
        plans.append(plan_files([f], progress=progress, stack=s).plans[0])
    memory = _memory(plans)
    blocks = tuple(_block(b, result.same_program) for b in result.blocks)
    unaligned = tuple(f"A: {u.label} ({u.ops} ops)" for u in result.only_a) + \
        tuple(f"B: {u.label} ({u.ops} ops)" for u in result.only_b)
    out = Regression(_side(file_a, stack_a), _side(file_b, stack_b), blocks, time, memory,
                     {"a": len(kernels[0].kernels), "b": len(kernels[1].kernels)}, unaligned, thresholds,
                     same_program=result.same_program)
    return _judged(out)


def _side(path: Path, stack: Stack) -> dict:
    import hashlib

    return {"stack": stack.name, "file": str(path), "versions": stack.versions,
            "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(), "ops_sha256": ops_digest(path)}


def ops_digest(path: Path) -> str | None:
    """sha256 of the module printed by the MLIR bindings without its locations: equal for two captures
    whose ops, types and attributes are the same whatever their `loc(...)` say (None: no parse here)."""
    import hashlib

    try:
        with mlir_context() as ctx:
            ctx.allow_unregistered_dialects = True
            from jaxlib.mlir import ir

            module = ir.Module.parse(Path(path).read_text())
            text = module.operation.get_asm(enable_debug_info=False)
    except Exception:  # a file this jaxlib cannot parse alone (a quant type): the full text's digest stands
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def same_xla(a: Stack, b: Stack) -> bool:
    """Whether the two stacks compile and run with the same XLA: the same jax and jaxlib releases."""
    return all(a.versions.get(k) and a.versions.get(k) == b.versions.get(k) for k in ("jax", "jaxlib"))


def _timed_pair(side_a, side_b, progress, rounds: int, together: bool | None = None) -> tuple:
    """Each file's Executable, timed (and profiled, for time per block) by its stack's XLA, `rounds` times,
    a fresh worker each time, each side's steady samples pooled over its rounds. Where both stacks hold
    the same jax and jaxlib (a PyTorch stack beside the lock's jax), both files run in one worker of A's
    stack, interleaved run by run as `bench A B` runs them; otherwise the two stacks cannot share one
    process, and their workers take turns (measured: op-identical programs then read 0.99-1.24x apart
    on a 2-core machine, docs/stacks.md); `together` overrides that choice (an A/A calibration is timed
    the way its A/B is). Returns (A's Executable, B's, each round's steady medians (A, B))."""

    got = [[], []]
    together = same_xla(side_a[1], side_b[1]) if together is None else together
    asked = Asked(profile=10)  # time per block: each round's steady state profiled
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        if together:
            paths = [side_a[0], side_b[0]]
            if progress:
                progress(f"{paths[0]} and {paths[1]}: timing together, round {r + 1} of {rounds} ...")
            with Isolated(default_max_memory(), stack=side_a[1], stager=staged_values) as worker:
                rows = worker.run(group_task([paths[i] for i in order], "cpu", None, asked), None)
            for i, row in zip(order, rows):
                got[i].append(row)
            continue
        for i in order:
            path, stack = side_a if i == 0 else side_b
            if progress:
                progress(f"{path}: timing, round {r + 1} of {rounds} ...")
            with Isolated(default_max_memory(), stack=stack, stager=staged_values) as worker:
                got[i].append(worker.run(file_task(path, "cpu", None, asked), None))
    return _pooled(got[0]), _pooled(got[1]), tuple(
        (a.timing.steady, b.timing.steady) for a, b in zip(*got) if a.ok and b.ok)


def _calibration(path: Path, stack: Stack, together: bool, progress, rounds: int) -> dict:
    """A against a copy of itself (A/A), timed as A and B are (`together` in one worker, else taking
    turns in fresh workers): its B/A interval across rounds, and the noise it shows (how far the
    interval reaches from 1 either way), by which CI mode widens the time threshold."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="stackwars-aa-") as folder:
        again = Path(folder) / Path(path).name
        shutil.copyfile(path, again)
        side = Path(path).with_suffix(".json")
        if side.is_file():  # the capture's arguments and reference, for the copy too
            shutil.copyfile(side, again.with_suffix(".json"))
        if progress:
            progress(f"CI mode: timing {path} against itself ({'together' if together else 'taking turns'}) ...")
        *rows, medians = _timed_pair((path, stack), (again, stack), progress, rounds, together=together)
    t = _time(rows, medians)
    if "error" in t:
        raise StackwarsError(f"CI mode: timing {path} against itself failed: {t['error']}")
    return {"ratio": t["ratio"], "low": t["low"], "high": t["high"], "rounds": t["rounds"],
            "noise": max(t["high"] - 1, 1 - t["low"], 0.0), "how": "together" if together else "taking turns"}


def _pooled(rows):
    """One Executable of a side's rounds: the first failed round's, else the last round's with every
    round's steady samples pooled (its median and deciles over them)."""
    import dataclasses
    import statistics

    bad = next((r for r in rows if not r.ok), None)
    if bad is not None:
        return bad
    samples = tuple(x for r in rows for x in r.timing.samples)
    p10, p90 = deciles(samples)
    timing = dataclasses.replace(rows[-1].timing, samples=samples, steady=statistics.median(samples),
                                 p10=p10, p90=p90, iterations=len(samples))
    return dataclasses.replace(rows[-1], timing=timing)


def _time(rows, rounds) -> dict:
    """B/A: the geometric mean of the rounds' ratios (each round's steady medians, B over A) and its 95%
    interval across the rounds (runstats.rounds_ratio); each side's steady median over its pooled samples."""

    a, b = rows
    if not (a.ok and b.ok):
        return {"error": next(r.error for r in rows if not r.ok)}
    ratio, low, high = rounds_ratio([tb / ta for ta, tb in rounds])
    return {"a": a.timing.steady, "b": b.timing.steady, "ratio": ratio, "low": low, "high": high,
            "rounds": [list(r) for r in rounds], "interval": "across rounds",
            "first_a": a.timing.first, "first_b": b.timing.first, "compile_a": a.compile_s, "compile_b": b.compile_s}


def _memory(plans) -> dict:
    a, b = plans
    if a.error or b.error:
        return {"error": a.error or b.error}
    return {"a": a.peak_bytes, "b": b.peak_bytes, "temp_a": a.temp_bytes, "temp_b": b.temp_bytes}


def _block(b, same_program: bool = False) -> BlockChange:
    """A diff's aligned block (diff.result.BlockResult) as regress words it; `same_program`: the diff found
    the two whole programs the same, so what differs in the block is where each spelling put its ops."""
    k, t = b.metrics.get("kernels"), b.metrics.get("time")
    changes = ()
    if b.op_diff is not None:  # a call's callee renamed (`_where_40` -> `_where_2`) is numbering, not a change
        changes = tuple(_group_words(g) for g in b.op_diff.groups
                        if not (g.status == "changed" and g.what and all(w.startswith("callee ") for w in g.what)))
    placement = bool(same_program) and (bool(changes) or len(b.ops_a) != len(b.ops_b))
    if placement:  # not changes: an op read from a block the other spelling cut otherwise
        changes = ()
    fusions = (tuple(n for n in k["names_a"] if "fusion" in n), tuple(n for n in k["names_b"] if "fusion" in n)) \
        if k else None

    label = b.name_a if b.name_a == b.name_b else f"{b.name_a} / {b.name_b}"
    # A module's backward is a block of its own, named like its forward: its phase is said beside the name.
    phase = next((p for p in PHASE_LABEL.values() if b.label.endswith(p)), "")
    label = (f"{label} {phase}" if phase else label) if b.name_a or b.name_b else b.label  # no module: its label
    return BlockChange(label, (len(b.ops_a), len(b.ops_b)), (k["a"], k["b"]) if k else None,
                       _fusion_kinds(fusions), (t["a"], t["b"]) if t else None, changes,
                       tuple(t["gap_95"]) if t and t.get("gap_95") else None, placement)


def _fusion_kinds(fusions):
    if fusions is None:
        return None
    return tuple(tuple(sorted(fusion_kind(n) for n in side)) for side in fusions)


def _group_words(g) -> str:
    if g.status == "changed":
        return f"{g.names_a[0]} changed: {'; '.join(g.what)}" if g.what else f"{g.names_a[0]} changed"
    if g.status == "only_a":
        return f"{', '.join(g.names_a[:3])} removed"
    if g.status == "only_b":
        return f"{', '.join(g.names_b[:3])} added"
    return f"{', '.join(g.names_a[:3])} rewritten as {', '.join(g.names_b[:3])}"


def _judged(r: Regression) -> Regression:
    import dataclasses

    t, breaches = r.thresholds, []
    noise = (r.time or {}).get("calibration", {}).get("noise", 0.0)  # CI mode: the A/A run's
    if r.time and "error" not in r.time and \
            STEADY.worse(Change(r.time["ratio"], r.time["low"], r.time["high"]), t.time + noise):
        beyond = f"+{t.time:.0%}" + (f" + the A/A noise {noise:.1%}" if noise else "")
        breaches.append(f"steady time B/A {r.time['ratio']:.2f} (95% interval from {r.time['low']:.2f}), over "
                        f"{beyond}")
    if r.memory and "error" not in r.memory and r.memory["a"] and \
            MEMORY.worse(MEMORY.change(r.memory["a"], r.memory["b"]), t.memory):
        breaches.append(f"memory plan peak {r.memory['b'] / r.memory['a'] - 1:+.0%}, over +{t.memory:.0%}")
    for b in r.blocks:
        # a block the two spellings cut otherwise holds other ops, so other kernels: judged with the whole below
        if b.kernels and not b.placement and KERNELS.worse(KERNELS.change(*b.kernels), t.kernels):
            breaches.append(f"{b.label}: {b.kernels[1] - b.kernels[0]:+d} kernels, over +{t.kernels}")
    if any(b.placement for b in r.blocks) and r.kernels and KERNELS.worse(KERNELS.change(r.kernels["a"],
                                                                                           r.kernels["b"]), t.kernels):
        breaches.append(f"the whole program: {r.kernels['b'] - r.kernels['a']:+d} kernels, over +{t.kernels} (judged "
                        "whole: the two spellings cut its blocks otherwise)")
    return dataclasses.replace(r, breaches=tuple(breaches))


def regress_model(req: Request, stack_a: Stack, stack_b: Stack, out_dir: Path, thresholds: Thresholds = Thresholds(), *,
                  timing: bool = True, calibrate: bool = False, rounds: int = ROUNDS,
                  progress: Callable[[str], object] | None = None, show: bool | None = None) -> Regression:
    """Capture `req` (one side: JAX's, or one PyTorch exporter's) under both stacks into out_dir/STACK/,
    then regress_files."""

    paths = []
    for s in (stack_a, stack_b):  # captured anew each time: a stack may have been made again since
        made = run(req, Path(out_dir) / s.name, force=True, show=show, stack=s)
        paths.append(next(p for p in made.files if p.suffix == ".mlir"))
    return regress_files(paths[0], paths[1], stack_a, stack_b, thresholds, timing=timing, calibrate=calibrate,
                         rounds=rounds, progress=progress)
