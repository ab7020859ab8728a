"""Model adapters: one file each (`gpt2.py`, ...) builds a PyTorch model, its Flax NNX twin on the same weights, and inputs.

The catalogue is every adapter file's `ENTRY`, read without importing the file (so `stackwars-ir
models` is instant): the files in this folder, then those named by STACKWARS_IR_ADAPTERS (files or
folders, separated by the path separator; `stackwars-ir --adapters PATH` sets it). An adapter file
defines `ENTRY = Entry(...)` (its data: sizes, default shapes, loss, what cannot export it, and an
optional `roles` table), `torch_model(size)`, `inputs(size, batch, seq, rng)` and
`jax_model(size, weights)`. A `.toml` file in those folders holds models as data instead (a
transformers model type, its configuration and input kind: read_data_entries). docs/adapters.md is
the protocol.
"""
from __future__ import annotations

import ast
import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ADAPTERS_ENV = "STACKWARS_IR_ADAPTERS"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    """What an adapter offers: its sizes (config values) and default input shape per size."""

    name: str
    description: str
    sizes: dict = field(repr=False)
    shapes: dict = field(repr=False)  # size -> {"batch": N, "seq": N}
    seq_meaning: str = "sequence length"
    unsupported: dict = field(default_factory=dict, repr=False)  # exporter -> why it cannot export this model
    # Training step's loss: "lm" (next-token cross-entropy through the tied embedding), "mse" (mean
    # squared error of the output against a seeded normal target), None (nothing to train).
    loss: str | None = "mse"
    train_unsupported: dict = field(default_factory=dict, repr=False)  # exporter -> why no training step
    # Module-path words the differ's generic table does not know, and their role ("output": "mlp" for
    # BERT's layer.N.output): consulted, innermost word first, where no generic word names a role.
    roles: dict = field(default_factory=dict, repr=False)
    workload: bool = False  # one of seed 002's basic workloads (no layers)
    # The PyTorch model's list of identical layers (its attribute path: "layers", "h"), which the
    # capture's --scan-layers and --remat apply to; the JAX twin runs the same list through
    # models._nnx.run_layers. None: the adapter offers neither.
    layers: str | None = None
    # --mesh with a tp axis: the dimension each parameter is split on for tensor parallelism, by the
    # ending of its PyTorch name ({"q_proj.weight": 0, "o_proj.weight": 1}: Linear's [out, in] split
    # on its output features for q/k/v/gate/up, on its input features for o/down). None: no tp axis.
    tensor_parallel: dict | None = None
    path: str = field(default="", repr=False, compare=False)  # the adapter file (set by the catalogue)
    # A model written as data (a table of an adapters folder's .toml file: read_data_entries): the
    # transformers model type and its input kind, from which adapter() builds the module. None: a .py file.
    data: dict | None = field(default=None, repr=False, compare=False)


# What an ENTRY may be written with: it is evaluated without importing its file.
_ENTRY_NAMES = {"Entry": Entry, "dict": dict, "list": list, "tuple": tuple, "True": True, "False": False,
                "None": None}


def read_entry(path: Path) -> Entry:
    """The `ENTRY = Entry(...)` of one adapter file, evaluated alone (literals, dict/list/tuple and
    Entry only), so the catalogue imports no framework. A file that is not an adapter: one line."""
    from stackwars_ir.common.errors import StackwarsError

    fix = "an adapter file assigns ENTRY = Entry(name, description, sizes, shapes, ...) with literals (docs/adapters.md)"
    try:
        source = path.read_text()
        tree = ast.parse(source, str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise StackwarsError(f"{path}: cannot read this adapter file: {e}", fix=fix) from None
    except SyntaxError as e:
        raise StackwarsError(f"{path}:{e.lineno}: not Python: {e.msg}", fix="correct the adapter file") from None
    node = next((n for n in tree.body if isinstance(n, ast.Assign)
                 and [getattr(t, "id", None) for t in n.targets] == ["ENTRY"]), None)
    if node is None:
        raise StackwarsError(f"{path}: no ENTRY = Entry(...) at the top level", fix=fix)
    for n in ast.walk(node.value):
        if isinstance(n, ast.Name) and n.id not in _ENTRY_NAMES:
            raise StackwarsError(f"{path}:{n.lineno}: ENTRY uses {n.id!r}, which is only known once the file runs",
                                 fix="write ENTRY with literals, dict(), list(), tuple() and Entry() only: the "
                                     "catalogue reads it without importing the file")
    try:
        value = eval(compile(ast.Expression(node.value), str(path), "eval"),
                     {"__builtins__": {}, **_ENTRY_NAMES})
    except Exception as e:
        raise StackwarsError(f"{path}:{node.lineno}: ENTRY does not evaluate: {type(e).__name__}: {e}",
                             fix=fix) from None
    if not isinstance(value, Entry):
        raise StackwarsError(f"{path}:{node.lineno}: ENTRY is a {type(value).__name__}, not an Entry", fix=fix)
    if value.name != path.stem:
        raise StackwarsError(f"{path}:{node.lineno}: ENTRY names the model {value.name!r}, the file {path.stem!r}",
                             fix=f"rename the file {value.name}.py, or the model {path.stem!r}")
    if not value.sizes or set(value.shapes) != set(value.sizes):
        raise StackwarsError(f"{path}:{node.lineno}: ENTRY's sizes and shapes must name the same sizes",
                             fix="give every size a default shape: {'tiny': dict(batch=2, seq=16)}")
    from dataclasses import replace

    return replace(value, path=str(path))


# The input kinds a data entry may name: models._hf's functions that draw them.
DATA_INPUTS = {"tokens": "token_ids", "pixels": "pixels"}


def read_data_entries(path: Path) -> list[Entry]:
    """The models of a .toml adapters file: one table each, `[name]` with `type` (transformers'
    model type: AutoModel builds it from the configuration, random weights), `inputs` ("tokens" or
    "pixels"), `description`, and each size's configuration and default shape (`tiny = {...}`,
    `shapes.tiny = {batch = 2, seq = 16}`); any other key is an Entry field (`seq_meaning`, `loss`,
    `roles`, ...). A table that is not one: one line naming the file and the table."""
    import dataclasses
    import tomllib

    from stackwars_ir.common.errors import StackwarsError

    fix = "write each model as [name] with type, inputs, description, its sizes' configurations and shapes (docs/adapters.md)"
    try:
        tables = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise StackwarsError(f"{path}: cannot read this adapters file: {e}", fix=fix) from None
    except tomllib.TOMLDecodeError as e:
        raise StackwarsError(f"{path}: not TOML: {e}", fix="correct the adapters file") from None
    fields = {f.name for f in dataclasses.fields(Entry)} - {"name", "description", "sizes", "shapes", "path", "data"}
    out = []
    for name, t in tables.items():
        if not isinstance(t, dict):
            raise StackwarsError(f"{path}: {name!r} is not a table", fix=fix)
        shapes = t.get("shapes", {})
        sizes = {k: v for k, v in t.items() if k in shapes}
        unknown = set(t) - {"type", "inputs", "description", "shapes"} - set(sizes) - fields
        if not isinstance(t.get("type"), str) or t.get("inputs") not in DATA_INPUTS or not sizes or unknown:
            said = ("no model type" if not isinstance(t.get("type"), str)
                    else f"inputs {t.get('inputs')!r} is none of {', '.join(DATA_INPUTS)}"
                    if t.get("inputs") not in DATA_INPUTS else "no size with a shape" if not sizes
                    else f"unknown key {sorted(unknown)[0]!r}")
            raise StackwarsError(f"{path}: [{name}]: {said}", fix=fix)
        extra = {k: v for k, v in t.items() if k in fields}
        out.append(Entry(name, t.get("description", t["type"]), sizes, shapes, path=str(path),
                         data={"type": t["type"], "inputs": t["inputs"]}, **extra))
    return out


def _data_adapter(e: Entry) -> ModuleType:
    """The adapter module of a data entry: transformers' AutoModel of its type on the size's
    configuration (models._hf.auto_model), inputs drawn as its kind says; no JAX twin."""
    module = ModuleType(f"stackwars_ir_adapters.{e.name}", f"{e.name}: {e.description} (from {Path(e.path).name})")
    module.__file__ = e.path
    module.ENTRY, module.SIZES = e, e.sizes

    def torch_model(size: str):
        from stackwars_ir.models._hf import auto_model

        return auto_model(e.data["type"], e.sizes[size])

    def inputs(size: str, batch: int, seq: int, rng):
        from stackwars_ir.models import _hf

        return getattr(_hf, DATA_INPUTS[e.data["inputs"]])(e.sizes[size], batch, seq, rng)

    module.torch_model, module.inputs = torch_model, inputs
    return module


def _adapter_files(in_folders: set | None = None) -> list[Path]:
    """Every adapter file: this package's, then each STACKWARS_IR_ADAPTERS item's (a file, or a folder's
    .py and .toml files); `in_folders` collects the resolved files found by listing a folder."""
    from stackwars_ir.common.errors import StackwarsError

    files = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_"))
    for item in filter(None, os.environ.get(ADAPTERS_ENV, "").split(os.pathsep)):
        p = Path(item).expanduser()
        if p.is_dir():
            listed = sorted(q for q in [*p.glob("*.py"), *p.glob("*.toml")] if not q.name.startswith("_"))
            files += listed
            if in_folders is not None:
                in_folders.update(q.resolve() for q in listed)
        elif p.suffix in (".py", ".toml") and p.is_file():
            files.append(p)
        else:
            why = "a file, but not a .py or .toml adapter file" if p.is_file() else "no adapter file or folder there"
            raise StackwarsError(f"{ADAPTERS_ENV}: {item}: {why}",
                                 fix="name .py or .toml adapter files or folders that hold them (--adapters PATH)")
    return list(dict.fromkeys(p.resolve() for p in files))  # a file named twice is read once


_CACHE: dict = {}
_SKIPPED: dict = {}  # STACKWARS_IR_ADAPTERS value -> ((file, why), ...): folder files that could not be read


def adapters_env(paths) -> str:
    """STACKWARS_IR_ADAPTERS with `paths` (--adapters) added after what it holds, each checked here
    and made absolute (workers may run elsewhere)."""
    from stackwars_ir.common.errors import StackwarsError

    for a in paths:
        p = Path(a).expanduser()
        if not (p.is_dir() or (p.suffix in (".py", ".toml") and p.is_file())):
            why = "a file, but not a .py or .toml adapter file" if p.is_file() else "no adapter file or folder there"
            raise StackwarsError(f"--adapters {a}: {why}",
                                 fix="name a .py or .toml adapter file, or a folder that holds them (docs/adapters.md)")
    known = [p for p in os.environ.get(ADAPTERS_ENV, "").split(os.pathsep) if p]
    given = [str(Path(a).expanduser().resolve()) for a in paths]
    return os.pathsep.join(dict.fromkeys([*known, *given]))


def catalog() -> dict[str, Entry]:
    """Every adapter's entry, by name: this folder's, then STACKWARS_IR_ADAPTERS' (read once per value)."""
    key = os.environ.get(ADAPTERS_ENV, "")
    if key not in _CACHE:
        from stackwars_ir.common.errors import StackwarsError

        found: dict[str, Entry] = {}
        skipped = []
        in_folders: set = set()
        for path in _adapter_files(in_folders):
            try:
                entries = read_data_entries(path) if path.suffix == ".toml" else [read_entry(path)]
            except StackwarsError as e:
                if path not in in_folders:  # a file named on its own: its error is the command's
                    raise
                skipped.append((path, e.one_line()))  # one broken file in a folder: the others stay usable
                continue
            for e in entries:
                if e.name in found:
                    raise StackwarsError(f"{path}: a model named {e.name!r} exists already ({found[e.name].path})",
                                         fix="give the adapter file another name")
                found[e.name] = e
        _CACHE[key] = found
        _SKIPPED[key] = tuple(skipped)
    return _CACHE[key]


def skipped() -> tuple:
    """((file, why), ...): the files of --adapters folders that hold no readable adapter (skipped)."""
    catalog()
    return _SKIPPED.get(os.environ.get(ADAPTERS_ENV, ""), ())


def __getattr__(name: str):
    """CATALOG, ADAPTERS, TRAINABLE and WORKLOADS, from the adapter files found now."""
    if name == "CATALOG":
        return catalog()
    if name == "ADAPTERS":
        return tuple(catalog())
    if name == "TRAINABLE":
        return tuple(n for n, e in catalog().items() if e.loss)
    if name == "WORKLOADS":
        return tuple(n for n, e in catalog().items() if e.workload)
    raise AttributeError(name)


SIZE_NAMES = ("tiny", "base")  # most adapters'; an entry's own sizes are its `sizes` keys


def entry(name: str) -> Entry:
    from stackwars_ir.common.errors import StackwarsError

    known = catalog()
    if name not in known:
        import difflib

        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise StackwarsError(f"unknown model {name!r}",
                             fix=f"{hint}choose one of: {', '.join(known)}; or, for a model of your own, name "
                                 f"its adapter file or folder with --adapters PATH (docs/adapters.md)")
    return known[name]


def exporters_for(name: str, exporters, step: str = "forward") -> tuple[tuple, dict]:
    """The exporters of `exporters` that can export model `name` (its training step, for "train"),
    and why the others cannot."""
    unsupported = {**entry(name).unsupported, **(entry(name).train_unsupported if step == "train" else {})}
    return tuple(e for e in exporters if e not in unsupported), \
        {e: unsupported[e] for e in exporters if e in unsupported}


def adapter(name: str) -> ModuleType:
    """The adapter module for `name` (imports jax and flax): this package's, or a user's file."""
    e = entry(name)
    if Path(e.path).parent == HERE:
        return importlib.import_module(f"{__name__}.{name}")
    import sys

    module_name = f"stackwars_ir_adapters.{name}"
    if e.data is not None:
        return sys.modules.setdefault(module_name, _data_adapter(e))
    if module_name not in sys.modules:
        from importlib import util

        spec = util.spec_from_file_location(module_name, e.path)
        module = util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[module_name]
            raise
    return sys.modules[module_name]
