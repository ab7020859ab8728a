"""Shared fixtures: the golden captures, the StableHLO corpus, and a CLI runner."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the study's package (study/) sits beside the library, not installed with it
    sys.path.insert(0, str(ROOT))
CAPTURES = ROOT / "captures"
CORPUS = ROOT.parent / "shared" / "corpus" / "stablehlo-testdata"


def pins(lock: str = "requirements.lock") -> dict:
    """{package: version} of one of the repository's lock files (names as written there)."""
    return dict(line.split("==", 1) for line in (ROOT / lock).read_text().splitlines()
                if "==" in line and not line.startswith("#"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"StableHLO corpus not found at {CORPUS}")
    return CORPUS


def golden(model: str, stem: str, size: str = "tiny") -> Path:
    return CAPTURES / f"{model}-{size}" / f"{stem}.mlir"


@pytest.fixture
def cli():
    """Run the CLI in-process; returns (exit code, stdout, stderr). The CLI sets the environment its
    workers read (--parse-timeout, --adapters): the test's own environment is put back after it, so a
    test's `--parse-timeout 2` cannot stop a later test's parse on a loaded machine."""
    from click.testing import CliRunner

    from stackwars_ir.cli.commands import main

    def run(*args):
        result = CliRunner().invoke(main, [str(a) for a in args])
        return result.exit_code, result.stdout, result.stderr

    saved = dict(os.environ)
    yield run
    os.environ.clear()
    os.environ.update(saved)
