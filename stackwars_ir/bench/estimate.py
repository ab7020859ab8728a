"""Estimate: each kernel's time on a TPU that is not here, from the TPU compiler's own cost model.

The compiler is libtpu's, compiling only; every figure is marked as an estimate.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.runtime import partitions
from ..common.targets import ESTIMATED, Chip
from ..ir import compile_input, load
from ..isolate.task import started
from .executable import Executable
from .kernels import kernels_of
from .planning import Compiler, check_target
from .xla_profile import KernelTime, Profile

# Async moves the TPU compiler schedules beside the compute (HBM <-> VMEM): their transfer overlaps
# the kernels between start and done, so their bound is reported apart, not added to the total.
_ASYNC_STARTS = ("copy-start", "slice-start")
_ASYNC_DONES = ("copy-done", "slice-done")
_FREE_CALLS = ("ConcatBitcast",)  # custom calls that move no data (a bitcast of a concatenation)
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "s4": 0.5, "u4": 0.5}
_SHAPE = re.compile(r"\b([a-z]+\d*[a-z0-9]*)\[([\d,]*)\]")
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')


CHIPS = {t.name: t.chip for t in ESTIMATED}  # the generations `bench --target` estimates for


def check_chip(target: str) -> Chip:
    if target not in CHIPS:
        raise StackwarsError(f"--target {target}: no estimates for it", fix=f"choose one of: {', '.join(CHIPS)}")
    check_target(target)  # libtpu installed
    return CHIPS[target]


def estimate_file(path: Path, target: str) -> Executable:
    """One StableHLO file compiled for `target` (libtpu, compile-only: no TPU), its kernels'
    estimates read from the optimized HLO: a bench Executable with no timing and an estimate as its
    profile. A bench worker job: the compile runs under the worker's limits."""
    import dataclasses
    import hashlib
    import time

    (result,) = load([path])
    if not result.ok:
        return Executable(str(path), "stablehlo", None, None, error=result.error)
    data, text = compile_input(path)
    started()
    try:
        compiler = Compiler(target)
        if isinstance(text, str):
            compiler.devices(partitions(text), str(path))  # libtpu's start-up, outside the compile's clock
        t0 = time.perf_counter()
        exe = compiler.compile(text, str(path))
        compile_s = time.perf_counter() - t0
    except StackwarsError as e:
        return Executable(str(path), "stablehlo", None, None, error=e.one_line())
    profile = estimate_hlo("\n".join(m.to_string() for m in exe.hlo_modules()), CHIPS[target])
    row = Executable(str(path), "stablehlo", compile_s, None, arguments="none: compiled, not run", profile=profile)
    return dataclasses.replace(row, sha256=hashlib.sha256(data).hexdigest())


def estimate_hlo(hlo_text: str, chip: Chip) -> Profile:
    """bench.profile.Profile of an optimized TPU module, every figure an estimate: a kernel's seconds are
    its `estimated_cycles` at the chip's clock where the compiler wrote them ("estimate"), else a
    memory bound, its operands' and result's bytes at the HBM bandwidth ("bound"); async copies'
    bounds are kept apart (they overlap the kernels), bitcasts cost nothing."""

    lines, sizes = {}, {}  # every instruction's (names are unique in a module): loop bodies' kernels too
    for line in hlo_text.splitlines():
        m = re.match(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$", line)
        if m:
            lines[m.group(1)] = line
            sizes[m.group(1)] = _bytes(_result_type(m.group(2)))
    out, totals = [], {"estimated": 0, "estimated_s": 0.0, "bounded": 0, "bound_s": 0.0, "async": 0,
                       "async_bound_s": 0.0, "free": 0}
    for k in kernels_of(hlo_text):
        line = lines.get(k.name, "")
        cycles = _CYCLES.search(line)
        result = sizes.get(k.name, 0)
        operands = [sizes.get(n, 0) for n in _operands(line, k.opcode)]
        runs = k.trips if k.loop and k.trips else 1  # a loop body's kernel, once per trip
        if cycles:
            how, seconds = "estimate", runs * int(cycles.group(1)) / chip.clock_hz
            totals["estimated"] += 1
            totals["estimated_s"] += seconds
        elif k.opcode in _ASYNC_STARTS:
            how, seconds = "async", 0.0
            totals["async"] += 1
            totals["async_bound_s"] += runs * sum(operands) / chip.hbm_bytes_per_s
        elif k.opcode in _ASYNC_DONES or k.opcode == "while" or \
                (k.opcode == "custom-call" and _target(line) in _FREE_CALLS):  # a loop costs what its body does
            how, seconds = "free", 0.0
            totals["free"] += 1
        else:
            # A lower bound: the result written, and of each operand no more than the result's bytes
            # read (a gather reads a few rows of its table, not the table).
            how, seconds = "bound", runs * (result + sum(min(n, result) for n in operands)) / chip.hbm_bytes_per_s
            totals["bounded"] += 1
            totals["bound_s"] += seconds
        out.append(KernelTime(k.name, k.opcode, k.path, k.phase, seconds, runs, how=how, spans=k.spans))
    serial = totals["estimated_s"] + totals["bound_s"]
    # The kernels run one after another; the async copies overlap them: a run takes at least the
    # longer of the two.
    total = max(serial, totals["async_bound_s"])
    estimate = dict(totals, target=chip.name, clock_hz=chip.clock_hz, clock=chip.clock_text(),
                    hbm_bytes_per_s=chip.hbm_bytes_per_s, kernels=len(out), serial_s=serial, total_s=total)
    return Profile(0, total, serial, serial, total, tuple(out), (), note=(
        f"estimate for the {chip.name}, not measured: the compiler's cycles at {chip.clock_text()} on "
        f"{totals['estimated']} of {len(out)} kernels, memory lower bounds at the HBM's "
        f"{chip.hbm_bytes_per_s / 1e9:,.0f} GB/s on {totals['bounded']}; a run: the longer of the kernels' "
        f"sum and the {totals['async']} async copies' transfer"), estimate=estimate)


def _result_type(rhs: str) -> str:
    """The result type of an instruction's right-hand side (`f32[2,3]{1,0} fusion(...)`, a tuple)."""
    depth, i = 0, 0
    for i, ch in enumerate(rhs):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == " " and depth == 0:
            break
    return rhs[:i]


def _bytes(type_text: str) -> float:
    total = 0.0
    for dtype, dims in _SHAPE.findall(type_text.split("{")[0] if not type_text.startswith("(") else type_text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += _BYTES.get(dtype, 4) * n
    return total


def _operands(line: str, opcode: str) -> list:
    m = re.search(re.escape(opcode) + r"\(([^)]*)\)", line)
    return re.findall(r"%([\w.\-]+)", m.group(1)) if m else []


def _target(line: str) -> str:
    m = re.search(r'custom_call_target="([^"]+)"', line)
    return m.group(1) if m else ""


FLOORS_S = (1e-6, 5e-6)  # bench --target's sensitivity line: a floor per bounded kernel, in seconds


def floored_serial(profile: Profile, floor_s: float) -> float:
    """The kernels' sum of a TPU estimate were each bounded kernel (no compiler estimate, a memory lower
    bound alone) at least `floor_s`: how far the bounds could move the estimate."""
    return sum(max(k.seconds, floor_s) if k.how == "bound" else k.seconds for k in profile.kernels)


def bounded_by_opcode(profile: Profile) -> list:
    """(opcode, kernels, seconds of their bounds, bytes moved) of the kernels without the compiler's
    estimate, most time first."""
    rate = profile.estimate["hbm_bytes_per_s"]
    groups: dict = {}
    for k in profile.kernels:
        if k.how == "bound":
            n, s = groups.get(k.opcode, (0, 0.0))
            groups[k.opcode] = (n + 1, s + k.seconds)
    return sorted(((op, n, s, s * rate) for op, (n, s) in groups.items()), key=lambda g: -g[2])
