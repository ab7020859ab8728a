"""torch.compile's steady runs under torch.profiler, each kernel traced to its module and phase.

An inductor kernel's module and phase are those of the FX nodes it computes; the result is a Profile
the diff splits by block.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .eager_profile import ops_profile, run_ops
from .xla_profile import Profile, union_seconds

if TYPE_CHECKING:
    import torch

_CALL = "## Call CompiledFxGraph "  # the range inductor runs each compiled graph in
_KERNEL_PREFIX = re.compile(r"^graph_\d+_")  # cpp kernels' profiler names: graph_<id>_<kernel>


@dataclass
class CompiledGraph:
    """What inductor generated for one FX graph: its cpp kernels by name and its extern calls in
    the order the graph's code makes them, each with the module path and phase it was traced to."""

    phase: str
    kernels: dict = field(default_factory=dict)  # name -> path
    externs: list = field(default_factory=list)  # [(aten op, path)]


class KernelOrigins:
    """A torch.compile backend: inductor as users run it, with its provenance tracking on and its
    caches off (so every graph is generated here and its kernels' FX nodes are known). After each
    graph's compile, each kernel is traced to the module of its output node: the FX node latest in
    the graph among those it computes (nn_module_stack; a backward node's forward module from
    fwd_nn_module_stack). `graphs` holds one CompiledGraph per compiled graph."""

    def __init__(self, train: bool) -> None:
        self.train = train
        self.graphs: list[CompiledGraph] = []
        self._patch = None

    def __enter__(self) -> "KernelOrigins":
        import torch._inductor.config as config

        self._patch = config.patch({"force_disable_caches": True, "trace.provenance_tracking_level": 1,
                                    "cpp.enable_kernel_profile": True})
        self._patch.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._patch.__exit__(*exc)

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        import functools

        from torch._inductor.compile_fx import compile_fx

        dynamo = {n.name: (i, _path_of([n], False)) for i, n in enumerate(gm.graph.nodes)}  # dynamo's graph
        return compile_fx(gm, example_inputs, inner_compile=functools.partial(self._inner, dynamo=dynamo))

    def _inner(self, gm, example_inputs, dynamo: dict, **kwargs):
        import torch._inductor.debug as debug
        from torch._inductor.compile_fx import compile_fx_inner

        known = set(debug._inductor_triton_kernel_to_post_grad_node_info)
        out = compile_fx_inner(gm, example_inputs, **kwargs)
        backward = bool(kwargs.get("is_backward"))
        graph = CompiledGraph("backward" if backward else ("forward" if self.train else ""))
        order = {n.name: i for i, n in enumerate(gm.graph.nodes)}  # the post-grad graph: passes ran in place
        nodes = {n.name: n for n in gm.graph.nodes}
        for key, origins in debug._inductor_triton_kernel_to_post_grad_node_info.items():
            if key in known:
                continue
            name = key.rpartition(":")[0]
            path = _path_of(sorted((nodes[o] for o in origins if o in nodes), key=lambda n: order[n.name]), backward)
            if name.startswith("extern_kernels.") or name.startswith("aten."):
                graph.externs.append((_aten(name), path))
            else:
                graph.kernels[name] = path
        listed = {op for op, _ in graph.externs}
        graph.externs += [(op, path) for op, path in _code_externs(getattr(out, "source_code", "") or "", dynamo)
                          if op not in listed]
        self.graphs.append(graph)
        return out


_SOURCE = re.compile(r"# Topologically Sorted Source Nodes: \[([^\]]*)\].*\n\s*(?:\w+ = )?"
                     r"(extern_kernels\.\w+|(?:torch\.ops\.)?aten\.\w+(?:\.\w+)?)\(")


def _code_externs(code: str, dynamo: dict) -> list:
    """[(aten op, path)] of the extern calls in a compiled graph's code, in order, the calls
    inductor's provenance does not list (convolutions, fallbacks): each traced to the module of the
    latest of the source nodes its comment names (nodes of dynamo's graph, forward or backward alike)."""
    out = []
    for m in _SOURCE.finditer(code):
        nodes = sorted((dynamo[n.strip()] for n in m.group(1).split(",") if n.strip() in dynamo), reverse=True)
        out.append((_aten(m.group(2).replace("torch.ops.", "")), next((p for _, p in nodes if p), "")))
    return out


def _aten(extern: str) -> str:
    """The profiler's name of an extern call: extern_kernels.addmm and aten.cumsum.default -> aten::addmm, aten::cumsum."""
    op = extern.split(".")[1]
    return f"aten::{op}"


def _path_of(nodes: list, backward: bool) -> str:
    """The module path (as named_modules names it) of the latest node that has one, or ""."""
    key = "fwd_nn_module_stack" if backward else "nn_module_stack"
    for n in reversed(nodes):
        stack = n.meta.get(key) or (n.meta.get("nn_module_stack") if backward else None)
        if stack:
            return module_path(list(stack.values())[-1][0])
    return ""


def module_path(source: str) -> str:
    """Dynamo's source of a submodule as a named_modules path: L['self']._modules['h']._modules['0'].ln_1 -> h.0.ln_1."""
    s = re.sub(r"^L\['self'\]\.?|^L\['[^']*'\]\.?|^self\.?", "", source)
    s = re.sub(r"\._modules\['([^']*)'\]|\['([^']*)'\]|\[(\d+)\]",
               lambda m: "." + (m.group(1) or m.group(2) or m.group(3)), "." + s if s else s)
    return s.strip(".")


def profile_compiled_runs(run: Callable[[], object], origins: KernelOrigins, runs: int, train: bool) -> Profile:
    """`runs` calls of `run` (a torch.compile'd step, compiled inside `origins`) under torch.profiler:
    a bench.profile.Profile whose kernels are inductor's cpp kernels and its extern calls (each
    call's whole time, its callees' included), traced to modules as KernelOrigins says, and the ops
    that ran outside compiled graphs (the loss, the optimizer's update, dynamo's guards) as the eager
    profile names them. A compiled graph's kernels are recognized by name; its extern calls by their
    order among the graph's calls of the same op; a call inductor did not list is counted in no block."""
    from torch.profiler import ProfilerActivity, profile

    per_run, walls, busy = [], [], []
    for _ in range(runs):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            run()
            walls.append(time.perf_counter() - t0)
        events = list(prof.events())
        ops, spans = run_ops([e for e in events if not _inside_call(e)], train)
        for (op, path, phase) in [k for k in ops if k[0].startswith(_CALL)]:  # the call's own Python time
            s, n = ops.pop((op, path, phase))
            t = ops.setdefault(("compiled graph call", path, phase), [0.0, 0])
            t[0], t[1] = t[0] + s, t[1] + n
        for key, (s, n) in _compiled_ops(events, origins.graphs).items():
            t = ops.setdefault(key, [0.0, 0])
            t[0] += s
            t[1] += n
        per_run.append(ops)
        busy.append(union_seconds(spans))
    return ops_profile(per_run, walls, busy, (
        "torch.compile (inductor), profiled by torch.profiler: each generated kernel and extern call traced "
        "through inductor's provenance to the module of the FX node it computes; outside compiled graphs, "
        "each op's self time"))


def _inside_call(e) -> bool:
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith(_CALL):
            return True
        p = p.cpu_parent
    return False


def _compiled_ops(events, graphs: list) -> dict:
    """{(kernel, module path, phase): [seconds, calls]} of the compiled graphs' calls in one run:
    each call's direct children, matched to the CompiledGraph whose kernels they are."""
    out: dict = {}
    for call in (e for e in events if e.name.startswith(_CALL)):
        children = [e for e in events if e.cpu_parent is call]
        graph = _graph_of(children, graphs)
        externs: dict = {}  # op -> its calls' paths, in the graph's order
        for op, path in (graph.externs if graph else ()):
            externs.setdefault(op, []).append(path)
        for e in children:
            name = _KERNEL_PREFIX.sub("", e.name)
            if graph and name in graph.kernels:
                path = graph.kernels[name]
            else:  # an extern call: the next of its op (a fallback inductor did not list: no block)
                queue = externs.get(e.name)
                path = queue.pop(0) if queue else ""
            phase = graph.phase if graph else ""
            t = out.setdefault((name, path, phase), [0.0, 0])
            t[0] += e.cpu_time_total / 1e6
            t[1] += 1
    return out


def _graph_of(children: list, graphs: list):
    """The compiled graph these kernels belong to: the most kernel names in common; with none (a
    graph of extern calls only), the one whose extern ops are the children's."""
    names = {_KERNEL_PREFIX.sub("", e.name) for e in children}
    best = max(graphs, key=lambda g: len(names & g.kernels.keys()), default=None)
    if best is not None and names & best.kernels.keys():
        return best
    ops = [e.name for e in children]
    return next((g for g in graphs if not g.kernels and [op for op, _ in g.externs] == ops), None)
