"""XLA's HLO files (text, HloModuleProto, dump protos) read as StableHLO through XLA's own converters."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from ..common.errors import ParseError


# What a file was, where the parser made StableHLO of something else (Module.form; "" for StableHLO as written).
FORM_HLO_PROTO = "an XLA HLO proto, converted to StableHLO by XLA's importer"

FORM_HLO_TEXT = "XLA HLO text, parsed by XLA's HLO parser and converted to StableHLO by its importer"

_T = TypeVar("_T")


def scheduled(text: str) -> bool:
    """Whether an HLO module's header says XLA scheduled it: the form it has after its optimizations."""
    return "is_scheduled=true" in text.lstrip().split("\n", 1)[0]


def from_hlo_proto(data: bytes) -> bytes | None:
    """StableHLO bytecode of an XLA HloModuleProto (an XLA dump's `*.hlo.pb`, torch_xla's graph protos),
    converted by XLA's own importer in jaxlib; None for bytes that are not one."""
    try:
        from jaxlib import _jax
    except ImportError:
        return None
    return first_module(data, _jax.mlir.hlo_to_stablehlo)


def first_module(data: bytes, read: Callable[[bytes], _T]) -> _T | None:
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


def hlo_text_modules(text: str) -> list[tuple[int, str]]:
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


def from_hlo_text(text: str, source: str, line: int) -> bytes:
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


_HLO_PROTO: list = [None]  # the HloProto message class, made once


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
