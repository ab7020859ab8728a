"""A timed executable's row (StableHLO or native): its timings, XLA's analyses, its arguments' source.

The row says where its argument values came from (recorded, rebuilt or synthetic); roofline places
it against the device's measured peaks, and machine names the machine that ran it. The compiling and
timing themselves are bench.timed's.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

from ..common.files import host
from ..isolate.stacks import Stack
from .host import HostPhases
from .proof import Proof
from .timing import Timing
from .xla_profile import Profile

BENCH_FORMAT = 1
# How a row's resident memory is measured (bench.planning.ResidentWindow), said in its JSON.
RESIDENT_METHOD = ("growth of the process's peak resident set over the row (compile, the row's own weights and "
                   "state placed, every run), against the resident set before it; the allocator as a user's "
                   "process has it")


@dataclass(frozen=True)
class Executable:
    """One measured StableHLO module (or native baseline): timings and XLA's own analyses."""

    label: str
    kind: str  # "stablehlo" | "jax.jit" | "torch eager" | "torch.compile" | "torch_xla lazy"
    compile_s: float | None
    timing: Timing | None
    flops: float | None = None
    bytes_accessed: float | None = None
    memory: dict = field(default_factory=dict)
    hlo: dict = field(default_factory=dict)  # fusions, optimized op histogram
    arguments: str = ""  # where the argument values came from
    error: str | None = None
    proof: Proof | None = None  # the first run's output against the reference output
    sha256: str | None = None  # of a StableHLO file: which file this row timed (report --bench checks it)
    resident_bytes: int | None = None  # the row's growth of peak resident memory (bench.planning.ResidentWindow)
    profile: Profile | None = None  # bench --profile: each kernel's time in the profiled runs
    host: HostPhases | None = None  # bench --host: a native runtime's steady step by host phase

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def name(self) -> str:
        """Short name: a StableHLO file's stem (`jax`, `torch-torch_xla`), a baseline's label."""
        return Path(self.label).stem if self.kind == "stablehlo" else self.label

    def as_json(self, peaks: dict | None = None) -> dict:
        out = {"label": self.label, "name": self.name, "kind": self.kind, "compile_s": self.compile_s,
               "timing": self.timing.as_json() if self.timing else None, "flops": self.flops,
               "bytes_accessed": self.bytes_accessed, "memory": self.memory, "optimized_hlo": self.hlo,
               "arguments": self.arguments, "error": self.error,
               "proof": self.proof.as_json() if self.proof else None, "sha256": self.sha256,
               "resident": None if self.resident_bytes is None else
               {"peak_growth_bytes": self.resident_bytes, "method": RESIDENT_METHOD},
               **({"profile": self.profile.as_json()} if self.profile else {}),
               **({"host": self.host.as_json()} if self.host else {})}
        if self.timing and self.flops:
            out["achieved_flops_per_s"] = self.flops / self.timing.steady
            if peaks:
                out["roofline"] = roofline(self.flops, self.bytes_accessed, self.timing.steady, peaks)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Executable":
        """The row as as_json wrote it (what it derives from the peaks, the name, is derived again)."""
        return cls(d["label"], d["kind"], d.get("compile_s"), Timing.from_json(d["timing"]) if d.get("timing") else None,
                   d.get("flops"), d.get("bytes_accessed"), d.get("memory") or {}, d.get("optimized_hlo") or {},
                   d.get("arguments", ""), d.get("error"), Proof.from_json(d["proof"]) if d.get("proof") else None,
                   d.get("sha256"), (d.get("resident") or {}).get("peak_growth_bytes"),
                   Profile.from_json(d["profile"]) if d.get("profile") else None,
                   HostPhases.from_json(d["host"]) if d.get("host") else None)


def roofline(flops: float, nbytes: float | None, seconds: float, peaks: dict) -> dict:
    """Where a run sits: its intensity, the bound the measured peaks allow, and the share reached."""
    intensity = flops / nbytes if nbytes else None
    bound = peaks["flops_per_s"] if intensity is None else min(peaks["flops_per_s"], intensity * peaks["bytes_per_s"])
    return {"intensity_flops_per_byte": intensity, "bound_flops_per_s": bound,
            "bound_by": "compute" if bound == peaks["flops_per_s"] else "memory",
            "fraction_of_bound": (flops / seconds) / bound if bound else None}


def machine(stack: Stack | None = None) -> dict:
    """This machine and its XLA's setting, and the version stack that compiled and ran (None: this
    environment's)."""

    info = host()
    info["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    info["threads"] = os.cpu_count()
    info["x64"] = "per argument: int64/float64 arguments are placed as 64-bit buffers, nothing else changes"
    try:
        import jax

        info["jax_devices"] = [str(d) for d in jax.devices()]
    except Exception:  # machine() must never fail a bench
        pass
    info["platform"] = platform.platform()
    if stack is not None and not stack.is_lock:  # compiled and run by another stack's XLA
        info["stack"] = stack.as_json()
    return info


