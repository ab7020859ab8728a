"""Parse StableHLO (text, generic or pretty, or bytecode) with real MLIR bindings into the IR model.

This runs inside the parse worker (see worker.py): a malformed file may crash MLIR's native
parser, and that must never take the caller down.
"""
from __future__ import annotations

import re

from ..errors import ParseError
from .locations import loc_name, provenance
from ..resources import inline

BYTECODE_MAGIC = b"ML\xefR"
SPLIT_MARKER = "// -----"
STABLEHLO_DIALECTS = frozenset({"stablehlo", "chlo", "mhlo", "vhlo"})
# Every attribute an op carries is kept (a diff compares them all): typed where the analyses read a
# Python value (dimensions, directions, names), as MLIR prints it otherwise; a long printed form keeps
# its head for the reader and a digest of the whole, so two attributes compare equal only when equal.
ATTR_TEXT_LIMIT = 200


def mlir_context():
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
        converted = _from_hlo_proto(data)  # an XLA dump's HloModuleProto: XLA's own importer reads it
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
    hlo = _hlo_text_modules(text)
    if hlo:  # XLA HLO text: a dump, compile().as_text(), torch_xla's saved graphs (XLA_SAVE_TENSORS_FMT=hlo)
        if len(hlo) == 1:
            return [_parse_bytecode(_from_hlo_text(hlo[0][1], source, hlo[0][0]), source, part, FORM_HLO_TEXT)]
        if part[0] > 0:
            return []
        return [_parse_bytecode(_from_hlo_text(chunk, source, line), f"{source}#{k}", (0, 1), FORM_HLO_TEXT)
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


# What a file was, where the parser made StableHLO of something else (Module.form; "" for StableHLO as written).
FORM_HLO_PROTO = "an XLA HLO proto, converted to StableHLO by XLA's importer"
FORM_HLO_TEXT = "XLA HLO text, parsed by XLA's HLO parser and converted to StableHLO by its importer"
FORM_MHLO = "MHLO, legalized to StableHLO by MHLO's own pass"
FORM_VHLO_TEXT = "VHLO text, upgraded to StableHLO as a portable artifact is"
FORM_VHLO_BYTECODE = "a VHLO portable artifact, upgraded to StableHLO"
FORM_OLD = "StableHLO from before 2024, its attributes rewritten to today's"
_OLD_ATTR = re.compile(r"\b\w+\s*=\s*dense<[^<>]*>\s*:\s*tensor<\d+xi(?:64|1)>")


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
        converted = _from_hlo_proto(data)
        return converted if converted is not None else data
    text = data.decode("utf-8", errors="replace")
    hlo = _hlo_text_modules(text)
    if hlo:  # XLA HLO text: its module as StableHLO bytecode, as the parser reads it
        if part is None and len(hlo) > 1:
            raise ParseError(f"{source}: holds {len(hlo)} HLO modules, and this command compiles one",
                             fix=f"give one as {source}#K, K from 0 to {len(hlo) - 1}")
        line, chunk = _part(hlo, part or 0, source)
        return _from_hlo_text(chunk, source, line)
    if SPLIT_MARKER in text:
        chunks = _split(text)
        if part is None and len(chunks) > 1:
            raise ParseError(f"{source}: holds {len(chunks)} modules split by `{SPLIT_MARKER}`, and this command "
                             "compiles one", fix=f"give one as {source}#K, K from 0 to {len(chunks) - 1}")
        text = _part(chunks, part or 0, source)[1]
    elif part:
        raise ParseError(f"{source}: the file holds one module, so there is no #{part}",
                         fix=f"give the file itself, {source.rsplit('#', 1)[0]}")
    if not _OLD_ATTR.search(text):
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
        text = _first_module(data, lambda m: xla_client.hlo.HloModule.from_serialized_hlo_module_proto(m).to_string())
        return text if text is not None and _scheduled(text) else None
    text = data.decode("utf-8", errors="replace")
    if part is not None:
        modules = _hlo_text_modules(text)
        text = modules[part][1] if part < len(modules) else ""
    return text if text.lstrip().startswith("HloModule ") and _scheduled(text) else None


def _scheduled(text: str) -> bool:
    """Whether an HLO module's header says XLA scheduled it: the form it has after its optimizations."""
    return "is_scheduled=true" in text.lstrip().split("\n", 1)[0]


def _from_hlo_proto(data: bytes) -> bytes | None:
    """StableHLO bytecode of an XLA HloModuleProto (an XLA dump's `*.hlo.pb`, torch_xla's graph protos),
    converted by XLA's own importer in jaxlib; None for bytes that are not one."""
    try:
        from jaxlib import _jax
    except ImportError:
        return None
    return _first_module(data, _jax.mlir.hlo_to_stablehlo)


def _first_module(data: bytes, read):
    """`read` (a function of an HloModuleProto's bytes) of `data` as an HloModuleProto, else of the one
    inside it as an HloProto; None where neither reads (XLA's "Failed to deserialize HloModuleProto")."""
    inner = _hlo_module_of(data) if _nested_first_field(data) else None
    for module in ((inner, data) if inner else (data, _hlo_module_of(data))):
        if module is None:
            continue
        try:
            return read(module)
        except Exception:  # noqa: BLE001 - jaxlib's JaxRuntimeError, or nanobind's on bytes of another kind
            continue
    return None


_GRAPH = re.compile(r"^## BEGIN_GRAPH\n(.*?)^## END_GRAPH$", re.M | re.S)


def _hlo_text_modules(text: str) -> list[tuple[int, str]]:
    """(first line, HLO text) of each XLA HLO module in `text`: one per `HloModule` header (an XLA dump,
    `compile().as_text()`), or one per graph of torch_xla's saved graphs (`XLA_SAVE_TENSORS_FILE` with
    `XLA_SAVE_TENSORS_FMT=hlo`: each between `## BEGIN_GRAPH` and `## END_GRAPH`, its `Graph Hash:`
    line left out); [] for text that is not HLO."""
    if text.lstrip().startswith("HloModule "):
        starts = [m.start() for m in re.finditer(r"^HloModule ", text, re.M)]
        return [(text.count("\n", 0, a) + 1, text[a:b]) for a, b in zip(starts, starts[1:] + [len(text)])]
    out = []
    for m in _GRAPH.finditer(text):
        body = m.group(1)
        at = body.find("HloModule ")
        if at < 0:
            continue
        hlo = body[at:].split("\nGraph Hash:")[0]
        out.append((text.count("\n", 0, m.start(1) + at) + 1, hlo))
    return out


def _from_hlo_text(text: str, source: str, line: int) -> bytes:
    """StableHLO bytecode of one XLA HLO text module: parsed by XLA's own HLO parser (jaxlib's
    xla_client), converted by its importer (the path an HloModuleProto takes)."""
    try:
        from jaxlib import _jax, xla_client
    except ImportError as e:
        raise ParseError(f"{source}:{line}: XLA HLO text, and jaxlib, which reads it, is missing ({e})",
                         fix="install the lock (make setup)") from None
    try:
        module = xla_client.hlo.hlo_module_from_text(text)
    except Exception as e:  # noqa: BLE001 - XLA's parser: "INVALID_ARGUMENT: Syntax error: ..."
        said = " ".join(str(e).split())[:300]
        raise ParseError(f"{source}:{line}: XLA HLO text that XLA's parser refuses: {said}",
                         fix="give the module as XLA dumped it (XLA_FLAGS='--xla_dump_to=DIR'), whole") from None
    return _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())


def _nested_first_field(data: bytes) -> bool:
    """Whether field 1 of a protobuf is itself a message whose first field is 1 (an HloProto's
    hlo_module, whose name comes first), not a string (an HloModuleProto's name): which to try first,
    so XLA's parser is not handed the other and logs "invalid UTF-8" on stderr."""
    if not data.startswith(b"\x0a"):
        return False
    i = 1
    while i < len(data) and i < 11:  # the varint length of field 1
        if not data[i] & 0x80:
            return i + 1 < len(data) and data[i + 1] == 0x0A
        i += 1
    return False


def _hlo_module_of(data: bytes) -> bytes | None:
    """The HloModuleProto inside an XLA HloProto (field 1, `hlo_module`; beside it the buffer
    assignment), which `--xla_dump_hlo_as_proto` writes as DIR/*.hlo.pb; None for bytes that are not
    one. Read by protobuf with a two-field descriptor: a message field's bytes are the same on the
    wire, so XLA's own hlo.proto is not needed."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

    if _HLO_PROTO[0] is None:
        pool = descriptor_pool.DescriptorPool()
        file = descriptor_pb2.FileDescriptorProto(name="stackwars_hlo_proto.proto", package="stackwars")
        msg = file.message_type.add(name="HloProto")
        for name, number in (("hlo_module", 1), ("buffer_assignment", 3)):
            msg.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        pool.Add(file)
        _HLO_PROTO[0] = message_factory.GetMessageClass(pool.FindMessageTypeByName("stackwars.HloProto"))
    proto = _HLO_PROTO[0]()
    try:
        proto.ParseFromString(data)
    except message.DecodeError:
        return None
    return proto.hlo_module or None


_HLO_PROTO: list = [None]  # the HloProto message class, made once


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
            form = FORM_OLD if _OLD_ATTR.search(chunk) else ""
            if _MHLO_OP.search(chunk):
                module, form = _legalized(module, lambda: ir.Module.parse(chunk)), FORM_MHLO
            elif '"vhlo.' in chunk and any(op.name.startswith("vhlo.") for op in _walk_names(module)):
                module, form = _from_vhlo(ctx, module), FORM_VHLO_TEXT  # upgraded as its bytecode would be
            return _build(module, label, "jaxlib", part=part) + (form,)
    except ir.MLIRError as e:
        raise _diagnostic(e, source, first_line) from None


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
            return _build(module, label, "iree", ir, part)
    except ir.MLIRError as e:
        raise _diagnostic(e, source, first_line) from None


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
                return _build(module, source, "jaxlib", part=part, blobs=False) + (form,)
            except _Blob:  # a dense_resource constant: its blob read from the module's text, as a file's is
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


def _diagnostic(err, source: str, first_line: int) -> ParseError:
    """`file:line:col: message` from MLIR's first error diagnostic."""
    diags = list(getattr(err, "error_diagnostics", []) or [])
    if not diags:
        msg = str(err).strip().splitlines()
        return ParseError(f"{source}: {msg[-1] if msg else 'MLIR could not parse the file'}")
    d = diags[0]
    line, col = _line_col(str(d.location))
    where = f"{source}:{line + first_line - 1}:{col}" if line else source
    return ParseError(f"{where}: {d.message.strip().splitlines()[0]}",
                      fix="give StableHLO MLIR, e.g. jax.jit(f).lower(...).as_text(debug_info=True) or stackwars-ir capture")


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


class _Stop(Exception):
    """The walk reached the end of this part's share of the module."""


class _Builder:
    """Walks one MLIR module and records functions, ops and values.

    The walk is the parse worker's hot loop (100,000s of ops): binding calls are made once per
    op, types and provenance are cached (types are uniqued per context; names repeat), and it
    records plain tuples (the wire form of Module.from_wire): values name their type by index.

    A big module is walked by several workers at once, each recording the top-level ops
    ("units") numbered [lo, hi). The units before `lo` are skipped: only numbered, so that op and
    value ids are the same as in a whole walk (ids count ops and values in walk order). The
    walk stops at `hi`. A value belongs to the part whose unit range holds the moment it is made.
    """

    def __init__(self, ir, lo: int = 0, hi: float = float("inf")):
        self.ir = ir
        self.lo, self.hi = lo, hi
        self.unit = 0  # the number of the next (or current) top-level op
        self.ops: list = []
        self.values: list = []
        self.skipped_ops = 0  # ops and values made before this part's share
        self.skipped_values = 0
        self.skipped_names: set = set()
        self.ids: dict = {}
        self.types: dict = {}  # MLIR type -> index into self.tensors
        self.tensors: list = []  # (shape, dtype)
        self.places: dict = {None: ("", "", "")}
        self.attr_values: dict = {}
        self.splats: dict = {}
        self.loc_kinds = tuple(getattr(ir, k, None) for k in ("NameLoc", "CallSiteLoc", "FusedLoc"))
        self.label = ""  # the file's name, in the text of a constant whose values it lacks
        self.blobs = True  # False: a dense_resource constant raises _Blob (bytecode: read again from its text)

    def owned(self) -> bool:
        """Whether what is made now belongs to this part; _Stop past its share."""
        if self.unit >= self.hi:
            raise _Stop
        return self.unit >= self.lo

    def tensor(self, t) -> int:
        """The index of a type's (shape, dtype) in self.tensors."""
        hit = self.types.get(t)
        if hit is None:
            key = str(t)
            ir = self.ir
            if _is(ir.RankedTensorType, t):
                rt = ir.RankedTensorType(t)
                dyn = ir.ShapedType.get_dynamic_size()
                shape = tuple(None if d == dyn else d for d in rt.shape)
                tensor = (shape, str(rt.element_type))
            elif _is(ir.ShapedType, t) and not ir.ShapedType(t).has_rank:
                tensor = ((None,), str(ir.ShapedType(t).element_type))  # unranked: one unknown dim
            else:
                tensor = ((), key)  # tokens, tuples, scalars of other dialects
            hit = self.types[t] = len(self.tensors)
            self.tensors.append(tensor)
        return hit

    def value(self, v, producer: int | None, arg_index: int | None = None, name: str = "") -> int:
        if self.owned():
            vid = self.skipped_values + len(self.values)
            self.values.append((vid, self.tensor(v.type), producer, arg_index, name))
        else:
            vid = self.skipped_values
            self.skipped_values += 1
        self.ids[v] = vid
        return vid

    def where(self, name: str | None) -> tuple[str, str, str]:
        """(module path, module class, phase) of a location name, read once per distinct name."""
        hit = self.places.get(name)
        if hit is None:
            hit = self.places[name] = provenance(name)
        return hit

    def func(self, fop) -> tuple:
        attrs = fop.attributes
        name = self.ir.StringAttr(attrs["sym_name"]).value
        visibility = self.ir.StringAttr(attrs["sym_visibility"]).value if "sym_visibility" in attrs else "public"
        ftype = self.ir.FunctionType(self.ir.TypeAttr(attrs["function_type"]).value)
        results = tuple(self.tensors[self.tensor(t)] for t in ftype.results)
        if not fop.regions or not fop.regions[0].blocks:  # a declaration
            return (name, visibility, (), results, (), (), (), ())
        entry = fop.regions[0].blocks[0]
        args = tuple(self.value(a, None, i, self.arg_name(a)) for i, a in enumerate(entry.arguments))
        first = self.skipped_ops + len(self.ops)
        returns = self.block(fop.regions[0], name, None)
        return (name, visibility, args, results, tuple(range(first, self.skipped_ops + len(self.ops))), returns,
                self.arg_shardings(attrs), self.donated(attrs))

    def donated(self, attrs) -> tuple:
        """(argument index, output index or -1) of each argument the function donates: `tf.aliasing_output
        = N` (its buffer becomes output N) or `jax.buffer_donor = true` (XLA may reuse it: -1)."""
        if "arg_attrs" not in attrs:
            return ()
        out = []
        for i, d in enumerate(self.ir.ArrayAttr(attrs["arg_attrs"])):
            d = self.ir.DictAttr(d)
            if "tf.aliasing_output" in d:
                out.append((i, self.ir.IntegerAttr(d["tf.aliasing_output"]).value))
            elif "jax.buffer_donor" in d and str(d["jax.buffer_donor"]) == "true":
                out.append((i, -1))
        return tuple(out)

    def arg_shardings(self, attrs) -> tuple:
        """Each argument's sharding as written (Shardy's sdy.sharding, GSPMD's mhlo.sharding), "" for none."""
        if "arg_attrs" not in attrs:
            return ()
        out = []
        for d in self.ir.ArrayAttr(attrs["arg_attrs"]):
            d = self.ir.DictAttr(d)
            if "sdy.sharding" in d:
                out.append(str(d["sdy.sharding"]))
            elif "mhlo.sharding" in d:
                out.append(self.ir.StringAttr(d["mhlo.sharding"]).value)
            else:
                out.append("")
        return tuple(out) if any(out) else ()

    def block(self, region, func: str, parent: int | None) -> tuple:
        """Record the ops of a region (nested regions included); return the operands of its
        top-level return."""
        returns = ()
        for block in region.blocks:
            for k, a in enumerate(block.arguments):
                if a not in self.ids:
                    self.value(a, parent, k)  # a region's argument: its position in the block
            returns = self.run(block.operations, func, parent) or returns
        return returns

    def run(self, operations, func: str, parent: int | None) -> tuple:
        """Record a sequence of ops; return the operands of a top-level return among them."""
        returns = ()
        top = parent is None
        ops, values, ids, types, places = self.ops, self.values, self.ids, self.types, self.places
        tensor, attrs, value = self.tensor, self.attrs, self.value
        name_loc, kinds = self.loc_kinds[0], self.loc_kinds
        op_base, value_base = self.skipped_ops, self.skipped_values
        for op in operations:
            op = op.operation
            if top and not self.owned():
                returns = self.skip(op) or returns
                self.unit += 1
                op_base, value_base = self.skipped_ops, self.skipped_values
                continue
            oid = op_base + len(ops)
            name = op.name
            operands = tuple([i if (i := ids.get(v)) is not None else value(v, None) for v in op.operands])
            results = []
            for r in op.results:
                vid = value_base + len(values)
                t = types.get(r.type)
                values.append((vid, tensor(r.type) if t is None else t, oid, None, ""))
                ids[r] = vid
                results.append(vid)
            loc = op.location
            # NameLoc, the common case, read inline; loc_name walks the other kinds
            lname = loc.name_str if type(loc) is name_loc else loc_name(loc, kinds)
            where = places.get(lname) or self.where(lname)
            attributes = op.attributes
            ops.append((oid, name, func, parent, operands, tuple(results),
                        attrs(attributes, name) if len(attributes) else (), *where))
            if len(op.regions):
                for inner in op.regions:
                    self.block(inner, func, oid)
            if top:
                self.unit += 1
                if name in _RETURNS:
                    returns = operands
        return returns

    def skip(self, op) -> tuple:
        """Number an op of another part's share, its values and its nested ops, as run() would;
        return its operands if it is a return."""
        ids = self.ids
        self.skipped_ops += 1
        name = op.name
        self.skipped_names.add(name)
        operands = []
        for v in op.operands:
            i = ids.get(v)
            if i is None:
                i = ids[v] = self.skipped_values
                self.skipped_values += 1
            operands.append(i)
        for r in op.results:
            ids[r] = self.skipped_values
            self.skipped_values += 1
        for region in op.regions:
            for block in region.blocks:
                for a in block.arguments:
                    if a not in ids:
                        ids[a] = self.skipped_values
                        self.skipped_values += 1
                for inner in block.operations:
                    self.skip(inner.operation)
        return tuple(operands) if name in _RETURNS else ()

    def attrs(self, attributes, op_name: str) -> tuple:
        kept = []
        constant = op_name.endswith(".constant")
        for key in attributes:  # names in this binding version (NamedAttribute in older ones)
            if not isinstance(key, str):
                key = key.name
            try:
                a = attributes[key]  # auto-downcast: fails for some element types (complex)
            except TypeError as e:  # the bindings' message carries the attribute as printed
                kept.append((key, _undowncast(e)))
                continue
            # Attributes are uniqued like types, and ops repeat them (broadcast dimensions,
            # comparison directions): read each distinct one once.
            if key == "dot_dimension_numbers":
                kept.extend(_dot_dims(a))
            elif key == "value" and constant:
                hit = self.splats.get(a)
                if hit is None:
                    hit = self.splats[a] = (_is_splat(self.ir, a), _scalar_int(self.ir, a), _printed(a))
                kept.append(("splat", hit[0]))
                if hit[1] is not None:  # a loop's bounds and steps (ir.loops)
                    kept.append(("int", hit[1]))
                value = hit[2]
                if value.startswith("dense_resource<") and not self.blobs:
                    raise _Blob
                if value.startswith("dense_resource<"):
                    # a blob the file does not hold (ir.resources inlined the others): its values unknown,
                    # so equal to no other constant, not even one of the same key elsewhere
                    value = f"{value} (its values are not in {self.label}) #{self.unit}"
                kept.append(("value", value))  # the constant itself: a diff compares it
            else:
                hit = self.attr_values.get(a)
                if hit is None:
                    hit = self.attr_values[a] = _attr_value(self.ir, a)
                kept.append((key, hit))
        return tuple(kept)

    def arg_name(self, arg) -> str:
        try:
            loc = arg.location
        except Exception:  # older bindings: block arguments without locations
            return ""
        name = loc_name(loc, self.loc_kinds) or ""
        return name if len(name) < 200 else ""


_RETURNS = frozenset({"func.return", "stablehlo.return", "mhlo.return", "sdy.return"})


def _is(cls, x) -> bool:
    """isinstance for both binding generations (auto-downcast, or the static `isinstance`)."""
    if isinstance(x, cls):
        return True
    check = getattr(cls, "isinstance", None)
    return bool(check and check(x))


def _attr_value(ir, a):
    for cls, get in ((ir.DenseI64ArrayAttr, lambda x: tuple(x)), (ir.BoolAttr, lambda x: x.value),
                     (ir.IntegerAttr, lambda x: x.value), (ir.FloatAttr, lambda x: x.value),
                     (ir.StringAttr, lambda x: _bounded(x.value)), (ir.FlatSymbolRefAttr, lambda x: x.value)):
        if _is(cls, a):
            return get(cls(a))
    return _printed(a)


def _printed(a) -> str:
    """An attribute as MLIR prints it; past ATTR_TEXT_LIMIT characters, its head and a digest of
    the whole (a constant's payload: two different ones never print alike)."""
    try:
        text = str(a)
    except Exception:  # an element type the bindings cannot print
        return "<unprintable attribute>"
    return _bounded(text)


def _bounded(text: str) -> str:
    """`text` up to ATTR_TEXT_LIMIT characters; a longer one as its head and a digest of the whole."""
    if len(text) <= ATTR_TEXT_LIMIT:
        return text
    import hashlib

    return text[:ATTR_TEXT_LIMIT] + "... #" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _undowncast(e: TypeError) -> str:
    """The printed form of an attribute the bindings cannot downcast (a complex constant): their
    error message quotes it as `Attribute(...)`. Reading it any other way aborts the process."""
    text = str(e)
    start = text.find("Attribute(")
    body = text[start + len("Attribute("):].rstrip()
    body = body[:-2] if body.endswith("))") else body
    if start < 0 or not body:
        return _bounded("<unprintable attribute: " + text + ">")
    return _bounded(body)


def _dot_dims(a) -> list:
    try:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.DotDimensionNumbers(a)
        return [("lhs_batching_dimensions", tuple(d.lhs_batching_dimensions)),
                ("rhs_batching_dimensions", tuple(d.rhs_batching_dimensions)),
                ("lhs_contracting_dimensions", tuple(d.lhs_contracting_dimensions)),
                ("rhs_contracting_dimensions", tuple(d.rhs_contracting_dimensions))]
    except Exception:  # IREE's bindings, or mhlo's attribute: keep the printed form
        return [("dot_dimension_numbers", str(a)[:200])]


def _scalar_int(ir, a) -> int | None:
    """The value of a rank-0 integer constant, else None."""
    try:
        if not _is(ir.DenseIntElementsAttr, a) or ir.ShapedType(a.type).rank != 0:
            return None
        return ir.IntegerAttr(ir.DenseElementsAttr(a).get_splat_value()).value
    except (TypeError, ValueError):
        return None


def _is_splat(ir, a) -> bool:
    try:
        return _is(ir.DenseElementsAttr, a) and ir.DenseElementsAttr(a).is_splat
    except TypeError:  # element types the bindings cannot cast (complex): report not-a-splat
        return False


class _Blob(Exception):
    """A bytecode module holds a dense_resource constant (parse reads it again from its text)."""


def _build(module, label: str, parser: str, ir=None, part: tuple = (0, 1), blobs: bool = True) -> tuple:
    """The wire form of a parsed module, or of part j of k of it: see Module.from_wire. `blobs` False:
    a dense_resource constant raises _Blob."""
    if ir is None:
        from jaxlib.mlir import ir
    body = [op.operation for op in module.body.operations]  # an OpView's .name is its symbol
    j, k = part
    lo, hi = _share(j, k, _units(body)) if k > 1 else (0, float("inf"))
    b = _Builder(ir, lo, hi)
    b.label, b.blobs = label, blobs
    funcs = []
    try:
        for op in body:
            if op.name == "func.func":
                funcs.append(b.func(op))
            else:  # module-level ops other than functions (rare): keep them in a pseudo-function
                b.run([op], "<module>", None)
    except _Stop:  # a part before the last: its functions are partial, the last part has them all
        return (label, parser, [], b.ops, b.values, b.tensors)
    names = {o[1] for o in b.ops} | b.skipped_names
    dialects = {name.split(".", 1)[0] if "." in name else "" for name in names}
    if not funcs:
        raise ParseError(f"{label}: MLIR module without any func.func", fix="give a StableHLO module")
    foreign = sorted(dialects - STABLEHLO_DIALECTS - {"func", "check", ""})
    if foreign and not dialects & STABLEHLO_DIALECTS:
        # An identity function (func ops only) is valid StableHLO; arith/linalg/tosa code is not.
        raise ParseError(f"{label}: MLIR but not StableHLO (no stablehlo/chlo/mhlo op; dialects: "
                         f"{', '.join(foreign)})",
                         fix="give the StableHLO export of the model (jax.jit(...).lower(...).as_text(debug_info=True))")
    return (label, parser, funcs, b.ops, b.values, b.tensors)


# Skipping a unit (numbering its values) costs about this fraction of recording it.
SKIP_COST = 0.3


def _units(body: list) -> int:
    """The number of top-level ops: those of the functions' blocks, and module-level others."""
    n = 0
    for op in body:
        if op.name == "func.func":
            n += sum(len(block.operations) for region in op.regions for block in region.blocks)
        else:
            n += 1
    return n


def _share(j: int, k: int, units: int) -> tuple:
    """Units [lo, hi) of part j of k, sized so every part takes about as long: part j skips
    the units before lo (at SKIP_COST each) and records its own. The last part runs to the end."""
    bounds = [0.0]
    for _ in range(k):
        bounds.append(bounds[-1] * (1 - SKIP_COST) + 1)
    lo = round(units * bounds[j] / bounds[k])
    hi = round(units * bounds[j + 1] / bounds[k]) if j < k - 1 else float("inf")
    return lo, hi
