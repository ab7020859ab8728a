"""The mutation test's fast subset: real programs changed in meaning are reported, in their block;
changed in spelling only, identical (benchmarks/mutations.py runs every program, docs/benchmarks.md)."""
from __future__ import annotations

import random

from conftest import CAPTURES, CORPUS
from stackwars_ir.diff import mutate


def _sources():
    # Goldens of three models (provenance, blocks, helpers) and, when ../shared is there, a seeded
    # sample of the corpus (every op kind the corpus tests turns up over the whole run).
    goldens = [CAPTURES / f"{m}-tiny" / f"{s}.mlir" for m, s in
               (("gpt2", "jax"), ("gpt2", "torch-torch_xla"), ("resnet50", "torch-torchax"), ("bert", "jax-train"))]
    corpus = sorted(CORPUS.rglob("*.mlir"))
    # random_gamma: helpers called inside loops, inlined after their readers (the diff raised KeyError)
    named = [p for p in corpus if p.name == "random_gamma_float32_3_chlo.mlir"]
    return goldens + named + random.Random(7).sample(corpus, min(40, len(corpus)))


def test_every_mutant_is_answered_right():
    report = mutate.run(_sources(), seed=1)
    assert report.errors == ()
    assert [v.mutant.what + " -> " + v.said for v in report.misses] == []
    made_meaning, _ = report.total(meaning=True)
    made_spelling, _ = report.total(meaning=False)
    assert made_meaning >= 30 and made_spelling >= 30
    assert set(report.made) >= {"swap_operands", "retarget_operand", "attribute", "constant", "delete_op", "add_op",
                                "generic_form", "bytecode", "ssa_names", "mhlo", "no_locations"}


def test_mutants_are_real_changes_and_seeded():
    text = (CAPTURES / "gpt2-tiny" / "jax.mlir").read_text()
    a = mutate.mutants(text, "gpt2", random.Random(3))
    b = mutate.mutants(text, "gpt2", random.Random(3))
    assert [(m.kind, m.what, m.data) for m in a] == [(m.kind, m.what, m.data) for m in b]
    assert all(m.data != text.encode() for m in a if m.kind not in ("no_locations",))
    assert {m.kind for m in a if m.changes_meaning} >= {"swap_operands", "retarget_operand", "attribute", "constant",
                                                        "delete_op", "add_op"}
