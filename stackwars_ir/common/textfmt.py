"""Plain-text tables for terminals and logs (one helper, used by every text renderer)."""
from __future__ import annotations


def table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    """Left-aligned columns, right-aligned where `right` says (numbers)."""
    if right is None:  # numbers in the first row say which columns are numeric
        right = {i for i, c in enumerate(rows[0]) if isinstance(c, (int, float))} if rows else set()
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def _fmt(c) -> str:
    if isinstance(c, float):
        return f"{c:.3g}" if abs(c) < 1000 else f"{c:,.0f}"
    if c is None:
        return "-"
    return str(c)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "dynamic"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
