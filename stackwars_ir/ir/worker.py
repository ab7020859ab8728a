"""The parse worker: a child process that parses files, so a crash in MLIR's native code kills only it.

Protocol on stdin/stdout: length-prefixed marshal data (both ends run the same Python).
Request: (path, j, k, seam): parse the file, or part j of k of it (see builder._Builder); seam is
None, or a test's "crash" or "hang".
Reply: ("ok", [wire, ...]), each the plain-tuple form that Module.from_wire reads,
("error", one-line message), or ("memory", detail) when the worker's memory limit was hit. marshal writes and reads plain tuples 3x faster than pickle
does the IR's NamedTuples.
"""
from __future__ import annotations

import marshal
import os
import signal
import sys
from typing import IO

from ..common.errors import StackwarsError
from ..common.wire import die_with_parent, receive_bytes, send_bytes
from .parse import parse_wire


def send(stream: IO[bytes], obj: object) -> None:
    send_bytes(stream, marshal.dumps(obj))


def receive(stream: IO[bytes]) -> tuple:
    return marshal.loads(receive_bytes(stream))


def handle(request: tuple[str, int, int, str | None]) -> tuple[str, list[tuple] | str]:
    path, j, k, seam = request
    if seam == "crash":  # the parent's test seams: die as MLIR's native parser does on some files
        os.kill(os.getpid(), signal.SIGSEGV)
    if seam == "hang":  # ... or never finish, as a parse of a hostile file can
        import time

        time.sleep(3600)
    try:
        with open(path, "rb") as f:
            data = f.read()
        return ("ok", parse_wire(data, path, (j, k)))
    except StackwarsError as e:
        return ("error", e.one_line())
    except MemoryError as e:  # the address-space limit (MLIR's std::bad_alloc arrives as this)
        return ("memory", str(e))
    except OSError as e:
        return ("error", f"{path}: cannot read: {e.strerror}")
    except Exception as e:  # a bug of ours: still one line, still not a crash of the caller
        detail = " ".join(str(e).split())[:200]
        return ("error", f"{path}: internal error while parsing: {type(e).__name__}: {detail}")


def main() -> None:
    import gc

    # A module is 100,000s of small tuples that live until the reply is sent: the cyclic GC
    # would rescan them again and again (a third of the build time on a 50k-op module).
    gc.disable()
    # Ctrl-C reaches the whole process group: the caller handles it and ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the reply stream
    while True:
        try:
            request = receive(stdin)
        except EOFError:
            return
        send(stdout, handle(request))


if __name__ == "__main__":
    main()
