#!/usr/bin/env bash
# The GPU check of issue 77, in one run on a machine with an NVIDIA GPU (about 10 minutes): the GPU lock,
# then benchmarks/gpu_check.py (its docstring says what runs); every record and page in one folder.
#   benchmarks/gpu_check.sh [--out out/gpu-check] [--page]
set -euo pipefail
cd "$(dirname "$0")/.."
make setup-gpu >/dev/null
JAX_PLATFORMS=cuda,cpu PJRT_DEVICE=CPU exec .venv/bin/python benchmarks/gpu_check.py "$@"
