"""The capture artifact: StableHLO text plus a JSON sidecar, written atomically and deterministically."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StackwarsError

SIDECAR_FORMAT = 1
# What the capture code writes: bumped whenever a capture's text or meaning changes for the same
# request (2: torch_xla's training step names its ops' modules and phases). `bench MODEL` reuses a
# capture on disk only from the same revision; the sidecar records it under `run`, beside the parts
# that differ between runs, so the goldens compare as before.
CAPTURE_REVISION = 2
VERSIONED_PACKAGES = ("jax", "jaxlib", "flax", "torch", "torch_xla", "torchax", "transformers", "numpy")


@dataclass(frozen=True)
class Argument:
    """One argument of the captured function: which parameter, buffer, constant or input it is."""

    index: int
    kind: str  # "parameter" | "buffer" | "constant" | "input"
    name: str
    shape: tuple[int, ...]
    dtype: str

    def as_json(self) -> dict:
        return {"index": self.index, "kind": self.kind, "name": self.name,
                "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Capture:
    """One exported module: its text, the meaning of its arguments and how long each stage took."""

    framework: str  # "jax" | "torch"
    exporter: str  # "jax" | "torch_xla" | "torchax"
    text: str = field(repr=False)
    arguments: tuple[Argument, ...] = field(repr=False)
    seconds: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict, repr=False)  # name -> numpy array (torch_xla lifted constants)
    outputs: tuple = field(default=(), repr=False)  # training step: {"index", "kind", "name"} per result
    stem_suffix: str = ""  # "-train" for a training step
    extra: dict = field(default_factory=dict, repr=False)  # route-specific evidence for the sidecar

    @property
    def stem(self) -> str:
        return ("jax" if self.framework == "jax" else f"torch-{self.exporter}") + self.stem_suffix

    def __str__(self) -> str:
        return f"Capture({self.stem}, {len(self.arguments)} arguments, {len(self.text)} chars)"


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg.replace("_", "-"))
        except metadata.PackageNotFoundError:
            try:
                out[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                out[pkg] = None
    return out


def host() -> dict[str, str | int | None]:
    return {"machine": platform.machine(), "system": platform.system(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "processor": _cpu_model()}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def target_paths(out_dir: Path, model: str, size: str, capture_stem: str) -> tuple[Path, Path]:
    folder = Path(out_dir) / f"{model}-{size}"
    return folder / f"{capture_stem}.mlir", folder / f"{capture_stem}.json"


def refuse_existing(paths: list[Path], force: bool) -> None:
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise StackwarsError(f"{existing[0]}: already exists", fix="pass --force to overwrite, or --out DIR")


def write_atomic(path: Path, content: str) -> None:
    """Write to a temporary file beside `path`, then rename: a crash leaves no half-written file."""
    write_set([(Path(path), content)])


def dump_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def read_sidecar(mlir_path: Path) -> dict | None:
    """The sidecar of a capture (`x.mlir` -> `x.json`), or None when there is none; StackwarsError
    when it does not describe that very file (edited, truncated, or from another capture)."""
    mlir_path = Path(mlir_path)
    side = mlir_path.with_suffix(".json")
    if not side.is_file():
        return None
    try:
        data = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise StackwarsError(f"{side}: unreadable capture sidecar: {e}", fix="re-run stackwars-ir capture")
    if not (isinstance(data, dict) and data.get("format") == SIDECAR_FORMAT):
        return None
    problem = _mismatch(mlir_path, data)
    if problem:
        raise StackwarsError(f"{side}: does not describe {mlir_path.name}: {problem}",
                             fix="re-run stackwars-ir capture, or move the .json away to use synthetic inputs")
    return data


def _mismatch(mlir_path: Path, data: dict) -> str | None:
    if data.get("stablehlo") not in (None, mlir_path.name):
        return f"it describes {data['stablehlo']!r}"
    want = data.get("sha256")
    if want:
        try:
            got = hashlib.sha256(mlir_path.read_bytes()).hexdigest()
        except OSError as e:
            return f"cannot read it: {e.strerror}"
        if got != want:
            return ("its sha256 differs from the one recorded at capture (the .mlir was edited, truncated, "
                    "or written by another capture)")
    return None


@contextlib.contextmanager
def locked_folder(folder: Path):
    """Hold an exclusive lock on `folder` (flock on the directory itself, so no lock file is left):
    two captures writing into one folder at once write their sets one after the other."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_set(files: list[tuple[Path, str]]) -> None:
    """Write several files as one: each to a temporary file first, then all renamed in place with
    Ctrl-C held back, so an interrupt or a failure leaves either the whole set or none of it."""
    import signal

    staged = []
    try:
        for path, content in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(content)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            from ..errors import check_interrupted

            check_interrupted()  # a Ctrl-C some callback swallowed earlier: publish nothing
            for tmp, path in staged:
                os.replace(tmp, path)
            staged = []
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a Ctrl-C held back is delivered now
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
