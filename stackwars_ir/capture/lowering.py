"""Lower a function with jax.jit so its locations name model code only, whoever the caller is."""
from __future__ import annotations

import os
import threading
from pathlib import Path


def _exclude_callers() -> None:
    """Drop the frames of the standard library and of stackwars_ir itself from locations.

    The lowering runs on a fresh thread (see lower_text), so what stays is the model code:
    the same text from the CLI, from pytest or from a notebook.
    """
    from jax._src import source_info_util

    for path in (os.path.dirname(threading.__file__), str(Path(__file__).resolve().parents[1])):
        if path not in source_info_util._exclude_paths:
            source_info_util.register_exclusion(path)


def lower_text(fn, *args, x64: bool = False) -> str:
    """`jax.jit(fn, keep_unused=True).lower(*args).as_text(debug_info=True)`, caller-independent."""
    import jax

    _exclude_callers()
    # JAX caches some traced helpers with the source location of their first trace (lax's scatter
    # combiner, used by every gather's transpose): without a clear, a capture's locations would
    # depend on what this process lowered before (measured: BERT's torchax training step after GPT-2's).
    jax.clear_caches()
    box: dict = {}

    def work():
        try:
            with jax.enable_x64(x64):
                # keep_unused: the argument list must match the parameter list one to one.
                box["text"] = jax.jit(fn, keep_unused=True).lower(*args).as_text(debug_info=True)
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=work, name="stackwars-ir-lower")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["text"]
