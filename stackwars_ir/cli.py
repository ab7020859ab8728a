"""The command line: a thin click layer; each command calls one library function."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .errors import EXIT_BAD_INPUT, EXIT_DIFFERENT, EXIT_INTERRUPTED, StackwarsError


def _quiet_third_parties() -> None:
    """Keep messages that say nothing to a user of this tool out of its output: absl's note that
    TensorFlow is absent (from orbax, through flax) and torchax's duplicate op registrations."""
    import logging

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            text = record.getMessage()
            return not (text.startswith("Tensorflow library not found") or text.startswith("Duplicate op registration"))

    for name in ("", "absl"):
        logging.getLogger(name).addFilter(Drop())
    for handler in logging.getLogger().handlers:
        handler.addFilter(Drop())


class Group(click.Group):
    """Turns every StackwarsError into one line on stderr and exit code 2."""

    def invoke(self, ctx):
        import signal

        from .errors import INTERRUPTED, on_sigint, on_unraisable

        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when the shell ignores it
            signal.signal(signal.SIGINT, on_sigint)
            sys.unraisablehook = on_unraisable
        try:
            result = super().invoke(ctx)
            if INTERRUPTED["flag"]:  # a Ctrl-C that a callback swallowed: still an interrupt
                raise KeyboardInterrupt
            return result
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
@click.option("--adapters", "adapters", metavar="PATH", multiple=True,
              help="Model adapter files or folders of them to add to the catalogue (repeatable; env "
                   "STACKWARS_IR_ADAPTERS; see docs/adapters.md).")
def main(parse_memory, parse_timeout, adapters):
    """Capture, parse, diff, benchmark and report StableHLO from JAX and PyTorch.

    The pipeline: capture -> parse (stats) -> diff -> bench -> report. Every file is parsed in a
    worker process under a memory and a time limit; a file over either gets one line, exit 2.
    """
    import os

    from .ir import MEMORY_ENV, TIMEOUT_ENV, Limits, parse_bytes

    _quiet_third_parties()
    from .runtime import quiet_libtpu

    quiet_libtpu()  # before any jax backend starts, in this process and in every worker it starts

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
    _use_adapters(adapters)


def _use_adapters(adapters) -> None:
    """Add --adapters paths to the catalogue for this command and its workers; a bad path or adapter
    file fails here, in one line, before any work."""
    import os

    from stackwars_ir.models import ADAPTERS_ENV, catalog

    for a in adapters:
        p = Path(a).expanduser()
        if not (p.is_dir() or (p.suffix == ".py" and p.is_file())):
            raise StackwarsError(f"--adapters {a}: no adapter file or folder there",
                                 fix="name a .py adapter file, or a folder that holds them (docs/adapters.md)")
    if adapters:
        given = [str(Path(a).expanduser().resolve()) for a in adapters]  # workers may run elsewhere: absolute
        known = [p for p in os.environ.get(ADAPTERS_ENV, "").split(os.pathsep) if p]
        _set_env_for_command(ADAPTERS_ENV, os.pathsep.join(dict.fromkeys([*known, *given])))
    if adapters or os.environ.get(ADAPTERS_ENV):
        catalog()


def adapters_option(command):
    """--adapters on a command too (`capture opt --adapters DIR`), as on the group."""
    return click.option("--adapters", metavar="PATH", multiple=True, expose_value=False,
                        callback=lambda ctx, param, value: _use_adapters(value) if value else None,
                        help="Model adapter files or folders to add to the catalogue (repeatable; as "
                             "`stackwars-ir --adapters PATH COMMAND`).")(command)


@main.command("models")
@adapters_option
def models_cmd():
    """List the model adapters, their sizes and default input shapes."""
    from stackwars_ir import models

    width = max(map(len, models.CATALOG)) + 1
    for entry in models.CATALOG.values():
        click.echo(f"{entry.name:{width}} {entry.description}")
        if Path(entry.path).parent != models.HERE:
            click.echo(f"{'':{width}} (adapter file {entry.path})")
        for size, shape in entry.shapes.items():
            click.echo(f"{'':{width}}   {size:5} batch {shape['batch']}, {entry.seq_meaning} {shape['seq']}")


def model_options(command: str, out_default: Path, step_help: str, shapes: bool = True):
    """The options that make a workload.Request, declared once for capture, bench and memory (bench and
    memory take them with MODEL only). A new Request field is one option here: `_request` passes every
    option named after a field on to the Request, where it is checked."""
    def w(text: str) -> str:
        lower = text if any(c.isupper() for c in text.split()[0][1:]) else text[0].lower() + text[1:]  # PyTorch
        return text if command == "capture" else f"With MODEL: {lower}"

    out_help = "Folder to write MODEL-SIZE/<framework>.mlir and .json into." if command == "capture" else \
        "Where captures are read from or written to (never the golden captures/ by default)."
    options = [
        click.option("--framework", default="both", show_default=True,
                     help=w("Only 'both' is timed." if command == "bench" else "jax, torch or both.")),
        click.option("--exporter", "exporters", multiple=True, default=("torch_xla",), show_default=True,
                     help=w("PyTorch exporter: torch_xla or torchax; comma-separated or repeated, or 'all'.")),
        click.option("--size", default="tiny", show_default=True,
                     help=w("tiny (tests), or the published size (base; llama: 8b).")),
        click.option("--seq", type=int, help=w("Sequence length, or image size for resnet50.")),
        click.option("--step", default="forward", show_default=True, help=w(step_help)),
        click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=out_default,
                     show_default=True, help=w(out_help)),
    ]
    if shapes:
        options += [
            click.option("--abstract", is_flag=True, help=w("Lower from shapes and dtypes alone: no weight "
                                                            "materialized, no parity (JAX and torchax).")),
            click.option("--dtype", default="float32", show_default=True,
                         help=w("Weights' dtype: float32, or bfloat16 with --abstract.")),
        ]

    def apply(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


MODEL_OPTIONS = ("framework", "exporters", "size", "seq", "step", "out_dir", "abstract", "dtype")


def _request(model: str, options: dict, **more):
    """The Request the model options ask for ('all' exporters expanded, notes on stderr)."""
    import dataclasses

    from .workload import Request

    fields = {f.name for f in dataclasses.fields(Request)}
    given = {k: v for k, v in options.items() if k in fields}
    given["exporters"] = _exporters(model, given.get("exporters", ()), given.get("step", "forward"))
    return Request(model, **given, **more)


@main.command("capture")
@click.argument("model")
@click.option("--batch", type=int, help="Batch size (default: the adapter's for this size).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random weights and inputs.")
@click.option("--attn", default="eager", show_default=True, help="Attention implementation (only eager exports).")
@click.option("--force", is_flag=True, help="Overwrite existing captures.")
@model_options("capture", Path("captures"), "forward, or train: loss, backward and one AdamW update (files named "
                                            "<framework>-train).")
@adapters_option
def capture_cmd(model, batch, seed, attn, force, out_dir, **options):
    """Export MODEL from JAX and/or PyTorch to StableHLO on the same weights, and check parity.

    Exit code 0: written and parity-checked; 1: written, but a capture differs from PyTorch eager;
    2: bad input, nothing written; 130: interrupted, nothing written.
    """
    import dataclasses

    from .capture import run

    req = _request(model, options, batch=batch, seed=seed, attn=attn)
    dataclasses.replace(req, abstract=True).validated()  # the cheap checks before any framework loads
    result = run(_fitted(req), out_dir, force=force)
    for line in [p.line() for p in result.parity] + list(result.skipped):
        click.echo(line)
    if not result.parity:
        from .capture.abstract import NOT_CHECKED

        click.echo(f"parity not checked: {NOT_CHECKED}")
    for f in result.files:
        click.echo(f"wrote {f}")


@main.command("stats")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "json_path", is_flag=False, flag_value="-", default=None, metavar="[FILE|-]",
              type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="JSON (one object per module) to FILE, or to stdout instead of the tables ('-' or no value).")
@click.option("--top", default=15, show_default=True, help="Rows of the op histogram to show.")
@adapters_option
def stats_cmd(files, json_path, top):
    """Op histogram by op and dialect, functions, arguments, parameter bytes, largest tensors.

    Exit code 0: every file parsed; 2: a file could not be parsed (the others are still shown).
    """
    import json

    from .ir import load
    from .ir.stats import module_stats
    from .report.text import stats_text

    if json_path is not None and json_path.suffix in (".mlir", ".mlirbc"):
        # `stats --json a.mlir b.mlir`: click took the first input as the JSON path; it is an input.
        files, json_path = (str(json_path), *files), Path("-")
    _warn_sidecars(files)
    results = load(files)
    stats = [module_stats(m, arg_names=_sidecar_names(r.path)) for r in results if r.ok for m in r.modules]
    data = {"modules": [s.as_json() for s in stats], "errors": [r.error for r in results if not r.ok]}
    if json_path is not None and str(json_path) == "-":
        click.echo(json.dumps(data, indent=2))
    elif json_path is not None:
        from .files import write_atomic

        write_atomic(Path(json_path), json.dumps(data, indent=2) + "\n")
        click.echo(f"wrote {json_path}", err=True)
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
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write JSON here ('-': to stdout, the text to stderr).")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write Markdown here.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the HTML report here.")
@click.option("--mode", type=click.Choice(["auto", "provenance", "structure"]), default="auto", show_default=True,
              help="Segment by locations (provenance), by dataflow (structure), or pick per file.")
@click.option("--excerpts/--no-excerpts", default=False, help="Print each block's IR side by side.")
@click.option("--ops", "ops", is_flag=True,
              help="Print the op-level diff of every block: each changed, rewritten or one-side-only group "
                   "of ops, with its lines in the two files.")
@click.option("--kernels", is_flag=True,
              help="Also compile both on the XLA CPU backend (nothing is run) and count, per block, the kernels "
                   "(fusions and unfused ops) each side compiled to.")
@click.option("--explorer", "explorer_dir", type=click.Path(path_type=Path),
              help="Write Model Explorer node-data overlays (op status, block, block op delta) for both files "
                   "into this new folder, with a README saying how to open them.")
@adapters_option
def diff_cmd(file_a, file_b, json_path, md_path, html_path, mode, excerpts, ops, kernels, explorer_dir):
    """Align FILE_A and FILE_B block by block and name what differs.

    Exit code 0: nothing differs; 1: something differs; 2: bad input; 130: interrupted.
    """
    from .diff import diff_files
    from .report import write_outputs
    from .report.text import diff_text

    if explorer_dir is not None:
        from .report.explorer import check_target

        check_target(explorer_dir)  # before the work: a folder in the way, Model Explorer missing
    _warn_sidecars((file_a, file_b))
    report = diff_files(file_a, file_b, mode)
    result = _with_kernels(report, report.result(), (file_a, file_b)) if kernels else report.result()
    to_stdout = json_path is not None and str(json_path) == "-"
    click.echo(diff_text(result, excerpts=excerpts, ops=ops), err=to_stdout)
    if to_stdout:
        import json

        from .report import diff_json

        click.echo(json.dumps(diff_json(result), indent=2))
        json_path = None
    for path in write_outputs(result, json_path=json_path, md_path=md_path, html_path=html_path):
        click.echo(f"wrote {path}", err=True)
    if explorer_dir is not None:
        from .report.explorer import write_explorer

        written = write_explorer(report, result, explorer_dir)
        click.echo(f"wrote {len(written)} files to {explorer_dir} (open: see {explorer_dir / 'README.md'})", err=True)
    sys.exit(EXIT_DIFFERENT if result.differs else 0)


@main.command("bench")
@click.argument("targets", nargs=-1, required=True)
@click.option("--batch", "batches", default="", help="With MODEL: batch sizes, e.g. 1,4,16 (a sweep).")
@click.option("--baselines", default="jax,eager", show_default=True,
              help="With MODEL: native runtimes to time too, from jax,eager,inductor,torch_xla (with --step "
                   "train also jax_donate), or 'none'.")
@click.option("--backend", default=None, help="cpu, gpu or tpu (default: what jax picks).")
@click.option("--timeout", type=float, default=None,
              help="Seconds per executable for its compile and runs; one still running 10 s later is stopped.")
@click.option("--max-memory", metavar="SIZE", default=None,
              help="Resident memory an executable's worker may use, e.g. 8G (default: 3/4 of this machine's).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write JSON here ('-': to stdout, the table to stderr).")
@click.option("--warmup", type=int, default=None,
              help="Runs after the second to discard before the steady state (default 2; the first is shown as "
                   "'third').")
@click.option("--runs", type=int, default=None,
              help="Exactly this many steady-state runs per row (default: adaptive, until the p10-p90 spread is "
                   "under 10%, 10 to 1000 runs, 0.5 to 10 s).")
@model_options("bench", Path("out") / "captures", shapes=False,
               step_help="forward, or train (one training step; baselines from jax,eager,inductor,torch_xla, each "
                         "running its own loop, so runs 1-3 are steps 1-3, and jax_donate: jax.jit's loop with the "
                         "parameters and AdamW state donated).")
@adapters_option
def bench_cmd(targets, batches, baselines, backend, timeout, max_memory, json_path, warmup, runs, out_dir, **options):
    """Time StableHLO files (FILE.mlir ...) or a model (MODEL) on the XLA backend.

    Reports compile time, first run, second run and steady state (median, p10-p90), the proof that
    each row did the work, XLA's cost and memory analysis, the optimized HLO's fusions, a roofline
    against measured peaks, and a verdict per pair.

    Exit code 0: every row measured; 2: bad input, or a row failed (the others are still measured);
    130: interrupted.
    """
    from .bench.run import bench_files
    from .bench.timing import sampling_setting
    from .report.text import bench_text
    from .sweep import bench_model

    memory, setting = _max_memory(max_memory, timeout), sampling_setting(warmup, runs)
    if setting:
        from .bench.timing import SAMPLING_ENV

        _set_env_for_command(SAMPLING_ENV, setting)
    model = _model_named(targets, "bench", ("batches", "baselines"), fix="bench a model by name")
    if model:
        report = bench_model(_request(model, options), batches=_int_list(batches) or (None,), baselines=baselines,
                             out_dir=out_dir, backend=backend, timeout=timeout, max_memory=memory, progress=_progress)
    else:
        report = bench_files([Path(t) for t in targets], backend, timeout, max_memory=memory, progress=_progress)
    _emit(bench_text(report), report.as_json(), json_path)
    for e in report.failed:
        click.echo(f"stackwars-ir: error: {e.error}", err=True)
    sys.exit(EXIT_BAD_INPUT if report.failed else 0)


@main.command("memory")
@click.argument("targets", nargs=-1, required=True)
@click.option("--target", "target", default="cpu", show_default=True,
              help="Compile for: cpu, gpu, or a TPU generation (tpu-v6e, tpu-v5e, tpu-v5p, tpu-v4; through "
                   "libtpu, no TPU needed: `make setup-tpu`).")
@click.option("--budget", "budget", default="", metavar="LIST",
              help="Budgets to check each plan against: sizes (16G, 512MiB) or devices (t4, v6e-1, h100-80gb, ...).")
@click.option("--measure", is_flag=True, help="Also run each executable once here (--target cpu) and measure its peak.")
@click.option("--batch", "batches", default="", help="With MODEL: batch sizes, e.g. 1,8.")
@click.option("--timeout", type=float, default=None, help="Seconds per executable to compile (and run with --measure).")
@click.option("--max-memory", metavar="SIZE", default=None,
              help="Resident memory the compiling worker may use, e.g. 8G (default: 3/4 of this machine's).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write JSON here ('-': to stdout, the table to stderr).")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False, path_type=Path), help="Write Markdown here.")
@click.option("--max-batch", is_flag=True,
              help="With MODEL: the largest batch that fits each --budget, searched by compiling abstract captures "
                   "(none run; torch_xla, which has none, left out); up to 1024.")
@model_options("memory", Path("out") / "captures", "forward, or train (one training step).")
@adapters_option
def memory_cmd(targets, target, budget, measure, batches, timeout, max_memory, json_path, md_path, max_batch, out_dir,
               **options):
    """Will it fit? XLA's memory plan of StableHLO files (FILE.mlir ...) or a model (MODEL).

    Each executable is compiled for --target, not run: arguments, outputs, aliased outputs,
    temporaries, generated code and the planned peak, against each --budget. With --measure (cpu)
    each is also run once and its peak measured beside the plan.

    Exit code 0: every executable planned (fitting or not); 2: bad input, or one failed to compile
    (the others are still planned); 130: interrupted.
    """
    from .bench.memory import budgets as parse_budgets, plan_files
    from .report.markdown import memory_markdown
    from .report.text import memory_text
    from .sweep import max_batch_model, plan_model

    limits, memory = parse_budgets(budget), _max_memory(max_memory, timeout)
    model = _model_named(targets, "memory", ("batches", "max_batch"), fix="name a model")
    run = dict(out_dir=out_dir, target=target, max_memory=memory, timeout=timeout, progress=_progress)
    if model and max_batch:
        report = max_batch_model(_request(model, options), budgets_=limits, batches=_int_list(batches),
                                 measure=measure, **run)
    elif model:
        report = plan_model(_fitted(_request(model, options)), batches=_int_list(batches) or (None,),
                            budgets_=limits, measure=measure, **run)
    else:
        report = plan_files([Path(t) for t in targets], target, limits, measure, memory, timeout, _progress)
    _emit(memory_text(report), report.as_json(), json_path)
    if md_path is not None:
        from .files import write_atomic

        write_atomic(md_path, memory_markdown(report))
        click.echo(f"wrote {md_path}", err=True)
    for p in report.failed:
        click.echo(f"stackwars-ir: error: {p.error}", err=True)
    sys.exit(EXIT_BAD_INPUT if report.failed else 0)


def _model_named(targets, command: str, more: tuple, fix: str) -> str | None:
    """The model TARGETS name (one catalogue name that is not a file), or None for StableHLO files, whose
    command then refuses every model option given and warns of sidecars that no longer match."""
    from . import models

    if len(targets) == 1 and not Path(targets[0]).exists() and _looks_like_a_name(targets[0]):
        models.entry(targets[0])  # an unknown name: one line with a did-you-mean
        return targets[0]
    _refuse_model_options(command, MODEL_OPTIONS + more, fix=fix)
    _warn_sidecars(targets)
    return None


def _max_memory(text: str | None, timeout: float | None) -> int | None:
    """--max-memory in bytes (default: 3/4 of this machine's), after checking --timeout."""
    from .bench.worker import check_timeout, default_max_memory
    from .ir import parse_bytes

    check_timeout(timeout)
    return parse_bytes(text, "--max-memory") if text else default_max_memory()


def _refuse_model_options(command: str, names, fix: str) -> None:
    """Options that only a MODEL takes, given with StableHLO files: one line naming the first."""
    ctx = click.get_current_context()
    given = [n for n in names if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE]
    if given:
        flag = {"exporters": "--exporter", "batches": "--batch", "out_dir": "--out"}.get(
            given[0], f"--{given[0].replace('_', '-')}")
        raise StackwarsError(f"{flag} applies to `{command} MODEL`, not to StableHLO files (a file is captured "
                             "already: its model, batch and exporter are fixed)", fix=f"drop {flag}, or {fix}")


def _set_env_for_command(name: str, value: str) -> None:
    """Set an environment variable for this command and the workers it starts; put back as it was when
    the command ends, so a caller running several commands in one process (tests, a notebook) keeps
    its own environment."""
    import os

    before = os.environ.get(name)
    os.environ[name] = value

    def restore() -> None:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before

    click.get_current_context().call_on_close(restore)


def _with_kernels(report, result, files):
    """The diff result with each block's kernel counts (bench.kernels), both files compiled in a worker."""
    from .bench.kernels import kernels_of_files
    from .diff import with_kernels

    ka, kb = kernels_of_files(files, "cpu", progress=_progress)
    for k in (ka, kb):
        if k.error:
            raise StackwarsError(k.error, fix="drop --kernels to diff without compiling")
    return with_kernels(report, result, ka, kb)


def _fitted(req):
    """workload.shapes.fitted, told which of --dtype and --exporter the user gave; its note on stderr."""
    from .workload.shapes import fitted

    ctx = click.get_current_context()
    explicit = {n for n in ("dtype", "exporters") if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    req, note = fitted(req, explicit)
    if note:
        click.echo(f"stackwars-ir: note: {note}", err=True)
    return req


def _exporters(model: str, given, step: str = "forward") -> tuple:
    """workload.shapes.exporters_asked, its notes on stderr."""
    from .workload.shapes import exporters_asked

    usable, notes = exporters_asked(model, given, step)
    for note in notes:
        click.echo(f"stackwars-ir: note: {note}", err=True)
    return usable


def _sidecar_names(path) -> dict:
    """Argument index -> PyTorch tensor name, from a capture's sidecar (torch_xla's arguments carry
    no names of their own); nothing for a file without one, or whose sidecar describes another file."""
    from .files import sidecar_of

    side, _ = sidecar_of(Path(path))  # one that does not describe its file: warned of by _warn_sidecars
    return side.argument_names() if side else {}


def _warn_sidecars(paths) -> None:
    """The one warning every command gives for a file whose sidecar no longer describes it (an
    edited .mlir): the command goes on, reading it as a file without a sidecar."""
    from .files import sidecar_of

    for path in dict.fromkeys(Path(p) for p in paths):
        _, warning = sidecar_of(path)
        if warning:
            click.echo(f"stackwars-ir: warning: {warning}", err=True)


def _progress(message: str) -> None:
    """Slow steps (capture, compile, first run) said on stderr as they start, terminal or not."""
    click.echo(f"stackwars-ir: {message}", err=True)


def _looks_like_a_name(target: str) -> bool:
    """`gpt3` is a mistyped model; `x.mlir` or `dir/x` is a missing file (the parser says so)."""
    return "/" not in target and "." not in target


def _emit(text: str, data: dict, json_path) -> None:
    """The human text on stdout, and the JSON to a file; with `--json -` the JSON takes stdout and
    the text goes to stderr, so `... --json - | jq` reads clean JSON."""
    from .files import dump_json, write_atomic

    if json_path is not None and str(json_path) == "-":
        click.echo(text, err=True)
        click.echo(dump_json(data), nl=False)
        return
    click.echo(text)
    if json_path is not None:
        write_atomic(Path(json_path), dump_json(data))
        click.echo(f"wrote {json_path}", err=True)


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
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The HTML file to write.")
@click.option("--from", "from_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Render a saved `stackwars-ir diff --json` result instead of diffing FILE_A FILE_B (the .mlir "
                   "files are not needed).")
@click.option("--bench", "bench_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir bench --json` file whose timings the report charts.")
@click.option("--memory", "memory_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A `stackwars-ir memory --json` file whose plans the report charts (stacked per executable).")
@click.option("--mode", type=click.Choice(["auto", "provenance", "structure"]), default="auto", show_default=True,
              help="How to segment into blocks (see diff).")
@click.option("--kernels", is_flag=True, help="Also count each block's kernels, as diff --kernels does.")
@adapters_option
def report_cmd(files, out, from_path, bench_path, memory_path, mode, kernels):
    """Write a self-contained HTML report of FILE_A vs FILE_B (op histograms, heat map, alignment, IR,
    timings, memory), or of a saved diff result (--from DIFF.json).

    Exit code 0: written; 2: bad input, nothing written; 130: interrupted, nothing written.
    """
    from .diff import diff_files
    from .report import sources, write_outputs

    if from_path is not None:
        result = sources.saved_diff(from_path, files, mode, kernels)
        mine, shown = sources.sides(result)
    else:
        mine, shown = sources.pair(files)
    bench = sources.attached(bench_path, "bench", mine, shown) if bench_path else None
    memory = sources.attached(memory_path, "memory", mine, shown) if memory_path else None
    if from_path is None:
        _warn_sidecars(files)
        report = diff_files(files[0], files[1], mode)
        result = report.result(excerpts="all")  # the graph view shows any block's IR
        if kernels:
            result = _with_kernels(report, result, files)
    command = sources.command_line(files, out, from_path, bench_path, memory_path, mode, kernels)
    write_outputs(result, html_path=out, bench=bench, command=command, memory=memory)
    click.echo(f"wrote {out}")
