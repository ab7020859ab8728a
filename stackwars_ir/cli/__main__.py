"""`python -m stackwars_ir.cli`: the command line (benchmarks/ run it so, with their interpreter)."""
from . import main

main()
