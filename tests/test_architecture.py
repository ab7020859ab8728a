"""The stages' import arrows point down only (docs/architecture.md): read from every module's source."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each stage's level: a module may import its own stage and any lower level, never a higher one, and
# never another stage of its own level (so no two stages can import each other).
LEVELS = {
    "__init__": 0, "errors": 0,
    "files": 1, "wire": 1, "textfmt": 1, "progress": 1, "runtime": 1, "runstats": 1,  # neutral helpers of several stages
    "models": 2,
    "ir": 3, "stacks": 3,
    "workload": 4,
    "capture": 5, "diff": 5,
    "bench": 6,
    "sweep": 7,
    "report": 8,
    "shell": 9,
    "cli_stack": 10,
    "cli": 11,
    "docs": 12,
}


_CHILDREN = {p.stem for p in (ROOT / "stackwars_ir").glob("*.py")} | \
    {p.name for p in (ROOT / "stackwars_ir").iterdir() if (p / "__init__.py").exists()} | \
    {"models"}  # stackwars_ir.models is the top-level models/ folder (pyproject's package-dir)


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "models":
        return "models"
    if parts[0] != "stackwars_ir":
        return None
    # `from . import __version__`: a name of the package itself, not a stage
    return parts[1] if len(parts) > 1 and parts[1] in _CHILDREN else "__init__"


def _modules():
    for path in sorted((ROOT / "stackwars_ir").rglob("*.py")) + sorted((ROOT / "models").glob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        package = parts[:-1] if parts[-1] != "__init__" or len(parts) == 1 else parts[:-1]
        yield path, ".".join(parts), package


def _imports(path: Path, package: tuple[str, ...]):
    """(line, imported module) for every import in the file, relative ones resolved, nested ones too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, module
            for alias in node.names:  # `from . import capture`: the name may be a stage itself
                yield node.lineno, f"{module}.{alias.name}"


def arrows() -> list[tuple[str, int, str, str]]:
    """Every import between two stages: (file, line, from stage, to stage)."""
    out = []
    for path, module, package in _modules():
        here = _stage(module)
        for line, target in _imports(path, package):
            there = _stage(target)
            if there is not None and there != here:
                out.append((str(path.relative_to(ROOT)), line, here, there))
    return out


def test_every_package_is_installed():
    # A stage folder missing from pyproject's packages works in the editable install and nowhere else.
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.relative_to(ROOT).parts[:-1]) for p in (ROOT / "stackwars_ir").rglob("__init__.py")}
    assert folders - listed == set()


def test_every_stage_has_a_level():
    stages = {s for _, _, here, there in arrows() for s in (here, there)} | _CHILDREN
    assert stages - set(LEVELS) == set(), "a new stage: give it a level here and a place in docs/architecture.md"


def test_arrows_point_down_only():
    wrong = [f"{f}:{line}: {a} (level {LEVELS[a]}) imports {b} (level {LEVELS[b]})"
             for f, line, a, b in arrows() if LEVELS[b] >= LEVELS[a]]
    assert wrong == []


def test_the_check_sees_an_upward_arrow(tmp_path):
    # The reader itself: relative imports resolved from a nested module, inside functions too.
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from ..report.text import bench_text\n    from .. import capture\n")
    got = {m for _, m in _imports(path, ("stackwars_ir", "bench"))}
    assert {"stackwars_ir.report.text", "stackwars_ir.capture"} <= got
    assert _stage("stackwars_ir.report.text") == "report" and LEVELS["report"] > LEVELS["bench"]
