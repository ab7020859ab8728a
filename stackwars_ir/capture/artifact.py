"""The capture artifact: StableHLO text plus a JSON sidecar, written atomically and deterministically."""
from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StackwarsError

SIDECAR_FORMAT = 1
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

    @property
    def stem(self) -> str:
        return "jax" if self.framework == "jax" else f"torch-{self.exporter}"

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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a written capture is for sharing
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def dump_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def read_sidecar(mlir_path: Path) -> dict | None:
    """The sidecar of a capture (`x.mlir` -> `x.json`), or None when there is none."""
    side = Path(mlir_path).with_suffix(".json")
    if not side.is_file():
        return None
    try:
        data = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise StackwarsError(f"{side}: unreadable capture sidecar: {e}", fix="re-run stackwars-ir capture")
    return data if isinstance(data, dict) and data.get("format") == SIDECAR_FORMAT else None
