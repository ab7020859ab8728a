"""A bench file's measurements joined to a diff's blocks: per-block kernel and host time, the verdict.

Each block gets its profiled kernel time and its host time; the pair gets the bench's verdict.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.files import read_result, read_sidecar
from ..common.routes import ROUTES
from ..diff import DiffReport, with_host, with_times, with_times as attach
from ..diff.result import DiffResult
from .answer import NATIVE_KINDS
from .host import HOST_RUNS
from .kernels import kernels_of_files
from .result import BenchReport
from .xplane import profile_of


def block_times_from(report: DiffReport, result: DiffResult, bench_path: Path) -> DiffResult:
    """The diff result (diff.DiffReport's) with each block's profiled time on both sides, from a
    `bench A B --profile --json` file whose rows timed these two files (matched by sha256)."""

    return block_times(report, result, read_result(bench_path, "bench", BenchReport.from_json), bench_path)


def block_times_from_profiles(report: DiffReport, result: DiffResult, files: Sequence[str | Path],
                              profiles: Iterable[Path], progress: Callable[[str], object] | None = None) -> DiffResult:
    """The diff result with each block's kernel time on both sides from two device profiles the user
    took (`profiles`: an XProf *.xplane.pb, or its folder, per file; bench.xplane), each file compiled
    here on XLA:CPU so the profile's kernel events map to its kernels and their module paths."""
    import dataclasses

    read = []
    for path, compiled in zip(profiles, kernels_of_files(files, "cpu", progress=progress)):
        if compiled.error:
            raise StackwarsError(compiled.error, fix="diff without --bench-profile, or fix the file as the error says")
        read.append(profile_of(path, compiled.path, compiled.kernels))
    out = with_times(report, result, *read)
    time = dict(out.metrics["time"], device_profiles=[p.note for p in read])
    return dataclasses.replace(out, metrics=dict(out.metrics, time=time))


def profiled(bench: BenchReport, result: DiffResult) -> bool:
    """Whether `bench` (a BenchReport) profiled both files of the diff `result`."""
    shas = {e.sha256 for _, e in bench.rows if e.profile is not None and e.sha256}
    return bool(result.a.sha256 in shas and result.b.sha256 in shas)


def block_times(report: DiffReport, result: DiffResult, bench: BenchReport, where: str | Path) -> DiffResult:
    """block_times_from, with the BenchReport read from `where` already."""
    import dataclasses

    profiles, names = [], []
    again = rerun(bench, result)
    for side in (result.a, result.b):
        rows = [e for _, e in bench.rows if e.kind == "stablehlo" and e.sha256 and e.sha256 == side.sha256]
        if not rows:
            raise StackwarsError(f"{where}: timed no file with the contents of {side.source}", fix=again)
        if rows[0].profile is None:
            raise StackwarsError(f"{where}: timed {side.source} without --profile, so it has no time per kernel",
                                 fix=again)
        profiles.append(rows[0].profile)
        names.append(rows[0].name)
    out = attach(report, result, *profiles)
    hosts = [_native_host(bench, side) for side in (result.a, result.b)]
    if any(h is not None for h in hosts):
        out = with_host(report, out, *hosts)
    # Whether the whole gap is more than the noise: the bench's own verdict on the two rows.
    verdict = next((v for v in bench.verdicts if {v.faster, v.slower} == set(names)), None)
    if verdict is None:
        return out
    time = dict(out.metrics["time"], verdict=verdict.sentence(), within_noise=verdict.tie or bool(verdict.withheld))
    return dataclasses.replace(out, metrics=dict(out.metrics, time=time))


def rerun(bench: BenchReport, result: DiffResult) -> str:
    """The bench command that profiles the diff's two files and keeps what `bench` measured besides: a
    model's bench with native rows timed by host phase (bench MODEL --host) is run again as a model's,
    with --profile added, so its native rows and host phases stay (`bench A B --profile` has neither);
    the sampling the bench asked for (--warmup, --runs, --host RUNS) is asked again."""
    from pathlib import Path

    sampling = bench.asked.options() if bench.asked is not None else []
    files = " ".join(["stackwars-ir bench", str(result.a.source), str(result.b.source), *sampling, "--profile --json FILE"])
    natives = [e for _, e in bench.rows if e.kind != "stablehlo"]
    if not natives:
        return files
    try:
        car = read_sidecar(Path(result.a.source)) or read_sidecar(Path(result.b.source))
    except (StackwarsError, OSError, ValueError):
        return files
    if car is None or not car.model:
        return files
    kinds = {e.kind for e in natives}
    baselines = [name for name, kind in NATIVE_KINDS.items() if kind in kinds and name != "jax_donate"]
    shape, out = car.model_run(result.a.source)  # the captures bench MODEL reuses: these files
    words = [f"stackwars-ir bench {car.model} --size {car.size}", *shape]
    if baselines:
        words.append(f"--baselines {','.join(baselines)}")
    if car.step and car.step != "forward":
        words.append(f"--step {car.step}")
    words.append(f"--out {out}")
    words += sampling
    host = ""
    if any(e.host is not None for e in natives):  # as many phased runs as the bench asked
        n = bench.asked.host if bench.asked is not None and bench.asked.host else HOST_RUNS
        host = " --host" + (f" {n}" if n != HOST_RUNS else "")
    words.append("--profile" + host + " --json FILE")
    return " ".join(words)


def _native_host(bench, side):
    """(label, HostPhases) of the native runtime a user of `side`'s route runs (routes.Route.native),
    from the same bench's rows with host phases (bench --host) at the capture's batch; None if none."""
    from pathlib import Path

    try:
        car = read_sidecar(Path(side.source))
    except (StackwarsError, OSError, ValueError):
        return None
    route = ROUTES.get("jax" if car is not None and car.framework == "jax" else car.exporter if car else "")
    if route is None or not route.native:
        return None
    rows = [e for batch, e in bench.rows if e.kind == route.native and e.host is not None
            and (car.batch is None or batch in (car.batch, str(car.batch)))]
    return (rows[0].label, rows[0].host) if rows else None
