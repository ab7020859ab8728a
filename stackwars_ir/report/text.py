"""Terminal text renderings."""
from __future__ import annotations

from ..ir.stats import ModuleStats
from ..textfmt import human_bytes, table


def stats_text(s: ModuleStats, top: int = 15) -> str:
    funcs = ", ".join(f"@{n}" + ("" if v == "public" else f" ({v})") for n, v, _ in s.functions)
    lines = [
        f"== {s.source}",
        f"functions: {len(s.functions)} ({funcs})" if len(funcs) < 200 else f"functions: {len(s.functions)}",
        f"ops: {s.ops_written} as written, {s.ops_inlined} with calls inlined ({s.calls} calls)",
        f"entry arguments: {s.arguments}, {human_bytes(s.argument_bytes)}",
        "",
        table(["op", "count"], [[k, v] for k, v in s.by_op[:top]])
        + (f"\n... {len(s.by_op) - top} more op kinds" if len(s.by_op) > top else ""),
        "",
        table(["dialect", "ops"], [[k, v] for k, v in s.by_dialect]),
        "",
        table(["largest tensors", "what", "bytes"], [[t, w, human_bytes(b)] for t, w, b in s.largest],
              right={2}),
        "",
    ]
    return "\n".join(lines)
