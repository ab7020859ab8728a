"""Why a PyTorch export failed, said at the model's own line.

The causes: data-dependent branches and shapes, and ops a route cannot lower.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..common.errors import CaptureError

if TYPE_CHECKING:
    import torch

FIXED = ("compute at a size fixed before the data is seen (a mixture of experts: every expert on every token "
         "weighted by its gate, or a fixed capacity per expert; docs/adapters.md, data-dependent shapes)")
BRANCH = f"drop the branch or state what holds with torch._check(...), or {FIXED}"
# torch.export's message names the symbols it could not decide, u0, u1, ... (unbacked: sizes known only at run time).
_UNBACKED = re.compile(r"\bu\d+\b")
_FILE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')
_FX_FILE = re.compile(r"# File: (.+?):(\d+) in (\S+), code: (.*)$")


class Site(NamedTuple):
    """A line of the user's code: where an op was written or a branch taken."""

    file: str
    line: int
    function: str
    code: str  # the source line, without a trailing comment

    def where(self) -> str:
        return f"{self.file}:{self.line}: in {self.function}()"


def _code(text: str) -> str:
    """A source line without the comment after it (two spaces then '#', as PEP 8 writes one)."""
    return re.split(r"\s{2,}#", text.strip(), maxsplit=1)[0].strip()


def _same(a: str, b: str | None) -> bool:
    return bool(b) and Path(a).resolve() == Path(b).resolve()


def _pick(sites: list[Site], path: str | None) -> Site | None:
    """The deepest site in the adapter's file, else the deepest outside installed packages."""
    ours = [s for s in sites if _same(s.file, path)]
    if ours:
        return ours[-1]
    outside = [s for s in sites if "site-packages" not in s.file and "/lib/python" not in s.file]
    return outside[-1] if outside else None


def node_site(node: torch.fx.Node, path: str | None) -> Site | None:
    """Where an FX node's op was written (its `stack_trace` meta: the Python frames torch.export recorded)."""
    trace = node.meta.get("stack_trace") or ""
    return _pick([Site(f, int(n), fn, _code(code)) for f, n, fn, code in _FILE.findall(trace)], path)


def data_dependent_node(ep: torch.export.ExportedProgram) -> torch.fx.Node | None:
    """The first node of an exported program whose output size is known only at run time (an unbacked
    symbol: nonzero, torch.where with one argument, a boolean mask, unique ...), or None."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node in ep.graph.nodes:
        val = node.meta.get("val")
        try:
            if val is not None and free_unbacked_symbols(val):
                return node
        except Exception:  # noqa: BLE001 - a value free_unbacked_symbols cannot walk holds no size
            continue
    return None


def _origin(partial_graph: str, symbols: list[str], path: str | None) -> Site | None:
    """The line that made the first of `symbols`: in torch.export's partial graph, the first value typed
    with it, under the `# File:` comment that precedes it."""
    last = None
    for text in partial_graph.splitlines():
        found = _FX_FILE.search(text)
        if found:
            last = Site(found[1], int(found[2]), found[3], _code(found[4]))
        elif last and symbols and re.search(r'"\w+\[[^"]*\b(' + "|".join(symbols) + r')\b', text):
            return last
    return None


def torch_export_failure(error: Exception, path: str | None, frames: list) -> CaptureError:
    """torch.export's exception as one line at the adapter's line. `frames`: the traceback frames in
    the adapter file (models._contract), outermost first; `path`: the adapter file."""
    name, first = type(error).__name__, (str(error).strip().splitlines() or [""])[0]
    site = Site(frames[-1].filename, frames[-1].lineno, frames[-1].name, _code(frames[-1].line or "")) \
        if frames else None
    data_dependent = "data-dependent" in str(error) or name.startswith("GuardOnDataDependent")
    if data_dependent:
        expr = re.search(r"data-dependent expression (.+?)(?: \(unhinted|$)", first)
        symbols = list(dict.fromkeys(_UNBACKED.findall(expr[1] if expr else first)))
        origin = _origin(getattr(error, "partial_fx_graph", "") or "", symbols, path)
        made = (f"; {', '.join(symbols)}: a size known only at run time, made at line {origin.line} "
                f"(`{origin.code}`)" if origin and symbols else "")
        branch = f" (`{site.code}`)" if site and site.code else ""
        what = f"torch.export cannot branch on a data-dependent value{branch}: {expr[1] if expr else first}{made}"
        return CaptureError(f"{site.where()}: {what}" if site else what, fix=BRANCH)
    attention = "scaled_dot_product" in str(error) or "sdpa" in str(error).lower() or \
        bool(site and "attention" in site.code)
    fix = "use --attn eager (sdpa attention is not exportable here)" if attention else \
        "change the line so torch.export can trace it (docs/adapters.md: what torch.export traces)"
    what = f"torch.export failed: {name}: {first}"
    return CaptureError(f"{site.where()}: {what}" if site else what, fix=fix)


def _named_ops(route: str, error: Exception) -> list[str]:
    """The ops a route's error says it could not lower: torch_xla's list of ops it would run outside
    the graph, torchax's assertion naming the op it has no function for."""
    text = str(error)
    if "not capturable by Pytorch/XLA:" in text:
        return [op.strip() for op in text.split("not capturable by Pytorch/XLA:", 1)[1].splitlines() if op.strip()]
    if route == "torchax" and isinstance(error, AssertionError):
        head = (text.strip().splitlines() or [""])[0].strip()
        return [head] if re.fullmatch(r"[\w.]+", head) else []
    found = re.search(r"OperatorNotFound\W+(?:Operator with name )?([\w.:]+)", text)
    return [found[1]] if found else []


def _node_of(ep, op: str):
    """The exported program's node calling `op` (spelled aten::nonzero or aten.nonzero.default)."""
    want = op.replace("::", ".")
    for node in ep.graph.nodes:
        if node.op == "call_function":
            target = str(node.target)
            if target == want or target.rsplit(".", 1)[0] == want:
                return node
    return None


def route_failure(route: str, error: Exception, ep: torch.export.ExportedProgram, path: str | None) -> CaptureError:
    """A route's failure to lower torch.export's program, at the model's line: the op the route has
    no lowering for, or the op whose output size depends on the data (which no XLA route lowers)."""
    name, first = type(error).__name__, (str(error).strip().splitlines() or [""])[0][:300]
    ops = _named_ops(route, error)
    node = next((n for n in (_node_of(ep, op) for op in ops) if n is not None), None) if ops else None
    dynamic = data_dependent_node(ep)
    if dynamic is not None and (node is None or node is dynamic):
        site = node_site(dynamic, path)
        said = f" ({route}: {', '.join(ops)})" if ops else f" ({route}: {name}: {first})"
        what = (f"`{site.code}` ({dynamic.target}) gives an output whose size depends on the data, which {route} "
                f"cannot lower to a static-shaped StableHLO program{said}")
        return CaptureError(f"{site.where()}: {what}" if site else what, fix=FIXED)
    if node is not None:
        site = node_site(node, path)
        what = f"{route} has no lowering for {node.target}" + (f" (`{site.code}`)" if site else "")
        return CaptureError(f"{site.where()}: {what}" if site else what,
                            fix="try another --exporter (--exporter all tries each), or write the op with ops "
                                f"{route} lowers")
    if ops:
        return CaptureError(f"{route} has no lowering for {', '.join(ops)}",
                            fix="try another --exporter (--exporter all tries each)")
    return CaptureError(f"{route} export failed: {name}: {first}")
