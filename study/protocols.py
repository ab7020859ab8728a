"""docs/findings-host.md's first part: the study's candidate timing protocols measured here, scored.

Measured as bench.protocols records, each protocol scored against the study's table.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from .host import NAMES, TARGET, WORKLOADS

STUDY_RATIO_TOLERANCE = 2.0  # a ratio "reproduces" the study's when the study's lies within 2x of its interval
SYNCS = ("waited", "not waited", "not synced")


@dataclass(frozen=True)
class Figure:
    """A time or ratio measured once per round: its geometric mean and 95% interval across rounds."""

    mean: float
    low: float
    high: float
    rounds: int

    @classmethod
    def of(cls, values) -> "Figure | None":
        from stackwars_ir.common.runstats import rounds_ratio

        values = [v for v in values if v and v > 0]
        if not values:
            return None
        mean, low, high = rounds_ratio(values)
        return cls(mean, low, high, len(values))

    def ms(self) -> str:
        if self.rounds < 2:
            return f"{_num(self.mean * 1e3)} (1 round)"
        return f"{_num(self.mean * 1e3)} [{_num(self.low * 1e3)}-{_num(self.high * 1e3)}]"

    def x(self, unit: str = "x") -> str:
        if self.rounds < 2:
            return f"{_num(self.mean)}{unit} (1 round)"
        return f"{_num(self.mean)}{unit} [{_num(self.low)}-{_num(self.high)}]"

    def plain(self) -> str:
        return self.x(unit="")

    def overlaps(self, other: "Figure") -> bool:
        return self.low <= other.high and other.low <= self.high


def _num(v: float) -> str:
    if not math.isfinite(v):
        return "inf"
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"


def stacks_in(results: Path) -> list[str]:
    """The version stacks whose records RESULTS holds (python -m study.run.protocols --stack)."""
    names = set()
    for p in Path(results).glob("*.json"):
        try:
            names.add(json.loads(p.read_text()).get("stack"))
        except (OSError, ValueError):
            continue
    return sorted(n for n in names if n)


def load_runs(results: Path, stack: str | None = None) -> dict:
    """{(workload, size, framework, protocol, condition): [ProtocolRun, ...] in round order} from RESULTS
    (condition: "idle", "loaded" beside spinning processes, "paused" before each steady step):
    the lock's records, or STACK's."""
    from stackwars_ir.bench.protocols import ProtocolRun

    out: dict = {}
    for p in sorted(Path(results).glob("*.json")):
        try:
            d = json.loads(p.read_text())
            run = ProtocolRun.from_json(d)
        except (OSError, ValueError, KeyError):
            continue
        if d.get("ok") is False or d.get("stack") != stack:
            continue
        stem = p.stem.split("-stack-")[0]
        condition = "loaded" if stem.endswith("-loaded") else "paused" if stem.endswith("-paused") else \
            f"beside {d['beside']}" if d.get("beside") else "idle"
        key = (run.workload, run.size, run.framework, run.protocol, condition)
        out.setdefault(key, []).append((d.get("round", 0), run, d.get("made", {})))
    return {k: [r for _, r, _ in sorted(v, key=lambda t: t[0])] for k, v in out.items()}


def _made(results: Path) -> list[str]:
    seen = set()
    for p in Path(results).glob("*.json"):
        try:
            m = json.loads(p.read_text()).get("made") or {}
        except (OSError, ValueError):
            continue
        if m:
            seen.add(f"{m.get('date')} (commit {m.get('commit')})")
    return sorted(seen)


def _machines(runs: dict) -> str:
    from .page import machine_text

    kinds = sorted({machine_text(r.conditions) for rs in runs.values() for r in rs if r.conditions.get("processor")})
    if not kinds:
        return "a machine the records do not name"
    return kinds[0] if len(kinds) == 1 else "more than one kind of machine: " + "; ".join(kinds)


def steady_s(run, sync: str, device_s: float = 0.0, factor: float = 1.0) -> float | None:
    """One round's steady step under a sync variant, with the host work scaled by `factor` and a
    device run of `device_s` beside it: waited (serial: host + device), not waited (overlapped: the
    longer of the two), not synced (the trace alone: nothing is launched). With device_s 0, the figure
    is host work as measured here, the device idle."""
    if run.error or not run.trace:
        return None
    if sync == "not synced":
        return factor * run.median("trace")
    host = factor * run.median("host")
    return host + device_s if sync == "waited" else max(host, device_s)


def device_estimates(host_results: Path) -> dict:
    """{(workload, "jax"|"pytorch"): seconds} of the tpu-v6e compiler's run estimates of the base-size
    forward captures that `make findings-host` keeps (W-tpu-v6e.json); absent where there is none."""
    from stackwars_ir.bench.run import BenchReport

    out = {}
    for w in WORKLOADS:
        try:
            rep = BenchReport.from_json(json.loads((Path(host_results) / f"{w}-{TARGET}.json").read_text()))
        except (OSError, ValueError, KeyError):
            continue
        for fw, stem in (("jax", "jax.mlir"), ("pytorch", "torch-torch_xla.mlir")):
            est = next((e for _, e in rep.rows if e.label.endswith("/" + stem) and e.ok and e.profile), None)
            if est is not None:
                out[(w, fw)] = est.profile.wall_s
    return out


def study_recompiles(workload: str) -> bool:
    """Whether the study's PyTorch second run implies a compile again at step 2: its second run at
    least half its first (a step that only runs is far shorter than one that compiles)."""
    from .table import STUDY

    first, second, _ = STUDY[(workload, "pytorch")]
    return second >= first / 2


def study_ratio(workload: str) -> float:
    from .table import STUDY

    return STUDY[(workload, "pytorch")][2] / STUDY[(workload, "jax")][2]


def _compiles(runs) -> str:
    shapes = []
    for r in runs:
        if r.error and not r.compiles:
            continue
        s = ", ".join(str(c) for c in r.compiles)
        if s not in shapes:
            shapes.append(s)
    errors = sorted({r.error.split(":")[0] for r in runs if r.error})
    text = " / ".join(shapes) if shapes else ""
    return (text + (" " if text else "") + ("failed: " + ", ".join(errors) if errors else "")).strip() or "-"


def fit_factor(cells) -> tuple[float, float, float] | None:
    """The one host factor f minimising the squared log error of f * host + device against the study
    over CELLS [(host s, device s, study s)], on a grid from 0.01 to 100 (1,000 points per decade):
    (f, the geometric-mean miss factor, the worst cell's miss factor)."""
    cells = [c for c in cells if c[0] and c[0] > 0]
    if not cells:
        return None
    best = None
    for i in range(4001):
        f = 10 ** (-2 + i / 1000)
        errs = [math.log((f * h + d) / s) for h, d, s in cells]
        sq = sum(e * e for e in errs)
        if best is None or sq < best[0]:
            best = (sq, f, errs)
    sq, f, errs = best
    return f, math.exp(math.sqrt(sq / len(errs))), math.exp(max(abs(e) for e in errs))


def protocols_section(results: Path, host_results: Path, workloads=WORKLOADS, level: str = "##") -> list[str]:
    """The protocols section of docs/findings-host.md from the records in RESULTS
    (study/run/protocols.py) and the v6e estimates among HOST_RESULTS; [] where there are none."""
    from .table import STUDY
    from stackwars_ir.bench.protocols import FIRST_STEPS, PROTOCOLS, STEADY

    runs = load_runs(results)
    if not runs:
        return []
    sub = level + "#"
    rounds = max(len(v) for v in runs.values())
    dev = device_estimates(host_results)
    pt = [p for p in PROTOCOLS if p.framework == "pytorch"]
    jx = [p for p in PROTOCOLS if p.framework == "jax"]
    out = [f"{level} The study's timing protocols, measured", "",
           f"Measured by `make findings-host` (study/run/protocols.py, stackwars_ir.bench.protocols) on "
           f"**{_machines(runs)}**, records made {', '.join(_made(results)) or 'on no recorded day'}; up to "
           f"{rounds} rounds per cell, each round a fresh process, the rounds of one cell minutes apart. "
           + ("Records from one kind of machine only: no other was available (another's would be compared "
              "through the calibration below). " if "more than one" not in _machines(runs) else "")
           + "Nothing here ran on a TPU.", "",
           "- **Where the device costs nothing.** Every protocol runs at the *narrow* size: the base model's "
           "layers, heads and op count with tensors a few elements wide (GPT-2 and BERT: width 24, 12 heads, "
           "12 layers, batch 1, 4 tokens; ResNet-50: its 16 bottlenecks at 4-32 channels, batch 2 at 32x32, since BatchNorm in train mode needs two values per channel). On XLA:CPU the "
           "device runs on the host's two cores; narrow, its work is a small fraction of the host's, as on a "
           "TPU, and host work is timed apart from it.",
           f"- **A step**: steps 1-{FIRST_STEPS} timed one by one from the process's first (graphs compiled in "
           f"each: torch_xla's UncachedCompile, jax's backend compiles), then {STEADY} steady steps, each begun "
           "with the device idle (the previous step waited for): *trace* (PyTorch: the Python step that traces "
           "the lazy graph; JAX: the jitted call until it returns), *launch* (torch_xla.sync(): compiles if it "
           "must and starts the run), *wait* (until the device is done). Host work = trace + launch; a round's "
           f"figure is the median of its {STEADY} steps; a figure below is the geometric mean of the rounds "
           "with its 95% interval across them [low-high].",
           "- **Sync variants**, each a reading of the same measured parts: *waited* (each step synced and "
           "waited for: host + device), *not waited* (synced, not waited for: steps overlap, the longer of "
           "host and device), *not synced* (PyTorch's Python step alone, the lazy graph never run; JAX has "
           "no such step: its figure is the call).", "",
           f"{sub} Protocols", "",
           "| framework | protocol | what runs |", "|---|---|---|"]
    out += [f"| {p.framework} | {p.name} | {p.what} |" for p in PROTOCOLS]

    # Graphs compiled per step: the protocols' signatures against the study's second-run column.
    out += ["", f"{sub} Graphs compiled at steps 1, 2, 3", "",
            "Each cell: the graphs compiled at steps 1, 2 and 3 (rounds that differ are shown apart). The "
            "study's column: whether its PyTorch second run implies a compile again at step 2 (its second "
            "run at least half its first).", "",
            "| workload | study recompiles at step 2 | " + " | ".join(f"pytorch {p.name}" for p in pt) + " | " +
            " | ".join(f"jax {p.name}" for p in jx) + " |",
            "|---|---|" + "---|" * (len(pt) + len(jx))]
    signature = {}
    for w in workloads:
        cells = []
        for p in pt + jx:
            rs = runs.get((w, "narrow", p.framework, p.name, "idle"), [])
            cells.append(_compiles(rs))
            if p.framework == "pytorch":
                ok = [r for r in rs if r.compiles and len(r.compiles) > 1]
                signature[(w, p.name)] = (any(r.compiles[1] > 0 for r in ok) if ok else None)
        out.append(f"| {NAMES[w]} | {'yes' if study_recompiles(w) else 'no'} | " + " | ".join(cells) + " |")

    # Steps 1-3's wall time: a protocol that compiles again at step 2 has a second step near its first.
    out += ["", f"{sub} Steps 1, 2, 3 (ms, narrow, XLA:CPU)", "",
            "Each step's wall time, waited for (compiles here included: XLA:CPU's, not a TPU's), the geometric "
            "mean of the rounds; the study's PyTorch first, second and steady runs on its v6e beside them. Its "
            "second run near its first is the pattern the column above tests.", "",
            "| workload | study pytorch (first / second / steady) | " + " | ".join(f"pytorch {p.name}" for p in pt) + " |",
            "|---|---|" + "---|" * len(pt)]
    for w in workloads:
        first, second, steady = STUDY[(w, "pytorch")]
        cells = []
        for p in pt:
            rs = [r for r in runs.get((w, "narrow", "pytorch", p.name, "idle"), []) if len(r.first) >= 3]
            figs = [Figure.of([r.first[i] for r in rs]) for i in range(3)] if rs else []
            cells.append(" / ".join(_num(f.mean * 1e3) for f in figs) if figs and all(figs) else "-")
        out.append(f"| {NAMES[w]} | {_num(first)} / {_num(second)} / {_num(steady)} | " + " | ".join(cells) + " |")

    # Steady host work per protocol.
    out += ["", f"{sub} Steady host work, narrow (ms)", "",
            "Host work (trace + launch) of the steady step with the device idle, and in brackets its interval "
            "across rounds; below it the trace alone and the device's wait on XLA:CPU.", "",
            "| workload | " + " | ".join(f"{p.framework} {p.name}" for p in pt + jx) + " |",
            "|---|" + "---|" * (len(pt) + len(jx))]
    for w in workloads:
        row, parts = [], []
        for p in pt + jx:
            rs = [r for r in runs.get((w, "narrow", p.framework, p.name, "idle"), []) if not r.error and r.trace]
            host = Figure.of([r.median("host") for r in rs])
            trace = Figure.of([r.median("trace") for r in rs])
            wait = Figure.of([r.median("wait") for r in rs])
            row.append(host.ms() if host else "-")
            parts.append(f"trace {_num(trace.mean * 1e3)}, wait {_num(wait.mean * 1e3)}" if trace and wait else "-")
        out.append(f"| {NAMES[w]} | " + " | ".join(row) + " |")
        out.append("| (parts) | " + " | ".join(parts) + " |")

    # The PyTorch/JAX ratio per protocol, no factor.
    out += ["", f"{sub} PyTorch/JAX steady ratio per protocol, no free parameter", "",
            "Each PyTorch protocol against its JAX partner (eval's for the forwards, AdamW's for AdamW), paired by "
            "round, as measured here at the narrow size: no host factor, no device estimate (the device's "
            "wait on XLA:CPU included where the variant waits). The study's ratio (steady PyTorch/JAX on its "
            "v6e) beside it.", "",
            "| protocol | variant | " + " | ".join(NAMES[w] for w in workloads) + " |",
            "|---|---|" + "---|" * len(workloads),
            "| **the study** | | " + " | ".join(f"**{_num(study_ratio(w))}x**" for w in workloads) + " |"]
    ratios: dict = {}
    for p in pt:
        for s in SYNCS:
            cells = []
            for w in workloads:
                a = runs.get((w, "narrow", "pytorch", p.name, "idle"), [])
                b = runs.get((w, "narrow", "jax", p.partner, "idle"), [])
                pairs = []
                for ra, rb in zip(a, b):
                    x = _measured_step(ra, s)
                    y = _measured_step(rb, "waited" if s == "waited" else "not waited")
                    if x and y:
                        pairs.append(x / y)
                fig = Figure.of(pairs)
                ratios[(w, p.name, s)] = fig
                cells.append(fig.x() if fig else "-")
            out.append(f"| {p.name} | {s} | " + " | ".join(cells) + " |")

    # Predicted for the v6e with one fitted host factor per protocol and variant.
    out += ["", f"{sub} One host factor, fitted per protocol", "",
            f"The v6e's steady step predicted as f x host work (narrow, measured here) + the {TARGET} compiler's "
            "estimate of the base-size forward's run, one f for both frameworks fitted across the steady cells "
            "of every workload (least squared log error); f fitted in each round apart, its interval across "
            "rounds. *fit*: the geometric-mean factor by which a cell misses the study, *worst*: the largest "
            "miss. AdamW: no v6e estimate of a training step is kept, so its cells are host work alone. Then the "
            "factor each cell would need on its own, PyTorch's beside JAX's, for the variant that fits best.", "",
            "| protocol | sync variant | f | fit | worst | " + " | ".join(f"{NAMES[w]}, predicted ratio" for w in workloads)
            + " |", "|---|---|---|---|---|" + "---|" * len(workloads),
            "| **the study** | | | | | " + " | ".join(f"**{_num(study_ratio(w))}x**" for w in workloads) + " |"]
    fits: dict = {}
    for p in pt:
        for s in SYNCS:
            per_round = []
            for i in range(rounds):
                cells = []
                for w in workloads:
                    for fw, name in (("pytorch", p.name), ("jax", p.partner)):
                        rs = runs.get((w, "narrow", fw, name, "idle"), [])
                        if i >= len(rs):
                            continue
                        sv = s if fw == "pytorch" else ("waited" if s == "waited" else "not waited")
                        h = steady_s(rs[i], sv)
                        d = 0.0 if p.name == "adamw" else dev.get((w, fw), 0.0)
                        if h:
                            hp = rs[i].median("trace") if sv == "not synced" else rs[i].median("host")
                            cells.append((hp, d if sv != "not synced" else 0.0, STUDY[(w, fw)][2] / 1e3, w, fw, sv))
                got = fit_factor([(h, d, st) for h, d, st, *_ in cells])
                if got:
                    per_round.append((got, cells))
            if not per_round:
                continue
            f = Figure.of([g[0] for g, _ in per_round])
            fit = statistics.median(g[1] for g, _ in per_round)
            worst = statistics.median(g[2] for g, _ in per_round)
            fits[(p.name, s)] = (f, fit, worst, per_round)
            pred = []
            for w in workloads:
                vals = []
                for (fr, _, _), cells in per_round:
                    by = {(cw, cfw): (h, d, sv) for h, d, st, cw, cfw, sv in cells}
                    if (w, "pytorch") in by and (w, "jax") in by:
                        vals.append(_at(by[(w, "pytorch")], fr) / _at(by[(w, "jax")], fr))
                fig = Figure.of(vals)
                pred.append(fig.x() if fig else "-")
            out.append(f"| {p.name} | {s} | {f.plain()} | {_num(fit)}x | {_num(worst)}x | " + " | ".join(pred) + " |")

    # Factor each cell would need, for each protocol's best-fitting variant.
    out += ["", "| protocol (variant) | " + " | ".join(f"{NAMES[w]} pytorch, jax" for w in workloads) + " |",
            "|---|" + "---|" * len(workloads)]
    for p in pt:
        options = [(fits[(p.name, s)][1], s) for s in SYNCS if (p.name, s) in fits]
        if not options:
            continue
        _, s = min(options)
        cells = []
        for w in workloads:
            need = []
            for fw, name in (("pytorch", p.name), ("jax", p.partner)):
                rs = runs.get((w, "narrow", fw, name, "idle"), [])
                if not rs:
                    need.append("-")
                    continue
                sv = s if fw == "pytorch" else ("waited" if s == "waited" else "not waited")
                vals = []
                for r in rs:
                    h = steady_s(r, sv)
                    if not h:
                        continue
                    hp = r.median("trace") if sv == "not synced" else r.median("host")
                    d = 0.0 if p.name == "adamw" or sv == "not synced" else dev.get((w, fw), 0.0)
                    study = STUDY[(w, fw)][2] / 1e3
                    if study > d:
                        vals.append((study - d) / hp)
                fig = Figure.of(vals)
                need.append(_num(fig.mean) if fig else "none")
            cells.append(", ".join(need))
        out.append(f"| {p.name} ({s}) | " + " | ".join(cells) + " |")

    # Verdicts.
    out += ["", f"{sub} Verdicts", "",
            f"A protocol *reproduces the study's pattern* when it compiles again at step 2 on exactly the rows where "
            f"the study's second run implies it; *its ratios* when, for every workload, the study's PyTorch/JAX "
            f"ratio lies within {STUDY_RATIO_TOLERANCE:g}x of the interval measured here with no free parameter "
            "(the table above; the variant closest to the study's ratios on the whole).", ""]
    closest: dict = {}
    for p in pt:
        sig = {w: signature.get((w, p.name)) for w in workloads}
        known = {w: v for w, v in sig.items() if v is not None}
        wrong = [w for w, v in known.items() if v != study_recompiles(w)]
        pattern = ("cannot be told (no run)" if not known else
                   "yes" if not wrong and len(known) == len(workloads) else
                   "no: " + "; ".join(f"{NAMES[w]} {'compiles again' if known[w] else 'does not compile again'} at "
                                      f"step 2, the study's {'does not' if known[w] else 'does'}" for w in wrong)
                   if wrong else f"on the {len(known)} rows measured only")
        best = None
        for s in SYNCS:
            misses = {}
            for w in workloads:
                fig = ratios.get((w, p.name, s))
                if fig is None or fig.rounds < 2:  # one round has no interval to judge by
                    continue
                st = study_ratio(w)
                misses[w] = 1.0 if fig.low <= st <= fig.high else min(abs(math.log(st / fig.low)),
                                                                       abs(math.log(st / fig.high)))
                misses[w] = math.exp(misses[w]) if misses[w] != 1.0 else 1.0
            if misses and (best is None or _score(misses) < _score(best[1])):
                best = (s, misses)
        if best is None:
            out.append(f"- **{p.name}**: pattern {pattern}; ratios: fewer than two pairs of rounds measured.")
            continue
        s, misses = best
        within = [w for w, m in misses.items() if m <= STUDY_RATIO_TOLERANCE]
        left = sorted(((m, w) for w, m in misses.items() if m > STUDY_RATIO_TOLERANCE), reverse=True)
        rverdict = ("yes" if not left and len(misses) == len(workloads) else
                    "no: " + ", ".join(f"{NAMES[w]} off by {_num(m)}x" for m, w in left) if left else
                    f"on the {len(misses)} workloads measured only")
        out.append(f"- **{p.name}** (closest variant: {s}): pattern {pattern}; ratios {rverdict} "
                   f"({len(within)} of {len(misses)} within {STUDY_RATIO_TOLERANCE:g}x).")
        closest[p.name] = (s, set(within), set(misses))
    out += [""] + _summary(closest, signature, workloads)

    out += base_section(runs, sub, workloads) + load_section(runs, host_results, sub, results)
    out += versions_section(results, runs, sub) + calibration_section(runs, sub)
    return out


def versions_section(results: Path, runs: dict, sub: str) -> list[str]:
    """torch_xla lazy's host work under each version stack against the lock's, same protocol (eval),
    rounds paired."""
    out = []
    for stack in stacks_in(results):
        theirs = load_runs(results, stack)
        rows, interleaved = [], True
        for (w, size, fw, proto, loaded), rs in sorted(theirs.items()):
            ok = [r for r in rs if not r.error and r.trace]
            beside = [r for r in runs.get((w, size, fw, proto, f"beside {stack}"), []) if not r.error and r.trace]
            interleaved = interleaved and bool(beside)
            mine = beside or [r for r in runs.get((w, size, fw, proto, loaded), []) if not r.error and r.trace]
            if not ok or not mine:
                errors = sorted({r.error for r in rs if r.error})
                if errors:
                    rows.append(f"| {NAMES[w]} | {size} | {fw} {proto} | failed: {errors[0][:160]} | | | | |")
                continue
            old, new = Figure.of([r.median("host") for r in ok]), Figure.of([r.median("host") for r in mine])
            ratio = Figure.of([a.median("host") / b.median("host") for a, b in zip(ok, mine)])
            comp = "/".join(sorted({", ".join(map(str, r.compiles)) for r in ok}))
            said = ("-" if ratio is None or ratio.rounds < 2 else "indistinguishable" if ratio.low <= 1 <= ratio.high
                    else "the stack slower" if ratio.low > 1 else "the stack faster")
            rows.append(f"| {NAMES[w]} | {size} | {fw} {proto} | {old.ms()} | {new.ms()} | "
                        f"{ratio.x() if ratio else '-'} | {said} | {comp} |")
        versions = sorted({r.conditions.get("torch", "?") for rs in theirs.values() for r in rs})
        lock = sorted({r.conditions.get("torch", "?") for rs in runs.values() for r in rs})
        order = ("each of the stack's processes followed at once by the lock's same job: the rounds interleaved"
                 if interleaved else "the stack's rounds run after the lock's, not interleaved with them, so a "
                 "drift between the two times passes for the version's effect")
        out += ["", f"{sub} An older stack: {stack} (torch {', '.join(versions)}) against the lock's (torch "
                f"{', '.join(lock)})", "",
                "The same protocol in the version stack's own environment (`stackwars-ir stack add`), rounds paired "
                f"with the lock's ({order}): *stack/lock* "
                "above 1 means the older release does more host work per step; *indistinguishable* where its "
                "interval holds 1.", "",
                "| workload | size | protocol | host, stack (ms) | host, lock (ms) | stack/lock | verdict | compiles, stack |",
                "|---|---|---|---|---|---|---|---|"] + rows
    return out


MODELS = ("gpt2", "bert", "resnet50")  # the study's models; the other rows are its basic workloads


def _summary(closest: dict, signature: dict, workloads) -> list[str]:
    """Two sentences across the verdicts: which protocols' ratios hold on the models and on the basic
    workloads, and which compile again at step 2 where."""
    def names(ws) -> str:
        return ", ".join(NAMES[w] for w in ws)

    models = [w for w in MODELS if w in workloads]
    basics = [w for w in workloads if w not in MODELS]
    out = []
    for group, label in ((models, "the models"), (basics, "the basic workloads")):
        if not group:
            continue
        holds = [f"{n} ({s})" for n, (s, within, measured) in closest.items()
                 if set(group) <= measured and set(group) <= within]
        out.append(f"- Ratios within {STUDY_RATIO_TOLERANCE:g}x of the study's on all of {label} ({names(group)}): "
                   f"{', '.join(holds) or 'no protocol'}.")
    again = sorted({n for (w, n), v in signature.items() if v and w in models and
                    all(signature.get((m, n)) for m in models)})
    if models:
        line = (f"- Compiling again at step 2 on every model, as the study's second runs imply: "
                f"{', '.join(again) or 'no protocol'}")
        if basics and again:
            also = [n for n in again if any(signature.get((b, n)) for b in basics)]
            line += (f"; of those, also on a basic workload, where the study's second run implies no compile: "
                     f"{', '.join(also) or 'none'}")
        out.append(line + ".")
    return out


def protocols_summary(results: Path, host_results: Path, workloads=WORKLOADS) -> list[str]:
    """docs/findings.md's part of the section: the measured ratio table and the verdicts, as the host
    page renders them (one renderer), their headings a level down."""
    lines = protocols_section(results, host_results, workloads, level="###")
    keep, out = False, []
    for line in lines:
        if line.startswith("#"):
            keep = line.startswith(("#### PyTorch/JAX steady ratio", "#### Verdicts"))
        if keep:
            out.append(line)
    return out


def _score(misses: dict) -> float:
    return sum(math.log(m) ** 2 for m in misses.values()) / max(1, len(misses))


def _at(cell, f: float) -> float:
    h, d, sv = cell
    if sv == "not synced":
        return f * h
    return f * h + d if sv == "waited" else max(f * h, d)


def _measured_step(run, sync: str) -> float | None:
    """A round's steady step as measured here under a sync variant (the device's wait on XLA:CPU
    counted where the variant waits)."""
    if run.error or not run.trace:
        return None
    if sync == "waited":
        return run.median("step")
    if sync == "not synced":
        return run.median("trace")
    return run.median("host")


def base_section(runs: dict, sub: str, workloads) -> list[str]:
    """How host work relates to tensor size: each model's eval protocols at base and narrow."""
    rows = []
    for w in workloads:
        for fw in ("pytorch", "jax"):
            base = [r for r in runs.get((w, "base", fw, "eval", "idle"), []) if not r.error and r.trace]
            narrow = [r for r in runs.get((w, "narrow", fw, "eval", "idle"), []) if not r.error and r.trace]
            if not base or not narrow:
                continue
            hb, hn = Figure.of([r.median("host") for r in base]), Figure.of([r.median("host") for r in narrow])
            wb = Figure.of([r.median("wait") for r in base])
            share = Figure.of([n.median("host") / b.median("host") for b, n in zip(base, narrow)])
            rows.append(f"| {NAMES[w]} | {fw} eval | {hb.ms()} | {hn.ms()} | {share.x() if share else '-'} | "
                        f"{wb.ms() if wb else '-'} |")
    if not rows:
        return []
    return ["", f"{sub} Host work at base size and narrow", "",
            "The same protocol (eval, waited) at base size and narrow, rounds paired: *narrow/base* is the share of "
            "the base model's host work that remains when its tensors are a few elements wide (the part that "
            "scales with op count; the rest scales with tensor size). *device wait, base*: XLA:CPU's run after the "
            "host's part, for scale.", "",
            "| workload | protocol | host, base (ms) | host, narrow (ms) | narrow/base | device wait, base (ms) |",
            "|---|---|---|---|---|---|"] + rows


def _old_record(host_results: Path) -> tuple[float, float, str] | None:
    """(forward s, sync s, made) of torch_xla lazy's GPT-2 base steady phases in the previous page's
    kept record (W-bench.json of `make findings-host`), or None."""
    from stackwars_ir.bench.run import BenchReport

    try:
        rep = BenchReport.from_json(json.loads((Path(host_results) / "gpt2-bench.json").read_text()))
        made = json.loads((Path(host_results) / "made.json").read_text()).get("gpt2-bench.json", {})
    except (OSError, ValueError, KeyError):
        return None
    got = _lazy_phases(rep)
    return None if got is None else (*got, f"{made.get('date', '?')} (commit {made.get('commit', '?')})")


def _lazy_phases(rep) -> tuple[float, float] | None:
    """(forward s, sync s) of a BenchReport's torch_xla lazy row (its steady host phases), or None."""
    row = next((e for _, e in rep.rows if e.kind == "torch_xla lazy" and e.ok and e.host), None)
    if row is None:
        return None
    phases = {p.name: p.seconds for p in row.host.phases if not p.parent}
    return phases.get("forward", 0.0), phases.get("sync", 0.0)


def previous_rounds(results: Path) -> dict:
    """{condition: [(round, forward s, sync s), ...] in round order} of the previous page's protocol run
    again in rounds (study/run/protocols.py: `bench gpt2 --size base --baselines jax,torch_xla
    --host`, idle and beside spinning processes): torch_xla lazy's steady host phases."""
    from stackwars_ir.bench.run import BenchReport

    out: dict = {}
    for p in sorted(Path(results).glob("*-bench-host-r*.json")):
        try:
            d = json.loads(p.read_text())
            rep = BenchReport.from_json(d["bench"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        got = _lazy_phases(rep)
        if got is not None:
            out.setdefault(d.get("condition", "idle"), []).append((d.get("round", 0), *got))
    return {k: sorted(v) for k, v in out.items()}


def _previous_lines(results: Path, step_idle: "Figure", kept_total: float | None) -> list[str]:
    """The previous page's protocol in rounds, idle against loaded, and against the step protocol."""
    got = previous_rounds(results)
    idle, busy = got.get("idle", []), got.get("loaded", [])
    if not idle:
        return []
    total = Figure.of([f + s for _, f, s in idle])
    fwd, sync = Figure.of([f for _, f, _ in idle]), Figure.of([s for _, _, s in idle])
    line = (f"The previous page's protocol run again in {len(idle)} rounds (`bench gpt2 --size base --baselines "
            f"jax,torch_xla --host`, each a fresh process; host phases timed while the device runs on the same "
            f"cores): idle, forward {fwd.ms()} + sync {sync.ms()} = {total.ms()} ms")
    if busy:
        btotal = Figure.of([f + s for _, f, s in busy])
        by = dict((r, f + s) for r, f, s in busy)
        effect = Figure.of([by[r] / (f + s) for r, f, s in idle if r in by])
        said = ("one round each: no interval" if effect is None or effect.rounds < 2 else
                f"indistinguishable: loaded/idle {effect.x()} (rounds paired) holds 1" if effect.low <= 1 <= effect.high
                else f"the load multiplies it by {effect.x()} (rounds paired)")
        line += f"; beside spinning processes {btotal.ms()} ms, {said}"
    if step_idle is not None and total is not None and total.rounds > 1 and step_idle.rounds > 1:
        rel = ("inside the step protocol's idle interval" if step_idle.low <= total.mean <= step_idle.high else
               f"{_num(total.mean / step_idle.mean)}x the step protocol's idle figure, "
               f"{'overlapping' if total.overlaps(step_idle) else 'outside'} its interval")
        line += f"; {rel}"
    if kept_total and total is not None and total.rounds > 1:
        where = ("inside that interval" if total.low <= kept_total <= total.high else
                 f"below that interval, its mean {_num(total.mean / kept_total)}x the record" if kept_total < total.low
                 else f"above that interval, {_num(kept_total / total.mean)}x its mean")
        line += f". The previous page's one record by this protocol ({_num(kept_total * 1e3)} ms) lies {where}"
    return [line + "."]


def load_section(runs: dict, host_results: Path, sub: str, results: Path | None = None) -> list[str]:
    """GPT-2 base torch_xla lazy eval host work: idle rounds against rounds beside spinning processes,
    against the previous page's one-job record, and the previous page's protocol run again in rounds."""
    idle = [r for r in runs.get(("gpt2", "base", "pytorch", "eval", "idle"), []) if not r.error and r.trace]
    busy = [r for r in runs.get(("gpt2", "base", "pytorch", "eval", "loaded"), []) if not r.error and r.trace]
    if not idle:
        return []
    out = ["", f"{sub} Idle, loaded and paused, and the previous records", ""]
    hi, ti = Figure.of([r.median("host") for r in idle]), Figure.of([r.median("trace") for r in idle])
    def loop(rs) -> str:  # the calibration's pure-Python loop: what the load did to the host's speed
        vals = [r.calibration.get("python loop", 0) for r in rs if r.calibration]
        return f"the calibration's Python loop {_num(statistics.median(vals) * 1e3)} ms" if vals else "no calibration"

    out.append(f"GPT-2 base, torch_xla lazy, eval, host work per steady step: idle {hi.ms()} ms (trace "
               f"{ti.ms()}; {loop(idle)}).")
    if busy:
        spin = busy[0].conditions.get("spinning processes beside", "?")
        hb, tb = Figure.of([r.median("host") for r in busy]), Figure.of([r.median("trace") for r in busy])
        effect = Figure.of([b.median("host") / i.median("host") for i, b in zip(idle, busy)])
        verdict = ("one round each: no interval to compare yet" if effect is None or effect.rounds < 2 else
                   f"{'the intervals overlap, but ' if hi.overlaps(hb) else 'the intervals do not overlap: '}the "
                   f"load multiplies host work by {effect.x()} (rounds paired)" if effect.low > 1 or effect.high < 1
                   else f"indistinguishable: loaded/idle {effect.x()} (rounds paired) holds 1")
        out.append(f"Beside {spin} spinning processes: {hb.ms()} ms (trace {tb.ms()}; {loop(busy)}); {verdict}.")
    paused = [r for r in runs.get(("gpt2", "base", "pytorch", "eval", "paused"), []) if not r.error and r.trace]
    if paused:
        pause = paused[0].conditions.get("pause s", 0)
        hp = Figure.of([r.median("host") for r in paused])
        effect = Figure.of([p.median("host") / i.median("host") for i, p in zip(idle, paused)])
        verdict = ("one round each: no interval to compare yet" if effect is None or effect.rounds < 2 else
                   f"indistinguishable: paused/idle {effect.x()} (rounds paired) holds 1"
                   if effect.low <= 1 <= effect.high else
                   f"paused/idle {effect.x()} (rounds paired): what follows right after the previous step's wait "
                   "changes the next step's host work")
        out.append(f"Paused {_num(pause * 1e3)} ms before each steady step (the previous step waited for, then "
                   f"nothing): {hp.ms()} ms; {verdict}.")
    old = _old_record(host_results)
    if old:
        fwd, sync, made = old
        total = fwd + sync
        where = (f"{_num(total / hi.mean)}x the idle round's figure (one round: no interval)" if hi.rounds < 2 else
                 "inside the idle interval" if hi.low <= total <= hi.high else
                 f"{_num(hi.mean / total)}x below the idle figure" if total < hi.low else
                 f"{_num(total / hi.mean)}x above the idle figure")
        out.append(f"The previous page's record (one job, {made}; `bench --host`, kept in benchmarks/records/host): "
                   f"forward {_num(fwd * 1e3)} + sync {_num(sync * 1e3)} = {_num(total * 1e3)} ms, {where}. Its "
                   "phases are this page's trace and launch (each step waited for there too), but it is one job "
                   "with no interval and no calibration record: where it lies against the idle and loaded "
                   "intervals is all that can be said of it.")
    if results is not None:
        out += _previous_lines(results, hi, sum(old[:2]) if old else None)
    return out


def calibration_section(runs: dict, sub: str) -> list[str]:
    groups: dict = {}
    for (w, size, fw, proto, condition), rs in runs.items():
        for r in rs:
            if r.calibration:
                groups.setdefault("beside spinning processes" if condition == "loaded" else "idle", []).append(r.calibration)
    if not groups:
        return []
    out = ["", f"{sub} Calibration", "",
           "Taken in every process before its protocol: a pure-Python loop (200,000 additions), 200 PyTorch CPU "
           "dispatches, 200 jax dispatches; median of the processes, and the range. A record from another machine "
           "or load compares through these.", "",
           "| condition | processes | python loop (ms) | torch dispatch (us each) | jax dispatch (us each) |",
           "|---|---:|---|---|---|"]
    for name, cals in sorted(groups.items()):
        def col(key, scale):
            vals = sorted(c[key] * scale for c in cals if key in c)
            return f"{_num(statistics.median(vals))} ({_num(vals[0])}-{_num(vals[-1])})" if vals else "-"
        out.append(f"| {name} | {len(cals)} | {col('python loop', 1e3)} | {col('torch dispatch', 1e6 / 200)} | "
                   f"{col('jax dispatch', 1e6 / 200)} |")
    return out
