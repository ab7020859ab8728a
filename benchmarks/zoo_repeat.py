"""How reproducible the zoo page's steady-state verdicts are: two runs' pages compared, architecture by architecture.

    python benchmarks/zoo_repeat.py OLD.md NEW.md   # e.g. OLD from `git show REV:docs/findings-zoo.md`

Each page is docs/findings-zoo.md as `make findings-zoo` wrote it (study/run/zoo.py); its
tables give each architecture's steady-state ratio torchax/torch_xla, and its verdict: faster (under
1 - SAME), slower (over 1 + SAME) or the same. Prints, per step: how many verdicts changed between the
two runs, which reversed (faster in one, slower in the other), how far the ratios moved (the median
and the largest factor), and the two runs' geometric means (of the pages' two-digit ratios, so one
may differ from the page's own, computed from the times, in the last digit). Two runs of the same code on the same
kind of machine should agree; where they do not, the per-architecture verdicts are the machine's
noise, not the lowering's.
"""
from __future__ import annotations

import math
import re
import statistics
import sys
from pathlib import Path

import _common  # noqa: F401  (the project on sys.path)
from study.zoo import SAME

# model | ops | fusions | compile | steady | ratio | ...: the ratio is the sixth cell (later columns vary)
ROW = re.compile(r"^\| (\w+) \| \d+ / \d+ \| [^|]+ \| [^|]+ \| [^|]+ \| ([0-9.]+) \|")
DATE = re.compile(r" on (\d{4}-\d{2}-\d{2}); machine: ([^;]+);")


def ratios(page: Path) -> tuple[str, dict]:
    """The page's date and machine, and its steady-state ratios by (step, model)."""
    text = page.read_text()
    said = DATE.search(text)
    if not said or "# Findings: the zoo" not in text:
        raise SystemExit(f"zoo_repeat: {page}: not a findings-zoo page (make findings-zoo writes one)")
    out, step = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            step = line[3:].strip()
        elif step in ("Forward", "Training step") and (m := ROW.match(line)):
            out[(step, m.group(1))] = float(m.group(2))
    return f"{said.group(1)} ({said.group(2)})", out


def verdict(ratio: float) -> str:
    return "faster" if ratio < 1 - SAME else "slower" if ratio > 1 + SAME else "the same"


def compare(old: dict, new: dict) -> list[str]:
    lines = []
    for step in ("Forward", "Training step"):
        both = sorted(m for s, m in old if s == step and (s, m) in new)
        if not both:
            continue
        a = [old[(step, m)] for m in both]
        b = [new[(step, m)] for m in both]
        changed = [(m, x, y) for m, x, y in zip(both, a, b) if verdict(x) != verdict(y)]
        reversed_ = [f"{m} {x:.2f} -> {y:.2f}" for m, x, y in changed if {verdict(x), verdict(y)} == {"faster", "slower"}]
        moved = [math.exp(abs(math.log(y / x))) for x, y in zip(a, b)]
        geo = [math.exp(statistics.fmean(math.log(v) for v in vs)) for vs in (a, b)]
        lines.append(f"{step}, {len(both)} architectures: the verdict (torchax faster / slower by more than {SAME:.0%}, "
                     f"or the same) changed in {len(changed)}, reversed in {len(reversed_)}"
                     + (f" ({', '.join(reversed_)})" if reversed_ else "")
                     + f"; a ratio moved by a factor of {statistics.median(moved):.2f} (median), {max(moved):.2f} at most; "
                     f"geometric mean ratio {geo[0]:.2f} then {geo[1]:.2f}.")
    return lines


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python benchmarks/zoo_repeat.py OLD.md NEW.md")
    (when_a, old), (when_b, new) = ratios(Path(argv[0])), ratios(Path(argv[1]))
    print(f"zoo pages compared: {when_a} against {when_b}")
    for line in compare(old, new):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
