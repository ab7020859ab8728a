"""Every result type reads back from the JSON it writes (issue 52): saved results load as typed values."""
from __future__ import annotations

import json

import pytest

from conftest import CAPTURES


@pytest.mark.parametrize("sidecar", sorted(CAPTURES.rglob("*.json")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_golden_captures_parity_reads_back_as_written(sidecar):
    from stackwars_ir.capture.parity import Parity

    written = json.loads(sidecar.read_text())["parity"]
    if written.get("verdict") is None:  # an abstract capture: nothing ran
        pytest.skip("no parity run")
    back = Parity.from_json(written, sidecar.stem)
    assert back.as_json() == written and back.stem == sidecar.stem


def test_stats_read_back_as_written():
    from stackwars_ir.ir.stats import StatsReport, stats_files

    paths = sorted(CAPTURES.glob("gpt2-tiny/*.mlir")) + sorted(CAPTURES.glob("*/jax-train.mlir"))[:1]
    report = stats_files(paths)
    assert report.modules and not report.errors
    back = StatsReport.from_json(json.loads(json.dumps(report.as_json())))
    assert back == report


def test_a_verdict_and_a_stack_read_back_as_written():
    from stackwars_ir.bench.compare import Verdict
    from stackwars_ir.isolate.stacks import lock, Stack

    for v in (Verdict(2, "jax", "torch-torchax", 1.31, 1.2, 1.4, paired=True),
              Verdict(None, "a", "b", 1.0, 0.9, 1.1, withheld="too noisy to call")):
        assert Verdict.from_json(json.loads(json.dumps(v.as_json()))) == v
    here = lock()
    assert Stack.from_json(json.loads(json.dumps(here.as_json()))) == here
