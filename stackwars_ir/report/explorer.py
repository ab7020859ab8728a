"""Model Explorer overlays: the diff's blocks and op-level statuses as node data on its own node ids."""
from __future__ import annotations

import json
from pathlib import Path

from ..common.errors import StackwarsError
from ..common.files import write_folder
from ..diff import DiffReport
from ..diff.result import DiffResult
from ..ir import Module

INSTALL_HINT = "pip install ai-edge-model-explorer==0.1.34 (it is in requirements.lock: make setup)"
# Node colors by op-level status (Model Explorer takes any CSS color per node).
STATUS_COLORS = {"matched": "#cfe8cf", "changed": "#ffe08a", "rewritten": "#ffb366", "only": "#ff8a80",
                 "unaligned": "#c8b3f0"}
STATUS_VALUES = {"matched": 0, "changed": 1, "rewritten": 2, "only": 3, "unaligned": 4}


def check_target(folder: Path) -> None:
    """What `write_explorer` needs, checked before any work: a new or empty folder, Model Explorer
    importable; StackwarsError otherwise."""
    import importlib.util

    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise StackwarsError(f"{folder}: exists and is not an empty folder",
                             fix="name a new folder for the Model Explorer overlays")
    try:
        installed = importlib.util.find_spec("model_explorer") is not None
    except (ImportError, ValueError):  # a module entry set to None, a broken install
        installed = False
    if not installed:
        raise StackwarsError("Model Explorer is not installed (ai-edge-model-explorer)", fix=INSTALL_HINT)


def explorer_graphs(mlir_path: Path) -> dict:
    """Model Explorer's graph of a .mlir file, by its own MLIR adapter: graph id (the function) ->
    {node id: label}. StackwarsError with the install hint when Model Explorer is missing."""
    try:
        from model_explorer.builtin_mlir_adapter import BuiltinMlirAdapter
    except ImportError:
        raise StackwarsError("Model Explorer is not installed (ai-edge-model-explorer)", fix=INSTALL_HINT) from None
    graphs = BuiltinMlirAdapter().convert(str(mlir_path), {})["graphCollections"]
    out: dict = {}
    for collection in graphs:
        for g in collection.graphs:
            out[g["id"]] = {n["id"]: n["label"] for n in g["nodes"]}
    return out


def node_ids(module: Module, graphs: dict) -> dict:
    """Op id -> (graph id, node id). Model Explorer numbers each function's ops in order, regions'
    ops and the return included (`Outputs`); every node is checked against the op's name, and a
    file where they disagree is refused rather than overlaid on the wrong nodes."""
    out = {}
    for fn in module.funcs:
        nodes = graphs.get(fn.name)
        if nodes is None:
            raise StackwarsError(f"{module.source}: Model Explorer shows no graph for function @{fn.name}",
                                 fix=f"check the installed Model Explorer version ({INSTALL_HINT})")
        for k, op_id in enumerate(fn.ops):
            name = module.ops[op_id].name
            label = nodes.get(str(k))
            if label != name and not (label == "Outputs" and name.endswith("return")):
                raise StackwarsError(
                    f"{module.source}: Model Explorer's node {k} of @{fn.name} is {label!r}, the op there is {name}",
                    fix=f"the overlay needs the Model Explorer this stackwars-ir was tested with ({INSTALL_HINT})")
            out[op_id] = (fn.name, str(k))
    return out


def side_statuses(report: DiffReport, result: DiffResult, side: str) -> tuple[dict, dict, dict]:
    """For one side ("a" or "b"): op id -> status, op id -> block text, op id -> the block's op-count
    difference (sum of |B - A| over op names; unaligned blocks: their op count)."""
    status, block, delta = {}, {}, {}
    for d, blk in zip(report.blocks, result.blocks):
        own = getattr(d, side)
        size = sum(abs(v) for v in blk.delta.values())
        statuses = blk.op_diff.status_of()[0 if side == "a" else 1] if blk.op_diff else {}
        for op, _ in own.ops:
            s = statuses.get(op.id)
            if s is None:
                continue
            s = "only" if s.startswith("only") else s
            # An op of a called function shows in every block that calls it: the first one speaks.
            status.setdefault(op.id, s)
            block.setdefault(op.id, f"{blk.label} ({blk.role})")
            delta.setdefault(op.id, size)
    unaligned = report.alignment.only_a if side == "a" else report.alignment.only_b
    for b in unaligned:
        for op, _ in b.ops:
            status.setdefault(op.id, "unaligned")
            block.setdefault(op.id, f"{b.label} ({b.role}, no partner)")
            delta.setdefault(op.id, len(b.ops))
    return status, block, delta


def side_times(report: DiffReport, result: DiffResult, side: str) -> tuple[dict, dict]:
    """With profiled times (diff --bench): op id -> its block's kernel time on this side (ms per run),
    and op id -> its block's gap, B - A (ms). A kernel fuses several ops and carries one module path,
    so time is known per block, not per op: every op of a block shows its block's figures."""
    own, gap = {}, {}
    if not result.metrics.get("time"):
        return own, gap
    for d, blk in zip(report.blocks, result.blocks):
        t = blk.metrics["time"]
        for op, _ in getattr(d, side).ops:
            own.setdefault(op.id, round(t[side] * 1e3, 6))
            gap.setdefault(op.id, round((t["b"] - t["a"]) * 1e3, 6))
    return own, gap


def overlays(report: DiffReport, result: DiffResult, side: str, graphs: dict) -> dict:
    """The node-data files of one side, name -> Model Explorer's node-data JSON (graph id ->
    {results: {node id: {value, bgColor}}, ...})."""
    module = getattr(report, side).module
    ids = node_ids(module, graphs)
    status, block, delta = side_statuses(report, result, side)

    def data(values: dict, name: str, color=None, gradient=None) -> dict:
        per_graph: dict = {}
        for op_id, v in values.items():
            g, n = ids[op_id]
            r = {"value": v}
            if color:
                r["bgColor"] = color(op_id)
            per_graph.setdefault(g, {})[n] = r
        out = {}
        for g in sorted(per_graph):
            gd = {"name": name, "results": dict(sorted(per_graph[g].items(), key=lambda kv: int(kv[0])))}
            if gradient:
                gd["gradient"] = gradient
            if isinstance(next(iter(values.values()), 0), str):
                gd["showExpandedSummaryOnGroupNode"] = True
            out[g] = gd
        return out

    own, gap = side_times(report, result, side)
    timed = {"time": data(own, "stackwars-ir block kernel time (ms per run)",
                          gradient=[{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#1e88e5"}]),
             "time-gap": data(gap, "stackwars-ir block kernel time B-A (ms per run)",
                              gradient=[{"stop": 0, "bgColor": "#43a047"}, {"stop": 0.5, "bgColor": "#ffffff"},
                                        {"stop": 1, "bgColor": "#e53935"}])} if own else {}
    # Model Explorer shows the last overlay it loads: the status one goes last.
    return {
        **timed,
        "block": data(block, "stackwars-ir block"),
        "delta": data(delta, "stackwars-ir block op delta |B-A|",
                      gradient=[{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#e53935"}]),
        "status": data(status, "stackwars-ir op status",
                       color=lambda i: STATUS_COLORS[status[i]]),
    }


def write_explorer(report: DiffReport, result: DiffResult, folder: Path) -> list[Path]:
    """Write both sides' overlays, and how to open them, into `folder` (new or empty), all or nothing."""
    folder = Path(folder)
    check_target(folder)
    files = {}
    opens = []
    for side, label in (("a", "A"), ("b", "B")):
        src = Path(getattr(report, side).module.source)
        graphs = explorer_graphs(src)
        stem = f"{label}-{src.stem}"
        names = []
        for kind, content in overlays(report, result, side, graphs).items():
            name = f"{stem}.{kind}.json"
            files[name] = json.dumps(content, indent=1, sort_keys=False) + "\n"
            names.append(name)
        opens.append((label, src, names))
    files["README.md"] = _readme(opens, folder)
    write_folder(folder, files)
    return [folder / n for n in files]


def _readme(opens, folder: Path) -> str:
    lines = ["# Model Explorer overlays from stackwars-ir", "",
             "Each side's file opens with its node-data overlays (with diff --bench: block kernel time and",
             "its gap B-A; then block, block op delta, op status; Model Explorer shows the last one, the",
             "others are a click away in its side panel):", ""]
    for label, src, names in opens:
        paths = ",".join(str(folder / n) for n in names)
        lines += [f"{label}: `model-explorer {src} --node_data_paths={paths}`", ""]
    lines += ["Colors of the status overlay: " + ", ".join(f"{s} {c}" for s, c in STATUS_COLORS.items()) + ".",
              "An op of a called function shows the status it has in the first block that calls it.",
              "Time (with diff --bench) is known per block, not per op (a kernel fuses several ops under one",
              "module path): every op of a block shows its block's kernel time and gap.", ""]
    return "\n".join(lines)
