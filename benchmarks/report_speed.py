"""Report speed: writing the HTML report for the GPT-2 base pair (goal < 2 s, parse and diff included).

Usage: .venv/bin/python benchmarks/report_speed.py [--captures DIR]
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _common import best_of, captures_dir


def main() -> None:
    captures = captures_dir()
    from stackwars_ir.diff import diff_files
    from stackwars_ir.report import write_outputs

    base = captures / "gpt2-base"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.html"
        t = best_of(lambda: write_outputs(diff_files(base / "jax.mlir", base / "torch-torch_xla.mlir").result(), html_path=out))
        print(f"gpt2 base report (jax vs torch_xla): {t:.2f} s, {out.stat().st_size / 1e3:.0f} kB (goal < 2 s)")


if __name__ == "__main__":
    main()
