"""An ablation's typed result: B's variants, each checked against B and timed against A and B.

Each variant's output check is against B's outputs; its time is measured once per round, with its
95% interval across the rounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..common.errors import StackwarsError

ABLATION_FORMAT = 1
DEFAULT_ATOL, DEFAULT_RTOL = 1e-4, 1e-3  # capture's parity bound (capture/parity.py) where B's sidecar names none


@dataclass(frozen=True)
class Check:
    """A variant's outputs against B's on the same arguments: the largest elementwise |V - B| and
    the bound it must stay within (atol + rtol * |B|, the capture's parity tolerance), or why it
    could not be compared (`error`)."""

    max_abs: float | None
    atol: float
    rtol: float
    ok: bool
    outputs: int = 0
    arguments: str = ""  # where the argument values came from
    error: str | None = None

    def as_json(self) -> dict:
        return {"max_abs_error": self.max_abs, "atol": self.atol, "rtol": self.rtol, "ok": self.ok,
                "outputs": self.outputs, "arguments": self.arguments, "error": self.error}

    @classmethod
    def from_json(cls, d: dict) -> "Check":
        return cls(d["max_abs_error"], d["atol"], d["rtol"], d["ok"], d.get("outputs", 0), d.get("arguments", ""),
                   d.get("error"))


@dataclass(frozen=True)
class Interval:
    """A figure measured once per round, and its 95% interval across the rounds (seconds, a ratio
    or a share, as its field says)."""

    value: float
    low: float
    high: float
    rounds: int

    def as_json(self) -> dict:
        """Bounds that are infinite (one round: no interval) as null: strict JSON has no Infinity."""
        import math

        return {"value": self.value, "low": self.low if math.isfinite(self.low) else None,
                "high": self.high if math.isfinite(self.high) else None, "rounds": self.rounds}

    @classmethod
    def from_json(cls, d: dict | None) -> "Interval | None":
        import math

        if d is None:
            return None
        return cls(d["value"], -math.inf if d["low"] is None else d["low"], math.inf if d["high"] is None else d["high"],
                   d["rounds"])

    def holds(self, x: float) -> bool:
        return self.low <= x <= self.high

    @property
    def bounded(self) -> bool:
        """Whether there is an interval: two or more rounds."""
        import math

        return self.rounds >= 2 and math.isfinite(self.high)

    def verdict(self) -> str:
        """Of a ratio (a variant's time over B's): "indistinguishable" where the interval holds 1, else
        "faster" or "slower"."""
        return "indistinguishable" if self.holds(1.0) else ("faster" if self.high < 1 else "slower")


@dataclass(frozen=True)
class Variant:
    """B with some of its differences rewritten into A's form.

    rewrites: the rewrites applied (ablate.rewrites names), or for a transplant (ablate.transplant)
    "block KIND"; sites: ops rewritten per rewrite (blocks transplanted);
    added/removed: op names -> count, whole module; findings: the diff findings its rewrites aim at
    (ablate.rewrites.finding_key) -> (count in A against B, count in A against this variant);
    findings_new: findings of other keys that A against the variant has and A against B had not, or
    the reverse ("(gone) ..."): a rewrite must leave them as they were; steady: seconds per round (median steady
    run); change: steady / B's steady, per round, as an interval; share: the part of B - A this
    variant closes, (B - V) / (B - A), None where the gap's interval holds zero (withheld)."""

    name: str
    path: str
    rewrites: tuple
    sites: dict
    added: dict
    removed: dict
    check: Check | None
    findings: dict = field(default_factory=dict)
    findings_new: tuple = ()
    steady: tuple = ()
    change: Interval | None = None
    share: Interval | None = None
    error: str | None = None  # a rewrite that could not apply: which op stopped it
    estimate_s: float | None = None  # --target: the TPU compiler's estimate of one run, seconds (not measured)
    blocks_skipped: tuple = ()  # a transplant: "label: why" for each differing block it left as it was
    block_times: tuple = ()  # --profile: (block label, B's kernel seconds, the variant's) of each block it changed
    kernel_s: tuple = ()  # --profile: B's and the variant's summed kernel time per run, seconds

    @property
    def timed(self) -> bool:
        return bool(self.steady)

    def as_json(self) -> dict:
        return {"name": self.name, "path": self.path, "rewrites": list(self.rewrites), "sites": self.sites,
                "added": self.added, "removed": self.removed,
                "check": self.check.as_json() if self.check else None,
                "findings": {k: list(c) for k, c in self.findings.items()}, "findings_new": list(self.findings_new),
                "steady_s": list(self.steady), "change": self.change.as_json() if self.change else None,
                "share_of_gap": self.share.as_json() if self.share else None, "error": self.error,
                **({"estimate_s": self.estimate_s} if self.estimate_s is not None else {}),
                **({"blocks_skipped": list(self.blocks_skipped)} if self.blocks_skipped else {}),
                **({"kernel_time_by_block": [list(x) for x in self.block_times], "kernel_s": list(self.kernel_s)}
                   if self.kernel_s else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Variant":
        return cls(d["name"], d["path"], tuple(d["rewrites"]), d["sites"], d["added"], d["removed"],
                   Check.from_json(d["check"]) if d.get("check") else None,
                   {k: tuple(c) for k, c in d.get("findings", {}).items()},
                   tuple(d.get("findings_new", ())), tuple(d.get("steady_s", ())),
                   Interval.from_json(d.get("change")), Interval.from_json(d.get("share_of_gap")), d.get("error"),
                   d.get("estimate_s"), tuple(d.get("blocks_skipped", ())),
                   tuple(tuple(x) for x in d.get("kernel_time_by_block", ())), tuple(d.get("kernel_s", ())))


@dataclass(frozen=True)
class Ablation:
    """`ablate A B`: B's variants and the times of A, B and each variant, in `rounds` rounds of fresh
    workers (their steady runs interleaved within a round). steady_a/steady_b: seconds per round;
    gap: B / A steady, as an interval; skipped: rewrite -> why it made no variant."""

    a: str
    b: str
    variants: tuple
    rounds: int
    steady_a: tuple = ()
    steady_b: tuple = ()
    gap: Interval | None = None
    skipped: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    platform: str = "cpu"
    sha256: tuple = ()  # of A and B: which files this ablation rewrote and timed (report --ablation checks it)
    target: str | None = None  # --target: the TPU generation the estimates are for
    estimate_a: float | None = None  # seconds, the compiler's estimate of one run of A (and of B)
    estimate_b: float | None = None
    estimate_errors: dict = field(default_factory=dict)  # file -> why the compiler gave no estimate

    def as_json(self) -> dict:
        return {"format": ABLATION_FORMAT, "a": self.a, "b": self.b, "platform": self.platform,
                "rounds": self.rounds, "steady_a_s": list(self.steady_a), "steady_b_s": list(self.steady_b),
                "gap_b_over_a": self.gap.as_json() if self.gap else None, "skipped": self.skipped,
                "variants": [v.as_json() for v in self.variants], "machine": self.machine,
                "sha256": list(self.sha256),
                **({"target": self.target, "estimate_a_s": self.estimate_a, "estimate_b_s": self.estimate_b,
                    "estimate_errors": self.estimate_errors} if self.target else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Ablation":
        if d.get("format") != ABLATION_FORMAT:
            raise StackwarsError(f"an ablation JSON of format {d.get('format')!r}, not {ABLATION_FORMAT}",
                                 fix="re-run stackwars-ir ablate")
        return cls(d["a"], d["b"], tuple(Variant.from_json(v) for v in d["variants"]), d["rounds"],
                   tuple(d.get("steady_a_s", ())), tuple(d.get("steady_b_s", ())),
                   Interval.from_json(d.get("gap_b_over_a")), dict(d.get("skipped", {})), d.get("machine", {}),
                   d.get("platform", "cpu"), tuple(d.get("sha256", ())), d.get("target"), d.get("estimate_a_s"),
                   d.get("estimate_b_s"), dict(d.get("estimate_errors", {})))
