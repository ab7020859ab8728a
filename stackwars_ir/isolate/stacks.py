"""Version stacks: cached virtual environments of other jax releases that capture, compile and time.

A stack may hold other torch, torch_xla and torchax releases too.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .. import models
from ..common.errors import StackwarsError
from ..common.files import versions
from ..common.routes import PACKAGE, TORCHAX, TORCH_SIDE

LOCK = "lock"  # the project's own stack: requirements.lock, this process
HOME_ENV = "STACKWARS_IR_STACKS"
STACK_FORMAT = 1
# What a stack's capture and bench workers import besides the packages it is named for: the JAX twins
# (flax, optax for a training step), the adapters' configurations (transformers, which needs no torch
# for them). flax and optax are resolved by pip against the stack's own jax; transformers is pinned
# to this process's version, so an adapter reads the same configuration in every stack.
RESOLVED = ("flax", "optax")
PINNED_HERE = ("transformers",)
# The distributions a stack's record lists (its sidecars' "versions" come from these).
RECORDED = ("jax", "jaxlib", "flax", "optax", "numpy", "ml_dtypes", "transformers", *TORCH_SIDE, "xla_cpu_pjrt")
SHOWN = ("jax", "jaxlib", "flax", "optax", "numpy", *TORCH_SIDE)  # stack list's columns
# What a PyTorch stack adds (`stack add NAME torch==V torch_xla==V ...`) is TORCH_SIDE, checked to import once made.
_TORCHAX = PACKAGE[TORCHAX.name]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")


@dataclass(frozen=True)
class Stack:
    """One stack: its name, where its environment lives (None: this process's, the lock's), the
    requirements it was made from and the versions pip resolved for them."""

    name: str
    root: Path | None
    requirements: tuple[str, ...] = ()
    versions: dict = field(default_factory=dict)
    # installed but not importable there, with why: torch_xla 2.8.1's copy of torchax needs a jax
    # older than the stack's (docs/stacks.md), so that stack has torch_xla's route and not torchax's
    broken: dict = field(default_factory=dict)

    @property
    def is_lock(self) -> bool:
        return self.root is None

    @property
    def python(self) -> str:
        return sys.executable if self.root is None else str(self.root / "env" / "bin" / "python")

    def line(self) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in self.versions.items() if v and k in SHOWN)
        return f"{self.name:16} {shown}" + ("" if self.is_lock else f"  ({self.root})")

    def as_json(self) -> dict:
        return {"name": self.name, "requirements": list(self.requirements), "versions": self.versions,
                **({"broken": self.broken} if self.broken else {})}

    @classmethod
    def from_json(cls, d: dict, root: Path | None = None) -> "Stack":
        """A stack's record (stack.json, or a sidecar's "stack"); `root`: where its environment lives."""
        return cls(d["name"], root, tuple(d.get("requirements") or ()), d.get("versions") or {}, d.get("broken") or {})


def home() -> Path:
    """Where stacks live: $STACKWARS_IR_STACKS, else ~/.cache/stackwars-ir/stacks (never the repository)."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".cache" / "stackwars-ir" / "stacks")


def lock() -> Stack:
    return Stack(LOCK, None, (), versions())


def check_name(name: str) -> str:
    if name == LOCK or not _NAME.match(name or ""):
        raise StackwarsError(f"stack name {name!r}: " + ("'lock' is the project's own stack" if name == LOCK else
                                                          "letters, digits, '.', '_' and '-' only, 64 at most"),
                             fix="e.g. stackwars-ir stack add jax-0.9.2 jax==0.9.2 jaxlib==0.9.2")
    return name


def check_requirements(requirements: Iterable[str]) -> tuple[str, ...]:
    """Exact pins only (`jax==0.9.2`): StableHLO text changes between releases, so a stack names them."""
    reqs = tuple(requirements)
    if not reqs:
        raise StackwarsError("a stack needs at least one requirement", fix="e.g. jax==0.9.2 jaxlib==0.9.2")
    for r in reqs:
        if not _PIN.match(r):
            raise StackwarsError(f"requirement {r!r}: not an exact pin NAME==VERSION",
                                 fix="pin every package of a stack exactly, e.g. jax==0.9.2")
    names = {_PIN.match(r).group(1).lower().replace("_", "-") for r in reqs}
    if "jax" in names and "jaxlib" not in names:
        raise StackwarsError("jax is pinned without jaxlib: pip would pick a jaxlib of its own",
                             fix="pin both, e.g. jax==0.9.2 jaxlib==0.9.2")
    return reqs


def mismatches(requirements: Iterable[str], versions: dict) -> list[str]:
    """The pins (`NAME==VERSION` lines; others skipped) of recorded packages whose code that imports is
    another release, one line each: `torchax==0.0.13 is pinned, but 0.0.6 (torch_xla 2.9.0's copy) imports`."""
    out = []
    for line in requirements:
        m = _PIN.match(line.split("#")[0].strip())
        name = m.group(1).lower().replace("-", "_") if m else None
        if name in versions and versions[name] != m.group(2):
            out.append(f"{name}=={m.group(2)} is pinned, but {versions[name] or 'nothing'} imports")
    return out


def check_lock(path: Path) -> dict[str, str]:
    """The lock's pins of recorded packages checked against this environment (`make setup` runs this):
    what imports here, by package, when every one is at its pin; one line for what is not."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise StackwarsError(f"{path}: cannot read the lock: {e.strerror}", fix="run from the repository's root") from None
    here = lock().versions
    bad = mismatches(lines, here)
    if bad:
        raise StackwarsError(f"{path}: {'; '.join(bad)}",
                             fix="make setup reinstalls the pinned torchax after torch_xla (pip install --no-deps "
                                 f"--force-reinstall torchax==VERSION); for another package, pip install -r {path}")
    return {k: v for k, v in here.items() if v is not None}


def find(name: str | None) -> Stack:
    """The stack called `name` ('lock' or None: this process's); one line when there is none."""
    if name in (None, LOCK):
        return lock()
    check_name(name)
    record = home() / name / "stack.json"
    try:
        d = json.loads(record.read_text())
    except FileNotFoundError:
        known = ", ".join(s.name for s in list_stacks()) or "none but lock"
        raise StackwarsError(f"no stack {name!r} in {home()} (stacks: {known})",
                             fix=f"stackwars-ir stack add {name} jax==VERSION jaxlib==VERSION") from None
    except (OSError, ValueError) as e:
        raise StackwarsError(f"{record}: unreadable stack record: {e}", fix=f"stackwars-ir stack remove {name}, "
                                                                            "then add it again") from None
    return Stack.from_json(d, home() / name)


def list_stacks() -> list[Stack]:
    """Every stack made here, by name (the lock's not included)."""
    root = home()
    names = sorted(p.parent.name for p in root.glob("*/stack.json")) if root.is_dir() else []
    return [find(n) for n in names]


def add(name: str, requirements: Iterable[str], *, index_url: str | None = None, python: str | None = None,
        progress: Callable[[str], object] | None = None) -> Stack:
    """Make the stack: a virtual environment under home() with `requirements` (exact pins) and what
    its workers import, made with the interpreter `python` (default: this process's; jax 0.11 and later
    need Python 3.12); built in a temporary folder and moved in place only once it imports, so a
    failed or interrupted build leaves nothing. An existing stack of the same requirements is reused."""
    check_name(name)
    reqs = check_requirements(requirements)
    interpreter = _interpreter(python)
    target = home() / name
    if (target / "stack.json").exists():
        old = find(name)
        if old.requirements == reqs:
            return old
        raise StackwarsError(f"stack {name!r} exists with other requirements ({' '.join(old.requirements)})",
                             fix=f"stackwars-ir stack remove {name}, or pick another name")
    home().mkdir(parents=True, exist_ok=True)
    building = home() / f".{name}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        broken = _build(building, reqs, index_url, progress, interpreter[0])
        versions = _versions(building / "env" / "bin" / "python")
        record = {"format": STACK_FORMAT, "name": name, "requirements": list(reqs), "versions": versions,
                  **({"broken": broken} if broken else {}),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "python": interpreter[1]}
        (building / "stack.json").write_text(json.dumps(record, indent=1) + "\n")
        os.replace(building, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return find(name)


def _interpreter(python: str | None) -> tuple[str, str]:
    """(path, version) of the interpreter a stack is made with: a path or command, or a version (`3.12`:
    python3.12 on PATH, else pyenv's); one line when none runs."""
    if python is None:
        return sys.executable, ".".join(map(str, sys.version_info[:3]))
    if re.fullmatch(r"3\.\d+", python):
        pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
        candidates = [f"python{python}", *sorted(str(p) for p in pyenv.glob(f"{python}.*/bin/python{python}"))]
    else:
        candidates = [python]
    said = "not found"
    for c in candidates:
        exe = shutil.which(c) or c
        try:
            done = subprocess.run([exe, "-c", "import sys, venv; print('.'.join(map(str, sys.version_info[:3])))"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            said = f"cannot run it ({type(e).__name__})"
            continue
        if done.returncode == 0 and done.stdout.strip():
            return exe, done.stdout.strip()
        said = f"not a Python with venv (exit {done.returncode})"  # e.g. a pyenv shim of a version not selected
    raise StackwarsError(f"--python {python}: {said}",
                         fix="name a Python 3 interpreter or its version, e.g. --python 3.12 or --python /usr/bin/python3.12")


def _build(folder: Path, reqs, index_url, progress, python: str = sys.executable) -> dict:
    """Make the stack's environment in `folder`; what it holds but cannot import (torchax), with why.
    jax, flax, numpy, and torch and torch_xla where pinned, must import, or nothing is made."""
    from importlib import metadata

    def run(what: str, cmd: list) -> None:
        if progress:
            progress(what)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            said = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
            raise StackwarsError(f"stack: {what} failed: {said[-1].strip() if said else f'exit {done.returncode}'}",
                                 fix="check the pins exist for this Python (pip index versions jax)")

    run("creating the virtual environment", [python, "-m", "venv", str(folder / "env")])
    pinned = {re.split(r"[=<>]", r)[0].lower().replace("_", "-") for r in reqs}
    extra = [p for p in RESOLVED if p not in pinned]
    for p in PINNED_HERE:
        if p not in pinned:
            with contextlib.suppress(metadata.PackageNotFoundError):
                extra.append(f"{p}=={metadata.version(p)}")
    cmd = [str(folder / "env" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           *(["--index-url", index_url] if index_url else []), *reqs, *extra]
    run(f"pip install {' '.join(reqs)} (and {', '.join(extra)})", cmd)
    pin = next((r for r in reqs if _PIN.match(r).group(1).lower() == _TORCHAX), None)
    if pin and "torch-xla" in pinned:  # torch_xla's wheel carries a torchax copy that may have overwritten it
        run(f"reinstalling {pin} over torch_xla's copy", [str(folder / "env" / "bin" / "python"), "-m", "pip",
                                                           "install", "--quiet", "--disable-pip-version-check",
                                                           "--force-reinstall", "--no-deps",
                                                           *(["--index-url", index_url] if index_url else []), pin])
    imports = ["jax", "flax", "numpy"] + [p for p in TORCH_SIDE if p != _TORCHAX and p.replace("_", "-") in pinned]
    run(f"checking that {', '.join(imports)} import", [str(folder / "env" / "bin" / "python"), "-c",
                                                       f"import {', '.join(imports)}"])
    broken = {}
    # a route of its own (pinned, or torch_xla's copy): without it the stack still has torch_xla's
    if _TORCHAX in pinned or "torch-xla" in pinned:
        done = subprocess.run([str(folder / "env" / "bin" / "python"), "-c", f"import {_TORCHAX}"], capture_output=True,
                              text=True)
        said = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        if done.returncode:
            why = re.sub(r" \(/[^)]*\)", "", said[-1] if said else f"exit {done.returncode}")  # no path of this machine
            broken[TORCHAX.name] = why
            if progress:
                progress(f"{_TORCHAX} does not import in this stack ({why}): it has no {TORCHAX.name} route")
    return broken


def _versions(python: Path) -> dict:
    """What the stack's environment holds, read there by files.distribution_version (stdlib only)."""
    import stackwars_ir

    here = str(Path(stackwars_ir.__file__).parent.parent)
    code = (f"import json, sys; sys.path.insert(0, {here!r}); from stackwars_ir.common.files import distribution_version as v; "
            f"print(json.dumps({{p: v(p) for p in {list(RECORDED)!r}}}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def remove(name: str) -> Path:
    """Delete the stack's folder; one line when there is no such stack."""
    stack = find(check_name(name))
    shutil.rmtree(stack.root)
    return stack.root


# Each stack's workers run this project's own code, copied into the stack (code/) and refreshed when
# it changed: the parent and its workers exchange this code's pickled values, so they must agree.
def code_dir(stack: Stack) -> Path:
    """The stack's copy of stackwars_ir (its `models` adapters included), the same as this process's."""
    import stackwars_ir

    src, adapters = Path(stackwars_ir.__file__).parent, Path(models.__file__).parent
    digest = _tree_digest([src, adapters])
    code = stack.root / "code"
    stamp = code / ".digest"
    if stamp.is_file() and stamp.read_text() == digest:
        return code
    fresh = stack.root / f".code-{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(src, fresh / "stackwars_ir", ignore=ignore)
    if adapters.parent != src:  # the source tree keeps the adapters beside the package (pyproject's package-dir)
        shutil.rmtree(fresh / "stackwars_ir" / "models", ignore_errors=True)
        shutil.copytree(adapters, fresh / "stackwars_ir" / "models", ignore=ignore)
    (fresh / ".digest").write_text(digest)
    old = stack.root / f".code-old-{os.getpid()}"
    try:
        if code.exists():
            os.replace(code, old)
        os.replace(fresh, code)
    except OSError:  # another process put its copy in place meanwhile: the same code, when the digests agree
        if not (stamp.is_file() and stamp.read_text() == digest):
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(fresh, ignore_errors=True)
    return code


def _tree_digest(roots) -> str:
    h = hashlib.sha256()
    for root in roots:
        for p in sorted(root.rglob("*.py")):
            if "__pycache__" not in p.parts:
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def worker_command(stack: Stack, boot: str) -> tuple[list, dict]:
    """The command and environment of a worker in `stack` running `boot` (Python code)."""
    code = str(code_dir(stack))
    env = dict(os.environ)
    env["PYTHONPATH"] = code
    # The copy first, the working directory not at all: a stackwars_ir folder there (this checkout)
    # would be imported instead, with this process's adapters but not the stack's packages.
    boot = f"import sys; sys.path[:] = [{code!r}] + [p for p in sys.path if p and p != {code!r}]; {boot}"
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")  # "PyTorch was not found": the stack has none, by design
    if stack.versions.get("xla_cpu_pjrt"):  # TorchTPU's device: the plugin named before torch autoloads TorchTPU
        plugins = sorted(stack.root.glob("env/lib/python*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"))
        if plugins:
            env["TPU_LIBRARY_PATH"] = str(plugins[0])
        # its allocator warning (tcmalloc not preloaded), torch's warning on every non-leaf .grad TorchTPU
        # reads while it traces, and the plugin's start-up log say nothing about the IR
        env["PYTHONWARNINGS"] = ",".join(w for w in (env.get("PYTHONWARNINGS"), "ignore:<TorchTpu/Performance/TcMalloc/") if w)
        env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("PYTHONHOME", None)
    return [stack.python, "-c", boot], env

