"""Length-prefixed pipe messages between stackwars-ir and its workers, and their end with the caller.

The workers: parse, bench and sweep jobs.
"""
from __future__ import annotations

import os
import struct
import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from subprocess import Popen


def send_bytes(stream: IO[bytes], data: bytes) -> None:
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def receive_bytes(stream: IO[bytes]) -> bytes:
    """One message; EOFError when the other end is gone (a worker that died, a caller that left)."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return data


def die_with_parent() -> None:
    """End this worker when the process that started it is gone (killed outright: no EOF reaches a
    worker busy compiling or timing). Without this, a bench worker of a killed sweep went on with its
    job (GPT-2 base's, 5.5 GiB resident, both cores) beside the sweep resumed after it."""
    import threading

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def end_worker(proc: Popen[bytes], grace_s: float) -> None:
    """End a worker the way both worker kinds do: close its stdin (its loop ends at EOF), give it
    `grace_s` to exit, then kill it and reap it."""
    import subprocess

    if proc.poll() is not None:
        return
    proc.stdin.close()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
