"""Length-prefixed messages on a pipe, between stackwars-ir and its worker processes (parse, bench)."""
from __future__ import annotations

import struct


def send_bytes(stream, data: bytes) -> None:
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def receive_bytes(stream) -> bytes:
    """One message; EOFError when the other end is gone (a worker that died, a caller that left)."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return data
