"""This process's freed memory given back to the system: cycles collected, glibc's free pages returned."""
from __future__ import annotations


def trim(fresh_blocks: bool = False) -> None:
    """glibc: free pages go back to the system (malloc_trim, every arena); `fresh_blocks`: and every
    block of 128 KiB or more is mapped anew from now on (a fixed mmap threshold: glibc raises it
    after each free of a mapped block, and a later run would then reuse pages an earlier one
    touched, unseen). Elsewhere: nothing to do."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        if fresh_blocks:
            libc.mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def release() -> None:
    """What dead objects hold, back to the system now: a deep-copied model (its modules and hooks
    refer to each other, so only the cycle collector frees it) and the pages glibc keeps after."""
    import gc

    gc.collect()
    trim()
