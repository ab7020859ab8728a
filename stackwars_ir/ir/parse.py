"""Parse StableHLO (text, generic or pretty, or bytecode) with real MLIR bindings into the IR model.

This runs inside the parse worker (see worker.py): a malformed file may crash MLIR's native
parser, and that must never take the caller down. The walk that builds the IR model from MLIR's op
tree is builder.py's; XLA's HLO files are read through hlo.py (XLA's own parser and importer).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..common.errors import ParseError
from ..common.resources import inline
from .builder import Blob, build
from .hlo import FORM_HLO_PROTO, FORM_HLO_TEXT, first_module, from_hlo_proto, from_hlo_text, hlo_text_modules, scheduled

if TYPE_CHECKING:
    from jaxlib.mlir import ir as jax_ir

BYTECODE_MAGIC = b"ML\xefR"

SPLIT_MARKER = "// -----"


def mlir_context() -> jax_ir.Context:
    """An MLIR context with the dialects jax registers (as jax's make_ir_context builds it).

    Built from jaxlib alone: importing jax to call make_ir_context costs the parse worker
    0.5 s more at start-up (0.74 s against 0.21 s here), on every command.
    """
    try:
        from jaxlib.mlir import ir
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo
    except ImportError:  # another jaxlib layout: jax's own factory
        from jax._src.interpreters import mlir as jmlir

        return jmlir.make_ir_context()
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = ir.Context()
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    sdy.register_dialect(ctx)
    mhlo.register_mhlo_dialect(ctx)
    chlo.register_dialect(ctx)
    stablehlo.register_dialect(ctx)
    return ctx


class _Contexts:
    """One MLIR context per binding flavour, created on first use and reused for every file."""

    def __init__(self):
        self._jax = None
        self._iree = None

    def jaxlib(self):
        if self._jax is None:
            ctx = mlir_context()
            ctx.allow_unregistered_dialects = True  # check.*, tf.*, custom dialects parse as opaque ops
            # Single-threaded: a module whose verification fails in MLIR's thread pool (found by
            # fuzzing: a call to a function left outside its module) deadlocked the parse within
            # 200 tries; without the pool, 200 parses of it take 0.03 s. Parallelism comes from
            # the worker processes.
            ctx.enable_multithreading(False)
            self._jax = ctx
        return self._jax

    def iree(self):
        """IREE's bindings register the quant dialect, which jaxlib's lack."""
        if self._iree is None:
            from iree.compiler import ir

            ctx = ir.Context()
            ctx.allow_unregistered_dialects = True
            ctx.enable_multithreading(False)  # as for jaxlib's context
            self._iree = ctx
        return self._iree


CONTEXTS = _Contexts()


def parse_wire(data: bytes, source: str, part: tuple = (0, 1)) -> list[tuple]:
    """Every module in `data` (one, or several split by `// -----`), in the wire form of
    Module.from_wire; ParseError names file:line:col.

    With part=(j, k), the share j of k of a single-module file (see _Builder). A file of several
    modules is not shared: part 0 gives them all, the others nothing.
    """
    if not data.strip():
        raise ParseError(f"{source}: empty file", fix="give a StableHLO .mlir or .mlirbc file")
    if data.startswith(BYTECODE_MAGIC):
        return [_parse_bytecode(data, source, part)]
    if b"\x00" in data[:4096] or not _is_utf8(data[:4096]):
        converted = from_hlo_proto(data)  # an XLA dump's HloModuleProto: XLA's own importer reads it
        if converted is not None:
            return [_parse_bytecode(converted, source, part, FORM_HLO_PROTO)]
        if b"\x00" in data[:4096]:
            raise ParseError(f"{source}: binary file that is neither MLIR bytecode nor an XLA HloModuleProto",
                             fix="give StableHLO text (.mlir), MLIR bytecode (.mlirbc) or an XLA dump's "
                                 "*.before_optimizations.hlo.pb")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"{source}: not UTF-8 text (byte {e.start})", fix="give a StableHLO .mlir file") from e
    hlo = hlo_text_modules(text)
    if hlo:  # XLA HLO text: a dump, compile().as_text(), torch_xla's saved graphs (XLA_SAVE_TENSORS_FMT=hlo)
        if len(hlo) == 1:
            return [_parse_bytecode(from_hlo_text(hlo[0][1], source, hlo[0][0]), source, part, FORM_HLO_TEXT)]
        if part[0] > 0:
            return []
        return [_parse_bytecode(from_hlo_text(chunk, source, line), f"{source}#{k}", (0, 1), FORM_HLO_TEXT)
                for k, (line, chunk) in enumerate(hlo)]
    chunks = _split(text)
    if len(chunks) == 1:
        first_line, chunk = chunks[0]
        return [_parse_text(chunk, source, source, first_line, part)]
    if part[0] > 0:
        return []
    return [_parse_text(chunk, f"{source}#{k}", source, first_line)
            for k, (first_line, chunk) in enumerate(chunks)]


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(data) - 4  # a character cut by the 4096-byte window is still text
    return True


FORM_MHLO = "MHLO, legalized to StableHLO by MHLO's own pass"

FORM_VHLO_TEXT = "VHLO text, upgraded to StableHLO as a portable artifact is"

FORM_VHLO_BYTECODE = "a VHLO portable artifact, upgraded to StableHLO"

FORM_OLD = "StableHLO from before 2024, its attributes rewritten to today's"

_OLD_ATTR = re.compile(r"\b\w+\s*=\s*dense<[^<>]*>\s*:\s*tensor<\d+xi(?:64|1)>")
# _OLD_ATTR from its literal `dense<` on: the regex engine skips to each `dense<` at once, where the whole
# pattern tries every word of a file (0.75 s on a 15 MB module); what comes before is checked by hand.
_OLD_ATTR_TAIL = re.compile(r"dense<[^<>]*>\s*:\s*tensor<\d+xi(?:64|1)>")


def _back(text: str, i: int) -> tuple[int, bool]:
    """(the index of the last character before `i` that is not whitespace (-1: none), whether the
    whitespace skipped holds a line break)."""
    j = i - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    return j, "\n" in text[j + 1:i]


def has_old_attr(text: str) -> bool:
    """Whether `text` holds an attribute written as before StableHLO's 2024 change (_OLD_ATTR matches)."""
    for m in _OLD_ATTR_TAIL.finditer(text):
        j, _ = _back(text, m.start())
        if j >= 0 and text[j] == "=":
            j, _ = _back(text, j)
            if j >= 0 and (text[j].isalnum() or text[j] == "_"):
                return True
    return False


def compile_form(data: bytes, source: str, part: int | None = None) -> str | bytes:
    """A file's module in the form XLA's compile takes, read as the parser reads it: bytecode as it is;
    an XLA HloModuleProto and HLO text as StableHLO bytecode (XLA's parser and importer); StableHLO
    text from before 2024's attribute change rewritten to today's (_parse_older); any other text as it
    is. `part`: module K of a file of several (`FILE#K`: HLO modules, torch_xla's saved graphs, text
    split by `// -----`). ParseError (one line) for a file of several modules and no part, a part the
    file does not hold, or HLO text that XLA's parser refuses."""
    if data.startswith(BYTECODE_MAGIC) or b"\x00" in data[:4096] or not _is_utf8(data[:4096]):
        if part:
            raise ParseError(f"{source}: a binary file holds one module, so there is no #{part}",
                             fix=f"give the file itself, {source.rsplit('#', 1)[0]}")
        if data.startswith(BYTECODE_MAGIC):
            return data
        converted = from_hlo_proto(data)
        return converted if converted is not None else data
    text = data.decode("utf-8", errors="replace")
    hlo = hlo_text_modules(text)
    if hlo:  # XLA HLO text: its module as StableHLO bytecode, as the parser reads it
        if part is None and len(hlo) > 1:
            raise ParseError(f"{source}: holds {len(hlo)} HLO modules, and this command compiles one",
                             fix=f"give one as {source}#K, K from 0 to {len(hlo) - 1}")
        line, chunk = _part(hlo, part or 0, source)
        return from_hlo_text(chunk, source, line)
    if SPLIT_MARKER in text:
        chunks = _split(text)
        if part is None and len(chunks) > 1:
            raise ParseError(f"{source}: holds {len(chunks)} modules split by `{SPLIT_MARKER}`, and this command "
                             "compiles one", fix=f"give one as {source}#K, K from 0 to {len(chunks) - 1}")
        text = _part(chunks, part or 0, source)[1]
    elif part:
        raise ParseError(f"{source}: the file holds one module, so there is no #{part}",
                         fix=f"give the file itself, {source.rsplit('#', 1)[0]}")
    if not has_old_attr(text):
        return text
    from jaxlib.mlir import ir

    try:
        with CONTEXTS.jaxlib():
            return _parse_older(ir, text).operation.get_asm(enable_debug_info=True)
    except Exception:  # noqa: BLE001 - XLA's compile says what is wrong with it
        return text


def _part(chunks: list, k: int, source: str) -> tuple:
    if k >= len(chunks):
        raise ParseError(f"{source}: the file holds {len(chunks)} modules; there is no #{k}",
                         fix=f"give one as {source.rsplit('#', 1)[0]}#K, K from 0 to {len(chunks) - 1}")
    return chunks[k]


def optimized_hlo_text(data: bytes, part: int | None = None) -> str | None:
    """The HLO text of a module XLA has already optimized (its header says `is_scheduled=true`: an XLA
    dump's `*.after_optimizations.hlo.pb` or `.txt`, `compile().as_text()`), from its text or its proto
    (HloProto or HloModuleProto, printed by XLA's own HloModule); None for anything else, an
    unoptimized module included. `part`: module K of HLO text holding several (FILE#K)."""
    if data.startswith(BYTECODE_MAGIC):
        return None
    if b"\x00" in data[:4096] or not _is_utf8(data[:4096]):
        try:
            from jaxlib import xla_client
        except ImportError:
            return None
        text = first_module(data, lambda m: xla_client.hlo.HloModule.from_serialized_hlo_module_proto(m).to_string())
        return text if text is not None and scheduled(text) else None
    text = data.decode("utf-8", errors="replace")
    if part is not None:
        modules = hlo_text_modules(text)
        text = modules[part][1] if part < len(modules) else ""
    return text if text.lstrip().startswith("HloModule ") and scheduled(text) else None


def _split(text: str) -> list[tuple[int, str]]:
    """Split on `// -----` lines (mlir-opt's -split-input-file); keep each chunk's first line number."""
    if SPLIT_MARKER not in text:
        return [(1, text)]
    chunks, start, current = [], 1, []
    for n, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.strip() == SPLIT_MARKER:
            chunks.append((start, "".join(current)))
            start, current = n + 1, []
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return [(s, c) for s, c in chunks if c.strip()] or [(1, text)]


_HIGH_ESCAPE = re.compile(r"\\[89a-fA-F][0-9a-fA-F]")

_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')

_HEX = frozenset("0123456789abcdefABCDEF")


def _unescape(text: str) -> bytes:
    """The bytes of an MLIR string literal's body (escapes: \\XX hex, \\n, \\t, \\\\, \\")."""
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "\\\"":
                out += nxt.encode()
                i += 2
                continue
            if nxt in "nt":
                out += b"\n" if nxt == "n" else b"\t"
                i += 2
                continue
            if i + 2 < len(text) and nxt in _HEX and text[i + 2] in _HEX:
                out.append(int(text[i + 1:i + 3], 16))
                i += 3
                continue
        out += c.encode()
        i += 1
    return bytes(out)


def _check_strings(chunk: str, source: str, first_line: int) -> None:
    """Found by fuzzing: a string whose escapes make invalid UTF-8 (`loc("\\00\\ff")`) parses, but
    jaxlib's bindings abort the process (nanobind's "conversion error", SIGABRT) when the walk
    reads it. Such a file gets one line instead. Strings without a byte escape >= 0x80 skip this."""
    if not _HIGH_ESCAPE.search(chunk):
        return
    for m in _STRING.finditer(chunk):
        body = m.group(1)
        if "\\" not in body or not _HIGH_ESCAPE.search(body):
            continue
        try:
            _unescape(body).decode("utf-8")
        except UnicodeDecodeError:
            line = first_line + chunk.count("\n", 0, m.start())
            raise ParseError(f"{source}:{line}: the string \"{body[:40]}\" holds bytes that are not UTF-8, which "
                             "jaxlib's MLIR bindings cannot read", fix="escape only valid UTF-8 in names and strings")


def _parse_text(chunk: str, label: str, source: str, first_line: int, part: tuple = (0, 1)) -> tuple:
    from jaxlib.mlir import ir

    _check_strings(chunk, source, first_line)
    chunk = inline(chunk).text  # dense_resource blobs in the file: compared by their values
    if "!quant." in chunk:
        # Always IREE's: jaxlib's context parses !quant only once a portable artifact's deserialization
        # has loaded the quant dialect into it, so which bindings read a file hung on what the worker
        # had read before (and the suite's corpus test on the order of its tests).
        return _parse_quantized(chunk, label, source, first_line, part)
    ctx = CONTEXTS.jaxlib()
    try:
        with ctx:
            try:
                module = _parse_older(ir, chunk)
            except (ValueError, OverflowError, RuntimeError) as e:
                if isinstance(e, ir.MLIRError):
                    raise
                raise _beyond_mlir(e, source) from None
            form = FORM_OLD if has_old_attr(chunk) else ""
            if has_mhlo_op(chunk):
                module, form = _legalized(module, lambda: ir.Module.parse(chunk)), FORM_MHLO
            elif '"vhlo.' in chunk and any(op.name.startswith("vhlo.") for op in _walk_names(module)):
                module, form = _from_vhlo(ctx, module), FORM_VHLO_TEXT  # upgraded as its bytecode would be
            return build(module, label, "jaxlib", part=part) + (form,)
    except ir.MLIRError as e:
        raise _diagnostic(e, source, first_line, chunk) from None


# StableHLO before 2024-02 (jax < 0.4.24) wrote integer-array attributes as dense elements
# (`start_indices = dense<0> : tensor<2xi64>`) where today's ops take `array<i64: 0, 0>`: the verifier
# names one such attribute at a time.
_OLD_ARRAY = re.compile(r"attribute '(\w+)' failed to satisfy constraint: (i64|i1) dense array attribute")


def _parse_older(ir, chunk: str):
    """The module in `chunk`; one written before StableHLO's 2024 attribute change is read as it means
    (each attribute the verifier refuses as not a dense array, rewritten from `dense<...> : tensor<Nx..>`
    to `array<...>`: the same values, on the same lines). Any other error is MLIR's own."""
    text = chunk
    for _ in range(64):
        try:
            return ir.Module.parse(text)
        except ir.MLIRError as e:
            diags = " ".join(d.message for d in (getattr(e, "error_diagnostics", None) or []))
            m = _OLD_ARRAY.search(diags or str(e))
            if m is None:
                raise
            new = _as_array(text, m.group(1), m.group(2))
            if new == text:
                raise
            text = new
    return ir.Module.parse(text)


def _as_array(text: str, name: str, kind: str) -> str:
    """Every `name = dense<...> : tensor<Nx{kind}>` in `text` as `name = array<{kind}: ...>`."""
    def rewrite(m: re.Match) -> str:
        body, n = m.group(2).strip(), int(m.group(3))
        items = [x.strip() for x in body.strip("[]").split(",") if x.strip()] if body.startswith("[") else [body] * n
        return f"{m.group(1)}array<{kind}" + (": " + ", ".join(items) if items else "") + ">"

    pattern = re.compile(rf"(\b{re.escape(name)}\s*=\s*)dense<([^<>]*)>\s*:\s*tensor<(\d+)x{kind}>")
    return pattern.sub(rewrite, text)


# An MHLO op in text: pretty (`= mhlo.add`, a line starting `mhlo.return`) or generic (`"mhlo.add"(`);
# not the mhlo.* attributes StableHLO files carry (mhlo.sharding, mhlo.frontend_attributes).
_MHLO_OP = re.compile(r'(?:=\s*|^\s*)mhlo\.\w+\b(?!\s*=)|"mhlo\.\w+"\s*\(', re.MULTILINE)
_MHLO_WORD = re.compile(r"mhlo\.\w+")
_SPACE_EQUALS = re.compile(r"\s*=")
_QUOTE_PAREN = re.compile(r'"\s*\(')


def has_mhlo_op(text: str) -> bool:
    """Whether `text` holds an MHLO op (_MHLO_OP matches), found from each literal `mhlo.` on (the whole
    pattern tries every line and `=` of a file: 0.44 s on a 15 MB module); the context checked by hand."""
    for m in _MHLO_WORD.finditer(text):
        s, e = m.span()
        if s > 0 and text[s - 1] == '"' and _QUOTE_PAREN.match(text, e):
            return True  # generic: "mhlo.add"(
        j, broke = _back(text, s)
        if (j < 0 or text[j] == "=" or broke) and not _SPACE_EQUALS.match(text, e):
            return True  # pretty: after `=`, or first on its line, and not an attribute's name
    return False


def _undeprecated(module, reparse):
    """StableHLO's deprecated ops XLA's importer writes (`dot` for a plain matmul, where JAX's lowering
    writes `dot_general`) rewritten as the ops they are by StableHLO's own
    stablehlo-legalize-deprecated-ops pass, so an XLA dump diffs like the StableHLO it came from; the
    module as written where the pass fails (`reparse`)."""
    from jaxlib.mlir import ir, passmanager
    from jaxlib.mlir.dialects import stablehlo

    global _STABLEHLO_PASSES
    if not _STABLEHLO_PASSES:
        stablehlo.register_stablehlo_passes()
        _STABLEHLO_PASSES = True
    try:
        passmanager.PassManager.parse("builtin.module(func.func(stablehlo-legalize-deprecated-ops))").run(
            module.operation)
        return module
    except ir.MLIRError:
        return reparse()


_STABLEHLO_PASSES = False  # StableHLO's passes registered with MLIR (once per process)


def _legalized(module, reparse):
    """MHLO ops rewritten as the StableHLO ops they are (MHLO's own hlo-legalize-to-stablehlo pass), so
    a module in MHLO reads, and diffs, like its StableHLO spelling. An MHLO op with no StableHLO form
    makes the pass fail: the module is then read as written (`reparse` gives it back unchanged)."""
    from jaxlib.mlir import ir, passmanager
    from jaxlib.mlir.dialects import mhlo

    global _MHLO_PASSES
    if not _MHLO_PASSES:
        mhlo.register_mhlo_passes()
        _MHLO_PASSES = True
    try:
        passmanager.PassManager.parse("builtin.module(hlo-legalize-to-stablehlo)").run(module.operation)
        return module
    except ir.MLIRError:
        return reparse()


_MHLO_PASSES = False


def _beyond_mlir(e: Exception, source: str) -> ParseError:
    """LLVM's own limits, raised from MLIR's parser as plain Python errors (found by fuzzing: a
    dimension number of 2^32 asks a SmallVector for 2^32 + 1 entries)."""
    detail = " ".join(str(e).split())[:200] or type(e).__name__
    return ParseError(f"{source}: MLIR cannot hold what this file asks for: {detail}",
                      fix="check the file's shapes, dimension numbers and attributes")


def _parse_quantized(chunk: str, label: str, source: str, first_line: int, part: tuple) -> tuple:
    try:
        from iree.compiler import ir
    except ImportError:
        raise ParseError(f"{source}: uses !quant types, which jaxlib's MLIR bindings cannot parse",
                         fix="pip install iree-base-compiler==3.13.0 (in requirements.lock)") from None
    ctx = CONTEXTS.iree()
    try:
        with ctx:
            module = ir.Module.parse(chunk)
            return build(module, label, "iree", ir, part)
    except ir.MLIRError as e:
        raise _diagnostic(e, source, first_line, chunk) from None


def _parse_bytecode(data: bytes, source: str, part: tuple, form: str = "") -> tuple:
    """The wire form of an MLIR bytecode module; `form`: how the file became this bytecode (an XLA
    HLO file converted), else what the bytecode was (a VHLO portable artifact, MHLO)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    ctx = CONTEXTS.jaxlib()
    try:
        with ctx:
            module = ir.Module.parse(data)
            if any(op.name.startswith("vhlo.") for op in _walk_names(module)):
                # A portable artifact: upgrade VHLO to StableHLO, as compilers do.
                module, form = stablehlo.deserialize_portable_artifact(ctx, data), form or FORM_VHLO_BYTECODE
            elif any(op.name.startswith("mhlo.") for op in _walk_names(module)) and not form:
                module, form = _legalized(module, lambda: ir.Module.parse(data)), FORM_MHLO
            elif any(op.name.startswith("mhlo.") for op in _walk_names(module)):
                module = _legalized(module, lambda: ir.Module.parse(data))
            if form in (FORM_HLO_PROTO, FORM_HLO_TEXT):
                module = _undeprecated(module, lambda: ir.Module.parse(data))
            try:
                return build(module, source, "jaxlib", part=part, blobs=False) + (form,)
            except Blob:  # a dense_resource constant: its blob read from the module's text, as a file's is
                text = module.operation.get_asm(enable_debug_info=True)
    except ir.MLIRError as e:
        raise _diagnostic(e, source, 1) from None
    return _parse_text(text, source, source, 1, part)


def _from_vhlo(ctx, module):
    """A VHLO (versioned StableHLO) module read as text, upgraded to StableHLO as a portable artifact is:
    written as bytecode, then deserialized by StableHLO's own upgrader."""
    import io

    from jaxlib.mlir.dialects import stablehlo

    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return stablehlo.deserialize_portable_artifact(ctx, buf.getvalue())


def _walk_names(module):
    for func in module.body.operations:
        for region in func.regions:
            for block in region.blocks:
                yield from (op.operation for op in block.operations)
        yield func.operation


# MLIR's word for a bare word where an op should be (`hello world`, prose): every dialect's op has a dot
_BARE_WORD = re.compile(r"custom op '([^'.]*)' is unknown")


def _diagnostic(err, source: str, first_line: int, text: str = "") -> ParseError:
    """`file:line:col: message` from MLIR's first error diagnostic; a bare word where an op should be
    (prose, a log) is said as such, with the line it starts (`text`: the text MLIR read)."""
    diags = list(getattr(err, "error_diagnostics", []) or [])
    if not diags:
        msg = str(err).strip().splitlines()
        return ParseError(f"{source}: {msg[-1] if msg else 'MLIR could not parse the file'}")
    d = diags[0]
    line, col = _line_col(str(d.location))
    where = f"{source}:{line + first_line - 1}:{col}" if line else source
    message = d.message.strip().splitlines()[0]
    bare = _BARE_WORD.match(message)
    if bare and line and text:
        shown = (text.splitlines()[line - 1:line] or [""])[0].strip()
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        message = f"{bare.group(1)!r} is no op (an op is named dialect.op): the line reads {shown!r}"
    cut = _cut_short(message, text)
    return ParseError(f"{where}: {message}" + (f"; {cut}" if cut else ""),
                      fix="copy or export the file again, whole" if cut else
                      "give StableHLO MLIR, e.g. jax.jit(f).lower(...).as_text(debug_info=True) or stackwars-ir capture")


# MLIR's words where a bytecode file ends early, and where a text file's location aliases (written at its
# end) are missing
_BYTECODE_CUT = ("when only", "missing data for top-level section", "unexpected end of")
_ALIASES_CUT = "location alias was never defined"


_VERSION = re.compile(r"bytecode version (\d+) is newer than the current version (\d+)")


def _cut_short(message: str, text: str) -> str:
    """Why the file looks cut short or corrupt ("" where it does not): its braces do not close, its
    location aliases are missing, its bytecode ends early or names a version far beyond any MLIR's
    (MLIR's own message names only the first symptom)."""
    if any(w in message for w in _BYTECODE_CUT):
        return "the bytecode ends early: the file looks cut short"
    v = _VERSION.search(message)
    if v and int(v.group(1)) > int(v.group(2)) + 20:  # a real newer writer is a few versions ahead (6 in 2025)
        return "no MLIR has written such a version: the file looks corrupt"
    if _ALIASES_CUT in message:
        return "the location aliases its end defines are missing: the file looks cut short"
    open_ = text.count("{") - text.count("}") if text else 0
    if open_ > 0:
        return f"{open_} brace{'s' if open_ > 1 else ''} never closed: the file looks cut short"
    return ""


def _line_col(loc: str) -> tuple[int, int]:
    """(line, col) of a printed file location `loc("-":12:7)`, (0, 0) when there is none."""
    q = loc.rfind('"')
    if q < 0:
        return 0, 0
    parts = loc[q + 1:].strip(")").split(":")
    try:
        return int(parts[1]), int(parts[2].split()[0])
    except (IndexError, ValueError):
        return 0, 0
