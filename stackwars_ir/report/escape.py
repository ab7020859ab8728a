"""The one place IR-derived text becomes HTML: escape everything, highlight IR lines safely."""
from __future__ import annotations

import html
import re


def esc(text: object) -> str:
    """Escape for HTML text and attribute values (quotes too)."""
    return html.escape(str(text), quote=True)


_TOKEN = re.compile(r"(%\w+)|(@[\w.$-]+)|(\b(?:stablehlo|chlo|mhlo|func|check)\.[\w.]+)|(\b\d+(?:x\d+)*x[a-z]+\d*\b)")


def highlight(line: str) -> str:
    """An IR excerpt line with SSA values, symbols, op names and types in spans; all text escaped."""
    out, pos = [], 0
    for m in _TOKEN.finditer(line):
        out.append(esc(line[pos:m.start()]))
        cls = ("v", "s", "o", "t")[next(i for i, g in enumerate(m.groups()) if g)]
        out.append(f'<span class="{cls}">{esc(m.group(0))}</span>')
        pos = m.end()
    out.append(esc(line[pos:]))
    return "".join(out)
