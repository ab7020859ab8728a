"""The command line's shell: the click group (an error is one line and an exit code), the options
several commands declare, and how results, notes, warnings and failures are printed."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..common.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, StackwarsError
from ..common.progress import Steps

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import TypeVar

    from ..workload import Request

    _F = TypeVar("_F", bound=Callable[..., object])  # a command's function, as click's decorators take and return it


def exporter_help() -> str:
    """--exporter's help, from the route table (routes.ROUTES): the lock's exporters, then those that
    run in a version stack of their own."""
    from ..common.routes import EXPORTERS, LOCK_EXPORTERS

    stacked = [e for e in EXPORTERS if e not in LOCK_EXPORTERS]
    own = f", or {' or '.join(stacked)} in a stack of its own (docs/stacks.md)" if stacked else ""
    return f"PyTorch exporter: {' or '.join(LOCK_EXPORTERS)}{own}; comma-separated or repeated, or 'all' (the lock's)."


class Group(click.Group):
    """Turns every StackwarsError into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> object:
        import signal

        from ..common.errors import INTERRUPTED, on_sigint, on_unraisable

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
            _exit_now(EXIT_INTERRUPTED)


# Set by a command whose every output is written and whose work left only memory to free (diff): the
# console script then exits without the interpreter's teardown (1.3 s of a ~110k-op diff's 24 s, measured).
_ONLY_MEMORY_LEFT: dict = {"flag": False, "kept": (), "console": False}


def only_memory_left(*kept: object) -> None:
    """Say that this command's outputs are all written and nothing is left but memory to free; `kept`
    (its big values) are held here, so leaving the command's frames does not free them one by one
    (0.6 s for a ~110k-op diff) before the console script's exit skips that. Held until the next call.
    Under the console script, the values made so far are also moved out of the cyclic GC's reach
    (gc.freeze): the command's no-GC section ends on its way out, and the first collection after it
    would walk every value of a big diff (1.0 s of a ~110k-op diff's whole process, measured by
    py-spy --native). Not in a caller's process (a test's CliRunner), which lives on."""
    if _ONLY_MEMORY_LEFT["console"]:
        import gc

        gc.freeze()
    _ONLY_MEMORY_LEFT["flag"] = True
    _ONLY_MEMORY_LEFT["kept"] = kept


def console(group: click.Group) -> None:
    """Run `group` as the console script does; after a command that called only_memory_left(), exit
    with its code without the interpreter's teardown (_exit_now: exit handlers run, streams flushed)."""
    _ONLY_MEMORY_LEFT["console"] = True
    try:
        group()
    except SystemExit as e:
        if _ONLY_MEMORY_LEFT["flag"] and isinstance(e.code, int):
            _exit_now(e.code)
        raise


def _exit_now(code: int) -> None:
    """Exit without the interpreter's shutdown. After a Ctrl-C, a framework's native thread cut short
    (XLA's, torch's) can abort that shutdown ("terminate called after throwing an instance of ''",
    exit -6: about one fresh-clone CI run in ten); every file is already whole, so nothing is lost by
    skipping it. Exit handlers run and worker processes are stopped first, streams flushed."""
    import atexit
    import multiprocessing
    import os

    atexit._run_exitfuncs()  # temporary folders' finalizers and the like; not the native threads' teardown
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(timeout=2)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def use_adapters(adapters: tuple[str, ...]) -> None:
    """Add --adapters paths to the catalogue for this command and its workers; a bad path or adapter
    file fails here, in one line, before any work."""
    import os

    from ..models import ADAPTERS_ENV, adapters_env, catalog, skipped

    if adapters:
        set_env_for_command(ADAPTERS_ENV, adapters_env(adapters))
    if adapters or os.environ.get(ADAPTERS_ENV):
        catalog()
        for path, why in skipped():  # a broken file in a folder: said once, the folder's others still usable
            if path not in _WARNED:
                _WARNED.add(path)
                click.echo(f"warning: skipped adapter file {path}: {why}", err=True)


_WARNED: set = set()


def adapters_option(command: _F) -> _F:
    """--adapters on a command too (`capture opt --adapters DIR`), as on the group."""
    return click.option("--adapters", metavar="PATH", multiple=True, expose_value=False,
                        callback=lambda ctx, param, value: use_adapters(value) if value else None,
                        help="Model adapter files or folders to add to the catalogue (repeatable; as "
                             "`stackwars-ir --adapters PATH COMMAND`).")(command)


OUT_HELP = "Where captures are read from or written to (never the golden captures/ by default)."


def model_options(out_default: Path, step_help: str, shapes: bool = True, model_optional: bool = True,
                  out_help: str = OUT_HELP, framework_help: str = "jax, torch or both.") -> Callable[[_F], _F]:
    """The options that make a workload.Request, declared once for capture, bench, memory and why; where
    MODEL is optional (`model_optional`: the command takes files too) each help says "With MODEL". A new
    Request field is one option here: `request` passes every option named after a field on to the
    Request, where it is checked."""
    def w(text: str) -> str:
        lower = text if any(c.isupper() for c in text.split()[0][1:]) else text[0].lower() + text[1:]  # PyTorch
        return f"With MODEL: {lower}" if model_optional else text

    options = [
        click.option("--framework", default="both", show_default=True, help=w(framework_help)),
        click.option("--exporter", "exporters", multiple=True, default=("torch_xla",), show_default=True,
                     help=w(exporter_help())),
        click.option("--size", default="tiny", show_default=True,
                     help=w("tiny (tests), narrow, or a published size (base; llama: 1b, 8b; gpt_neo: 1.3b): "
                            "`stackwars-ir models` lists each model's.")),
        click.option("--seq", type=int, help=w("Sequence length, or image size for resnet50.")),
        click.option("--step", default="forward", show_default=True, help=w(step_help)),
        click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=out_default,
                     show_default=True, help=w(out_help)),
        click.option("--scan-layers", is_flag=True,
                     help=w("Run the layers in a loop over their stacked weights: jax.lax.scan in JAX, "
                            "torch_xla's scan_layers in PyTorch (models with a list of identical layers: gpt2, "
                            "bert, vit, llama; files end in -scan).")),
        click.option("--remat", is_flag=True,
                     help=w("With --step train: rematerialize each layer in the backward (jax.checkpoint; "
                            "torch_xla's checkpoint; files end in -remat).")),
        click.option("--mesh", default="", metavar="AXES",
                     help=w("Shard the program over a device mesh, e.g. fsdp=8 or fsdp=2,tp=2 (axes dp, fsdp, tp; "
                            "docs/sharding.md): JAX's NamedShardings, torch_xla's SPMD mark_sharding, torchax's "
                            "JAX shardings; files end in -fsdp8. Parity runs on as many CPU devices.")),
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


MODEL_OPTIONS = ("framework", "exporters", "size", "seq", "step", "out_dir", "abstract", "dtype", "scan_layers",
                 "remat", "mesh")


def request(model: str, options: dict, **more: object) -> Request:
    """The Request the model options ask for ('all' exporters expanded, notes on stderr)."""
    import dataclasses

    from ..workload import Request

    fields = {f.name for f in dataclasses.fields(Request)}
    given = {k: v for k, v in options.items() if k in fields}
    given["exporters"] = usable_exporters(model, given.get("exporters", ()), given.get("step", "forward"))
    return Request(model, **given, **more)


def model_or_files(targets: tuple[str, ...], command: str, more: tuple, fix: str) -> str | None:
    """The model TARGETS name (workload.model_named), or None for StableHLO files, whose command then
    refuses every model option given and warns of sidecars that no longer match."""
    from ..workload import model_named

    name = model_named(targets)
    if name:
        return name
    refuse_model_options(command, MODEL_OPTIONS + more, fix=fix)
    warn_sidecars(targets)
    return None


def given_on_command_line(names: Iterable[str]) -> list[str]:
    """Of this command's parameters `names`, those the user gave on the command line, in that order."""
    ctx = click.get_current_context()
    return [n for n in names if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE]


def refuse_model_options(command: str, names: Iterable[str], fix: str) -> None:
    """Options that only a MODEL takes, given with StableHLO files: one line naming the first."""
    given = given_on_command_line(names)
    if given:
        flag = {"exporters": "--exporter", "batches": "--batch", "out_dir": "--out"}.get(
            given[0], f"--{given[0].replace('_', '-')}")
        raise StackwarsError(f"{flag} applies to `{command} MODEL`, not to StableHLO files (a file is captured "
                             "already: its model, batch and exporter are fixed)", fix=f"drop {flag}, or {fix}")


def estimate_options() -> None:
    """bench --target runs nothing: the options that time runs are refused in one line."""
    given = [f"--{n}" for n in given_on_command_line(("backend", "baselines", "warmup", "runs", "profile", "rounds"))]
    if given:
        raise StackwarsError(f"{given[0]} times runs here, and bench --target runs nothing (it compiles for the TPU "
                             "and reads the compiler's estimates)", fix=f"drop {given[0]}, or drop --target")


def set_env_for_command(name: str, value: str) -> None:
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


def fitted_request(req: Request) -> Request:
    """workload.shapes.fitted, told which of --dtype and --exporter the user gave; its note on stderr."""
    from ..workload.shapes import fitted

    ctx = click.get_current_context()
    explicit = {n for n in ("dtype", "exporters") if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    req, note = fitted(req, explicit)
    if note:
        click.echo(f"stackwars-ir: note: {note}", err=True)
    return req


def usable_exporters(model: str, given: Iterable[str], step: str = "forward") -> tuple:
    """workload.shapes.exporters_asked, its notes on stderr."""
    from ..workload.shapes import exporters_asked

    usable, notes = exporters_asked(model, given, step)
    for note in notes:
        click.echo(f"stackwars-ir: note: {note}", err=True)
    return usable


def warn_sidecars(paths: Iterable[str | Path]) -> None:
    """The one warning every command gives for a file whose sidecar no longer describes it (an
    edited .mlir): the command goes on, reading it as a file without a sidecar."""
    from ..common.files import sidecar_warnings

    for warning in sidecar_warnings(paths):
        click.echo(f"stackwars-ir: warning: {warning}", err=True)


def _say(message: str) -> None:
    click.echo(f"stackwars-ir: {message}", err=True)


# Slow steps (capture, compile, first run) said on stderr as they start, terminal or not; a long
# command's steps with their position and the time left (progress.Steps).
progress = Steps(_say)


def emit(text: str | None, data: dict | Callable[[], dict], json_path: Path | None,
         dumps: Callable[[dict], str] | None = None) -> None:
    """The human text on stdout, and the JSON to a file; with `--json -` the JSON takes stdout and
    the text goes to stderr, so `... --json - | jq` reads clean JSON. `data` may be a function that
    makes the JSON, called only when there is a --json to write (a big diff's takes seconds)."""
    from ..common.files import dump_json, write_atomic

    dumps, to_stdout = dumps or dump_json, json_path is not None and str(json_path) == "-"
    if json_path is not None and callable(data):
        data = data()
    if text is not None:
        click.echo(text, err=to_stdout)
    if to_stdout:
        click.echo(dumps(data), nl=False)
    elif json_path is not None:
        write_atomic(Path(json_path), dumps(data))
        click.echo(f"wrote {json_path}", err=True)


def every_row_failed(rows: int, failed: int) -> bool:
    """Whether every one of a command's `rows` failed (bench's, memory's): it then writes neither its
    table nor its JSON, and its failures' own lines (finish) say it all, as bad input's one line does
    for diff and stats. Where some row was measured, the table and the JSON hold the failed ones too."""
    return bool(rows) and failed >= rows


def finish(failed: Sequence[object], note: str = "") -> None:
    """Each failure's one line on stderr (then `note`); exit 2 if any, else 0."""
    for f in failed:
        click.echo(f"stackwars-ir: error: {getattr(f, 'error', f)}", err=True)
    if note:
        click.echo(note, err=True)
    sys.exit(EXIT_BAD_INPUT if failed else 0)


def has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _path(**kw):
    return click.Path(dir_okay=False, path_type=Path, **kw)


def writable(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """The callback of an output file option: the path checked before any work (files.check_writable);
    '-' (stdout) only for --json."""
    from ..common.files import check_writable

    if value is None:
        return value
    if str(value) == "-":
        if param.name != "json_path":
            flag = param.opts[0]
            raise StackwarsError(f"{flag} -: only --json writes to stdout", fix=f"give {flag} a file name")
        return value
    check_writable(value)
    return value


def output_option(*decls: str, **kw: object) -> Callable[[_F], _F]:
    """An option naming a file to write (--json, --markdown, --html): checked before any work, a folder
    there said in the command's one line (writable)."""
    kw.setdefault("type", click.Path(path_type=Path))
    kw.setdefault("metavar", "FILE")
    return click.option(*decls, callback=writable, **kw)


def json_option(what: str = "the table") -> Callable[[_F], _F]:
    return output_option("--json", "json_path", type=click.Path(allow_dash=True, path_type=Path),
                         help=f"Write JSON here ('-': to stdout, {what} to stderr).")


def markdown_option(command: _F) -> _F:
    return output_option("--markdown", "md_path", help="Write Markdown here.")(command)


def mode_option(help_: str) -> Callable[[_F], _F]:
    return click.option("--mode", type=click.Choice(["auto", "provenance", "structure"]), default="auto",
                        show_default=True, help=help_)


def limits_options(timeout_help: str, worker: str) -> Callable[[_F], _F]:
    """--timeout and --max-memory of the worker that compiles (and runs) each executable."""
    def apply(fn):
        fn = click.option("--max-memory", metavar="SIZE", default=None,
                          help=f"Resident memory {worker} may use, e.g. 8G (default: 3/4 of this machine's).")(fn)
        return click.option("--timeout", type=float, default=None, help=timeout_help)(fn)
    return apply


def batches_option(example: str) -> Callable[[_F], _F]:
    return click.option("--batch", "batches", default="", help=f"With MODEL: batch sizes, e.g. {example}.")


def stack_option(command: Callable[..., object]) -> Callable[..., object]:
    """--stack NAME on a command over files: the command gets the stack (`stack`: None without the
    option) whose workers compile and run its files."""
    import functools

    @functools.wraps(command)
    def run(*args, stack=None, **kw):
        if stack is None:
            return command(*args, stack=None, **kw)
        from ..common.errors import StackwarsError
        from ..isolate.stacks import find

        chosen = find(stack)
        model = next((t for t in kw.get("targets", ()) if not str(t).endswith((".mlir", ".mlirbc"))), None)
        if model is not None:
            raise StackwarsError(f"--stack {stack} times and plans files, and {model!r} is a model",
                                 fix=f"stackwars-ir capture {model} --framework jax --stack {stack}, then pass its file")
        return command(*args, stack=chosen, **kw)

    return click.option("--stack", default=None, metavar="NAME",
                        help="Compile and run in this version stack's XLA (stackwars-ir stack list; files only).")(run)
