"""A generated page's claims checked against its own numbers: a verdict against its interval, a share against its parts.

Each rule reads one form the generators write (bench.compare.Verdict's sentences, regress's and the
versions pages' ratios, the time-by-block shares) and says where a sentence claims more than its
numbers: a speed-up whose 95% interval reaches 1, "indistinguishable" of an interval that excludes 1,
a ratio outside its own interval, a regression whose interval starts at or below zero, a share over
100% with no word for it, causal wording ("caused by the IR", "equally fast"), a split of a kernel
gap by block beside a steady gap of the other sign with no word for it, gaps said to "differ in
sign" where one is 0 or they agree, a ratio of counts over a count of 0 or off its own counts. A
page (or a generated sentence) that breaks none passes; tests/test_page_claims.py runs it over every
docs/findings*.md, over the generated docs pages and the sentences the generators write for edge
cases (gaps within noise, counts of zero), and over pages built to break each rule, so a generator
change cannot bring an overstatement back.

Usage: .venv/bin/python benchmarks/page_claims.py docs/findings*.md   (exit 1 and one line per claim)
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

NUM = r"(\d+(?:\.\d+)?)"
# bench.compare.Verdict.sentence: "A ran 1.25x as fast as B (batch 2) (95% interval 1.03-1.40)"
FASTER = re.compile(rf"ran {NUM}x as fast as [^()|]*?(?:\(batch \d+\) )?\(95% interval {NUM}-{NUM}\)")
# ... and "A and B (batch 2): indistinguishable (ratio 1.03, 95% interval 0.98-1.05 spans 1)"
TIE = re.compile(rf"indistinguishable \(ratio {NUM}, 95% interval {NUM}-{NUM} spans 1\)")
# A ratio with its interval anywhere: "B/A 1.033 (95% interval 0.966-1.105", "1.097 (95% interval 1.02-1.18)"
RATIO = re.compile(rf"{NUM}x? \(95% interval {NUM}-{NUM}")
# The versions pages: "slower by 35% (95% interval from 32%)" / "faster by 5% (95% interval from 2%)"
BY = re.compile(rf"(slower|faster) by {NUM}% \(95% interval from (-?\d+(?:\.\d+)?)%\)")
# findings-versions' verdicts: "the lock's XLA is slower (B/A 1.12, 95% interval 1.03-1.20)"; the
# ablations page's: "indistinguishable (V/B 1.011, 95% interval 0.994-1.028)" (a variant over B)
DIRECTION = re.compile(rf"(slower|faster|indistinguishable) \((?:B/A|V/B) {NUM}, 95% interval {NUM}-{NUM}\)")
SHARE = re.compile(rf"\(({NUM})%;")  # time by block: "attention, 12 blocks: -1.06 (64%; kernels ..."
# docs/findings-host.md's protocol tables: "7.37x [6.1-8.9]" (geometric mean of rounds, its 95% interval
# across them); a ratio cell there without one ("7.37x (1 round)", "7.37x") is a ratio with no interval.
BRACKETED = re.compile(r"^([\d,]+(?:\.\d+)?)x \[([\d,]+(?:\.\d+)?)-([\d,]+(?:\.\d+)?)\]$")
BARE_RATIO = re.compile(r"^[\d,]+(?:\.\d+)?x\b")
# diff --bench's sentence: "The kernel gap (-0.017 ms) and the steady-state gap (+0.000 ms) differ in sign"
SIGNS = re.compile(r"kernel gap \(([+-]?\d+(?:\.\d+)?) ms\) and the steady-state gap \(([+-]?\d+(?:\.\d+)?) ms\) "
                   r"differ in sign")
# A ratio of counts: "touched 9.0x a steady run's fresh memory (9 page faults against 0)"
COUNT_RATIO = re.compile(r"(\d+(?:\.\d+)?)x (?:(?!\d+(?:\.\d+)?x )[^()])*\(([\d,]+) [a-z][a-z ]* against "
                         r"([\d,]+(?:\.\d+)?)\)")  # the ratio nearest the counts
CAUSAL = ("is caused by the IR", "are caused by the IR", "caused by the ir", "equally fast")
# Words that say a share over 100% is not an error: blocks that differ both ways (issue 53).
BOTH_WAYS = ("both ways", "differ both ways", "opposite", "over 100%")


def _number(cell: str) -> float | None:
    """A cell's leading number; of a ratio worded "indistinguishable from 1 (0.96x, ...)", that ratio."""
    m = re.match(r"\s*(?:indistinguishable from 1 \()?([+-]?[\d,]+(?:\.\d+)?)", cell)
    return float(m.group(1).replace(",", "")) if m else None


def _signs_disagree(header: list[str], row: list[str]) -> tuple | None:
    """(kernel gap, steady gap) of a time-by-block row whose two gaps have opposite signs; None otherwise
    (the kernel gap read from its column, or from "B / A kernels" as B/A - 1)."""
    if "steady gap ms" not in header or len(row) != len(header):
        return None
    steady = _number(row[header.index("steady gap ms")])
    if "kernel gap ms" in header:
        kernel = _number(row[header.index("kernel gap ms")])
    elif "B / A kernels" in header:
        ratio = _number(row[header.index("B / A kernels")])
        kernel = None if ratio is None else ratio - 1
    else:
        return None
    if kernel is None or steady is None or kernel == 0 or steady == 0 or (kernel > 0) == (steady > 0):
        return None
    return kernel, steady


def _protocol_ratios(at: str, cells: list[str]) -> list[str]:
    """A protocol table's ratio cells (docs/findings-host.md): each with its interval across rounds, its
    point inside it."""
    out = []
    for cell in cells:
        if (m := BRACKETED.match(cell)):
            r, lo, hi = (float(g.replace(",", "")) for g in m.groups())
            if not lo <= r <= hi:
                out.append(f"{at}: ratio {r:g} outside its own interval {lo:g}-{hi:g}")
        elif BARE_RATIO.match(cell):
            out.append(f"{at}: a ratio without an interval across rounds ({cell})")
    return out


def claims(text: str, where: str = "page") -> list[str]:
    """One line per claim of `text` that its own numbers do not support."""
    out, header = [], []
    for n, line in enumerate(text.splitlines(), 1):
        at = f"{where}:{n}"
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if not header:
                header = cells
            elif header[:2] == ["protocol", "variant"] and not cells[0].startswith("**"):
                out += _protocol_ratios(at, cells[2:])
            elif (gaps := _signs_disagree(header, cells)) and "opposite signs" not in line:
                out.append(f"{at}: a kernel gap ({gaps[0]:+g}) split by block beside a steady gap of the other sign "
                           f"({gaps[1]:+g}) with no word for it")
        else:
            header = []
        for m in FASTER.finditer(line):
            r, lo, hi = map(float, m.groups())
            if lo <= 1.0:
                out.append(f"{at}: 'ran {m.group(1)}x as fast' but its 95% interval {lo:g}-{hi:g} reaches 1")
            if not lo <= r <= hi:
                out.append(f"{at}: ratio {r:g} outside its own interval {lo:g}-{hi:g}")
        for m in TIE.finditer(line):
            r, lo, hi = map(float, m.groups())
            if not lo <= 1.0 <= hi:
                out.append(f"{at}: 'indistinguishable' but its 95% interval {lo:g}-{hi:g} excludes 1")
        for m in RATIO.finditer(line):
            r, lo, hi = map(float, m.groups())
            if not lo <= r <= hi:
                out.append(f"{at}: ratio {r:g} outside its own interval {lo:g}-{hi:g}")
        for m in BY.finditer(line):
            word, pct, low = m.group(1), float(m.group(2)), float(m.group(3))
            if low <= 0:
                out.append(f"{at}: '{word} by {pct:g}%' but its 95% interval starts at {low:g}%")
        for m in DIRECTION.finditer(line):
            word, (r, lo, hi) = m.group(1), map(float, m.groups()[1:])
            holds = {"slower": lo > 1.0, "faster": hi < 1.0, "indistinguishable": lo <= 1.0 <= hi}[word]
            if not holds or not lo <= r <= hi:
                out.append(f"{at}: '{word}' with B/A {r:g} and its 95% interval {lo:g}-{hi:g}")
        for m in SIGNS.finditer(line):
            kernel, steady = float(m.group(1)), float(m.group(2))
            if kernel == 0 or steady == 0 or (kernel > 0) == (steady > 0):
                out.append(f"{at}: 'differ in sign' said of gaps {kernel:+g} and {steady:+g} ms")
        for m in COUNT_RATIO.finditer(line):
            ratio, top, bottom = float(m.group(1)), *(float(g.replace(",", "")) for g in m.groups()[1:])
            if bottom == 0:
                out.append(f"{at}: a ratio ({ratio:g}x) over a count of 0 ({top:g} against 0)")
            elif abs(ratio - top / bottom) > 0.05 * top / bottom + 0.05:
                out.append(f"{at}: {ratio:g}x said of {top:g} against {bottom:g} ({top / bottom:.2g}x)")
        lowered = line.lower()
        for phrase in CAUSAL:
            if phrase in lowered:
                out.append(f"{at}: causal wording '{phrase}' (say what the interval supports)")
        shares = [float(m.group(1)) for m in SHARE.finditer(line)]
        if any(s > 100 for s in shares) and not any(w in lowered for w in BOTH_WAYS):
            out.append(f"{at}: a share over 100% ({max(shares):g}%) with no word for it (blocks that differ both ways)")
    return out


def main(paths) -> int:
    found = [c for p in paths for c in claims(Path(p).read_text(), str(p))]
    for c in found:
        print(c)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
