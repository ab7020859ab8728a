"""The diff's result: one typed, versioned value that every rendering reads, saved and loaded as JSON.

The renderings: text, JSON, Markdown, HTML.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ..common.errors import StackwarsError
from ..ir.sharding import split_text
from .findings import Finding
from .ops import OpDiff

RESULT_FORMAT = 4  # 1: the first JSON (no phases, findings as sentences); 2: typed blocks (docs/diff.md);
# 3: each block's op-level diff (diff.ops); 4: ops matched only on the same operands, attributes,
# constants and regions, and the entry functions' interfaces compared ("interface"). Formats 2 and 3
# are still read: their op-level diffs compared less, and they have no interface changes.
READS_FORMATS = (2, 3, 4)
NO_PATH = "(no module path)"  # the name of a block whose ops carry no provenance


@dataclass(frozen=True)
class Summary:
    """One of the study's questions answered for this pair, as data (normalization, flattening, embedding)."""

    topic: str
    numbers: dict

    def as_json(self) -> dict:
        return {"topic": self.topic, "numbers": self.numbers}


@dataclass(frozen=True)
class SideResult:
    """One input of the diff: where it came from and what it holds."""

    name: str
    source: str
    mode: str  # how it was segmented: provenance or structure
    mode_reason: str  # why (auto chooses by the share of ops with a module path)
    coverage: float  # share of ops whose location names a module path
    ops: int
    blocks: int
    histogram: dict = field(repr=False)  # op name -> count, calls inlined
    provenance: dict | None = field(default=None, repr=False)  # from the capture's sidecar, when it has one
    provenance_note: str = ""  # why there is none ("no sidecar", "sidecar ignored: ...")
    sha256: str | None = None  # of the file: which bench and memory results belong to this diff
    loops: tuple = ()  # each while's trip count (None: not fixed by the IR), in program order
    executed: dict | None = field(default=None, repr=False)  # op name -> runs per call, with loops; None: unknown
    devices: int = 1  # the devices the module is sharded over (ir.sharding)
    shardings: tuple = field(default=(), repr=False)  # ir.sharding.ArgSharding of each argument, as dicts
    form: str = ""  # what the file was, where it was not StableHLO as written (ir.Module.form)

    def as_json(self) -> dict:
        return {"name": self.name, "source": self.source, "sha256": self.sha256, "mode": self.mode,
                "mode_reason": self.mode_reason,
                "location_coverage": self.coverage, "ops": self.ops, "blocks": self.blocks,
                "histogram": dict(sorted(self.histogram.items())), "provenance": self.provenance,
                "provenance_note": self.provenance_note, "loops": list(self.loops),
                "histogram_executed": None if self.executed is None else dict(sorted(self.executed.items())),
                "devices": self.devices, "shardings": [_listed(a) for a in self.shardings],
                "read_from": self.form or "StableHLO"}


class TimeGap(NamedTuple):
    """diff --bench: the kernel-time gap (B - A, seconds per run) and how it splits: by role (role,
    blocks, seconds), by block (the blocks, largest share first), and outside aligned blocks."""

    gap: float
    roles: tuple
    blocks: tuple  # BlockResult
    rest: float  # not traced to a block, or in an unmatched block
    phases: tuple = ()  # (phase, seconds) of a training step: forward, backward, update
    interval: tuple = ()  # the gap's 95% interval over the profiled runs (low, high); () where not kept
    role_intervals: dict = {}  # role -> its blocks' summed gap's 95% interval (low, high), where kept

    @property
    def within_noise(self) -> bool:
        """The gap's interval holds zero: its sign, and so any share of it, cannot be told."""
        return bool(self.interval) and self.interval[0] <= 0.0 <= self.interval[1]

    def share(self, seconds: float) -> float | None:
        """A part's share of the gap; None where the gap is zero or within the noise."""
        return seconds / self.gap if self.gap and not self.within_noise else None

    def role_interval(self, role: str) -> tuple:
        """A role's gap's 95% interval (low, high), or () where not kept."""
        return tuple(self.role_intervals.get(role) or ())

    def role_share(self, role: str, seconds: float) -> float | None:
        """A role's share of the gap; None where the gap, or the role's own gap, is within the noise."""
        low_high = self.role_interval(role)
        return None if low_high and low_high[0] <= 0.0 <= low_high[1] else self.share(seconds)

    def sure_roles(self) -> tuple:
        """(role, seconds, low, high) of each role whose own gap's 95% interval excludes zero, in the
        roles' order: a finding of its own even where the whole gap is within the noise."""
        out = []
        for role, _, dt in self.roles:
            low_high = self.role_interval(role)
            if low_high and not low_high[0] <= 0.0 <= low_high[1]:
                out.append((role, dt, *low_high))
        return tuple(out)

    def block_share(self, block: BlockResult) -> float | None:
        """A block's share of the gap; None where the gap, or the block's own gap, is within the noise."""
        return None if block_within_noise(block) else self.share(block.metrics["time"]["b"] - block.metrics["time"]["a"])

    def carriers(self, share: float = 0.8) -> tuple:
        """The fewest groups of blocks (one role in one phase: "norm", "backward") whose differences,
        largest first and in the gap's direction, add up to `share` of the gap: (role, phase, blocks,
        seconds, kernels that ran in A, in B). Empty when the gap is zero or within the noise, or no
        such groups reach it."""
        if self.within_noise:
            return ()
        groups: dict = {}
        for d in self.blocks:
            t = d.metrics["time"]
            g = groups.setdefault((d.role, d.phase), [0, 0.0, 0, 0])
            g[0] += 1
            g[1] += t["b"] - t["a"]
            g[2] += t.get("kernels_a", 0)
            g[3] += t.get("kernels_b", 0)
        out, reached = [], 0.0
        for (role, phase), (n, dt, ka, kb) in sorted(groups.items(), key=lambda kv: -kv[1][1] * _sign(self.gap)):
            if not self.gap or reached / self.gap >= share or dt * self.gap <= 0:
                break
            out.append((role, phase, n, dt, ka, kb))
            reached += dt
        return tuple(out) if self.gap and reached / self.gap >= share else ()


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def block_within_noise(block: BlockResult) -> bool:
    """Whether a block's gap B - A has a 95% interval over the profiled runs that holds zero."""
    g = block.metrics.get("time", {}).get("gap_95")
    return bool(g) and g[0] <= 0.0 <= g[1]


def time_gap(result: DiffResult) -> TimeGap | None:
    """The TimeGap of a result with profiled times (diff.with_times), or None."""
    time = result.metrics.get("time")
    if not time:
        return None
    a, b = time["a"], time["b"]
    roles: dict = {}
    phases: dict = {}
    for d in result.blocks:
        n, dt = roles.get(d.role, (0, 0.0))
        delta = d.metrics["time"]["b"] - d.metrics["time"]["a"]
        roles[d.role] = (n + 1, dt + delta)
        if d.phase:
            phases[d.phase] = phases.get(d.phase, 0.0) + delta
    rest = b["unattributed_s"] + b["unaligned_s"] - a["unattributed_s"] - a["unaligned_s"]
    return TimeGap(b["kernels_sum_s"] - a["kernels_sum_s"],
                   tuple((r, n, dt) for r, (n, dt) in sorted(roles.items(), key=lambda kv: -abs(kv[1][1]))),
                   tuple(sorted(result.blocks, key=lambda d: -abs(d.metrics["time"]["b"] - d.metrics["time"]["a"]))),
                   rest, tuple(phases.items()), tuple(time.get("gap_95") or ()), dict(time.get("roles_95") or {}))


@dataclass(frozen=True)
class BlockResult:
    """One aligned pair of blocks: its key (phase, layer, role, ordinal), both sides' ops and facts,
    what differs, IR excerpts, and a slot for per-block metrics."""

    label: str
    phase: str  # "" (a forward pass), forward, backward, update
    layer: tuple
    role: str
    ordinal: int
    name_a: str
    name_b: str
    ops_a: tuple = field(repr=False)  # op ids in A's module, in block order
    ops_b: tuple = field(repr=False)
    facts_a: dict = field(repr=False)  # diff.findings.BlockFacts.as_json()
    facts_b: dict = field(repr=False)
    findings: tuple = ()  # Finding
    excerpt_a: tuple = field(default=(), repr=False)  # the block's ops as IR lines
    excerpt_b: tuple = field(default=(), repr=False)
    metrics: dict = field(default_factory=dict, repr=False)  # per-block figures (timings, memory), when known
    op_diff: OpDiff | None = field(default=None, repr=False)  # which ops match, changed, were rewritten

    @property
    def histogram_a(self) -> Counter:
        return Counter(self.facts_a["histogram"])

    @property
    def histogram_b(self) -> Counter:
        return Counter(self.facts_b["histogram"])

    @property
    def delta(self) -> Counter:
        """B - A per op, as git diff A B counts: + is more in B."""
        return counter_delta(self.histogram_b, self.histogram_a)

    @property
    def differs(self) -> bool:
        """Whether anything differs in this pair: an op count, or one op changed, rewritten or on one
        side only. The op diff compares everything an op computes; the findings describe the pair (a
        helper's name among them, which is spelling) and decide only for a result saved without one."""
        if self.op_diff is None:
            return bool(self.delta) or bool(self.findings)
        return bool(self.delta) or not self.op_diff.identical

    def as_json(self) -> dict:
        return {"label": self.label, "phase": self.phase, "layer": list(self.layer), "role": self.role,
                "ordinal": self.ordinal, "name_a": self.name_a, "name_b": self.name_b,
                "ops_a": sum(self.histogram_a.values()), "ops_b": sum(self.histogram_b.values()),
                "op_ids_a": list(self.ops_a), "op_ids_b": list(self.ops_b),
                "delta": dict(sorted(self.delta.items())), "findings": [f.as_json() for f in self.findings],
                "a": self.facts_a, "b": self.facts_b, "excerpt_a": list(self.excerpt_a),
                "excerpt_b": list(self.excerpt_b), "metrics": self.metrics,
                "op_diff": self.op_diff.as_json() if self.op_diff else None}


@dataclass(frozen=True)
class Unmatched:
    """A block of one side that the alignment left without a partner."""

    label: str
    name: str
    ops: int

    def as_json(self) -> dict:
        return {"label": self.label, "name": self.name, "ops": self.ops}


@dataclass(frozen=True)
class DiffResult:
    """Everything a diff found, and nothing that needs the .mlir files again."""

    a: SideResult
    b: SideResult
    method: str  # key: same phase, layer, role and ordinal; order: k-th block of a role to k-th
    method_reason: str  # why that method (the fallback to order, and the coverages that decided it)
    coverage: float  # share of blocks paired
    blocks: tuple  # BlockResult, in A's program order
    only_a: tuple = ()  # Unmatched
    only_b: tuple = ()
    summary: tuple = ()  # Summary
    metrics: dict = field(default_factory=dict, repr=False)  # whole-module figures (bench, memory), when known
    # Block dataflow of each side: (i, j) when an op of aligned block i feeds one of block j (indices
    # into `blocks`); what the report's graph view draws.
    flow_a: tuple = field(default=(), repr=False)
    flow_b: tuple = field(default=(), repr=False)
    # What differs in the entry functions' interfaces, in words (diff.program.interface_changes): an
    # argument one side alone takes or types otherwise, a result that is another value.
    interface: tuple = ()
    # Whether the two entry functions compute the same thing, whatever their spelling and blocks
    # (diff.program.Program); None in a result saved before format 4.
    same_program: bool | None = None

    @property
    def names(self) -> tuple[str, str]:
        return self.a.name, self.b.name

    @property
    def pairing_note(self) -> str:
        """What the pairing did beyond its method, in words ('' when nothing): blocks numbered by
        their module names (align.by_names), as the alignment's reason says."""
        return next((part for part in self.method_reason.split("; ") if "numbered by their module names" in part), "")

    @property
    def differs(self) -> bool:
        if self.same_program:  # blocks cut otherwise (one side without locations) are no difference
            return bool(self.sharding_changes)
        return bool(self.only_a or self.only_b) or any(b.differs for b in self.blocks) \
            or self.a.histogram != self.b.histogram or bool(self.sharding_changes) or bool(self.interface) \
            or self.same_program is False

    @property
    def sharding_changes(self) -> tuple:
        """The arguments the two sides split differently (ShardingChange)."""
        return sharding_changes(self.a, self.b)

    def __str__(self) -> str:
        return f"DiffResult({self.a.name} vs {self.b.name}: {len(self.blocks)} aligned blocks)"

    def as_json(self) -> dict:
        """The result as data; report.diff_json adds each record's words for readers of the file."""
        return {
            "format": RESULT_FORMAT,
            "a": self.a.as_json(), "b": self.b.as_json(),
            "alignment": {"method": self.method, "reason": self.method_reason, "coverage": round(self.coverage, 4),
                          "pairs": len(self.blocks), "only_a": [u.as_json() for u in self.only_a],
                          "only_b": [u.as_json() for u in self.only_b]},
            "summary": [s.as_json() for s in self.summary],
            "blocks": [b.as_json() for b in self.blocks],
            "differs": self.differs,
            "metrics": self.metrics,
            "flow": {"a": [list(e) for e in self.flow_a], "b": [list(e) for e in self.flow_b]},
            "sharding_changes": [c.as_json() for c in self.sharding_changes],
            "interface": list(self.interface),
            "same_program": self.same_program,
        }

    @classmethod
    def from_json(cls, data: dict, source: str = "diff JSON") -> "DiffResult":
        """A saved result; anything that is not one gets one line naming what is wrong."""

        fix = "write one with: stackwars-ir diff A.mlir B.mlir --json FILE"
        if not isinstance(data, dict) or "blocks" not in data or "alignment" not in data:
            raise StackwarsError(f"{source}: not a stackwars-ir diff JSON file (no 'blocks' and 'alignment')", fix=fix)
        if data.get("format") not in READS_FORMATS:
            raise StackwarsError(f"{source}: diff JSON format {data.get('format')!r}, this stackwars-ir reads "
                                 f"formats {', '.join(map(str, READS_FORMATS))}", fix="re-run stackwars-ir diff with this version")
        try:
            al = data["alignment"]
            return cls(
                _side(data["a"]), _side(data["b"]), al["method"], al.get("reason", ""), al["coverage"],
                tuple(_block(b) for b in data["blocks"]),
                tuple(Unmatched(u["label"], u["name"], u["ops"]) for u in al["only_a"]),
                tuple(Unmatched(u["label"], u["name"], u["ops"]) for u in al["only_b"]),
                tuple(Summary(s["topic"], s["numbers"]) for s in data["summary"]),
                data.get("metrics", {}),
                tuple(tuple(e) for e in data.get("flow", {}).get("a", ())),
                tuple(tuple(e) for e in data.get("flow", {}).get("b", ())),
                tuple(data.get("interface", ())), data.get("same_program"))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise StackwarsError(f"{source}: a diff JSON file with a missing or malformed field "
                                 f"({type(e).__name__}: {e})", fix=fix) from None


def _side(d: dict) -> SideResult:
    return SideResult(d["name"], d["source"], d["mode"], d.get("mode_reason", ""), d["location_coverage"], d["ops"],
                      d["blocks"], dict(d["histogram"]), d.get("provenance"), d.get("provenance_note", ""),
                      d.get("sha256"), tuple(d.get("loops", ())), d.get("histogram_executed"), d.get("devices", 1),
                      tuple({**a, "shape": tuple(a["shape"]), "parts": tuple(a["parts"]), "axes": tuple(a["axes"])}
                            for a in d.get("shardings", ())),
                      "" if d.get("read_from", "StableHLO") == "StableHLO" else d["read_from"])


def _listed(a: dict) -> dict:
    return {**a, "shape": list(a["shape"]), "parts": list(a["parts"]), "axes": list(a["axes"])}


class ShardingChange(NamedTuple):
    """One argument placed differently on the two sides: its split on each (whole where one side has
    no sharding), in the side's own words."""

    name: str
    shape: tuple
    a: str
    b: str

    def as_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "a": self.a, "b": self.b}


def sharding_changes(a: SideResult, b: SideResult) -> tuple:
    """Every argument split differently (parts per dimension) on the two sides, paired by name where
    both sides name their arguments alike (captures' sidecars), else by position."""
    if not a.shardings and not b.shardings:
        return ()

    def split(x: dict) -> str:
        return split_text(x["parts"], x["axes"])

    def whole(x: dict) -> dict:
        return {**x, "parts": (1,) * len(x["shape"]), "axes": ("",) * len(x["shape"])}

    side_a = {x["name"]: x for x in a.shardings}
    side_b = {x["name"]: x for x in b.shardings}
    by_name = bool(side_a) and bool(side_b) and len(set(side_a) & set(side_b)) >= len(side_a) // 2
    if not by_name:
        side_a = {x["index"]: x for x in a.shardings}
        side_b = {x["index"]: x for x in b.shardings}
    out = []
    for key in list(side_a) + [k for k in side_b if k not in side_a]:
        x, y = side_a.get(key), side_b.get(key)
        if x is None or y is None:  # one side unsharded (no attribute): its arguments are whole
            x, y = x or whole(y), y or whole(x)
        if tuple(x["parts"]) != tuple(y["parts"]):
            name = x["name"] if x["name"] == y["name"] else f'{x["name"]} / {y["name"]}'
            out.append(ShardingChange(name, tuple(x["shape"]), split(x), split(y)))
    return tuple(out)


def _block(d: dict) -> BlockResult:
    return BlockResult(d["label"], d["phase"], tuple(d["layer"]), d["role"], d["ordinal"], d["name_a"], d["name_b"],
                       tuple(d["op_ids_a"]), tuple(d["op_ids_b"]), d["a"], d["b"],
                       tuple(Finding.from_json(f) for f in d["findings"]), tuple(d["excerpt_a"]),
                       tuple(d["excerpt_b"]), d.get("metrics", {}),
                       OpDiff.from_json(d["op_diff"]) if d.get("op_diff") else None)


def first_of_each_role(roles: Iterable[str]) -> list[int]:
    """Indices of the first block of each role (`other` aside): the blocks whose IR the report and
    the Markdown show side by side, and the only ones a report written at once needs excerpts of."""
    seen, out = set(), []
    for i, role in enumerate(roles):
        if role != "other" and role not in seen:
            seen.add(role)
            out.append(i)
    return out


def counter_delta(a: Counter, b: Counter) -> Counter:
    """a - b, keeping negative counts and dropping zeros (Counter's own `-` drops negatives)."""
    d = Counter(a)
    d.subtract(b)
    return Counter({k: v for k, v in d.items() if v})
