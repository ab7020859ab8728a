"""Regress and bisect results in words: each changed block's sentence, the lines of each result.

A regress's lines and a bisection's lines.
"""
from __future__ import annotations

from ..versions.bisection import Bisection
from ..versions.metric import METRICS
from ..versions.regress import BlockChange, Regression


def block_sentence(b: BlockChange) -> str:
    """One aligned block's changes in words (regress's lines, the versions page)."""
    said = []
    if b.placement:
        said.append(f"the same program, its ops cut into blocks otherwise ({b.ops[0]} -> {b.ops[1]} ops here)")
    elif b.ops[0] != b.ops[1]:
        said.append(f"{_signed(b.ops[1] - b.ops[0])} ops ({b.ops[0]} -> {b.ops[1]})")
    if b.kernels and b.kernels[0] != b.kernels[1]:
        n = b.kernels[1] - b.kernels[0]
        said.append(f"{_signed(n)} kernel{'s' if abs(n) != 1 else ''} ({b.kernels[0]} -> {b.kernels[1]})")
    if b.fusions:
        from collections import Counter

        was, now = Counter(b.fusions[0]), Counter(b.fusions[1])
        moved = [f"{kind} {was[kind]} -> {now[kind]}" for kind in sorted(was | now) if was[kind] != now[kind]]
        if moved:  # XLA's fusions counted by kind (the kind is the fusion's name less its number)
            said.append("fusions by kind " + ", ".join(moved[:4]) + (", ..." if len(moved) > 4 else ""))
    said += list(b.changes[:3])
    lost = [side for side, t, k in zip("AB", b.time or (), b.kernels or ()) if t == 0 and k]
    if b.time and lost and b.changed:  # kernels compiled for the block, none of them named in its profile
        said.append(f"time not attributed on {' and '.join(lost)} (its profile names none of the block's "
                    f"{b.kernels['AB'.index(lost[0])]} kernels), so no change in time is claimed")
    elif b.time and b.time[0] > 0 and b.changed:
        noise = ""
        if b.gap_95:
            noise = (", within the noise:" if b.time_within_noise else ",") + \
                f" 95% interval of B - A {b.gap_95[0] * 1e6:+.1f} to {b.gap_95[1] * 1e6:+.1f} us"
        said.append(f"{b.time[1] / b.time[0] - 1:+.0%} of the block's time "
                    f"({b.time[0] * 1e6:.1f} -> {b.time[1] * 1e6:.1f} us{noise})")
    return f"{b.label}: " + ("; ".join(said) if said else "unchanged")


def regress_lines(r: Regression) -> list[str]:
    """A regress result (versions.regress.Regression) as text: the two sides, what changed per block, time, memory, breaches."""
    out = [f"A: {r.a['file']} (stack {r.a['stack']}: {_versions_line(r.a['versions'])})",
           f"B: {r.b['file']} (stack {r.b['stack']}: {_versions_line(r.b['versions'])})"]
    same = r.a["sha256"] == r.b["sha256"]
    changed = [b for b in r.blocks if b.changed]
    compiled = [b for b in r.blocks if b.compiled_changed]
    if same:
        out.append("IR: identical" + (f"; compiled differently in {len(changed)} of {len(r.blocks)} blocks"
                                      if changed else ""))
    elif r.same_program:
        placed = sum(b.placement for b in r.blocks)
        out.append("IR: the same program, spelled otherwise (the diff's verdict)"
                   + (f"; its ops cut into blocks otherwise in {placed} of {len(r.blocks)} blocks" if placed else "")
                   + (f"; compiled differently in {len(compiled)} of {len(r.blocks)} blocks" if compiled else ""))
    elif not r.unaligned and not any(b.ir_changed for b in r.blocks):
        out.append("IR: StableHLO identical op for op (only names differ); XLA's fusions changed"
                   + (f" in {len(compiled)} of {len(r.blocks)} blocks" if compiled else ": none"))
    else:
        out.append(f"IR: {len(changed)} of {len(r.blocks)} aligned blocks changed (IR or kernels)" +
                   (f", {len(r.unaligned)} on one side only" if r.unaligned else ""))
    out += [f"  {block_sentence(b)}" for b in changed]
    out += [f"  only in {u}" for u in r.unaligned]
    if r.kernels:
        out.append(f"kernels: {r.kernels['a']} -> {r.kernels['b']}")
    if r.time:
        t = r.time
        out.append(f"time: {t['error']}" if "error" in t else
                   f"steady time: {t['a'] * 1e6:.1f} us -> {t['b'] * 1e6:.1f} us, B/A {t['ratio']:.3f} "
                   f"(95% interval {t['low']:.3f}-{t['high']:.3f}"
                   + (f" across {len(t['rounds'])} rounds, a fresh worker each" if t.get("rounds") else "")
                   + f"); compile {t['compile_a']:.2f} s -> "
                   f"{t['compile_b']:.2f} s")
        if t.get("calibration"):
            c = t["calibration"]
            out.append(f"CI mode: A against itself ({c['how']}) B/A {c['ratio']:.3f} (95% interval {c['low']:.3f}-"
                       f"{c['high']:.3f}): noise {c['noise']:.1%}, added to the time threshold")
    if r.memory:
        m = r.memory
        out.append(f"memory: {m['error']}" if "error" in m else
                   f"memory plan peak: {m['a']:,} -> {m['b']:,} bytes (temporaries {m['temp_a']:,} -> "
                   f"{m['temp_b']:,})")
    out += [f"REGRESSION: {b}" for b in r.breaches] or ["no threshold passed "
                                                           f"({_thresholds_line(r.thresholds)})"]
    return out


def bisect_lines(r: Bisection) -> list[str]:
    """A bisection (versions.bisect.Bisection) as text: each probed version's value, the boundary and its regress."""
    out = [f"{len(r.versions)} versions from {r.versions[0]} to {r.versions[-1]}, metric {r.metric}: "
           f"{r.probes} probed (ceil(log2 {len(r.versions)}) + 1 = {_bound(len(r.versions))})"]
    out += [f"  {v:10} {METRICS[r.metric].show(r.measured[v])}" for v in r.versions if v in r.measured]
    if r.first_bad is None:
        out.append(f"no change: {r.note}")
    else:
        out.append(f"first bad version: {r.first_bad} (last good: {r.last_good})")
    if r.boundary is not None:
        out += ["", f"at the boundary, {r.last_good} -> {r.first_bad}:"] + \
            [f"  {ln}" for ln in regress_lines(r.boundary)]
    return out


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


def _versions_line(v: dict) -> str:
    return ", ".join(f"{k} {v[k]}" for k in ("jax", "jaxlib", "torch", "torch_xla") if v.get(k)) or "unknown"


def _thresholds_line(t) -> str:
    return f"time +{t.time:.0%} beyond noise, memory +{t.memory:.0%}, kernels +{t.kernels} per block"


def _bound(n: int) -> int:
    import math

    return math.ceil(math.log2(n)) + 1
