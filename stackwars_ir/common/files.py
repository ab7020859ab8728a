"""Files every stage reads and writes: atomic writes and sets, capture sidecars and what they record.

A sidecar records the host and the versions that made its capture.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .errors import StackwarsError, check_interrupted

_T = TypeVar("_T")  # read_result's: what `from_json` returns
SIDECAR_FORMAT = 1
VERSIONED_PACKAGES = ("jax", "jaxlib", "flax", "torch", "torch_xla", "torchax", "transformers", "numpy")
# Recorded only where installed: TorchTPU's route and the CPU plugin it runs on (a stack of their own).
OPTIONAL_PACKAGES = ("torch_tpu", "xla_cpu_pjrt")


def versions() -> dict[str, str | None]:
    out = {pkg: distribution_version(pkg) for pkg in VERSIONED_PACKAGES}
    return out | {pkg: v for pkg in OPTIONAL_PACKAGES if (v := distribution_version(pkg))}


def distribution_version(pkg: str) -> str | None:
    """The version of `pkg` installed here (None: not installed), as its distribution says; for
    torchax, the version of the code that imports. torch_xla's wheels (2.8, 2.9) carry a torchax
    package of their own, which overwrites the torchax distribution's files when pip installs
    torch_xla after it (the lock's `make setup` reinstalls the pinned torchax over it: docs/stacks.md).
    Where torch_xla's files are the ones installed, with or without a torchax distribution, this says
    "0.0.6 (torch_xla 2.9.0's copy)"."""
    from importlib import metadata

    for name in (pkg.replace("_", "-"), pkg):
        try:
            version = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            continue
    else:
        version = None
    if pkg != "torchax":
        return version
    owner = _owner(f"{pkg}/__init__.py", (pkg, "torch_xla"))
    if owner is None or owner[0] == pkg:
        return version
    import re

    text = Path(metadata.distribution(owner[0]).locate_file(f"{pkg}/__init__.py")).read_text(errors="replace")
    said = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
    return f"{said.group(1) if said else '?'} ({owner[0]} {owner[1]}'s copy)"


def _owner(relative: str, candidates) -> tuple[str, str] | None:
    """(distribution, version) of the first candidate whose RECORD lists `relative` with the hash of
    the file installed there; None when none does (or the file is missing)."""
    import base64
    from importlib import metadata

    for name in candidates:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        entry = next((f for f in dist.files or () if str(f) == relative and f.hash), None)
        if entry is None:
            continue
        try:
            digest = hashlib.new(entry.hash.mode, Path(dist.locate_file(relative)).read_bytes()).digest()
        except (OSError, ValueError):
            return None
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == entry.hash.value:
            return name, dist.version
    return None


def host() -> dict[str, str | int | None]:
    return {"machine": platform.machine(), "system": platform.system(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "processor": _cpu_model()}


_COMMIT: list = []


def code_commit() -> str | None:
    """The git commit this code was checked out at (12 hex digits, `+` when files differ from it), or
    None outside a git checkout (an installed copy, a version stack's copy): what a record names so a
    page can say which code measured it."""
    if not _COMMIT:
        import subprocess

        root = Path(__file__).resolve().parents[2]  # the checkout holding stackwars_ir/common/files.py
        try:
            head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                  text=True, timeout=10)
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10)
            ok = head.returncode == 0 and (root / ".git").exists()
            _COMMIT.append(head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if ok else None)
        except (OSError, subprocess.SubprocessError):
            _COMMIT.append(None)
    return _COMMIT[0]


def host_memory() -> int | None:
    """This machine's memory in bytes (MemTotal), or None where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def write_atomic(path: Path, content: str) -> None:
    """Write to a temporary file beside `path`, then rename: a crash leaves no half-written file."""
    write_set([(Path(path), content)])


def read_json_of(path: Path, command: str) -> dict:
    """A `stackwars-ir COMMAND --json` file, or one line saying why it is not one."""
    key = {"diff": "blocks", "bench": "results", "memory": "executables", "ablate": "variants"}[command]
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise StackwarsError(f"{path}: not a readable {command} JSON file: {e}",
                             fix=f"write one with stackwars-ir {command} ... --json FILE") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise StackwarsError(f"{path}: not a stackwars-ir {command} JSON file (no {key!r})",
                             fix=f"write one with stackwars-ir {command} ... --json FILE")
    return data


def read_result(path: Path, command: str, from_json: Callable[[dict], _T]) -> _T:
    """The typed result (`from_json` of it) of a `stackwars-ir COMMAND --json` file, or one line
    naming what this version cannot read in it."""
    data = read_json_of(path, command)
    try:
        return from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"no field {e}" if isinstance(e, KeyError) else str(e)
        raise StackwarsError(f"{path}: not a stackwars-ir {command} JSON file this version reads ({what})",
                             fix=f"write it again with stackwars-ir {command} ... --json FILE") from None


def dump_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class Sidecar:
    """A capture's sidecar (`x.json` beside `x.mlir`, written by capture) as its readers use it; `data`
    keeps the whole JSON for what only one reader needs (versions, host, the training step's record)."""

    model: str
    size: str
    seed: int
    batch: int | None
    seq: int | None
    framework: str
    exporter: str
    sha256: str | None
    step: str = "forward"
    abstract: bool = False
    dtype: str = "float32"
    arguments: tuple = ()  # {"index", "kind", "name", "shape", "dtype"} per argument of the entry function
    inputs: tuple = ()  # {"name", "shape", "dtype"} per model input
    constants: dict = field(default_factory=dict, repr=False)  # name -> {"shape", "dtype", "values"}
    roles: dict | None = None  # the adapter's path-to-role words, as recorded at capture
    values: dict | None = None  # the recorded argument values (.npz), or why none were recorded
    capture_revision: int | None = None
    data: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict, where: str = "sidecar") -> "Sidecar":
        """A sidecar's JSON, read; one line naming what is missing or malformed."""
        try:
            return cls(
                data["model"], data["size"], data["seed"], data.get("batch"), data.get("seq"), data["framework"],
                data["exporter"], data.get("sha256"), data.get("step", "forward"), bool(data.get("abstract", False)),
                data.get("dtype", "float32"), tuple(data.get("arguments", ())), tuple(data.get("inputs", ())),
                dict(data.get("constants", {})), (data.get("adapter") or {}).get("roles"), data.get("values"),
                (data.get("run") or {}).get("capture_revision"), data)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise StackwarsError(f"{where}: a capture sidecar with a missing or malformed field "
                                 f"({type(e).__name__}: {e})", fix="re-run stackwars-ir capture") from None

    def capture_command(self, mlir_path: str | Path) -> str:
        """The capture command that writes this very file again, into the folder it is in (capture
        writes OUT/<model>-<size>/<stem>.mlir): its model, size, seed, batch, sequence length, step,
        route, layers, mesh, abstract dtype and version stack, with --force."""
        words = ["stackwars-ir capture", self.model, "--size", self.size, "--seed", str(self.seed)]
        words += ["--batch", str(self.batch)] if self.batch is not None else []
        words += ["--seq", str(self.seq)] if self.seq is not None else []
        words += ["--step", self.step] if self.step != "forward" else []
        words += ["--framework", self.framework] + (["--exporter", self.exporter] if self.framework == "torch" else [])
        program = self.data.get("program") or {}
        words += ["--scan-layers"] * bool(program.get("scan_layers")) + ["--remat"] * bool(program.get("remat"))
        axes = (self.data.get("mesh") or {}).get("axes") or {}
        words += ["--mesh", ",".join(f"{k}={v}" for k, v in axes.items())] if axes else []
        words += ["--abstract", "--dtype", self.dtype] if self.abstract else []
        stack = (self.data.get("stack") or {}).get("name")
        words += ["--stack", stack] if stack else []
        import shlex

        out = Path(mlir_path).parent.parent
        return " ".join(words + ["--out", shlex.quote(str(out)), "--force"])

    def model_run(self, mlir_path: str | Path) -> tuple[list[str], Path]:
        """The words and --out folder with which `bench MODEL` (or `why MODEL`) reads this capture again
        rather than capturing anew: a sweep's folder (OUT/b<batch>-s<seq>/<model>-<size>/) needs its
        --batch and --seq; the adapter's own batch and length (OUT/<model>-<size>/) need none, and a
        --batch given there would move the captures to a sweep's folder."""
        import re

        out = Path(mlir_path).parent.parent
        if re.fullmatch(rf"b{self.batch}-s{self.seq}", out.name):
            return ["--batch", str(self.batch), "--seq", str(self.seq)], out.parent
        return [], out

    def argument_names(self) -> dict[int, str]:
        """Argument index -> the PyTorch tensor (or input) it holds."""
        return {a["index"]: a["name"] for a in self.arguments}


def read_sidecar(mlir_path: Path) -> Sidecar | None:
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
    return Sidecar.from_json(data, str(side))


def sidecar_of(mlir_path: Path) -> tuple[Sidecar | None, str]:
    """The sidecar of a capture, or None with the warning every command prints when it exists but
    does not describe this file (an edited .mlir): the file is then read as one without a sidecar."""
    try:
        return read_sidecar(mlir_path), ""
    except StackwarsError as e:
        return None, f"{e.message}; it is ignored: the file is read as one without a sidecar (synthetic " \
                     f"arguments, no capture provenance) (fix: {e.fix})"


def sidecar_warnings(paths: Iterable[str | Path]) -> list[str]:
    """sidecar_of's warning for each of `paths` whose sidecar no longer describes it, each file once."""
    return [w for w in (sidecar_of(p)[1] for p in dict.fromkeys(Path(p) for p in paths)) if w]


def argument_names(mlir_path: Path) -> dict:
    """Argument index -> PyTorch tensor name, from a capture's sidecar (torch_xla's arguments carry
    no names of their own); nothing for a file without one, or whose sidecar describes another file."""
    side, _ = sidecar_of(Path(mlir_path))
    return side.argument_names() if side else {}


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
def locked_folder(folder: Path) -> Iterator[None]:
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


def values_bytes(arrays: list) -> bytes:
    """The arrays an executable is called with, as a deterministic .npz (`arg0`, `arg1`, ... in order,
    and `reference`): numpy's savez stamps each member with the time of writing; here every stamp
    is the zip epoch, so the same capture writes the same bytes."""
    import io
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, array in arrays:
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(array, order="C"), allow_pickle=False)  # 0-d stays 0-d
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, member.getvalue())
    return buf.getvalue()


def read_values(mlir_path: Path, sidecar: Sidecar, staged: str | None = None) -> tuple[list, object] | None:
    """The argument values and reference output a capture recorded beside itself (`"values"` in its
    sidecar), or those in `staged` (an .npz a parent process built for a stack's worker:
    bench.staging), or None when it recorded none; StackwarsError when the file is gone or not the one
    recorded."""
    import numpy as np

    if staged is not None:
        with np.load(staged, allow_pickle=False) as z:
            return [z[f"arg{i}"] for i in range(sum(n.startswith("arg") for n in z.files))], z["reference"]
    recorded = sidecar.values or {}
    if not recorded.get("file"):
        return None
    path = Path(mlir_path).with_name(recorded["file"])
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StackwarsError(f"{path}: the capture's recorded values cannot be read: {e.strerror}",
                             fix=f"copy the .npz beside its .mlir and .json, or capture it again: "
                                 f"{sidecar.capture_command(mlir_path)}") from None
    if hashlib.sha256(data).hexdigest() != recorded.get("sha256"):
        raise StackwarsError(f"{path}: not the values its capture recorded (sha256 differs)",
                             fix=sidecar.capture_command(mlir_path))
    import io

    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        args = [z[f"arg{i}"] for i in range(sum(n.startswith("arg") for n in z.files))]
        return args, z["reference"]


def write_set(files: list[tuple[Path, str | bytes]]) -> None:
    """Write several files as one: each to a temporary file first, then all renamed in place with
    Ctrl-C held back, so an interrupt or a failure leaves either the whole set or none of it."""
    import signal

    staged = []
    try:
        for path, content in files:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                staged.append((tmp, path))
                if isinstance(content, bytes):
                    with os.fdopen(fd, "wb") as f:
                        f.write(content)
                else:
                    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                        f.write(content)
                _share(tmp, 0o666)
            except OSError as e:  # a folder that cannot be written, a disk full: nothing of the set is published
                raise StackwarsError(f"{path}: cannot be written: {e.strerror or e}",
                                     fix="give a path in a folder you can write") from None
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            check_interrupted()  # a Ctrl-C some callback swallowed earlier: publish nothing
            for tmp, path in staged:
                try:
                    os.replace(tmp, path)
                except OSError as e:  # a folder where the file should be
                    raise StackwarsError(f"{path}: cannot be written: {e.strerror or e}",
                                         fix="give a file name that is not a folder's") from None
            staged = []
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a Ctrl-C held back is delivered now
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def check_writable(path: str | Path) -> None:
    """StackwarsError (one line) unless a file can be written at `path`: not a folder, and its nearest
    existing folder (the missing ones are made) one this process may write in. Checked before the work
    whose result goes there, so a bad output path costs nothing and leaves nothing half-written."""
    p = Path(path)
    if p.is_dir():
        raise StackwarsError(f"{p}: is a folder, not a file", fix=f"give a file name, e.g. {p / 'out'}")
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise StackwarsError(f"{p}: {folder} is a file, so nothing can be written under it",
                             fix="give a path under a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StackwarsError(f"{p}: the folder {folder} cannot be written (permission denied)",
                             fix="give a path in a folder you can write")


def _share(path, mode: int) -> None:
    """Give a temporary file or folder the mode a plain `open` or `mkdir` would have (mkstemp and
    mkdtemp make them private), so the renamed result reads like any other file of the user's."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def write_folder(folder: Path, contents: dict[str, str]) -> None:
    """Write a folder of files as one: a temporary folder beside it, renamed in place; `folder` must
    be absent or empty. A failure leaves no folder behind (or the empty one as it was)."""
    import shutil

    folder = Path(folder)
    parent = folder.parent if str(folder.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    try:
        _share(tmp, 0o777)  # mkdtemp's 0700 is for secrets; this is a folder to share
        for name, text in contents.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if folder.exists():
            folder.rmdir()  # empty: a folder with files in it raises here, and is left as it was
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
