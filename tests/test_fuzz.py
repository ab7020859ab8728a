"""Fuzzing: a seeded sample of mutated StableHLO through parse, stats and segmentation, no failure."""
from __future__ import annotations

import pytest
from conftest import CAPTURES, CORPUS
from stackwars_ir.diff import fuzz


def sources():
    # The corpus when it is there (../shared), every 7th file; the golden captures always.
    return sorted(CAPTURES.glob("*/*.mlir")) + sorted(CORPUS.glob("*.mlir"))[::7]


def test_mutations_are_seeded_and_reproducible():
    a = [(i.source, i.mutations, i.data) for i in fuzz.inputs(sources(), 50, seed=3)]
    b = [(i.source, i.mutations, i.data) for i in fuzz.inputs(sources(), 50, seed=3)]
    assert a == b and len({m for _, ms, _ in a for m in ms}) >= 8  # many kinds of mutation, the same each time


@pytest.mark.slow  # over 20 s here (issue 52)
def test_a_thousand_mutated_inputs_give_no_traceback_and_no_bad_message(tmp_path):
    report = fuzz.run(sources(), 1000, seed=0, keep=tmp_path)
    assert report.inputs == 1000
    assert report.failures == [], [(i.index, i.source, i.mutations, p) for i, p in report.failures[:5]]
    assert report.outcomes["parsed"] > 20 and report.outcomes["rejected with one line"] > 500
