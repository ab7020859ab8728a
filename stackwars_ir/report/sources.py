"""What a report is made from: a saved diff or two files, and the JSON results that belong to them.

Those results: bench and memory JSON, and an ablation's.
"""
from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from ..ablate import Ablation
from ..bench.attach import block_times, profiled
from ..bench.kernels import block_kernels
from ..bench.memory import MemoryReport
from ..bench.run import BenchReport
from ..common.errors import StackwarsError
from ..common.files import read_json_of, read_result
from ..diff import diff_files
from ..diff.result import DiffResult


_VERB = {"bench": "timed", "memory": "planned"}


def saved_diff(path: Path, files: Sequence[str | Path] = (), mode: str = "auto", kernels: bool = False) -> DiffResult:
    """The DiffResult saved at `path` (report --from), refusing what only applies to diffing files."""

    if kernels:
        raise StackwarsError("--kernels compiles the files, and --from renders a saved result without them",
                             fix="diff the files with --kernels --json, then report --from that JSON")
    if files:
        raise StackwarsError("report takes FILE_A FILE_B or --from DIFF.json, not both",
                             fix="drop the files, or drop --from")
    if mode != "auto":
        raise StackwarsError("--mode applies when diffing files; a saved result is segmented already",
                             fix="drop --mode, or diff the files again with it")
    return DiffResult.from_json(read_json_of(path, "diff"), str(path))


def sides(result: DiffResult) -> tuple[set, tuple[str, str]]:
    """The sha256 of each side a saved diff records, and the two files as the diff named them."""
    return {s.sha256 for s in (result.a, result.b) if s.sha256}, tuple(str(s.source) for s in (result.a, result.b))


def pair(files: Sequence[str | Path]) -> tuple[set, tuple[str, str]]:
    """The two files' sha256 (one that cannot be read: the diff names it in its own words) and names."""
    if len(files) != 2:
        raise StackwarsError(f"report takes two files to diff (got {len(files)})",
                             fix="stackwars-ir report A.mlir B.mlir --html r.html, or --from DIFF.json")
    mine = set()
    for f in files:
        try:
            mine.add(hashlib.sha256(Path(f).read_bytes()).hexdigest())
        except OSError:
            pass
    return mine, tuple(str(f) for f in files)


def attached(path: Path, command: str, mine: set, shown: tuple) -> BenchReport | MemoryReport:
    """The bench.run.BenchReport or bench.memory.MemoryReport of a `COMMAND --json` file to chart in the
    report; it must have measured one of the report's files (`mine`: their sha256; `shown`: their names)."""

    report = read_result(path, command, {"bench": BenchReport, "memory": MemoryReport}[command].from_json)
    rows = report.plans if isinstance(report, MemoryReport) else [e for _, e in report.rows if e.kind == "stablehlo"]
    hashes = {r.sha256: r.label for r in rows if r.sha256}
    what = _VERB[command]
    if not hashes:
        raise StackwarsError(f"{path}: records no file hashes, so nothing shows it {what} these files",
                             fix=f"{_on(command, shown)}, or drop --{command}")
    if mine and not set(hashes) & mine:
        labels = ", ".join(sorted({Path(x).name for x in hashes.values()}))
        raise StackwarsError(f"{path}: {what} other files ({labels}), not {Path(shown[0]).name} or "
                             f"{Path(shown[1]).name}", fix=f"{_on(command, shown)}, or drop --{command}")
    return report


def report_of(files: Sequence[str | Path], from_path: Path | None, bench_path: Path | None, memory_path: Path | None,
              mode: str, kernels: bool, progress: Callable[[str], object] | None = None):
    """What `report` renders: the diff result (saved, or of FILE_A FILE_B with every block's excerpt,
    as the graph view shows any block's IR), and the bench and memory JSON that measured its files."""
    if from_path is not None:
        result = saved_diff(from_path, files, mode, kernels)
        mine, shown = sides(result)
    else:
        mine, shown = pair(files)
    bench = attached(bench_path, "bench", mine, shown) if bench_path else None
    memory = attached(memory_path, "memory", mine, shown) if memory_path else None
    if from_path is None:
        report = diff_files(files[0], files[1], mode)
        result = report.result(excerpts="all")
        if kernels:
            result = block_kernels(report, result, files, progress)

        if bench is not None and profiled(bench, result):  # a bench --profile of these files: time by block
            result = block_times(report, result, bench, bench_path)
    return result, bench, memory


def _on(command: str, files) -> str:
    """The `COMMAND A B --json FILE` that measures the report's own two files."""
    import shlex

    return " ".join(["stackwars-ir", command, *(shlex.quote(str(f)) for f in files), "--json FILE"])


def ablation_of(path: Path, files: Sequence[str | Path], result: DiffResult | None = None) -> Ablation:
    """A `stackwars-ir ablate --json` file (ablate.Ablation) of the report's two files, A and B in that
    order (their sha256, the saved diff's where it renders one)."""

    abl = read_result(path, "ablate", Ablation.from_json)
    own = (result.a.source, result.b.source) if result is not None else tuple(files)
    if not abl.sha256:
        raise StackwarsError(f"{path}: records no file hashes, so nothing shows it ablates these files",
                             fix=f"{_on('ablate', own)}, or drop --ablation")
    if result is not None:
        mine = (result.a.sha256, result.b.sha256)
    else:
        mine = tuple(hashlib.sha256(Path(f).read_bytes()).hexdigest() if Path(f).is_file() else None for f in files)
    if tuple(abl.sha256) != mine:
        which = [w for w, x, y in zip(("A", "B"), abl.sha256, mine) if x != y]
        raise StackwarsError(f"{path}: ablates other files: its {' and '.join(which)} ({Path(abl.a).name}, "
                             f"{Path(abl.b).name} as it names them) have another sha256 than the report's "
                             f"{' and '.join(which)}",
                             fix=f"{_on('ablate', own)} (the report's files, in its order), or drop --ablation")
    return abl


def command_line(files: Sequence[str | Path], out: Path, from_path: Path | None, bench_path: Path | None,
                 memory_path: Path | None, mode: str, kernels: bool, ablation_path: Path | None = None) -> str:
    """The command that regenerates the report, as the report prints it."""
    given = ("--from", from_path) if from_path is not None else files
    return " ".join(shlex.quote(str(x)) for x in ("stackwars-ir", "report", *given, "--html", out,
                                                   *(("--bench", bench_path) if bench_path else ()),
                                                   *(("--memory", memory_path) if memory_path else ()),
                                                   *(("--ablation", ablation_path) if ablation_path else ()),
                                                   *(("--mode", mode) if mode != "auto" else ()),
                                                   *(("--kernels",) if kernels else ())))
