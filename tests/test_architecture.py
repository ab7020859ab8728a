"""The stages' import arrows point down only (docs/architecture.md): read from every module's source."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each stage's level: a module may import its own stage and any lower level, never a higher one, and
# never another stage of its own level (so no two stages can import each other).
LEVELS = {
    "__init__": 0,
    "common": 1,  # what every stage uses: errors, files, progress, the route and target tables, the runtime
    "models": 2,
    "ir": 3,
    "isolate": 4,  # running elsewhere: a task in a killable worker, in this environment or a version stack's
    "workload": 5,
    "capture": 6, "diff": 6,
    "bench": 7,
    "sweep": 8, "versions": 8, "ablate": 8,  # model runs and grids; library versions compared; ablations: none imports another
    "report": 9,
    "cli": 10,
}
# Inside the stages that gather several tenants, each module's level, under the same rule.
INNER = {
    "common": {"errors": 0, "resources": 0, "files": 1, "wire": 1, "textfmt": 1, "progress": 1, "runtime": 1,
               "runstats": 1, "targets": 1, "routes": 1, "hostmem": 1},
    "isolate": {"stacks": 0, "task": 1},
    "cli": {"shell": 0, "stack": 1, "causes": 1, "commands": 2, "reference": 3, "__main__": 4},
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


def _typing_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (imports for annotations alone)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for st in node.body for n in ast.walk(st)}
    return out


def _imports(path: Path, package: tuple[str, ...], typing: bool = True):
    """(line, imported module) for every import in the file, relative ones resolved, nested ones too;
    `typing=False`: not those made for annotations alone (under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = set() if typing else _typing_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def test_arrows_inside_a_gathered_stage_point_down_only():
    wrong, unknown = [], set()
    for path, module, package in _modules():
        here = _stage(module)
        if here not in INNER or path.name == "__init__.py":
            continue
        me = module.split(".")[2]
        unknown |= {me} - set(INNER[here])
        for line, target in _imports(path, package):
            parts = target.split(".")
            if _stage(target) == here and len(parts) > 2 and parts[2] in INNER[here] and parts[2] != me \
                    and INNER[here][parts[2]] >= INNER[here].get(me, 0):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {me} imports {parts[2]}")
    assert unknown == set(), "a new module in a gathered stage: give it a level in INNER"
    assert wrong == []


def test_the_check_sees_an_upward_arrow(tmp_path):
    # The reader itself: relative imports resolved from a nested module, inside functions too.
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from ..report.text import bench_text\n    from .. import capture\n")
    got = {m for _, m in _imports(path, ("stackwars_ir", "bench"))}
    assert {"stackwars_ir.report.text", "stackwars_ir.capture"} <= got
    assert _stage("stackwars_ir.report.text") == "report" and LEVELS["report"] > LEVELS["bench"]


def _sources():
    """(path, dotted module, package) of every project module: the library, the adapters, the study
    (study/, a package beside the library) and benchmarks/."""
    yield from _modules()
    for path in sorted((ROOT / "study").rglob("*.py")):
        parts = ("study",) + path.relative_to(ROOT / "study").with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        yield path, ".".join(parts), parts if path.name == "__init__.py" else parts[:-1]
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        parts = path.relative_to(ROOT / "benchmarks").with_suffix("").parts
        yield path, ".".join(parts), parts[:-1]


def _project_modules() -> set[str]:
    return {module for _, module, _ in _sources()}


def private_imports() -> list[str]:
    """Every `from M import _name` where M is a project module and `_name` is a name in it, not a
    module of its own (models/_contract.py is a module: importing it is fine): a private name crossing
    files, which ties the two files' insides together."""
    known = _project_modules()
    out = []
    for path, module, package in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target not in known:
                continue
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not name.startswith("__") and f"{target}.{name}" not in known:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}.{name}")
    return out


def _face_sources() -> dict[str, str]:
    """`stackwars_ir.P.name` -> the module P's face imports `name` from (faces only re-export)."""
    out = {}
    for path, module, package in _modules():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                source = ".".join(list(package[:len(package) - node.level + 1]) + ([node.module] if node.module else []))
                for alias in node.names:
                    out[f"{module}.{alias.asname or alias.name}"] = source
    return out


def circles() -> list[list[str]]:
    """The circles of imports between a stage's own modules (the ones inside functions too): a module
    that imports a name from its package's face counts as importing the module the face takes it from.
    An import for annotations alone (under `if TYPE_CHECKING:`) runs never, so it closes no circle;
    it still counts as an arrow between stages (arrows())."""
    import networkx as nx

    known = {module for _, module, _ in _modules()}
    faces = _face_sources()
    graph = nx.DiGraph()
    for path, module, package in _modules():
        graph.add_node(module)
        for _, target in _imports(path, package, typing=False):
            target = faces.get(target, target)
            if target in known and target != module and _stage(target) == _stage(module) \
                    and not target.endswith(".__init__"):
                if module.startswith(target + "."):  # the package's own face, which re-exports
                    continue
                graph.add_edge(module, target)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_no_private_name_crosses_files():
    assert private_imports() == []


def test_the_private_check_sees_one(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "a.py").write_text("def _hidden():\n    pass\n")
    (tmp_path / "benchmarks" / "b.py").write_text("from a import _hidden\n")
    (tmp_path / "stackwars_ir").mkdir()
    (tmp_path / "models").mkdir()
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert private_imports() == ["benchmarks/b.py:1: a._hidden"]


# Circles known and tolerated: none. (Issue 52 removed the last, bench's worker switching on string
# kinds: a worker's task is now the owning stage's function, isolate.Task.) This list may only shrink.
KNOWN_CIRCLES: list = []


def test_no_new_circle_inside_a_stage():
    found = circles()
    assert [c for c in found if c not in KNOWN_CIRCLES] == [], "a circle of imports inside a stage"
    assert found == KNOWN_CIRCLES, "a known circle is gone or changed: shrink KNOWN_CIRCLES to what is left"


def test_package_faces_are_short():
    # A package's __init__.py re-exports; its engine lives in named modules (issue 52): a face over 60
    # lines is code a reader cannot find by its file name.
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "stackwars_ir").rglob("__init__.py")
            if (n := len(p.read_text().splitlines())) > 60}
    assert long == {}


def test_every_module_says_in_one_short_line_what_it_is_for():
    # STYLE: a module's docstring says in one line what the module is for (issue 76: under 100
    # characters, so a listing of first lines reads as the map of the package).
    missing, long = [], {}
    for p in sorted((ROOT / "stackwars_ir").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(p.read_text()), clean=False)
        if not doc or not doc.strip():
            missing.append(str(p.relative_to(ROOT)))
        elif len(first := doc.splitlines()[0]) > 100:
            long[str(p.relative_to(ROOT))] = len(first)
    assert missing == [] and long == {}


def test_no_library_file_is_over_600_lines():
    # Issue 76: a file past 600 lines holds several tenants (two segmentation strategies, every native
    # runtime, a matcher and its words); each gets a room of its own.
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "stackwars_ir").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_a_native_runtime_is_one_module_and_one_row():
    # Issue 76: each native runtime lives in bench/runtimes/ (one module each) and is listed once,
    # in bench/native.py's RUNTIMES, the steps it times read from its module.
    from stackwars_ir.bench import native

    folder = ROOT / "stackwars_ir" / "bench" / "runtimes"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "shared"}
    assert {r.code.__name__.rsplit(".", 1)[-1] for r in native.RUNTIMES} == modules
    for r in native.RUNTIMES:
        assert r.steps, f"{r.name}: its module has neither forward nor train"


def test_the_library_never_imports_the_study():
    # Issue 76: the study's write-up (study/: the findings pages) sits beside the library and uses its
    # public API; the library, a user's tool, carries no study (an import inside a function too).
    into = [f"{path.relative_to(ROOT)}:{line}" for path, module, package in _modules()
            for line, target in _imports(path, package) if target == "study" or target.startswith("study.")]
    assert into == []


def test_the_findings_scripts_run_grids_and_leave_pages_to_report():
    # Issue 52: the study's drivers (study/run/, issue 76: once benchmarks/findings*.py) run a grid and
    # call study/, which renders every page from its records; a heading or a table written in a driver
    # is a page rendered outside the study's renderers.
    rendered = []
    drivers = sorted((ROOT / "study" / "run").glob("*.py"))
    assert len(drivers) >= 8 and not list((ROOT / "benchmarks").glob("findings*.py"))
    for path in drivers:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    (node.value.lstrip("\n").startswith("#") or "| ---" in node.value or "|---" in node.value):
                rendered.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:40]!r}")
    assert rendered == []


# The modules `stackwars-ir --help` imports: their project imports stay inside the functions that use
# them, so --help loads no stage it does not show (tests/test_docs.py keeps the frameworks out).
HELP_PATH = {"stackwars_ir/common/errors.py", "stackwars_ir/common/progress.py", "stackwars_ir/common/routes.py",
             "stackwars_ir/common/targets.py", "stackwars_ir/versions/__init__.py", "stackwars_ir/versions/metric.py"}


def test_a_library_modules_project_imports_are_at_its_top():
    # Issue 76: a module's neighbours show in its first lines. Inside a function only in the command
    # line (cli/) and the modules its --help imports (HELP_PATH), and for the model catalogue
    # (`models`: its adapters import torch and jax at their top, which no stage may load by importing).
    inside = []
    for path, module, package in _modules():
        rel = str(path.relative_to(ROOT))
        if _stage(module) in ("cli", "models") or rel in HELP_PATH:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node is not fn:
                    base = list(package[:len(package) - node.level + 1]) if node.level else []
                    target = ".".join(base + ([node.module] if node.module else []))
                    names = {f"{target}.{a.name}" for a in node.names}
                    if _stage(target) not in (None, "models") and not any(_stage(n) == "models" for n in names):
                        inside.append(f"{rel}:{node.lineno}: {target}")
    assert inside == []
    # and what --help imports is that list (and common/'s face, which holds no code)
    import subprocess
    import sys

    code = ("import sys, stackwars_ir.cli.commands\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('stackwars_ir.'))))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    files = {m: (ROOT / m.replace(".", "/") / "__init__.py") if (ROOT / m.replace(".", "/")).is_dir()
             else ROOT / (m.replace(".", "/") + ".py") for m in got}
    assert {str(f.relative_to(ROOT)) for m, f in files.items()
            if _stage(m) != "cli" and m != "stackwars_ir.common"} == HELP_PATH


def test_every_public_signature_is_annotated():
    # STYLE: types on every public signature (issue 76 found 332 public functions with an unannotated
    # parameter). A public function or method (no leading underscore; __init__ and __call__ too):
    # every parameter but self and cls annotated.
    bare = []
    for path, _, _ in _modules():
        if path.parts[-2] == "models" or "stackwars_ir" not in path.parts:
            continue

        def visit(node: ast.AST, in_class: bool) -> None:
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, ast.ClassDef) and not ch.name.startswith("_"):
                    visit(ch, True)
                elif isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        (not ch.name.startswith("_") or ch.name in ("__init__", "__call__")):
                    a = ch.args
                    params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]
                    if in_class and params and params[0].arg in ("self", "cls"):
                        params = params[1:]
                    missing = [p.arg for p in params if p.annotation is None]
                    if missing:
                        bare.append(f"{path.relative_to(ROOT)}:{ch.lineno}: {ch.name}({', '.join(missing)})")

        visit(ast.parse(path.read_text()), False)
    assert bare == []


def test_the_library_dispatches_on_types_not_command_names_and_reads_no_result_dicts():
    # Issue 76: jobs own their work (a method per job type) and records hold typed results; a comparison
    # of a command's name with a string, or a record's `.result` read as a dict (`.get`, `[...]`), is the
    # dispatch and the untyped read that round removed.
    def named_command(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == "command") or \
            (isinstance(node, ast.Attribute) and node.attr == "command")

    found = []
    for path, _, _ in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            rel = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Compare) and any(
                    named_command(side) and any(isinstance(o, ast.Constant) and isinstance(o.value, str)
                                                for o in [node.left, *node.comparators])
                    for side in [node.left, *node.comparators]):
                found.append(f"{rel}: {ast.unparse(node)}")
            target = node.value if isinstance(node, ast.Subscript) else \
                node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" else None
            if isinstance(target, ast.Attribute) and target.attr == "result":
                found.append(f"{rel}: {ast.unparse(node)}")
    assert found == []
