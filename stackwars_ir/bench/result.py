"""A bench's typed result (as_json, from_json): executables per batch size, the peaks, the machine."""
from __future__ import annotations

from dataclasses import dataclass, field

from .compare import verdicts
from .executable import BENCH_FORMAT, Executable
from .timing import Asked


@dataclass(frozen=True)
class BenchReport:
    """Executables per batch size, the measured peaks and the machine; rendered as text and JSON."""

    backend: str
    rows: tuple  # (batch or None, Executable)
    peaks: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    crossover: str | None = None
    asked: Asked | None = None  # the sampling the user asked for (--warmup, --runs, --profile, --host); None: unknown

    @property
    def failed(self) -> list:
        return [e for _, e in self.rows if not e.ok]

    @property
    def verdicts(self) -> list:
        return verdicts(self.rows)

    def as_json(self) -> dict:
        return {"format": BENCH_FORMAT, "backend": self.backend, "machine": self.machine, "peaks": self.peaks,
                "results": [dict(e.as_json(self.peaks), batch=b) for b, e in self.rows],
                "verdicts": [v.as_json() for v in self.verdicts], "crossover": self.crossover,
                **({"asked": self.asked.as_json()} if self.asked is not None else {})}  # a report made before: as it was

    @classmethod
    def from_json(cls, d: dict) -> "BenchReport":
        """A `bench --json` file's report; the verdicts are computed again from the rows' samples (the
        same bootstrap, seeded: the same verdicts)."""
        if d.get("format", BENCH_FORMAT) != BENCH_FORMAT:
            raise ValueError(f"format {d.get('format')!r}, this version reads {BENCH_FORMAT}")
        return cls(d["backend"], tuple((r.get("batch"), Executable.from_json(r)) for r in d["results"]),
                   d.get("peaks") or {}, d.get("machine") or {}, d.get("crossover"),
                   Asked.from_json(d["asked"]) if d.get("asked") else None)
