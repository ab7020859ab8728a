"""The command line: a thin click layer; each command calls one library function."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .errors import EXIT_BAD_INPUT, EXIT_DIFFERENT, EXIT_INTERRUPTED, StackwarsError


class Group(click.Group):
    """Turns every StackwarsError into one line on stderr and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except StackwarsError as e:
            click.echo(f"stackwars-ir: error: {e.one_line()}", err=True)
            sys.exit(getattr(e, "exit_code", EXIT_BAD_INPUT))
        except KeyboardInterrupt:  # every file is written whole or not at all: nothing to clean up
            click.echo("stackwars-ir: interrupted; no file was left half-written", err=True)
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stackwars-ir")
@click.option("--parse-memory", metavar="SIZE",
              help="Memory limit of each parse worker, e.g. 8G (default 3G; env STACKWARS_IR_PARSE_MEMORY).")
@click.option("--parse-timeout", metavar="SECONDS",
              help="Time limit to parse one file (default 60; env STACKWARS_IR_PARSE_TIMEOUT).")
def main(parse_memory, parse_timeout):
    """Capture, parse, diff, benchmark and report StableHLO from JAX and PyTorch.

    The pipeline: capture -> parse (stats) -> diff -> bench -> report. Every file is parsed in a
    worker process under a memory and a time limit; a file over either gets one line, exit 2.
    """
    import os

    from .ir import MEMORY_ENV, TIMEOUT_ENV, Limits, parse_bytes

    memory = str(parse_bytes(parse_memory)) if parse_memory is not None else None
    if parse_timeout is not None:
        try:
            ok = float(parse_timeout) > 0
        except ValueError:
            ok = False
        if not ok:
            raise StackwarsError(f"--parse-timeout {parse_timeout!r} is not a positive number of seconds",
                                 fix="e.g. 60")
        os.environ[TIMEOUT_ENV] = parse_timeout
    if memory is not None:
        os.environ[MEMORY_ENV] = memory
    Limits.from_env()  # a bad value in the environment fails here, in one line, before any work


@main.command("models")
def models_cmd():
    """List the model adapters, their sizes and default input shapes."""
    from stackwars_ir import models

    for entry in models.CATALOG.values():
        click.echo(f"{entry.name:9} {entry.description}")
        for size, shape in entry.shapes.items():
            click.echo(f"{'':9}   {size:5} batch {shape['batch']}, {entry.seq_meaning} {shape['seq']}")


@main.command("capture")
@click.argument("model")
@click.option("--framework", default="both", show_default=True, help="jax, torch or both.")
@click.option("--exporter", "exporters", multiple=True, default=("torch_xla",), show_default=True,
              help="PyTorch exporter: torch_xla or torchax; repeat it, or say 'all', for both.")
@click.option("--size", default="tiny", show_default=True, help="tiny (tests) or base (published configs).")
@click.option("--batch", type=int, help="Batch size (default: the adapter's for this size).")
@click.option("--seq", type=int, help="Sequence length, or image size for resnet50.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random weights and inputs.")
@click.option("--attn", default="eager", show_default=True, help="Attention implementation (only eager exports).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("captures"),
              show_default=True, help="Folder to write MODEL-SIZE/<framework>.mlir and .json into.")
@click.option("--force", is_flag=True, help="Overwrite existing captures.")
def capture_cmd(model, framework, exporters, size, batch, seq, seed, attn, out_dir, force):
    """Export MODEL from JAX and/or PyTorch to StableHLO on the same weights, and check parity."""
    from .capture import EXPORTERS, Request, run

    exporters = _exporters(model, exporters)
    req = Request(model, size, framework, exporters, batch, seq, seed, attn)
    result = run(req, out_dir, force=force)
    for p in result.parity:
        click.echo(f"parity {p.stem:16} max abs error {p.max_abs:.3g}  max rel error {p.max_rel:.3g}  ok")
    for f in result.files:
        click.echo(f"wrote {f}")


@main.command("stats")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per module) instead of tables.")
@click.option("--top", default=15, show_default=True, help="Rows of the op histogram to show.")
def stats_cmd(files, as_json, top):
    """Op histogram by op and dialect, functions, arguments, parameter bytes, largest tensors."""
    import json

    from .ir import load
    from .ir.stats import module_stats
    from .report.text import stats_text

    results = load(files)
    stats = [module_stats(m) for r in results if r.ok for m in r.modules]
    if as_json:
        click.echo(json.dumps({"modules": [s.as_json() for s in stats],
                               "errors": [r.error for r in results if not r.ok]}, indent=2))
    elif sys.stdout.isatty() and _has("rich"):
        from .report.text import stats_rich

        for s in stats:
            stats_rich(s, top)
    else:
        for s in stats:
            click.echo(stats_text(s, top))
    failed = [r for r in results if not r.ok]
    for r in failed:
        click.echo(f"stackwars-ir: error: {r.error}", err=True)
    if len(files) > 1:
        click.echo(f"parsed {len(files) - len(failed)} of {len(files)} files", err=True)
    sys.exit(EXIT_BAD_INPUT if failed else 0)


@main.command("diff")
@click.argument("file_a", type=click.Path(path_type=Path))
@click.argument("file_b", type=click.Path(path_type=Path))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write JSON here.")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write Markdown here.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the HTML report here.")
@click.option("--mode", type=click.Choice(["auto", "provenance", "structure"]), default="auto", show_default=True,
              help="Segment by locations (provenance), by dataflow (structure), or pick per file.")
@click.option("--excerpts/--no-excerpts", default=False, help="Print each block's IR side by side.")
def diff_cmd(file_a, file_b, json_path, md_path, html_path, mode, excerpts):
    """Align FILE_A and FILE_B block by block and name what differs.

    Exit code 0: nothing differs; 1: something differs; 2: bad input.
    """
    from .diff import diff_files
    from .report import write_outputs
    from .report.text import diff_text

    report = diff_files(file_a, file_b, mode)
    click.echo(diff_text(report, excerpts=excerpts))
    write_outputs(report, json_path=json_path, md_path=md_path, html_path=html_path)
    sys.exit(EXIT_DIFFERENT if report.differs else 0)


@main.command("bench")
@click.argument("targets", nargs=-1, required=True)
@click.option("--framework", default="both", show_default=True, help="With MODEL: only 'both' is timed.")
@click.option("--exporter", "exporters", multiple=True, default=("torch_xla",), show_default=True,
              help="With MODEL: PyTorch exporter(s); 'all' for both.")
@click.option("--size", default="tiny", show_default=True, help="With MODEL: tiny or base.")
@click.option("--batch", "batches", default="", help="With MODEL: batch sizes, e.g. 1,4,16 (a sweep).")
@click.option("--seq", type=int, help="With MODEL: sequence length (image size for resnet50).")
@click.option("--baselines", default="jax,eager", show_default=True,
              help="With MODEL: native runtimes to time too, from jax,eager,inductor,torch_xla ('none').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("captures"),
              show_default=True, help="With MODEL: where captures are read from or written to.")
@click.option("--backend", default=None, help="cpu, gpu or tpu (default: what jax picks).")
@click.option("--timeout", type=float, default=None,
              help="Seconds per executable for its compile and runs; one still running 10 s later is stopped.")
@click.option("--max-memory", metavar="SIZE", default=None,
              help="Resident memory an executable's worker may use, e.g. 8G (default: 3/4 of this machine's).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write JSON here.")
def bench_cmd(targets, framework, exporters, size, batches, seq, baselines, out_dir, backend, timeout, max_memory,
              json_path):
    """Time StableHLO files (FILE.mlir ...) or a model (MODEL) on the XLA backend.

    Reports compile time, first run, second run and steady state (median, p10-p90), XLA's cost
    and memory analysis, the optimized HLO's fusions, and a roofline against measured peaks.
    """

    from . import models
    from .bench.native import BASELINES
    from .bench.run import bench_files, bench_model
    from .capture import EXPORTERS
    from .capture.artifact import dump_json, write_atomic
    from .bench.worker import default_max_memory
    from .ir import parse_bytes
    from .report.text import bench_text

    if timeout is not None and not timeout > 0:
        raise StackwarsError(f"--timeout {timeout:g} must be a positive number of seconds", fix="e.g. --timeout 60")
    memory = parse_bytes(max_memory, "--max-memory") if max_memory else default_max_memory()
    if len(targets) == 1 and targets[0] in models.CATALOG and not Path(targets[0]).exists():
        if framework != "both":
            raise StackwarsError(f"bench MODEL times both frameworks; got --framework {framework}",
                                 fix="use --framework both, or bench the capture files directly")
        wanted = () if baselines == "none" else tuple(b for b in baselines.split(",") if b)
        bad = [b for b in wanted if b not in BASELINES]
        if bad:
            raise StackwarsError(f"unknown baseline {bad[0]!r}", fix=f"choose from {', '.join(BASELINES)}")
        exps = _exporters(targets[0], exporters)
        sweep = _int_list(batches) or (None,)
        report = bench_model(targets[0], size=size, batches=sweep, seq=seq, exporters=exps, baselines=wanted,
                             out_dir=out_dir, backend=backend, timeout=timeout, max_memory=memory)
    else:
        report = bench_files([Path(t) for t in targets], backend, timeout, max_memory=memory)
    click.echo(bench_text(report))
    if json_path:
        write_atomic(json_path, dump_json(report.as_json()))
    for e in report.failed:
        click.echo(f"stackwars-ir: error: {e.error}", err=True)
    sys.exit(EXIT_BAD_INPUT if report.failed else 0)


def _exporters(model: str, given) -> tuple:
    """The exporters asked for; 'all' means all that can export this model (a note names the others)."""
    from . import models
    from .capture import EXPORTERS

    if "all" not in given:
        return tuple(dict.fromkeys(given))
    if model not in models.CATALOG:
        return EXPORTERS  # an unknown model gets its one-line error from the capture itself
    usable, skipped = models.exporters_for(model, EXPORTERS)
    for e, why in skipped.items():
        click.echo(f"stackwars-ir: note: {model}: {e} skipped: {why}", err=True)
    return usable


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _int_list(text: str) -> tuple:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise StackwarsError(f"--batch {text!r} is not a list of integers", fix="e.g. --batch 1,4,16") from None
    if any(v < 1 for v in values):
        raise StackwarsError("--batch sizes must be positive", fix="e.g. --batch 1,4,16")
    return values


@main.command("report")
@click.argument("file_a", type=click.Path(path_type=Path))
@click.argument("file_b", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The HTML file to write.")
@click.option("--bench", "bench_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir bench --json` file whose timings the report charts.")
@click.option("--mode", type=click.Choice(["auto", "provenance", "structure"]), default="auto", show_default=True,
              help="How to segment into blocks (see diff).")
def report_cmd(file_a, file_b, out, bench_path, mode):
    """Write a self-contained HTML report (op histograms, heat map, alignment, IR, timings)."""
    import json

    from .diff import diff_files
    from .report import write_outputs

    bench = None
    if bench_path:
        try:
            bench = json.loads(Path(bench_path).read_text())
        except (OSError, ValueError) as e:
            raise StackwarsError(f"{bench_path}: not a readable bench JSON file: {e}",
                                 fix="write one with stackwars-ir bench ... --json FILE") from None
        if not isinstance(bench, dict) or "results" not in bench:
            raise StackwarsError(f"{bench_path}: not a stackwars-ir bench JSON file (no 'results')",
                                 fix="write one with stackwars-ir bench ... --json FILE")
    report = diff_files(file_a, file_b, mode)
    write_outputs(report, html_path=out, bench=bench)
    click.echo(f"wrote {out}")
