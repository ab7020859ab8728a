"""`ablate A B`: B's variants written, each checked against B's outputs, then timed with A and B.

A, B and the variants are timed in rounds of fresh workers.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..bench.arguments import signature_arguments
from ..bench.executable import machine
from ..bench.run import bench_files, estimate_files
from ..bench.timing import Asked
from ..bench.xla_profile import merged
from ..common.errors import StackwarsError
from ..common.files import sidecar_of, write_set
from ..common.runstats import rounds_mean, rounds_ratio
from ..common.runtime import runtime
from ..diff import diff_files
from ..diff.measured import with_times
from ..ir import load, load_single
from ..ir.parse import mlir_context
from ..isolate.task import Isolated, Task, row, started
from .result import DEFAULT_ATOL, DEFAULT_RTOL, Ablation, Check, Interval, Variant
from .rewrites import REVERSIBLE, REWRITES, Applied, CannotApply, apply, by_name, finding_key
from .transplant import NothingToTransplant, is_label, transplant_file

ALL = "all"  # the variant with every rewrite that applied
BLOCK = "block"  # a transplant's variant: block-KIND, its rewrites ("block KIND",)


def rewrite_file(b: Path, names: tuple, reverse: tuple = ()) -> tuple[str, list]:
    """B's text with the rewrites `names` applied in order (those in `reverse` the other way round:
    rewrites.apply), and what each did (rewrites.Applied); CannotApply from the first that cannot.
    Parsed and printed with the MLIR bindings (locations kept), verified before printing."""
    from jaxlib.mlir import ir

    data = Path(b).read_bytes()
    with mlir_context(), ir.Location.unknown():
        module = ir.Module.parse(data if str(b).endswith(".mlirbc") else data.decode())
        done = [apply(module, by_name(n), n in reverse) for n in names]
        if not module.operation.verify():
            raise StackwarsError(f"{b}: the module rewritten by {'+'.join(names)} does not verify",
                                 fix="report it: a rewrite made invalid StableHLO")
        return module.operation.get_asm(enable_debug_info=True), done


def make_variants(a: Path, b: Path, out: Path, only: tuple | None = None) -> tuple[list, dict]:
    """Each rewrite whose difference the diff names between A and B (one of its findings in A
    against B) and that finds a site in B, written as `OUT/<B's stem>.<rewrite>.mlir` with a sidecar
    copied from B's where B has one (and `all`, every such rewrite at once, where two or more apply);
    the diff's findings of A against each variant beside those of A against B. A rewrite whose
    difference the diff does not name is not run: it would make B less like A (A and B the same
    program, or both flattening alike). Returns the variants (unchecked, untimed) and skipped:
    rewrite -> why it made no variant."""
    names = tuple(dict.fromkeys(only or tuple(r.name for r in REWRITES)))
    before = findings_of(a, b)
    named = {f[1] for f in before}
    # A reversible rewrite runs the other way round where only A has the form it removes (A flattens)
    reverse = tuple(r.name for r in REWRITES if r.name in REVERSIBLE and
                    {f[2] for f in before if f[1] in r.finding} == {"a"})
    variants, skipped, applied = [], {}, []
    for name in names:
        if not named & set(by_name(name).finding):
            skipped[name] = (f"the diff names no such difference between {Path(a).name} and {Path(b).name} "
                             f"(none of: {', '.join(by_name(name).finding)})")
            continue
        try:
            text, (done,) = rewrite_file(b, (name,), reverse)
        except CannotApply as e:
            variants.append(Variant(name, "", (name,), {}, {}, {}, None, error=f"{b}: {e.op}: {e.why}"))
            continue
        if not done.sites:
            skipped[name] = f"{Path(b).name} has no " + ("dot_general with two or more dimensions of one kind to merge as "
                                                         f"{Path(a).name} does" if name in reverse else by_name(name).site)
            continue
        applied.append(name)
        variants.append(_written(b, out, name, (name,), text, [done]))
    if len(applied) > 1:
        text, done = rewrite_file(b, tuple(applied), reverse)
        variants.append(_written(b, out, ALL, tuple(applied), text, done))
    return [_with_findings(a, before, v) if v.path else v for v in variants], skipped


def _written(b: Path, out: Path, name: str, rewrites: tuple, text: str, done: list) -> Variant:
    import hashlib

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{Path(b).stem}.{name}.mlir"
    files = [(path, text)]
    side = Path(b).with_suffix(".json")
    if side.is_file():
        data = json.loads(side.read_text())
        data["stablehlo"] = path.name
        data["sha256"] = hashlib.sha256(text.encode()).hexdigest()
        data["ablation"] = {"of": Path(b).name, "of_sha256": hashlib.sha256(Path(b).read_bytes()).hexdigest(),
                            "rewrites": list(rewrites), "sites": {d.rewrite: d.sites for d in done}}
        data["parity"] = {"verdict": "unchecked", "reference": f"{Path(b).name}'s outputs (stackwars-ir ablate)",
                          "atol": (data.get("parity") or {}).get("atol", DEFAULT_ATOL),
                          "rtol": (data.get("parity") or {}).get("rtol", DEFAULT_RTOL)}
        values = data.get("values") or {}
        if values.get("file") and (Path(b).parent / values["file"]).is_file() and Path(b).parent != out:
            files.append((out / values["file"], (Path(b).parent / values["file"]).read_bytes()))
        files.append((path.with_suffix(".json"), json.dumps(data, indent=1, sort_keys=True) + "\n"))
    write_set(files)
    added, removed = Counter(), Counter()
    for d in done:
        added.update(d.added)
        removed.update(d.removed)
    net = {k: added[k] - removed[k] for k in set(added) | set(removed)}
    return Variant(name, str(path), rewrites, {d.rewrite: d.sites for d in done},
                   {k: v for k, v in sorted(net.items()) if v > 0}, {k: -v for k, v in sorted(net.items()) if v < 0},
                   None)


def findings_of(a: Path, b: Path) -> Counter:
    """The diff's findings of A against B: (block label, finding key, side, figures) -> count; the
    whole module's (the summaries, the entry function's interface) under the label "(module)", their
    line numbers dropped (a rewrite moves every line)."""
    import re

    result = diff_files(a, b).result()
    found = Counter((blk.label, finding_key(f.kind, f.numbers), f.side, json.dumps(f.numbers, sort_keys=True))
                    for blk in result.blocks for f in blk.findings)
    for x in result.summary:
        found[("(module)", f"summary {x.topic}", "", json.dumps(x.as_json(), sort_keys=True))] += 1
    for text in result.interface:
        found[("(module)", "interface", "", re.sub(r" ?\(line \d+\)", "", str(text)))] += 1
    return found


def _with_findings(a: Path, before: Counter, v: Variant, blocks: tuple = ()) -> Variant:
    """The variant with the findings its rewrites aim at counted in A against B and in A against it
    (`findings`: key -> (before, after)), and those A against it has that A against B had not, or
    the reverse ("(gone) ..."): a rewrite must leave them as they were, and any it changes is listed.
    A transplant (`blocks`: the labels of the blocks it replaced) aims at every finding of those
    blocks, counted as "in KIND blocks", and at the whole-module summaries that restate them."""
    import dataclasses

    after = findings_of(a, Path(v.path))
    if blocks:
        kind = v.rewrites[0].split(" ", 1)[1]
        counts = {f"in {kind} blocks": (sum(n for f, n in before.items() if f[0] in blocks),
                                        sum(n for f, n in after.items() if f[0] in blocks))}

        def own(f) -> bool:
            return f[0] in blocks or f[1].startswith("summary ")
    else:
        keys = [k for name in v.rewrites for k in by_name(name).finding]
        mine = set(keys) | {f"summary {by_name(name).topic}" for name in v.rewrites}  # restates its own findings
        counts = {k: (sum(n for f, n in before.items() if f[1] == k), sum(n for f, n in after.items() if f[1] == k))
                  for k in keys}

        def own(f) -> bool:
            return f[1] in mine
    new = sorted({_said(f) for f in after - before if not own(f)})
    gone = sorted({_said(f) for f in before - after if not own(f)})
    return dataclasses.replace(v, findings={k: c for k, c in counts.items() if c != (0, 0)},
                               findings_new=tuple(new + [f"(gone) {g}" for g in gone]))


def _said(f: tuple) -> str:
    """A finding key as the table lists it: its block and kind, a module-level one with its figures."""
    return f"{f[0]}: {f[1]}" + (f" {f[3]}" if f[0] == "(module)" else "")


def transplant_task(a: Path, b: Path, kind: str) -> tuple:
    """transplant_file in a worker: (text, Transplanted, None, False); ("", None, why, True) where
    there is nothing to transplant, ("", None, why, False) where it cannot apply."""
    try:
        text, done = transplant_file(a, b, kind)
        return text, done, None, False
    except NothingToTransplant as e:
        return "", None, f"{e.op}: {e.why}", True
    except CannotApply as e:
        return "", None, f"{e.op}: {e.why}", False


def transplant_failed(message: str) -> tuple:
    """A transplant task's row when its worker did not finish (killed, out of time or memory)."""
    return "", None, message, False


def block_name(kind: str) -> str:
    """A transplant's variant name: block-attention, block-attention-0-0-backward for one block's label."""
    import re

    return f"{BLOCK}-" + "-".join(x for x in re.split(r"[^A-Za-z0-9_]+", kind) if x)


def transplant_variants(a: Path, b: Path, out: Path, blocks: tuple, before: Counter, worker: Isolated,
                        timeout: float | None, progress: Callable[[str], object] | None = None) -> tuple[list, dict]:
    """One variant per entry of `blocks` (a block role, ablate.transplant.KINDS, or one block's
    label): B with A's blocks of it (ablate.transplant), written as `OUT/<B's stem>.block-KIND.mlir`
    with its sidecar, the diff's findings of A against it beside those of A against B. Runs in
    `worker` (the transplant runs both programs). Returns the variants (unchecked, untimed) and
    skipped: "block KIND" -> why it made no variant."""
    import dataclasses

    variants, skipped = [], {}
    for kind in blocks:
        name = f"{BLOCK} {kind}"
        if progress:
            progress(f"transplanting {a}'s {kind} block{'' if is_label(kind) else 's'} into {b} ...")
        text, done, why, nothing = worker.run(Task(transplant_task, (Path(a), Path(b), kind), name, transplant_failed),
                                              timeout)
        if nothing:
            skipped[name] = why
            continue
        if why:
            variants.append(Variant(block_name(kind), "", (name,), {}, {}, {}, None, error=f"{b}: {why}"))
            continue
        v = _written(b, out, block_name(kind), (name,), text, [Applied(name, done.blocks, done.added, done.removed)])
        v = dataclasses.replace(v, blocks_skipped=tuple(f"{label}: {w}" for label, w in done.skipped))
        variants.append(_with_findings(a, before, v, done.labels))
    return variants, skipped


def check_variant(b: Path, v: Path) -> Check:
    """The variant's outputs against B's on the same arguments (B's recorded or rebuilt values, else
    synthetic ones), both compiled and run on this process's XLA:CPU: elementwise |V - B| <= atol +
    rtol * |B| with B's parity tolerance. Runs in a worker (isolate)."""
    import numpy as np

    rb, rv = load([b, v])
    for r, p in ((rb, b), (rv, v)):
        if not r.ok:
            return Check(None, DEFAULT_ATOL, DEFAULT_RTOL, False, error=f"{p}: {r.error}")
    side, _ = sidecar_of(Path(b))
    parity = (side.data.get("parity") or {}) if side else {}
    atol, rtol = float(parity.get("atol", DEFAULT_ATOL)), float(parity.get("rtol", DEFAULT_RTOL))
    arrays, origin, _ = signature_arguments(rb.modules[0], side, np.random.default_rng(0))
    rt = runtime("cpu")
    started()  # in a worker: the two compiles and runs are under the user's --timeout, not the setup limit
    outs = []
    for path in (b, v):
        exe = rt.compile(Path(path).read_text(), str(path))
        outs.append([np.asarray(x) for x in rt.run(exe, rt.put(arrays, exe))])
    ob, ov = outs
    if len(ob) != len(ov) or any(x.shape != y.shape for x, y in zip(ob, ov)):
        return Check(None, atol, rtol, False, len(ob), origin, f"{v}: its outputs are not B's in number or shape")
    worst, ok = 0.0, True
    for x, y in zip(ob, ov):
        if x.size == 0:
            continue
        if not np.issubdtype(x.dtype, np.floating):
            same = np.array_equal(x, y)
            ok &= bool(same)
            worst = max(worst, 0.0 if same else float("inf"))
            continue
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        same = (x64 == y64) | (np.isnan(x64) & np.isnan(y64))  # an equal infinity or NaN is no error
        with np.errstate(invalid="ignore"):
            err = np.where(same, 0.0, np.abs(y64 - x64))
        finite = np.isfinite(x64) & np.isfinite(y64)  # a value infinite or NaN on one side only is an error
        with np.errstate(invalid="ignore"):
            ok &= bool(np.all(same | (finite & (err <= atol + rtol * np.abs(x64)))))
        worst = max(worst, float(np.nanmax(np.where(np.isfinite(err), err, np.inf))))
    return Check(worst, atol, rtol, bool(ok), len(ob), origin)


def ablate(a: Path, b: Path, out: Path, only: tuple | None = None, rounds: int = 3, timeout: float | None = None,
           max_memory: int | None = None, progress: Callable[[str], object] | None = None, target: str | None = None,
           blocks: tuple = (), profile: int = 0) -> Ablation:
    """Variants of B with its differences from A rewritten into A's form (ablate.rewrites), each
    checked against B (check_variant; a failed check is never timed), then A, B and every checked
    variant timed on XLA:CPU in `rounds` rounds, each a fresh bench worker where their steady runs
    take turns. Per variant: its steady time against B's (ratio, 95% interval across rounds) and
    the share of B - A it closes (withheld where B / A's interval holds 1). `target` (a TPU
    generation): A, B and each checked variant also compiled for it (libtpu, compile-only) and the
    compiler's estimate of one run kept beside the times, labelled as an estimate. `blocks`: block
    roles or labels whose blocks are transplanted from A (transplant_variants), a variant each,
    checked and timed as the others; `only` = () with blocks: no rewrite, transplants alone.
    `profile` (2 or more): that many runs of each file profiled in every round, after its steady
    runs, and per variant the kernel time of each block it changed beside B's (block_times)."""
    import dataclasses

    load_single([a, b])  # ParseError, one line, for a file that is not one StableHLO module
    if rounds < 1:
        raise StackwarsError(f"--rounds {rounds} must be at least 1", fix="e.g. --rounds 3")
    if progress:
        progress(f"rewriting {b} into {a}'s form ...")
    import hashlib

    sha = tuple(hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (a, b))
    variants, skipped = make_variants(Path(a), Path(b), Path(out), only) if only != () else ([], {})
    checked = []
    with Isolated(max_memory) as worker:
        if blocks:
            more, why = transplant_variants(Path(a), Path(b), Path(out), tuple(dict.fromkeys(blocks)),
                                            findings_of(a, b), worker, timeout, progress)
            variants, skipped = variants + more, {**skipped, **why}
        if not variants:  # nothing to ablate: no time is measured for a comparison nobody asked
            return Ablation(str(a), str(b), (), rounds, skipped=skipped, machine=machine(), platform="cpu", sha256=sha)
        for v in variants:
            if v.error:
                checked.append(v)
                continue
            if progress:
                progress(f"{v.path}: checking its outputs against {b} ...")
            check = worker.run(Task(check_variant, (Path(b), Path(v.path)), v.path,
                                    row(Check, None, DEFAULT_ATOL, DEFAULT_RTOL, False)), timeout)
            checked.append(dataclasses.replace(v, check=check))
    timed = [v for v in checked if v.check is not None and v.check.ok]
    paths = [str(a), str(b)] + [v.path for v in timed]
    per_round, failed_timing, profiles = [], {}, {}

    asked = Asked.of(profile=profile) if profile else None
    for r in range(rounds):
        if progress:
            progress(f"round {r + 1} of {rounds}: timing {len(paths)} files, interleaved, in a fresh worker ...")
        report = bench_files(paths, "cpu", timeout, with_peaks=False, max_memory=max_memory, progress=progress,
                             asked=asked)
        rows = {e.label: e for _, e in report.rows}
        bad = [f"{p}: {rows[p].error}" for p in paths[:2] if not rows[p].ok]
        if bad:  # A or B: nothing to compare the variants with
            raise StackwarsError(f"round {r + 1}: {bad[0]}", fix="bench the file alone to see why it fails")
        for p in paths[2:]:
            if not rows[p].ok:  # a variant that runs no more: reported, never compared
                failed_timing.setdefault(p, f"round {r + 1}: {rows[p].error}")
        per_round.append({p: rows[p].timing.steady for p in paths if rows[p].ok})
        for p in paths:
            if rows[p].ok and rows[p].profile is not None:
                profiles.setdefault(p, []).append(rows[p].profile)
    steady_a = tuple(x[str(a)] for x in per_round)
    steady_b = tuple(x[str(b)] for x in per_round)
    gap = ratio_interval([sb / sa for sa, sb in zip(steady_a, steady_b)])
    out_variants = []
    for v in checked:
        if v.path in failed_timing:
            out_variants.append(dataclasses.replace(v, error=f"{v.path}: timing failed: {failed_timing[v.path]}"))
            continue
        if v not in timed:
            out_variants.append(v)
            continue
        steady = tuple(x[v.path] for x in per_round)
        change = ratio_interval([sv / sb for sv, sb in zip(steady, steady_b)])
        share = None
        if not gap.holds(1.0):
            share = mean_interval([(sb - sv) / (sb - sa) for sa, sb, sv in zip(steady_a, steady_b, steady)])
        times = {}
        if profile and str(b) in profiles and v.path in profiles:
            if progress:
                progress(f"{v.path}: kernel time by block against {b} ...")
            times = block_times(Path(b), Path(v.path), profiles[str(b)], profiles[v.path])
        out_variants.append(dataclasses.replace(v, steady=steady, change=change, share=share, **times))
    abl = Ablation(str(a), str(b), tuple(out_variants), rounds, steady_a, steady_b, gap, skipped, machine(), "cpu", sha)
    return estimated(abl, paths, target, timeout, max_memory, progress) if target else abl


def block_times(b: Path, v: Path, profiles_b: list, profiles_v: list) -> dict:
    """The kernel time of each block the variant changed (ops or findings of B against it), B's
    beside the variant's: bench.profile's kernels (each the mean over rounds of its time in the
    median profiled run) traced to the blocks of `diff B V` by module path (diff.with_times), as
    Variant fields: block_times ((label, B seconds, V seconds), in B's order) and kernel_s (B's and
    the variant's summed kernel time, seconds)."""

    pb, pv = merged(profiles_b), merged(profiles_v)
    report = diff_files(b, v)
    result = with_times(report, report.result(), pb, pv)
    rows = tuple((blk.label, blk.metrics["time"]["a"], blk.metrics["time"]["b"])
                 for blk, d in zip(result.blocks, report.blocks) if any(d.delta.values()) or d.findings)
    return {"block_times": rows, "kernel_s": (pb.kernel_s, pv.kernel_s)}


def estimated(abl: Ablation, paths: list, target: str, timeout: float | None, max_memory: int | None,
              progress: Callable[[str], object] | None) -> Ablation:
    """The ablation with the TPU compiler's estimate of one run of A, B and each variant in `paths`
    (bench.run.estimate_files: compile-only, no TPU needed, libtpu installed)."""
    import dataclasses

    report = estimate_files([Path(p) for p in paths], target, timeout, max_memory, progress)
    got, errors = {}, {}
    for _, e in report.rows:
        if e.ok and e.profile is not None and e.profile.estimate:
            got[e.label] = e.profile.estimate["total_s"]
        else:
            errors[e.label] = e.error or "no estimate"
    variants = tuple(dataclasses.replace(v, estimate_s=got.get(v.path)) if v.path else v for v in abl.variants)
    return dataclasses.replace(abl, variants=variants, target=target, estimate_a=got.get(str(abl.a)),
                               estimate_b=got.get(str(abl.b)), estimate_errors=errors)


def ratio_interval(ratios: Sequence[float]) -> Interval:
    """Ratios measured once per round: geometric mean and 95% t-interval (runstats.rounds_ratio)."""

    value, low, high = rounds_ratio(list(ratios))
    return Interval(value, low, high, len(ratios))


def mean_interval(xs: Iterable[float]) -> Interval:
    """Figures measured once per round: mean and 95% t-interval (runstats.rounds_mean)."""

    xs = list(xs)
    return Interval(*rounds_mean(xs), len(xs))
