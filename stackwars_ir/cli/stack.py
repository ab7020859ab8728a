"""The command line of version stacks: stack add/list/check/remove, regress and bisect.

Thin, over stackwars_ir.isolate.stacks and stackwars_ir.versions.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ..common.routes import EXPORTERS
from ..versions.metric import METRICS
from .shell import emit, json_option, markdown_option, progress


def register(main: click.Group) -> None:
    main.add_command(stack_group)
    main.add_command(regress_cmd)
    main.add_command(bisect_cmd)


@click.group("stack")
def stack_group() -> None:
    """Version stacks: other jax/jaxlib releases in cached environments outside the repository
    ($STACKWARS_IR_STACKS, else ~/.cache/stackwars-ir/stacks); `lock` is the project's own."""


@stack_group.command("add")
@click.argument("name")
@click.argument("requirements", nargs=-1, required=True)
@click.option("--index-url", default=None, help="The package index to install from (default: pip's).")
@click.option("--python", "python", default=None,
              help="The interpreter the stack's environment is made with (default: this one's); jax 0.11 and "
                   "later need Python 3.12 or newer.")
def stack_add(name: str, requirements: tuple[str, ...], index_url: str | None, python: str | None) -> None:
    """Make stack NAME from exact pins (jax==0.9.2 jaxlib==0.9.2 ...): a virtual environment with
    them, flax and optax resolved against them, and this project's transformers; reused when it exists.

    Exit code 0: made or reused; 2: bad input, or pip could not install the pins (nothing left behind).
    """
    from ..isolate.stacks import add

    made = add(name, requirements, index_url=index_url, python=python, progress=progress)
    click.echo(made.line())


@stack_group.command("list")
@json_option("the list")
def stack_list(json_path: Path | None) -> None:
    """The stacks made here, and the lock's, with their versions."""
    from ..isolate.stacks import list_stacks, lock

    stacks = [lock(), *list_stacks()]
    emit("\n".join(s.line() for s in stacks), {"stacks": [s.as_json() for s in stacks]}, json_path)


@stack_group.command("check")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("requirements.lock"),
              show_default=True, help="The lock whose pins this environment must import.")
def stack_check(lock_path: Path) -> None:
    """Check that each package whose version captures record imports here at the lock's pin (torch_xla's
    wheel carries a torchax copy that can shadow the pinned torchax). `make setup` runs it.

    Exit code 0: every pin imports; 2: one does not (the line names it and the fix).
    """
    from ..isolate.stacks import check_lock

    got = check_lock(lock_path)
    click.echo(f"{lock_path}: imports at the pinned versions: " + ", ".join(f"{k} {v}" for k, v in got.items()))


@stack_group.command("remove")
@click.argument("name")
def stack_remove(name: str) -> None:
    """Delete stack NAME's environment."""
    from ..isolate.stacks import remove

    click.echo(f"removed {remove(name)}")


def _thresholds(time_pct, memory_pct, kernels):
    from ..common.errors import StackwarsError
    from ..versions.regress import Thresholds

    for what, v in (("--time", time_pct), ("--memory", memory_pct), ("--kernels", kernels)):
        if v < 0:
            raise StackwarsError(f"{what} {v:g} must be 0 or more", fix=f"e.g. {what} 10")
    return Thresholds(time_pct / 100, memory_pct / 100, int(kernels))


@click.command("regress")
@click.argument("targets", nargs=-1, required=True)
@click.option("--from", "from_stack", default="lock", show_default=True, help="Stack A (the before).")
@click.option("--to", "to_stack", default="lock", show_default=True, help="Stack B (the after).")
@click.option("--size", default="tiny", show_default=True, help="With MODEL: the adapter's size.")
@click.option("--step", default="forward", show_default=True, type=click.Choice(["forward", "train"]),
              help="With MODEL: the forward pass, or one training step (loss, backward, AdamW).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("out") / "regress",
              show_default=True, help="With MODEL: where each stack's capture goes (OUT/STACK/MODEL-SIZE/).")
@click.option("--time", "time_pct", type=float, default=10, show_default=True,
              help="Regression: steady time up by more than this %, the 95% interval's low end past it.")
@click.option("--memory", "memory_pct", type=float, default=10, show_default=True,
              help="Regression: the memory plan's peak up by more than this %.")
@click.option("--kernels", type=int, default=0, show_default=True,
              help="Regression: a block compiled to more than this many extra kernels.")
@click.option("--exporter", type=click.Choice(list(EXPORTERS)), default=None,
              help="With MODEL: regress this PyTorch exporter's capture instead of the JAX side (both stacks "
                   "must hold torch and it: PyTorch stacks, docs/stacks.md).")
@click.option("--no-time", is_flag=True, help="Compile and plan only; time nothing.")
@click.option("--rounds", type=click.IntRange(min=3), default=5, show_default=True,
              help="Time A and B in this many rounds, a fresh worker each; the B/A interval is taken across "
                   "them (more rounds narrow it).")
@click.option("--ci", is_flag=True, help="CI mode: first time A against a copy of itself the way A and B are timed "
                                         "(A/A), and widen --time by the noise it shows, so an unchanged program "
                                         "does not fail on this machine's noise (one more timing of A).")
@json_option("the text")
@markdown_option
def regress_cmd(targets: tuple[str, ...], from_stack: str, to_stack: str, size: str, step: str, out_dir: Path,
                time_pct: float, memory_pct: float, kernels: int, exporter: str | None, no_time: bool, rounds: int,
                ci: bool, json_path: Path | None, md_path: Path | None) -> None:
    """MODEL (its JAX side, or --exporter's, captured under both stacks) or FILE_A FILE_B: what changed per
    block in the IR, the kernels XLA compiled, the time per block and the memory plan, A by --from's XLA, B
    by --to's.

    Exit code 0: no threshold passed; 1: a regression (each named); 2: bad input; 130: interrupted.
    """
    from ..common.errors import StackwarsError
    from ..isolate.stacks import find
    from ..versions.regress import regress_files, regress_model
    from ..workload import Request

    limits, a, b = _thresholds(time_pct, memory_pct, kernels), find(from_stack), find(to_stack)
    if len(targets) == 2:
        result = regress_files(Path(targets[0]), Path(targets[1]), a, b, limits, timing=not no_time, calibrate=ci,
                               rounds=rounds, progress=progress)
    elif len(targets) == 1 and not targets[0].endswith((".mlir", ".mlirbc")):
        req = Request(targets[0], size, "torch" if exporter else "jax", step=step,
                      **({"exporters": (exporter,)} if exporter else {}))
        result = regress_model(req, a, b, out_dir, limits, timing=not no_time, calibrate=ci, rounds=rounds,
                               progress=progress)
    else:
        raise StackwarsError(f"regress {' '.join(targets)}: give a MODEL or two files", fix="e.g. regress gpt2 "
                             "--from jax-0.9.2, or regress A.mlir B.mlir")
    from ..report.versions import regress_lines

    emit("\n".join(regress_lines(result)), result.as_json(), json_path)
    if md_path is not None:
        from ..common.files import write_atomic
        from ..report.markdown import regress_markdown

        write_atomic(md_path, regress_markdown(result))
        click.echo(f"wrote {md_path}", err=True)
    sys.exit(1 if result.regressed else 0)


@click.command("bisect")
@click.argument("model")
@click.option("--good", required=True, metavar="jax==VERSION", help="A version whose metric is the reference.")
@click.option("--bad", required=True, metavar="jax==VERSION", help="A version whose metric has changed.")
@click.option("--metric", type=click.Choice(list(METRICS)), default="kernels",
              show_default=True, help="What must change: the kernel count, the kinds of fusions XLA made, the "
                                      "memory plan's peak (over 10%), or the steady time (beyond noise and 10%).")
@click.option("--size", default="tiny", show_default=True, help="The adapter's size.")
@click.option("--step", default="forward", show_default=True, type=click.Choice(["forward", "train"]),
              help="The forward pass, or one training step.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("out") / "bisect",
              show_default=True, help="Where each version's capture goes (OUT/jax-VERSION/MODEL-SIZE/).")
@json_option("the text")
def bisect_cmd(model: str, good: str, bad: str, metric: str, size: str, step: str, out_dir: Path,
               json_path: Path | None) -> None:
    """The first jax release between --good and --bad at which MODEL's metric changes (kernel count,
    memory plan peak, or steady time beyond noise), making jax-VERSION stacks as it goes, and the
    block-level regress of the two versions at the boundary.

    Exit code 0: a first bad version found; 1: the metric does not change between the ends; 2: bad
    input; 130: interrupted.
    """
    from ..versions.bisection import bisect_model
    from ..workload import Request

    found = bisect_model(Request(model, size, "jax", step=step), _pin(good, "--good"), _pin(bad, "--bad"), metric,
                         out_dir, progress=progress)
    from ..report.versions import bisect_lines

    emit("\n".join(bisect_lines(found)), found.as_json(), json_path)
    sys.exit(0 if found.first_bad else 1)


def _pin(text: str, option: str) -> str:
    from ..common.errors import StackwarsError

    name, _, version = text.partition("==")
    if name.strip().lower() != "jax" or not version:
        raise StackwarsError(f"{option} {text!r}: bisect searches jax releases, given as jax==VERSION",
                             fix=f"e.g. {option} jax==0.9.2")
    return version.strip()
