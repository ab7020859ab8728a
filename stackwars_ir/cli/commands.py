"""The command line: a thin click layer; each command calls one library function."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import __version__
from ..common.errors import EXIT_DIFFERENT
from ..common.targets import ESTIMATED, TPUS, names
from .shell import (Group, adapters_option, batches_option, emit, estimate_options, finish, fitted_request, has,
                    json_option, limits_options, markdown_option, mode_option, model_options, model_or_files,
                    only_memory_left, output_option, progress, every_row_failed,
                    request, set_env_for_command, stack_option, use_adapters, warn_sidecars)

if TYPE_CHECKING:
    from ..isolate.stacks import Stack


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stackwars-ir")
@click.option("--parse-memory", metavar="SIZE",
              help="Memory limit of each parse worker, e.g. 8G (default 3G; env STACKWARS_IR_PARSE_MEMORY).")
@click.option("--parse-timeout", metavar="SECONDS",
              help="Time limit to parse one file (default 60; env STACKWARS_IR_PARSE_TIMEOUT).")
@click.option("--adapters", "adapters", metavar="PATH", multiple=True,
              help="Model adapter files or folders of them to add to the catalogue (repeatable; env "
                   "STACKWARS_IR_ADAPTERS; see docs/adapters.md).")
def main(parse_memory: str | None, parse_timeout: str | None, adapters: tuple[str, ...]) -> None:
    """Capture, parse, diff, benchmark and report StableHLO from JAX and PyTorch.

    The pipeline: capture -> parse (stats) -> diff -> bench -> report. Every file is parsed in a
    worker process under a memory and a time limit; a file over either gets one line, exit 2.
    """
    import os

    from ..ir import Limits, limits_env
    from ..common.runtime import quiet_libtpu, quiet_third_parties

    quiet_third_parties()
    quiet_libtpu()  # before any jax backend starts, in this process and in every worker it starts
    os.environ.update(limits_env(parse_memory, parse_timeout))
    Limits.from_env()  # a bad value in the environment fails here, in one line, before any work
    use_adapters(adapters)


@main.command("models")
@adapters_option
def models_cmd() -> None:
    """List the model adapters, their sizes and default input shapes; then each --adapters folder that
    holds no adapter, and each file there that could not be read (skipped, the others usable)."""
    import os

    from .. import models

    width = max(map(len, models.CATALOG)) + 1
    for entry in models.CATALOG.values():
        click.echo(f"{entry.name:{width}} {entry.description}")
        if Path(entry.path).parent != models.HERE:
            click.echo(f"{'':{width}} (adapter file {entry.path})")
        for size, shape in entry.shapes.items():
            click.echo(f"{'':{width}}   {size:5} batch {shape['batch']}, {entry.seq_meaning} {shape['seq']}")
    bad = models.skipped()
    for path, why in bad:
        click.echo(f"could not read {path}: {why}")
    for item in filter(None, os.environ.get(models.ADAPTERS_ENV, "").split(os.pathsep)):
        folder = Path(item)
        if folder.is_dir() and not any(Path(e.path).parent == folder.resolve() for e in models.CATALOG.values()):
            click.echo(f"no adapter in {folder}" + (" that could be read" if any(p.parent == folder.resolve()
                                                                                 for p, _ in bad) else ""))


@main.command("capture")
@click.argument("model")
@click.option("--batch", type=int, help="Batch size (default: the adapter's for this size).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random weights and inputs.")
@click.option("--attn", default="eager", show_default=True, help="Attention implementation (only eager exports).")
@click.option("--force", is_flag=True, help="Overwrite existing captures.")
@click.option("--strict", is_flag=True, help="Exit 1 on a SUSPECT capture too (within the bound, but far beyond "
                                               "float32's own error: likely another function); files are written.")
@click.option("--stack", default=None, metavar="NAME",
              help="Lower with this version stack's packages (stackwars-ir stack list): its jax, and its torch "
                   "and exporters where it holds them; on the weights and reference built here.")
@model_options(Path("captures"), "forward, or train: loss, backward and one AdamW update (files named "
                                "<framework>-train).", model_optional=False,
               out_help="Folder to write MODEL-SIZE/<framework>.mlir and .json into.")
@adapters_option
def capture_cmd(model: str, batch: int | None, seed: int, attn: str, force: bool, strict: bool, stack: str | None,
                out_dir: Path, **options: object) -> None:
    """Export MODEL from JAX and/or PyTorch to StableHLO on the same weights, and check parity.

    Exit code 0: written and parity-checked (a SUSPECT line warns: within the bound, but far beyond
    float32's own error against the model in float64; with --strict it exits 1); 1: written, but a
    capture differs from PyTorch eager, or (several --exporter routes) a route was not captured, each
    said why, the others written; 2: bad input, nothing written; 130: interrupted, nothing written.
    """
    import dataclasses

    from ..capture import run
    from ..isolate.stacks import find

    req = request(model, options, batch=batch, seed=seed, attn=attn)
    dataclasses.replace(req, abstract=True).validated()  # the cheap checks before any framework loads
    req.frameworks()  # a JAX capture of an adapter without a twin: refused before the model is sized
    from ..common.errors import PartialCapture

    try:
        result = run(fitted_request(req), out_dir, force=force, stack=find(stack) if stack else None)
    except PartialCapture as e:  # --exporter all: what was captured shown, then each route that was not
        _show_captures(e.result)
        raise
    _show_captures(result)
    suspect = [p for p in result.parity if p.suspect]
    if strict and suspect:
        from ..common.errors import ParityError

        raise ParityError(f"{req.model}-{req.size}: {', '.join(p.stem for p in suspect)} SUSPECT under --strict "
                          "(likely another function than PyTorch's); files written for inspection",
                          fix="the SUSPECT line names the first module whose output diverges")


def _show_captures(result) -> None:
    """capture's lines: each route's parity, routes skipped, warnings, the files written (the routes not
    captured are in the error that follows)."""
    for line in [p.line() for p in result.parity] + list(result.skipped):
        click.echo(line)
    for line in result.warnings:
        click.echo(f"warning: {line}", err=True)
    if not result.parity:
        from ..capture.abstract import NOT_CHECKED

        click.echo(f"parity not checked: {NOT_CHECKED}")
    for f in result.files:
        click.echo(f"wrote {f}")


@main.command("stats")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_option("--json", "json_path", is_flag=False, flag_value="-", default=None, metavar="[FILE|-]",
               type=click.Path(allow_dash=True, path_type=Path),
              help="JSON (one object per module) to FILE, or to stdout instead of the tables ('-' or no value).")
@click.option("--top", default=15, show_default=True, help="Rows of the op histogram to show.")
@adapters_option
def stats_cmd(files: tuple[Path, ...], json_path: Path | None, top: int) -> None:
    """Op histogram by op and dialect, functions, arguments, parameter bytes, largest tensors.

    Exit code 0: every file parsed; 2: a file could not be parsed (the others are still shown).
    """
    import json

    from ..ir.stats import stats_files
    from ..report.text import stats_rich, stats_text

    if json_path is not None and json_path.suffix in (".mlir", ".mlirbc"):
        # `stats --json a.mlir b.mlir`: click took the first input as the JSON path; it is an input.
        files, json_path = (str(json_path), *files), Path("-")
    warn_sidecars(files)
    report = stats_files(files)
    if json_path is not None:  # the tables are not shown: the JSON takes stdout, or goes to a file
        emit(None, report.as_json(), json_path, dumps=lambda d: json.dumps(d, indent=2) + "\n")
    elif sys.stdout.isatty() and has("rich"):
        for s in report.modules:
            stats_rich(s, top)
    else:
        for s in report.modules:
            click.echo(stats_text(s, top))
    finish(report.failed, f"parsed {report.files - len(report.failed)} of {report.files} files" if report.files > 1
           else "")


@main.command("diff")
@click.argument("file_a", type=click.Path(path_type=Path))
@click.argument("file_b", type=click.Path(path_type=Path))
@json_option("the text")
@markdown_option
@output_option("--html", "html_path",
              help="Write the HTML report here.")
@mode_option("Segment by locations (provenance), by dataflow (structure), or pick per file.")
@click.option("--excerpts/--no-excerpts", default=False, help="Print each block's IR side by side.")
@click.option("--ops", "ops", is_flag=True,
              help="Print the op-level diff of every block: each changed, rewritten or one-side-only group "
                   "of ops, with its lines in the two files.")
@click.option("--kernels", is_flag=True,
              help="Also compile both on the XLA CPU backend (nothing is run) and count, per block, the kernels "
                   "(fusions and unfused ops) each side compiled to, and a sharded side's collectives.")
@click.option("--kernels-target", default="cpu", show_default=True,
              help=f"With --kernels: compile for this target instead ({names(TPUS)}: "
                   "compile-only through libtpu, `make setup-tpu`; a sharded file on its slice).")
@click.option("--bench", "bench_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `bench FILE_A FILE_B --profile --json` file: each block's kernel time on both sides, and "
                   "each block's share of the gap.")
@click.option("--bench-profile", "device_profiles", nargs=2, type=click.Path(path_type=Path), default=None,
              metavar="PA PB",
              help="Device profiles you took of FILE_A's and FILE_B's steps outside stackwars-ir (XProf *.xplane.pb, "
                   "or jax.profiler.trace's folder; XLA:CPU's, from jax or torch_xla): each block's kernel time on "
                   "both sides, with its interval across the profiles' steps (docs/own-files.md).")
@click.option("--explorer", "explorer_dir", type=click.Path(path_type=Path),
              help="Write Model Explorer node-data overlays (op status, block, block op delta) for both files "
                   "into this new folder, with a README saying how to open them.")
@adapters_option
def diff_cmd(file_a: Path, file_b: Path, json_path: Path | None, md_path: Path | None, html_path: Path | None,
             mode: str, excerpts: bool, ops: bool, kernels: bool, kernels_target: str, bench_path: Path | None,
             device_profiles: tuple[Path, Path] | None, explorer_dir: Path | None) -> None:
    """Align FILE_A and FILE_B block by block and name what differs.

    Exit code 0: nothing differs; 1: something differs; 2: bad input; 130: interrupted.
    """
    from ..ir import no_gc
    from ..report.explorer import check_target

    if explorer_dir is not None:
        check_target(explorer_dir)  # before the work: a folder in the way, Model Explorer missing
    if device_profiles and bench_path:
        from ..common.errors import StackwarsError

        raise StackwarsError("--bench and --bench-profile both give each block's time", fix="give one of them")
    warn_sidecars((file_a, file_b))
    with no_gc():  # the modules hold no cycles: the cyclic GC would rescan 100,000s of values (seconds)
        _diff_cmd(file_a, file_b, mode, excerpts, ops, kernels, kernels_target, bench_path, device_profiles,
                  json_path, md_path, html_path, explorer_dir)


def _diff_cmd(file_a: Path, file_b: Path, mode: str, excerpts: bool, ops: bool, kernels: bool, kernels_target: str,
              bench_path: Path | None, device_profiles: tuple, json_path: Path | None, md_path: Path | None,
              html_path: Path | None, explorer_dir: Path | None) -> None:
    import json

    from ..bench.attach import block_times_from
    from ..bench.kernels import block_kernels
    from ..diff import diff_files
    from ..report import diff_json, write_outputs
    from ..report.explorer import write_explorer
    from ..report.text import diff_text

    report = diff_files(file_a, file_b, mode)
    # each block's IR excerpts: for --excerpts and the files that show them (the text alone shows none)
    shown = "all" if excerpts or any(p is not None for p in (json_path, md_path, html_path, explorer_dir)) else "none"
    result = block_kernels(report, report.result(shown), (file_a, file_b), progress, kernels_target) if kernels \
        else report.result(shown)
    result = block_times_from(report, result, bench_path) if bench_path else result
    if device_profiles:
        from ..bench.attach import block_times_from_profiles

        result = block_times_from_profiles(report, result, (file_a, file_b), device_profiles, progress)
    emit(diff_text(result, excerpts=excerpts, ops=ops), lambda: diff_json(result), json_path,
         dumps=lambda d: json.dumps(d, indent=2) + "\n")
    for path in write_outputs(result, md_path=md_path, html_path=html_path):
        click.echo(f"wrote {path}", err=True)
    if explorer_dir is not None:
        written = write_explorer(report, result, explorer_dir)
        click.echo(f"wrote {len(written)} files to {explorer_dir} (open: see {explorer_dir / 'README.md'})", err=True)
    only_memory_left(report, result)
    sys.exit(EXIT_DIFFERENT if result.differs else 0)


@main.command("bench")
@click.argument("targets", nargs=-1, required=True)
@batches_option("1,4,16 (a sweep)")
@click.option("--baselines", default="jax,eager", show_default=True,
              help="With MODEL: native runtimes to time too, from jax,eager,inductor,torch_xla (with --step "
                   "train also jax_donate), torch_xla_dynamo (torch.compile(backend='openxla')) and torchax (a forward: "
                   "jax.jit of torchax.extract_jax; a training step: jax.jit of torchax's step with optax AdamW), or "
                   "'none'.")
@click.option("--backend", default=None, help="cpu, gpu or tpu (default: what jax picks).")
@click.option("--target", default=None, metavar="TPU",
              help=f"Run nothing: compile for {names(ESTIMATED, ' or ')} (libtpu, no TPU needed: `make setup-tpu`) and "
                   "estimate each kernel's time from the compiler's cost model; `diff A B --bench` splits the "
                   "estimated gap by block. Estimates, never measurements.")
@limits_options("Seconds per executable for its compile and runs; one still running 10 s later is stopped.",
                "an executable's worker")
@json_option()
@click.option("--warmup", type=int, default=None,
              help="Runs after the second to discard before the steady state (default 2; the first is shown as "
                   "'third').")
@click.option("--runs", type=int, default=None,
              help="Exactly this many steady-state runs per row (default: adaptive, until the p10-p90 spread is "
                   "under 10%, 10 to 1000 runs, 0.5 to 10 s).")
@click.option("--profile", type=int, is_flag=False, flag_value=10, default=None, metavar="[RUNS]",
              help="After the steady state, run each StableHLO file RUNS more times (default 10) under the runtime's "
                   "profiler and time each kernel (XLA:CPU or XLA:GPU; on XLA:CPU the files take turns in one "
                   "trace), and profile the native runtimes (jax.jit, torch "
                   "eager, torch.compile, torch_xla on its own XLA; on a GPU jax.jit alone) in workers of their own; "
                   "`diff A B --bench` then splits the gap by block.")
@click.option("--host", "host", type=int, is_flag=False, flag_value=10, default=None, metavar="[RUNS]",
              help="After the steady state, run each native runtime RUNS more times (default 10), each step split into "
                   "its host phases at the runtime's API calls (torch_xla: forward, sync, wait; jax.jit: dispatch, wait; "
                   "a training loop: forward and loss, backward, optimizer step) and by the runtime's own clocks "
                   "inside them (torch_xla's metrics), and RUNS more with a hook on each PyTorch module: the "
                   "forward's host time by module, which `diff A B --bench` shows per block.")
@click.option("--rounds", type=int, default=None, metavar="N",
              help="With --profile: profile the StableHLO files in N rounds, each in a fresh worker (the first "
                   "round's timing is the row's); `diff A B --bench` then gives each block's interval across the "
                   "rounds, which a fresh worker's shift moves, where one worker's runs are not (default 1; 3 for "
                   "intervals that hold on a rerun: docs/benchmarks.md).")
@model_options(Path("out") / "captures", shapes=False, framework_help="Only 'both' is timed.",
               step_help="forward, or train (one training step; baselines from jax,eager,inductor,torch_xla, each "
                         "running its own loop, so runs 1-3 are steps 1-3, and jax_donate: jax.jit's loop with the "
                         "parameters and AdamW state donated).")
@adapters_option
@stack_option
def bench_cmd(targets: tuple[str, ...], batches: str, baselines: str, backend: str | None, target: str | None,
              timeout: float | None, max_memory: str | None, json_path: Path | None, warmup: int | None,
              runs: int | None, profile: int | None, host: int | None, rounds: int | None, out_dir: Path,
              stack: Stack | None = None, **options: object) -> None:
    """Time StableHLO files (FILE.mlir ...) or a model (MODEL) on the XLA backend.

    Reports compile time, first run, second run and steady state (median, p10-p90), the proof that
    each row did the work, XLA's cost and memory analysis, the optimized HLO's fusions, a roofline
    against measured peaks, and a verdict per pair.

    A catalogue capture's weights, inputs and PyTorch reference are rebuilt from its model once and
    kept for the next run (~/.cache/stackwars-ir/values, up to 1 GiB; env STACKWARS_IR_VALUES: another
    folder, or off). The torch.compile baseline's first call compiles from nothing (inductor's caches in
    a new empty folder; env STACKWARS_IR_COMPILE_CACHE=warm: as earlier processes left them).

    Exit code 0: every row measured; 2: bad input, or a row failed (the others are still measured);
    130: interrupted.
    """
    from ..bench.run import bench_files, estimate_files
    from ..bench.timing import Asked
    from ..isolate.task import max_memory as max_memory_of
    from ..report.text import bench_text
    from ..sweep import bench_model, estimate_model
    from ..workload import batch_list

    memory, asked = max_memory_of(max_memory, timeout), Asked.of(warmup, runs, profile, host, rounds)
    model = model_or_files(targets, "bench", ("batches", "baselines"), fix="bench a model by name")
    if target:
        estimate_options()
        report = estimate_model(request(model, options), target, batches=batch_list(batches) or (None,),
                                out_dir=out_dir, timeout=timeout, max_memory=memory, progress=progress) if model \
            else estimate_files([Path(t) for t in targets], target, timeout, memory, progress)
    elif model:
        report = bench_model(request(model, options), batches=batch_list(batches) or (None,), baselines=baselines,
                             out_dir=out_dir, backend=backend, timeout=timeout, max_memory=memory, progress=progress,
                             asked=asked)
    else:
        report = bench_files([Path(t) for t in targets], backend, timeout, max_memory=memory, progress=progress,
                             asked=asked, stack=stack)
    if every_row_failed(len(report.rows), len(report.failed)):
        finish(report.failed)
    emit(bench_text(report), report.as_json(), json_path)
    finish(report.failed)


@main.command("memory")
@click.argument("targets", nargs=-1, required=True)
@click.option("--target", "target", default="cpu", show_default=True,
              help=f"Compile for: cpu, gpu, or a TPU generation ({names(TPUS)}; through "
                   "libtpu, no TPU needed: `make setup-tpu`).")
@click.option("--budget", "budget", default="", metavar="LIST",
              help="Budgets to check each plan against: sizes (16G, 512MiB) or devices (t4, v6e-1, h100-80gb, ...).")
@click.option("--measure", is_flag=True, help="Also run each executable once here (--target cpu) and measure its peak.")
@batches_option("1,8")
@limits_options("Seconds per executable to compile (and run with --measure).", "the compiling worker")
@json_option()
@markdown_option
@click.option("--max-batch", is_flag=True,
              help="With MODEL: the largest batch that fits each --budget, searched by compiling abstract captures "
                   "(none run; torch_xla, which has none, left out); up to 1024.")
@click.option("--chips", is_flag=True,
              help="With MODEL and a TPU --target: the smallest slice whose chips each hold their share, searched by "
                   "capturing on a mesh of each slice size (fsdp over the chips) and compiling; abstract captures.")
@model_options(Path("out") / "captures", "forward, or train (one training step).")
@adapters_option
@stack_option
def memory_cmd(targets: tuple[str, ...], target: str, budget: str, measure: bool, batches: str, timeout: float | None,
               max_memory: str | None, json_path: Path | None, md_path: Path | None, max_batch: bool, chips: bool,
               out_dir: Path, stack: Stack | None = None, **options: object) -> None:
    """Will it fit? XLA's memory plan of StableHLO files (FILE.mlir ...) or a model (MODEL).

    Each executable is compiled for --target, not run: arguments, outputs, aliased outputs,
    temporaries, generated code and the planned peak, against each --budget. With --measure (cpu)
    each is also run once and its peak measured beside the plan.

    Exit code 0: every executable planned (fitting or not); 2: bad input, or one failed to compile
    (the others are still planned); 130: interrupted.
    """
    from ..bench.memory import budgets as parse_budgets
    from ..bench.planning import plan_files
    from ..isolate.task import max_memory as max_memory_of
    from ..common.files import write_atomic
    from ..report.markdown import memory_markdown
    from ..report.text import memory_text
    from ..sweep import max_batch_model, plan_model, smallest_slice_model
    from ..workload import batch_list

    limits, memory = parse_budgets(budget), max_memory_of(max_memory, timeout)
    model = model_or_files(targets, "memory", ("batches", "max_batch", "chips"), fix="name a model")
    run = dict(out_dir=out_dir, target=target, max_memory=memory, timeout=timeout, progress=progress)
    if model and chips:
        report = smallest_slice_model(request(model, options), budgets_=limits, **run)
    elif model and max_batch:
        report = max_batch_model(request(model, options), budgets_=limits, batches=batch_list(batches),
                                 measure=measure, **run)
    elif model:
        report = plan_model(fitted_request(request(model, options)), batches=batch_list(batches) or (None,),
                            budgets_=limits, measure=measure, **run)
    else:
        report = plan_files([Path(t) for t in targets], target, limits, measure, memory, timeout, progress, stack=stack)
    if every_row_failed(len(report.plans), len(report.failed)):
        finish(report.failed)
    emit(memory_text(report), report.as_json(), json_path)
    if md_path is not None:
        write_atomic(md_path, memory_markdown(report))
        click.echo(f"wrote {md_path}", err=True)
    finish(report.failed)


@main.command("sweep")
@click.argument("grid", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--results", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of the results, one file per finished job (default: out/sweeps/GRID-NAME).")
@click.option("--jobs", type=int, default=None, help="Local worker processes (default: the cores, 4 GiB each).")
@click.option("--ray", "ray", metavar="local|auto|ADDRESS", default=None,
              help="Run the jobs as Ray tasks: a Ray started here (local), the running cluster (auto) or the one at "
                   "ADDRESS (`make setup-ray`).")
@click.option("--retry-failed", is_flag=True, help="Run the jobs that failed before again.")
@click.option("--retry-noisy", is_flag=True,
              help="Run the timed jobs again whose records were taken on a noisy machine (the probe before "
                   "them, or one of their rows' steady-state spread, over 10%).")
@click.option("--render", is_flag=True, help="Run nothing: the page of what the results folder holds.")
@json_option("the summary")
@markdown_option
def sweep_cmd(grid: Path, root: Path | None, jobs: int | None, ray: str | None, retry_failed: bool, retry_noisy: bool,
              render: bool, json_path: Path | None, md_path: Path | None) -> None:
    """A grid of captures, memory plans, benches and diffs (GRID.toml), each job in its own worker.

    Every finished job is a file in the results folder, keyed by its request and the stack's
    versions: a finished job is never computed again, a killed sweep resumes where it stopped, a
    failed job is recorded with its one-line error and the others go on (docs/sweep.md).

    Exit code 0: every job succeeded; 1: some failed (each named), or with --render some have not
    run yet; 2: bad input; 130: interrupted.
    """
    import os

    from ..common.files import write_atomic
    from ..models import ADAPTERS_ENV
    from ..report.markdown import sweep_markdown
    from ..report.text import sweep_text
    from ..sweep.execute import run_sweep
    from ..sweep.grid import read_grid

    set_env_for_command(ADAPTERS_ENV, os.environ.get(ADAPTERS_ENV, ""))  # the grid's `adapters`: this command's
    plan = read_grid(grid)
    root = root or Path("out") / "sweeps" / grid.stem
    report = run_sweep(plan, root, jobs=jobs, ray=ray, retry_failed=retry_failed, retry_noisy=retry_noisy,
                       render_only=render, progress=progress)
    emit(sweep_text(report), report.as_json(), json_path)
    if md_path is not None:
        write_atomic(md_path, sweep_markdown(report))
        click.echo(f"wrote {md_path}", err=True)
    sys.exit(1 if report.failed or report.pending else 0)


@main.command("report")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@output_option("--html", "-o", "--output", "out", required=True,
              help="The HTML file to write (-o and --output: older spellings of --html, kept).")
@click.option("--from", "from_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Render a saved `stackwars-ir diff --json` result instead of diffing FILE_A FILE_B (the .mlir "
                   "files are not needed).")
@click.option("--bench", "bench_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir bench --json` file whose timings the report charts (with --profile: time by block).")
@click.option("--memory", "memory_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir memory --json` file whose plans the report charts (stacked per executable).")
@click.option("--ablation", "ablation_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir ablate --json` file of these files: its \"what each difference costs\" table.")
@mode_option("How to segment into blocks (see diff).")
@click.option("--kernels", is_flag=True, help="Also count each block's kernels, as diff --kernels does.")
@adapters_option
def report_cmd(files: tuple[Path, ...], out: Path, from_path: Path | None, bench_path: Path | None,
               memory_path: Path | None, ablation_path: Path | None, mode: str, kernels: bool) -> None:
    """Write a self-contained HTML report of FILE_A vs FILE_B (op histograms, heat map, alignment, IR,
    timings, memory), or of a saved diff result (--from DIFF.json).

    Exit code 0: written; 2: bad input, nothing written; 130: interrupted, nothing written.
    """
    from ..report import sources, write_outputs

    if from_path is None:
        warn_sidecars(files)
    result, bench, memory = sources.report_of(files, from_path, bench_path, memory_path, mode, kernels, progress)
    ablation = sources.ablation_of(ablation_path, files, result if from_path else None) if ablation_path else None
    command = sources.command_line(files, out, from_path, bench_path, memory_path, mode, kernels, ablation_path)
    write_outputs(result, html_path=out, bench=bench, command=command, memory=memory, ablation=ablation)
    click.echo(f"wrote {out}")


from .causes import register as register_causes  # noqa: E402  (why, ablate)
from .stack import register  # noqa: E402  (stack, regress, bisect: over stackwars_ir.isolate.stacks and versions)

register_causes(main)
register(main)
