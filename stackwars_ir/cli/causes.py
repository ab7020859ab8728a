"""The command line of causes: why (a gap between two runtimes split), ablate (blocks transplanted).

Thin, over stackwars_ir.bench.answer and stackwars_ir.ablate; registered on the main group as cli_stack's are.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .shell import (adapters_option, batches_option, emit, finish, given_on_command_line, json_option, limits_options,
                    markdown_option, model_options, model_or_files, output_option, progress, request, warn_sidecars)
from ..common.targets import ESTIMATED, names


def register(main: click.Group) -> None:
    main.add_command(why_cmd)
    main.add_command(ablate_cmd)


@click.command("why")
@click.argument("targets", nargs=-1, required=True)
@click.option("--a", "a", default="jax", show_default=True,
              help="A: the native runtime B is compared against (a bench baseline: jax, eager, torch_xla, torchax, "
                   "inductor, torch_xla_dynamo; or a row's kind as bench names it).")
@click.option("--b", "b", default="torch_xla", show_default=True, help="B: the native runtime asked about.")
@click.option("--rounds", type=int, default=3, show_default=True,
              help="With MODEL: benches run, each in fresh workers; the intervals are across them.")
@click.option("--warmup", type=int, default=None,
              help="With MODEL: runs after the second to discard before each row's steady state (as bench's; default 2).")
@click.option("--runs", type=int, default=None,
              help="With MODEL: exactly this many steady-state runs per row (as bench's; default: adaptive, until the "
                   "p10-p90 spread is under 10%, 10 to 1000 runs, 0.5 to 10 s).")
@batches_option("the first batch of the bench")
@limits_options("Seconds per executable for its compile and runs.", "each bench's workers")
@json_option("the paragraph")
@markdown_option
@output_option("--html", "html_path",
              help="Write a self-contained HTML page here.")
@model_options(Path("out") / "captures", shapes=False, step_help="forward, or train (one training step).")
@adapters_option
def why_cmd(targets: tuple[str, ...], a: str, b: str, rounds: int, warmup: int | None, runs: int | None, batches: str,
            timeout: float | None,
            max_memory: str | None, json_path: Path | None, md_path: Path | None, html_path: Path | None, out_dir: Path,
            **options: object) -> None:
    """Why B's step differs from A's, in one paragraph: the ratio of their native steady steps, the
    share the compiled programs explain (both timed on one XLA runtime), the share the host's work per
    step explains (bench --host's phases), and what is left, each with its 95% interval and source.

    TARGETS: a model (benched --rounds times: `bench MODEL --baselines A,B --host`), or bench --json
    files of such benches (each file one round).

    Exit code 0: answered; 2: bad input (a bench without both runtimes), nothing written; 130: interrupted.
    """
    import json

    from ..bench.answer import answer, native_kind
    from ..bench.result import BenchReport
    from ..common.errors import StackwarsError
    from ..common.files import read_result, write_atomic
    from ..report.answer import answer_html, answer_markdown, answer_text
    from ..workload import batch_list

    files = [Path(t) for t in targets if t.endswith(".json")]
    kind_a, kind_b = native_kind(a), native_kind(b)
    batch = (batch_list(batches) or (None,))[0]
    if files:
        if len(files) != len(targets):
            raise StackwarsError("why takes a model or bench --json files, not both",
                                 fix="give the bench files alone, or the model alone")
        given = given_on_command_line(("rounds", "warmup", "runs"))
        if given:  # each file is one round, measured already
            raise StackwarsError(f"--{given[0]} asks how a model is benched, and bench --json files were measured already",
                                 fix="drop it, or name the model")
        reports = [read_result(f, "bench", BenchReport.from_json) for f in files]
        source = "bench --json files " + ", ".join(str(f) for f in files)
    else:
        model = model_or_files(targets, "why", ("batches",), fix="name a model, or give bench --json files")
        if rounds < 1:
            raise StackwarsError(f"--rounds {rounds} must be at least 1", fix="e.g. --rounds 3")
        from ..bench.timing import Asked
        from ..isolate.task import max_memory as max_memory_of
        from ..sweep import bench_model

        from ..common.progress import planned
        from ..sweep import bench_steps

        req, asked = request(model, options), Asked.of(host=10, runs=runs, warmup=warmup)
        reports, steps = [], bench_steps(req, batches=(batch,), baselines=(a, b), out_dir=out_dir, asked=asked)
        with planned(progress, steps + [k for k in steps if k != "capture"] * (rounds - 1)):
            for i in range(rounds):
                progress(f"why: round {i + 1} of {rounds}: bench {model} --baselines {a},{b} --host")
                reports.append(bench_model(req, batches=(batch,), baselines=(a, b), out_dir=out_dir,
                                           timeout=timeout, max_memory=max_memory_of(max_memory, timeout),
                                           progress=progress, asked=asked))
        sampling = "".join(f" {w}" for w in asked.options())
        source = f"stackwars-ir bench {model} --size {req.size} --baselines {a},{b}{sampling} --host, {rounds} times"
    ans = answer(reports, kind_a, kind_b, batch, source)
    if md_path is not None:
        write_atomic(md_path, answer_markdown(ans))
    if html_path is not None:
        write_atomic(html_path, answer_html(ans, " ".join(["stackwars-ir"] + sys.argv[1:])))
    emit(answer_text(ans), ans.as_json(), json_path, dumps=lambda d: json.dumps(d, indent=1))


@click.command("ablate")
@click.argument("file_a", type=click.Path(path_type=Path))
@click.argument("file_b", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder the variants of FILE_B are written to, each with a sidecar (default: out/ablate/<FILE_B's "
                   "folder name>, so two ablations of different captures keep their variants apart).")
@click.option("--only", default="", metavar="LIST",
              help="Rewrites to try, comma-separated: norm, flatten, embedding, or all (the default).")
@click.option("--block", "blocks", multiple=True, metavar="NAME",
              help="Transplant A's blocks of this kind into B (norm, attention, mlp, embedding, any other block "
                   "role, all for the four, or one block's label as diff prints it: 'attention[3]#0'); repeatable. "
                   "Without --only and --block: every rewrite and each of the four kinds; with --only alone: no "
                   "transplant; with --block alone: no rewrite.")
@click.option("--rounds", type=int, default=3, show_default=True,
              help="Rounds of timing, each in a fresh worker (an interval needs 3 or more).")
@click.option("--profile", type=int, default=None, metavar="N",
              help="Also profile N runs of each file per round (after its steady runs) and show, per variant, the "
                   "kernel time of each block it changed beside B's.")
@json_option("the table")
@markdown_option
@output_option("--html", "html_path", help="Write HTML here.")
@click.option("--target", default=None, metavar="TPU",
              help=f"Also compile A, B and each variant for {names(ESTIMATED, ' or ')} (libtpu, no TPU needed: "
                   "`make setup-tpu`) and show the compiler's estimate of one run beside the times: estimates, "
                   "never measurements.")
@limits_options("Seconds per executable for its compile and runs; one still running 10 s later is stopped.",
                "the checking and timing workers")
@adapters_option
def ablate_cmd(file_a: Path, file_b: Path, out_dir: Path | None, only: str, blocks: tuple[str, ...], rounds: int,
               profile: int | None, json_path: Path | None, md_path: Path | None, html_path: Path | None,
               target: str | None, timeout: float | None, max_memory: str | None) -> None:
    """What each difference between FILE_A and FILE_B costs: FILE_B's lowering rewritten into
    FILE_A's form, one kind of difference at a time (norm: batch_norm_training/batch_norm_grad
    spelled out; flatten: dot_general on unflattened operands; embedding: position tables as iota,
    lookups as jnp.take reads them) and all of them at once; and, for what no rewrite covers,
    FILE_A's blocks transplanted into FILE_B, one kind at a time (--block). Each variant is checked
    against FILE_B's outputs on the same arguments (a failed one is never timed), then FILE_A,
    FILE_B and the variants are timed on XLA:CPU, interleaved, in --rounds fresh workers
    (docs/ablate.md).

    Exit code 0: done (also when nothing can be rewritten); 2: bad input, or a variant that failed
    its check or its rewrite; 130: interrupted.
    """
    from ..ablate import KINDS, REWRITES, ablate, is_label
    from ..diff.block import ROLES
    from ..common.errors import StackwarsError
    from ..isolate.task import max_memory as max_memory_of
    from ..report.ablation import ablation_html, ablation_markdown, ablation_text

    names = tuple(dict.fromkeys(n.strip() for n in only.split(",") if n.strip()))
    known = [r.name for r in REWRITES]
    names = () if "all" in names else names  # all: every rewrite, as without --only
    for n in names:
        if n not in known:
            raise StackwarsError(f"--only {n}: no such rewrite", fix=f"one of {', '.join(known)}")
    kinds = tuple(dict.fromkeys(k for b in blocks for k in (KINDS if b.strip() == "all" else (b.strip(),))))
    for k in kinds:
        if not is_label(k) and k not in ROLES:
            raise StackwarsError(f"--block {k}: no such block role", fix=f"one of {', '.join(ROLES)}, all, or a block's "
                                                                     "label as diff prints it (attention[0]#0)")
    # Neither asked: every rewrite and each kind of block; --only alone: no transplant; --block alone: no rewrite.
    rewrites = (names or None) if only else (() if kinds else None)
    kinds = kinds or (() if only else KINDS)
    if profile is not None:
        from ..bench.timing import Asked

        Asked.of(profile=profile)  # --profile 1: one line before anything runs
    if target:
        from ..bench.estimate import check_chip

        check_chip(target)  # a generation with no cost model, or no libtpu: one line before anything runs
    warn_sidecars([file_a, file_b])
    out_dir = out_dir or Path("out") / "ablate" / (Path(file_b).resolve().parent.name or "root")
    abl = ablate(file_a, file_b, out_dir, rewrites, rounds, timeout, max_memory_of(max_memory, timeout), progress, target,
                 kinds, profile or 0)
    from ..common.files import write_atomic

    if md_path:
        write_atomic(md_path, ablation_markdown(abl))
    if html_path:
        write_atomic(html_path, ablation_html(abl, " ".join(["stackwars-ir"] + sys.argv[1:])))
    emit(ablation_text(abl), abl.as_json(), json_path)
    finish([v for v in abl.variants if v.error or (v.check is not None and not v.check.ok)])
