"""Memory plans as values: XLA's buffer plans of each executable against budgets, and a run's peak.

The plans are XLA's buffer assignment, made by bench/planning.py (compiled for the target, a run
measured); here their types, the budgets, the tables' rows, and the searches for the largest batch
that fits a budget (--max-batch) and the smallest slice that does (--chips).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.targets import TABLE, TPUS
from ..common.textfmt import human_bytes

# Nominal memory of the devices users ask about, in GiB (2^30 bytes) as their vendors count it; a
# runtime reserves some of it (CUDA context, TPU runtime), so a plan within a few percent of a
# budget is "tight", not safe.
DEVICES = {
    "t4": 16, "v100-16gb": 16, "v100-32gb": 32, "a100-40gb": 40, "a100-80gb": 80, "l4": 24,
    "h100-80gb": 80, "h200": 141,
    **{t.one_chip: t.chip_gib for t in sorted(TPUS, key=lambda t: t.one_chip)},  # v4-1, v5e-1, v5p-1, v6e-1
}
TIGHT = 0.05  # headroom below this share of the budget: "tight"

# Compile targets (targets.TABLE): each TPU generation's slices, smallest first, and libtpu's name of
# the smallest.
SLICES = {t.name: t.slices for t in TPUS}
TOPOLOGIES = {t.name: t.topology for t in TPUS}
TARGETS = tuple(TABLE)
LIBTPU = "libtpu==0.0.50.1"  # requirements-tpu.lock's pin (tests/test_memory.py checks they agree)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


@dataclass(frozen=True)
class Budget:
    """A memory budget: a named device's nominal memory, or a size given in bytes."""

    name: str
    bytes: int

    @classmethod
    def parse(cls, text: str) -> "Budget":
        t = text.strip().lower().replace(" ", "")
        if t in DEVICES:
            return cls(t, DEVICES[t] << 30)
        num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = t[len(num):]
        try:
            value = float(num) * _UNITS[unit]
        except (ValueError, KeyError):
            raise StackwarsError(f"--budget {text!r} is neither a size nor a device I know",
                                 fix=f"a size like 16G or 512MiB, or a device: {', '.join(DEVICES)}") from None
        if not value > 0:
            raise StackwarsError(f"--budget {text!r} must be more than 0 bytes", fix="e.g. --budget 16G")
        return cls(text.strip(), int(value))


def budgets(text: str | None) -> tuple[Budget, ...]:
    """`v6e-1,t4,24G` -> the budgets, in the order given."""
    return tuple(Budget.parse(b) for b in (text or "").split(",") if b.strip())


@dataclass(frozen=True)
class Measured:
    """What one run of the executable took beyond what was resident before it (this process's peak
    resident set, reset before the run), against the plan's share for a run: temporaries + outputs."""

    run_bytes: int
    method: str


@dataclass(frozen=True)
class MemoryPlan:
    """XLA's memory analysis of one executable compiled for one target (nothing run)."""

    label: str
    target: str
    argument_bytes: int = 0
    output_bytes: int = 0
    alias_bytes: int = 0  # outputs that reuse an argument's buffer (donation)
    temp_bytes: int = 0
    code_bytes: int = 0
    compile_s: float | None = None
    measured: Measured | None = None
    error: str | None = None
    sha256: str | None = None
    batch: int | None = None
    # The TPU compiler refuses a program whose buffers exceed the chip's memory: no plan, but its
    # own figures, "required" (what its buffers need) and "available" (the chip's usable memory).
    refused: dict | None = None
    devices: int = 1  # the devices the module is sharded over: the plan is per device (chip)
    # Host memory the program offloads to (libtpu's host_* fields: `memory_kind = "pinned_host"`,
    # annotate_device_placement): counted apart, never in the device peak or the budgets.
    host_argument_bytes: int = 0
    host_output_bytes: int = 0
    host_alias_bytes: int = 0
    host_temp_bytes: int = 0

    @property
    def host_bytes(self) -> int:
        """Host memory the plan holds at its worst point: arguments + outputs - aliased + temporaries there."""
        return self.host_argument_bytes + self.host_output_bytes - self.host_alias_bytes + self.host_temp_bytes

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def name(self) -> str:
        return Path(self.label).stem

    @property
    def peak_bytes(self) -> int:
        """Live at once at the worst point, as XLA's buffer assignment plans it: every argument,
        every output not aliased to an argument, and the temporaries; code counted apart. For a
        program the compiler refused, what it said the program requires."""
        if self.refused:
            return self.refused["required_bytes"]
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes

    def fits(self, budget: Budget) -> tuple[bool, int]:
        """Whether the plan (code included: it sits in device memory too) fits, and the headroom."""
        headroom = budget.bytes - self.peak_bytes - self.code_bytes
        return headroom >= 0, headroom

    def as_json(self, budgets_: Iterable[Budget] = ()) -> dict:
        out = {"label": self.label, "name": self.name, "target": self.target, "batch": self.batch,
               "argument_bytes": self.argument_bytes, "output_bytes": self.output_bytes,
               "alias_bytes": self.alias_bytes, "temp_bytes": self.temp_bytes, "code_bytes": self.code_bytes,
               "peak_bytes": self.peak_bytes if self.ok else None, "compile_s": self.compile_s,
               "error": self.error, "sha256": self.sha256, "refused_by_compiler": self.refused,
               "devices": self.devices,
               "host": {"argument_bytes": self.host_argument_bytes, "output_bytes": self.host_output_bytes,
                        "alias_bytes": self.host_alias_bytes, "temp_bytes": self.host_temp_bytes,
                        "peak_bytes": self.host_bytes}}
        if self.measured is not None:
            planned = self.temp_bytes + self.output_bytes - self.alias_bytes
            out["measured"] = {"run_bytes": self.measured.run_bytes, "planned_run_bytes": planned,
                               "ratio": self.measured.run_bytes / planned if planned else None,
                               "method": self.measured.method}
        if self.ok:
            out["budgets"] = {b.name: {"bytes": b.bytes, "fits": self.fits(b)[0], "headroom_bytes": self.fits(b)[1]}
                              for b in budgets_}
        return out

    @classmethod
    def from_json(cls, d: dict) -> "MemoryPlan":
        m, host = d.get("measured"), d.get("host") or {}
        return cls(d["label"], d["target"], d["argument_bytes"], d["output_bytes"], d["alias_bytes"], d["temp_bytes"],
                   d["code_bytes"], d.get("compile_s"), Measured(m["run_bytes"], m["method"]) if m else None,
                   d.get("error"), d.get("sha256"), d.get("batch"), d.get("refused_by_compiler"), d.get("devices", 1),
                   host.get("argument_bytes", 0), host.get("output_bytes", 0), host.get("alias_bytes", 0),
                   host.get("temp_bytes", 0))


@dataclass(frozen=True)
class MemoryReport:
    """Plans of every executable for one target, against the budgets; rendered as text, JSON, Markdown."""

    target: str
    plans: tuple[MemoryPlan, ...]
    budgets: tuple[Budget, ...] = ()
    machine: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    max_batch: tuple = ()  # MaxBatch per executable and budget, with --max-batch
    slices: tuple = ()  # SmallestSlice per executable and budget, with --chips

    @property
    def failed(self) -> list:
        return [p for p in self.plans if not p.ok]

    @property
    def whose_plan(self) -> str:
        return whose_plan(self.target)

    def as_json(self) -> dict:
        return {"format": 1, "target": self.target, "plan_of": self.whose_plan,
                "budgets": [{"name": b.name, "bytes": b.bytes} for b in self.budgets],
                "executables": [p.as_json(self.budgets) for p in self.plans],
                **({"max_batch": [m.as_json() for m in self.max_batch]} if self.max_batch else {}),
                **({"smallest_slice": [m.as_json() for m in self.slices]} if self.slices else {}),
                "machine": self.machine, "versions": self.versions}

    @classmethod
    def from_json(cls, d: dict) -> "MemoryReport":
        if d.get("format", 1) != 1:
            raise ValueError(f"format {d.get('format')!r}, this version reads 1")
        budgets_ = tuple(Budget(b["name"], b["bytes"]) for b in d.get("budgets", ()))
        return cls(d["target"], tuple(MemoryPlan.from_json(p) for p in d["executables"]), budgets_,
                   d.get("machine") or {}, d.get("versions") or {},
                   tuple(MaxBatch.from_json(m) for m in d.get("max_batch", ())),
                   tuple(SmallestSlice.from_json(m) for m in d.get("smallest_slice", ())))


def whose_plan(target: str) -> str:
    if target == "cpu":
        return ("XLA's CPU backend: a CPU plan is not a device plan (the CPU backend computes bfloat16 "
                "in float32 and plans its temporaries so)")
    if target == "gpu":
        return "XLA's GPU backend, on this machine's GPU"
    return (f"the TPU {target[4:]} compiler (libtpu, compile-only: no TPU needed), per chip")


def table_rows(report: MemoryReport) -> tuple[list[str], list[list]]:
    """The memory table's headers and rows, shared by the text and Markdown renderings."""

    sharded = any(p.devices > 1 for p in report.plans)
    headers = ["executable", "batch"] + (["devices"] if sharded else []) + \
        ["arguments", "outputs", "aliased", "temporaries", "code", "peak"]
    measured = any(p.measured for p in report.plans)
    host = any(p.ok and p.host_bytes for p in report.plans)
    if host:
        headers.append("host (offloaded)")
    if measured:
        headers.append("run: measured / planned")
    headers += [f"{b.name} ({human_bytes(b.bytes)})" for b in report.budgets]
    rows = []
    for p in report.plans:
        head = [p.label, p.batch] + ([p.devices] if sharded else [])
        if not p.ok:
            rows.append(head + ["-"] * (len(headers) - len(head) - 1) + ["FAILED"])
            continue
        if p.refused:
            row = head + ["-"] * 5 + [f"{human_bytes(p.peak_bytes)} (refused: more than the "
                                      f"{human_bytes(p.refused['available_bytes'])} it has)"]
        else:
            row = head + [human_bytes(n) for n in (p.argument_bytes, p.output_bytes, p.alias_bytes,
                                                                  p.temp_bytes, p.code_bytes, p.peak_bytes)]
        if host:
            row.append(human_bytes(p.host_bytes) if p.host_bytes else "-")
        if measured:
            if p.measured:
                planned = p.temp_bytes + p.output_bytes - p.alias_bytes
                ratio = f" ({p.measured.run_bytes / planned:.2f}x)" if planned else ""
                row.append(f"{human_bytes(p.measured.run_bytes)} / {human_bytes(planned)}{ratio}")
            else:
                row.append("-")
        for b in report.budgets:
            ok, headroom = p.fits(b)
            if not ok:
                row.append(f"OOM, needs {human_bytes(-headroom)} more")
            else:
                row.append(f"fits{', tight' if headroom < TIGHT * b.bytes else ''}, {human_bytes(headroom)} free")
        rows.append(row)
    return headers, rows


def max_batch_rows(report: MemoryReport) -> tuple[list[str], list[list]]:
    """The --max-batch table: per executable and budget, the largest batch that fits and the plans
    on either side of the boundary."""

    headers = ["executable", "budget", "largest batch that fits", "needs at it", "needs at the next", "compiles"]
    rows = []
    for m in report.max_batch:
        budget = f"{m.budget.name} ({human_bytes(m.budget.bytes)})"
        if m.error:
            rows.append([m.name, budget, "FAILED", "-", "-", len(m.probes)])
            continue
        largest = f"{m.largest} or more (the search's limit)" if m.at_limit else \
            ("none: batch 1 does not fit" if m.largest == 0 else str(m.largest))
        at = m.need(m.largest) if m.largest else None
        nxt = m.need(m.largest + 1) if not m.at_limit else None
        rows.append([m.name, budget, largest, human_bytes(at) if at is not None else "-",
                     human_bytes(nxt) if nxt is not None else "-", len(m.probes)])
    return headers, rows


MAX_BATCH_NOTE = ("largest batch: compiled at the batches a search asked for (a line through the plans nearest the "
                  "boundary, then bisection), never run; 'needs': peak + code, as the budget columns count it. "
                  "Abstract captures (the IR a capture with weights gives, no weight materialized).")

NOTES = ("peak: arguments + outputs - aliased + temporaries, as XLA's buffer assignment plans them (code apart; "
         "a budget must hold both); 'refused': the TPU compiler would not build it, and the peak is what it said the "
         "program requires. Budgets are nominal device memory; the runtime reserves part of it. host (offloaded), "
         "where a program places buffers in host memory (memory_kind pinned_host): arguments + outputs - aliased + "
         "temporaries there, in neither the device peak nor the budgets.")
MEASURED_NOTE = ("run: what one execution added to this process's peak resident set (arguments placed "
                 "before), against the plan's temporaries + outputs - aliased; the resident set grows by whole "
                 "pages and allocator chunks, so against a plan of a few KiB the ratio is mostly that granularity")


# --max-batch: the largest batch whose plan fits a budget, found by compiling, never running.
MAX_BATCH_LIMIT = 1024  # the search stops here ("1024 or more"): inputs are generated at each probed batch
LINEAR_GUESSES = 5  # compiles guided by a line through the plans, then doubling and bisection
MAX_PROBES = LINEAR_GUESSES + 2 * MAX_BATCH_LIMIT.bit_length()  # per executable and budget: a bound, never reached


@dataclass(frozen=True)
class MaxBatch:
    """The largest batch whose plan fits one budget, for one executable, and the compiles that show it."""

    name: str  # the executable (jax, torch-torchax, jax-train, ...)
    budget: Budget
    largest: int | None  # 0: not even batch 1 fits; None: the search failed (see error)
    probes: tuple  # (batch, bytes needed: peak + code), in the order compiled
    limit: int = MAX_BATCH_LIMIT
    error: str | None = None

    @property
    def at_limit(self) -> bool:
        return self.largest is not None and self.largest >= self.limit

    def need(self, batch: int) -> int | None:
        return dict(self.probes).get(batch)

    def as_json(self) -> dict:
        return {"name": self.name, "budget": self.budget.name, "budget_bytes": self.budget.bytes,
                "largest_batch": self.largest, "at_limit": self.at_limit, "limit": self.limit,
                "need_bytes_at_largest": self.need(self.largest) if self.largest else None,
                "need_bytes_at_next": None if self.largest is None or self.at_limit else self.need(self.largest + 1),
                "probes": [{"batch": b, "need_bytes": n} for b, n in sorted(self.probes)], "error": self.error}

    @classmethod
    def from_json(cls, d: dict) -> "MaxBatch":
        return cls(d["name"], Budget(d["budget"], d["budget_bytes"]), d["largest_batch"],
                   tuple((p["batch"], p["need_bytes"]) for p in d["probes"]), d["limit"], d.get("error"))


def next_batch(points: dict, budget: int, limit: int) -> int | None:
    """The next batch to compile in the search for the largest batch whose need fits `budget`, from the
    needs known so far (batch -> bytes), or None when the answer is known. Memory grows about linearly
    with the batch, so the first guesses follow the line through the two known points nearest the
    boundary, the bracket once there is one (a linear plan is found in 3 or 4 compiles); from the fifth compile on, plain doubling and
    bisection (XLA's plans step where its algorithms change: at most 2 log2(limit) more compiles)."""
    fit = [b for b, n in points.items() if n <= budget]
    lo = max(fit, default=0)
    hi = min((b for b, n in points.items() if n > budget and b > lo), default=None)
    if hi == lo + 1 or lo >= limit:
        return None
    if not points:
        return 1
    top = hi if hi is not None else limit + 1
    if len(points) >= LINEAR_GUESSES:
        return (lo + top) // 2 if hi is not None else min(2 * lo, limit)
    other = hi if hi is not None else max((b for b in points if b < lo), default=None)
    if lo == 0 or other is None:
        guess = 2 * lo
    else:  # the line through the bracket (lo, hi), or through lo and the point below it
        slope = (points[other] - points[lo]) / (other - lo)
        guess = lo + int((budget - points[lo]) // slope) if slope > 0 else 2 * lo
    return max(lo + 1, min(guess, top - 1, limit))


def search_max_batch(probe: Callable[[int], Mapping[str, MemoryPlan]], names: Iterable[str], budgets_: Sequence[Budget],
                     limit: int = MAX_BATCH_LIMIT) -> tuple[MaxBatch, ...]:
    """For each executable name and budget, the largest batch that fits. `probe(batch)` compiles every
    executable at that batch and returns name -> MemoryPlan (it caches: one compile per batch)."""
    out = []
    for name in names:
        for budget in budgets_:
            points, order, error = {}, [], None
            for _ in range(MAX_PROBES + 1):
                b = next_batch(points, budget.bytes, limit)
                if b is None:
                    break
                plan = probe(b).get(name)
                if plan is None or not plan.ok:
                    error = plan.error if plan is not None else f"{name} was not captured at batch {b}"
                    break
                points[b] = plan.peak_bytes + plan.code_bytes
                order.append((b, points[b]))
            else:
                error = f"no answer after {MAX_PROBES} compiles (the plan is not monotonic in the batch)"
            largest = None if error else max((b for b, n in points.items() if n <= budget.bytes), default=0)
            out.append(MaxBatch(name, budget, largest, tuple(order), limit, error))
    return tuple(out)


# --chips: the smallest slice of a TPU generation on which an executable's per-chip plan fits.
def slice_chips(target: str) -> tuple[int, ...]:
    """The chip counts --chips tries on `target`: one chip, then each slice this tool describes."""
    from math import prod

    return (1,) + tuple(prod(int(x) for x in shape.split("x")) for shape in SLICES[target])


@dataclass(frozen=True)
class SmallestSlice:
    """The fewest chips on which one executable's per-chip plan fits one budget, and the plans that show it."""

    name: str  # the executable without its mesh (jax-train, torch-torchax-train)
    budget: Budget
    chips: int | None  # None: not even the largest slice tried
    probes: tuple  # (chips, the mesh, bytes needed per chip: peak + code), in the order compiled
    error: str | None = None

    def as_json(self) -> dict:
        return {"name": self.name, "budget": self.budget.name, "budget_bytes": self.budget.bytes,
                "chips": self.chips, "probes": [{"chips": c, "mesh": m, "need_bytes": n} for c, m, n in self.probes],
                "error": self.error}

    @classmethod
    def from_json(cls, d: dict) -> "SmallestSlice":
        return cls(d["name"], Budget(d["budget"], d["budget_bytes"]), d["chips"],
                   tuple((p["chips"], p["mesh"], p["need_bytes"]) for p in d["probes"]), d.get("error"))


def slice_rows(report: MemoryReport) -> tuple[list[str], list[list]]:
    """The --chips table: per executable and budget, the smallest slice that fits and the need per chip there."""

    headers = ["executable", "budget per chip", "smallest slice that fits", "needs per chip there",
               "on the slice before"]
    rows = []
    for m in report.slices:
        budget = f"{m.budget.name} ({human_bytes(m.budget.bytes)})"
        if m.error:
            rows.append([m.name, budget, f"FAILED: {m.error}", "-", "-"])
            continue
        needs = {c: (mesh, n) for c, mesh, n in m.probes}
        before = [c for c in needs if m.chips is None or c < m.chips]
        prev = f"{human_bytes(needs[max(before)][1])} on {max(before)} ({needs[max(before)][0]})" if before else "-"
        if m.chips is None:
            rows.append([m.name, budget, f"none up to {max(needs)} chips", "-", prev])
        else:
            rows.append([m.name, budget, f"{m.chips} chip{'s' if m.chips > 1 else ''} ({needs[m.chips][0]})",
                         human_bytes(needs[m.chips][1]), prev])
    return headers, rows


SLICE_NOTE = ("smallest slice: the training or forward step captured on a mesh of each slice size in turn (the fsdp "
              "axis taking the chips the other axes leave) and compiled for it, never run; 'needs': the per-chip "
              "peak + code, as the budget columns count it. Abstract captures.")
