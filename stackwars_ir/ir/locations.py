"""Provenance: the module path an op came from, read off its printed MLIR location."""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iree.compiler import ir as iree_ir
    from jaxlib.mlir import ir as jax_ir

# Only a location's head matters: the outermost name location, or a call site's callee.


def loc_name(loc: jax_ir.Location | iree_ir.Location, kinds: tuple[type, type, type]) -> str | None:
    """The outermost NameLoc's string of a Location object, read off its structure.

    `kinds` is the bindings' (NameLoc, CallSiteLoc, FusedLoc) classes, which locations are
    downcast to. Reading the structure costs under 1 us; printing a JAX debug location (its
    whole call stack) costs about 8 us, and a module has one per op. Location kinds the
    bindings do not downcast are printed and read by top_name.
    """
    name_loc, callsite_loc, fused_loc = kinds
    while True:
        kind = type(loc)
        if kind is name_loc:
            return loc.name_str
        if kind is callsite_loc:
            loc = loc.callee
        elif kind is fused_loc:
            inner = loc.locations
            if not inner:
                return None
            loc = inner[0]
        elif kind.__name__ in ("FileLineColLoc", "UnknownLoc"):
            return None
        else:
            return top_name(str(loc))


def top_name(loc: str) -> str | None:
    """The outermost NameLoc's string of a printed location (`loc("a/b"(...))` -> `a/b`), else None."""
    i = 4 if loc.startswith("loc(") else 0
    while True:
        if loc.startswith("callsite(", i):
            i += len("callsite(")
        elif loc.startswith("fused", i):
            j = loc.find("[", i)
            if j < 0:
                return None
            i = j + 1
        elif loc.startswith('"', i):
            text, end = _read_string(loc, i)
            if end < len(loc) and loc[end] == ":":  # a file location: "file":line:col
                return None
            return text
        else:
            return None


def _read_string(s: str, i: int) -> tuple[str, int]:
    """Decode the MLIR string literal starting at s[i] == '"'; return it and the index after it."""
    end = s.find('"', i + 1)
    if end >= 0 and "\\" not in s[i + 1:end]:  # the common case: no escapes
        return s[i + 1:end], end + 1
    out = []
    j = i + 1
    n = len(s)
    while j < n:
        c = s[j]
        if c == '"':
            return "".join(out), j + 1
        if c == "\\" and j + 1 < n:
            nxt = s[j + 1]
            if nxt in '\\"':
                out.append(nxt)
                j += 2
                continue
            if nxt == "n":
                out.append("\n")
                j += 2
                continue
            try:
                out.append(chr(int(s[j + 1:j + 3], 16)))
                j += 3
                continue
            except ValueError:
                pass
        out.append(c)
        j += 1
    return "".join(out), n


_TORCH_XLA_BEGIN = "<XLA_MLIR_DEBUGINFO_BEGIN>"
_TORCH_XLA_END = "<XLA_MLIR_DEBUGINFO_END>"
# torch_xla's XLA build keeps, in a lazy graph's metadata, the scope torch_xla gives an op of its own
# (`aten__lerp.28/aten__lerp`): an op name, not a module path. (Its StableHLO export drops it.)
TORCH_XLA_OP_SCOPE = re.compile(r"^aten__\w+(\.\d+)?$")


def provenance(name: str | None) -> tuple[str, str, str]:
    """(module path, module class, phase) from a name location; ("", "", "") when it carries none.

    - torch_xla node metadata: JSON with `nn_module_stack` ("key,path,type;..."), last entry wins;
    - XLA's metadata of an op it made of several, their names joined by ";": the path they share;
    - JAX named scopes (`jit(f)/h.3/attn/dot_general`, Flax linen `Model/h/3/attn/...`): the
      scope components joined with "."; function names (`jit(_take)`) and the trailing primitive
      name are dropped; a transformation keeps the scope it wraps (`jvp(h.3)` -> `h.3`) and says
      the phase of a training step: "forward" under `jvp(...)`, "backward" under `transpose(...)`.
    """
    if not name:
        return "", "", ""
    if name.startswith(_TORCH_XLA_BEGIN) or name.startswith("{"):
        return (*_torch_xla(name), "")
    if ";" in name:  # XLA's metadata of an op made from several (a folded transpose pair): their names
        return _merged(name.split(";"))
    if "/" not in name:
        return "", "", ""
    every = name.split("/")
    # the last component is the primitive; torch_xla's own op scopes (`aten__add.2/aten__add`, in an XLA
    # dump of a lazy graph made under XLA_HLO_DEBUG=1) name an op, not a module
    parts = [p for p in every[:-1] if not (p.startswith("aten__") and TORCH_XLA_OP_SCOPE.match(p))]
    # ... or, for a call, the function it calls as transformed (`jvp(jit(log_softmax))`): it says
    # the phase too.
    phase = "backward" if any(p.startswith("transpose(") for p in every) else \
        "forward" if any(p.startswith("jvp(") for p in every) else ""
    return ".".join(s for s in map(_unwrap, parts) if s), "", phase


_TRANSFORMS = ("jvp(", "transpose(", "vmap(", "remat(", "checkpoint(", "pjit(")


def _merged(names: list[str]) -> tuple[str, str, str]:
    """One op's provenance from the op names XLA joined with ";" when it made the op of several
    (`jit(f)/h.0/attn/transpose;jit(f)/h.0/attn/transpose`): the module path they share (their common
    leading components), the phase where they agree. Read as one name, the second half's scopes doubled
    the path (`h.0.attn.h.0.attn`)."""
    got = [provenance(n) for n in names if n]
    if not got:
        return "", "", ""
    words = [g[0].split(".") if g[0] else [] for g in got]
    common = words[0]
    for w in words[1:]:
        n = 0
        while n < min(len(common), len(w)) and common[n] == w[n]:
            n += 1
        common = common[:n]
    phases = {g[2] for g in got}
    return ".".join(common), "", phases.pop() if len(phases) == 1 else ""


def _unwrap(part: str) -> str:
    """`transpose(jvp(h.3))` -> `h.3`; `jit(_take)`, `jvp()`, `jvp(jit(log_softmax))` -> ""."""
    while part.endswith(")") and part.startswith(_TRANSFORMS):
        part = part[part.index("(") + 1:-1]
    return "" if "(" in part else part


def _torch_xla(name: str) -> tuple[str, str]:
    body = name
    if body.startswith(_TORCH_XLA_BEGIN):
        body = body[len(_TORCH_XLA_BEGIN):]
        body = body.split(_TORCH_XLA_END, 1)[0]
    try:
        meta = json.loads(body)
    except ValueError:
        return "", ""
    stack = meta.get("nn_module_stack") or ""
    entries = [e.split(",") for e in stack.split(";") if e]
    for entry in reversed(entries):
        if len(entry) >= 3 and entry[1]:
            return entry[1], entry[-1].rsplit(".", 1)[-1]
    return "", ""


def name_changes(text_a: str, text_b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The location names (`loc("name"...)`, file locations left out) that only A's text holds, and only
    B's: what changed in provenance between two captures whose ops are the same."""
    import re

    def names(text: str) -> set:
        return {m.group(1) for m in re.finditer(r'loc\("((?:[^"\\]|\\.)*)"(?!:\d)', text)}

    a, b = names(text_a), names(text_b)
    return tuple(sorted(a - b)), tuple(sorted(b - a))
