"""Bisect: the first release between a good and a bad one at which a metric of a model changes."""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..capture import run
from ..common.errors import StackwarsError
from ..isolate.stacks import add, find, home, lock
from ..workload import Request
from .metric import metric as metric_named
from .regress import Regression, regress_files

_RELEASE = re.compile(r"^\d+(\.\d+)*$")  # final releases only: no rc, dev or post


def version_key(v: str) -> tuple:
    """Orders final releases numerically; a part that is not a number (0rc1) sorts before 0."""
    return tuple(int(p) if p.isdigit() else -1 for p in v.split("."))


def released_between(good: str, bad: str, available: Collection[str]) -> list[str]:
    """The final releases from `good` to `bad`, both included, in order (either end may be the newer)."""
    lo, hi = sorted((good, bad), key=version_key)
    out = sorted({v for v in available if _RELEASE.match(v) and version_key(lo) <= version_key(v) <= version_key(hi)},
                 key=version_key)
    for end in (good, bad):
        if end not in out:
            raise StackwarsError(f"{end}: not a released version of both jax and jaxlib here "
                                 f"(the latest: {', '.join(out[-6:] or sorted(available, key=version_key)[-6:])})",
                                 fix="pick versions from `pip index versions jaxlib`")
    return out if version_key(good) <= version_key(bad) else out[::-1]


def available_versions(package: str) -> list[str]:
    """What the package index offers for this Python (`pip index versions`, the one network use)."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                          capture_output=True, text=True)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if done.returncode or line is None:
        said = [ln for ln in done.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        raise StackwarsError(f"pip index versions {package} failed: {said[-1] if said else 'no versions listed'}",
                             fix="check that the package index is reachable")
    return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]


def changed(metric: str, good: object, value: object, threshold: float = 0.10) -> bool:
    """Whether `value` differs from the good version's by `metric`'s own measure beyond `threshold`
    (versions.metric: kernels and fusion kinds by any count, memory by more than the ratio, steady time
    when the 95% interval of the ratio lies wholly outside it)."""
    m = metric_named(metric)
    return m.differs(m.change(good, value), threshold)


@dataclass(frozen=True)
class Bisection:
    """The versions searched, what each probed one measured, and the boundary."""

    metric: str
    versions: tuple
    measured: dict  # version -> the metric's plain value (kernels count, peak bytes, median seconds, fusion kinds)
    first_bad: str | None  # None: the metric does not change between the ends
    last_good: str | None
    probes: int  # captures the search made (the good end and each version it tested)
    note: str = ""
    boundary: object = field(default=None, repr=False)  # regress.Regression of last_good -> first_bad

    def as_json(self) -> dict:
        return {"metric": self.metric, "versions": list(self.versions),
                "measured": dict(self.measured),
                "first_bad": self.first_bad, "last_good": self.last_good, "probes": self.probes, "note": self.note,
                "boundary": self.boundary.as_json() if self.boundary is not None else None}

    @classmethod
    def from_json(cls, d: dict) -> "Bisection":
        return cls(d["metric"], tuple(d["versions"]), dict(d["measured"]), d.get("first_bad"), d.get("last_good"),
                   int(d["probes"]), d.get("note") or "",
                   Regression.from_json(d["boundary"]) if d.get("boundary") else None)


def search(versions: Iterable[str], probe: Callable[[str], object],
           differs: Callable[[object, object], bool], metric: str = "",
           ) -> Bisection:
    """Binary search for the first version whose probe differs from the first's (the good one); the
    last version is taken as bad without probing it, so the search costs 1 + ceil(log2(N - 1))
    probes; measured at the end only when the boundary falls on it and nothing in between changed."""
    versions = tuple(versions)
    if len(versions) < 2:
        raise StackwarsError("bisect needs two different versions", fix="e.g. --good jax==0.8.3 --bad jax==0.10.2")
    measured = {versions[0]: probe(versions[0])}
    lo, hi = 0, len(versions) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        measured[versions[mid]] = probe(versions[mid])
        if differs(measured[versions[0]], measured[versions[mid]]):
            hi = mid
        else:
            lo = mid
    if versions[hi] not in measured:  # the boundary is the bad end: confirm that it changed at all
        measured[versions[hi]] = probe(versions[hi])
        if not differs(measured[versions[0]], measured[versions[hi]]):
            return Bisection(metric, versions, measured, None, None, len(measured),
                             f"{versions[-1]} measures as {versions[0]} does")
    return Bisection(metric, versions, measured, versions[hi], versions[lo], len(measured))


def bisect_model(req: Request, good: str, bad: str, metric: str, out_dir: Path, *,
                 available: Collection[str] | None = None, progress: Callable[[str], object] | None = None,
                 show: bool | None = None) -> Bisection:
    """Bisect jax releases (jax==V jaxlib==V stacks, made as needed and kept) for `req`'s `metric`,
    then regress the two versions at the boundary block by block."""
    import dataclasses

    measured_by = metric_named(metric)
    if available is None:
        available = sorted(set(available_versions("jax")) & set(available_versions("jaxlib")), key=version_key)
    versions = released_between(good, bad, available)
    files: dict = {}

    def stack_of(v: str):
        here = lock()
        if here.versions.get("jax") == v and here.versions.get("jaxlib") == v:
            return here  # the project's own versions: no stack to make
        name = f"jax-{v}"
        if not (home() / name / "stack.json").exists():
            if progress:
                progress(f"making stack {name} (jax=={v} jaxlib=={v}) in {home()} ...")
            return add(name, [f"jax=={v}", f"jaxlib=={v}"], progress=progress)
        return find(name)

    def probe(v: str):
        made = run(req, Path(out_dir) / f"jax-{v}", force=True, show=show, stack=stack_of(v))
        path = next(p for p in made.files if p.suffix == ".mlir")
        files[v] = path
        value = measured_by.measure(path, stack_of(v), progress)
        if progress:
            progress(f"jax {v}: {measured_by.show(measured_by.plain(value))}")
        return value

    found = search(versions, probe, lambda g, x: changed(metric, g, x), metric)
    found = dataclasses.replace(found, measured={v: measured_by.plain(x) for v, x in found.measured.items()})
    if found.first_bad is None:
        return found
    boundary = regress_files(files[found.last_good], files[found.first_bad], stack_of(found.last_good),
                             stack_of(found.first_bad), progress=progress)
    return dataclasses.replace(found, boundary=boundary)
