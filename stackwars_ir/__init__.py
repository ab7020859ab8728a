"""stackwars-ir: capture, parse, diff, benchmark and report StableHLO from JAX and PyTorch."""

__version__ = "0.1.0"
