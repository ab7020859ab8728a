"""IR: StableHLO text or bytecode parsed into a typed Module with the real MLIR bindings.

Parsing runs in isolated workers (ir.pool).
"""
from .model import Func, Module, Op, Tensor, Value  # noqa: F401
from .pool import (  # noqa: F401
    DEFAULT_MEMORY, DEFAULT_SECONDS, MAX_SHARES, MEMORY_ENV, RECYCLE_BYTES, SHARE_BYTES, TIMEOUT_ENV, Limits,
    ParseResult, Parser, compile_input, limits_env, load, load_one, load_single, no_gc, parse_bytes, picked,
)
from .parse import (  # noqa: F401
    compile_form, optimized_hlo_text,
)
