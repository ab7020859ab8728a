"""TorchTPU's route: torch.export's program to StableHLO through TorchTPU's MLIR exporter.

TorchTPU's device is XLA's CPU PJRT plugin.
"""
from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import CaptureError, MissingExtra, StackwarsError
from ..common.progress import Stages
from ..common.routes import PACKAGE, TORCH_TPU
from ..workload import Argument
from .artifact import Capture
from .lowering import Placement

if TYPE_CHECKING:
    import torch

# TorchTPU loads its PJRT plugin from TPU_LIBRARY_PATH (libtpu's by default, which aborts the process
# on a machine without a TPU). OpenXLA publishes XLA's CPU client as a PJRT plugin (the xla-cpu-pjrt
# wheel, pinned in the stack): TorchTPU's device then runs on this CPU, and its exporter lowers the
# same program it lowers for a TPU (nothing of it is compiled for a TPU: the file is StableHLO).
PLUGIN = "xla_plugins.xla_cpu_pjrt"
# The name a traced op's innermost frame is given (its FX node's module path after it), so that the
# op's location says which module it came from; named_by_module turns it into the op's own name.
MARK = "stackwars-module:"


def cpu_plugin() -> str:
    """The CPU PJRT plugin's library, or a one-line error naming the package."""
    import importlib.util

    spec = importlib.util.find_spec(PLUGIN)
    lib = os.path.join(os.path.dirname(spec.origin), "xla_cpu_pjrt.so") if spec and spec.origin else ""
    if not lib or not os.path.isfile(lib):
        raise StackwarsError("TorchTPU's route needs XLA's CPU PJRT plugin, which is not installed here",
                             fix="pin xla-cpu-pjrt==0.0.1 in the stack (docs/stacks.md: the TorchTPU stack)")
    return lib


def tpu_device():
    """TorchTPU imported with its device on XLA's CPU plugin (private API: torch_tpu._loader, since
    its public loader starts the device only where it finds TPU chips). torch imports TorchTPU itself
    (a device backend it autoloads) and TorchTPU then loads whatever TPU_LIBRARY_PATH names: the
    plugin must be named before torch is imported (a stack's workers are started so: stacks.worker_command)."""
    import sys

    plugin = cpu_plugin()
    if os.environ.get("TPU_LIBRARY_PATH") != plugin:
        if "torch" in sys.modules:
            raise StackwarsError("TorchTPU's route: torch was imported before TPU_LIBRARY_PATH named XLA's CPU plugin, "
                                 "so TorchTPU would start libtpu, which aborts without a TPU",
                                 fix=f"run with TPU_LIBRARY_PATH={plugin}, or capture with --stack (its workers set it)")
        os.environ["TPU_LIBRARY_PATH"] = plugin
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", message="<TorchTpu/Performance/TcMalloc/")  # the allocator: no effect on the IR
    try:
        import torch_tpu  # noqa: F401
        from torch_tpu import _loader
    except Exception as e:
        raise MissingExtra(PACKAGE[TORCH_TPU.name], e) from e
    return _loader._init_device("tpu")


def node_path(node: torch.fx.Node) -> str:
    """The module path torch.export recorded for an FX node (`h.3.attn.c_attn`; "" for none)."""
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


@contextlib.contextmanager
def module_frames(interpreter: type) -> Iterator[None]:
    """While TorchTPU's interpreter runs a node, the frame its ops' locations record is named after
    the node's module (TorchTPU names it after the node's source line, which two modules of one class
    share)."""
    own = interpreter._set_func_code_to_node_source_locations

    def named(self, func, node):
        own(self, func, node)
        path = node_path(node)
        if path:
            func.__code__ = func.__code__.replace(co_name=MARK + path)

    interpreter._set_func_code_to_node_source_locations = named
    try:
        yield
    finally:
        interpreter._set_func_code_to_node_source_locations = own


@contextlib.contextmanager
def on_device(ep: torch.export.ExportedProgram, device: torch.device) -> Iterator[int]:
    """While TorchTPU lowers the program, the tensors its ops make (GPT-2's position ids: torch.arange)
    are made on TorchTPU's device: torch.export recorded this CPU as their device, and TorchTPU refuses
    a CPU tensor beside its own ("embedding(): expected tensor to be on tpu, got cpu", measured)."""
    import torch

    def cpu(x) -> bool:
        return isinstance(x, torch.device) and x.type == "cpu"

    moved = []
    for node in ep.graph_module.graph.nodes:  # a device as keyword (arange) or positional (aten.to.device)
        if any(map(cpu, node.args)) or any(map(cpu, node.kwargs.values())):
            moved.append((node, node.args, node.kwargs))
            node.args = tuple(device if cpu(a) else a for a in node.args)
            node.kwargs = {k: device if cpu(v) else v for k, v in node.kwargs.items()}
    try:
        yield len(moved)
    finally:
        for node, args, kwargs in moved:
            node.args, node.kwargs = args, kwargs


_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)$", re.M)
_NAMED = re.compile(r'^"((?:[^"\\]|\\.)*)"\((#loc\d*)\)$')
_CALL = re.compile(r"^callsite\((#loc\d*) at (#loc\d*)\)$")
_MODULE = re.compile(r'^module @(?:"[^"]*"|[\w.$-]+)', re.M)


def named_by_module(text: str) -> str:
    """TorchTPU's debug-info text with each op's own name location (`layer_norm/layer_norm`, its op
    labels) renamed `MODULE.PATH/label` where its frames carry module_frames' mark, and `label`
    elsewhere: the provenance JAX's captures carry (`h.3.attn/dot_general`), read by ir.locations."""
    aliases = {m.group(1): m.group(2) for m in _ALIAS.finditer(text)}
    found: dict = {}

    def module_of(alias: str, depth: int = 0) -> str:
        if alias in found or depth > 64:
            return found.get(alias, "")
        body, path = aliases.get(alias, ""), ""
        named, call = _NAMED.match(body), _CALL.match(body)
        if named and named.group(1).startswith(MARK):
            path = named.group(1)[len(MARK):]
        elif named:
            path = module_of(named.group(2), depth + 1)
        elif call:
            path = module_of(call.group(1), depth + 1) or module_of(call.group(2), depth + 1)
        found[alias] = path
        return path

    def rename(m: re.Match) -> str:
        alias, body = m.group(1), m.group(2)
        named = _NAMED.match(body)
        if not named or "/" not in named.group(1) or named.group(1).startswith(MARK):
            return m.group(0)
        label, inner = named.group(1).rsplit("/", 1)[-1], named.group(2)
        path = module_of(inner)
        return f'{alias} = loc("{path + "/" if path else ""}{label}"({inner}))'

    # Its module is named after the last node's frame (`tt_jit_linear_L135C0_<frame>`): named after the route.
    return _MODULE.sub("module @torch_tpu", _ALIAS.sub(rename, text), count=1)


def _arguments(ep, inputs: dict) -> tuple[list, dict]:
    """The arguments of TorchTPU's program in its order (export.py's _extract_states_from_exported_program:
    parameters, buffers, then lifted constants; then the inputs), and the constants' values."""
    sig, state = ep.graph_signature, {**ep.state_dict, **(getattr(ep, "constants", None) or {})}
    named = [("parameter", n) for n in sig.parameters] + [("buffer", n) for n in sig.buffers] + \
        [("constant", n) for n in getattr(sig, "lifted_tensor_constants", ())]
    arguments, constants = [], {}
    for i, (kind, name) in enumerate(named):
        t = state[name]
        arguments.append(Argument(i, kind, name, tuple(t.shape), str(t.dtype).replace("torch.", "")))
        if kind == "constant":
            constants[name] = t.detach().cpu().numpy()
    arguments += [Argument(len(named) + j, "input", n, tuple(v.shape), str(v.dtype)) for j, (n, v) in enumerate(inputs.items())]
    return arguments, constants


def capture_torch_tpu(ep: torch.export.ExportedProgram, inputs: dict[str, np.ndarray], stages: Stages,
                      placement: Placement | None = None) -> Capture:
    """TorchTPU's exporter (torch_tpu._internal.export: private, the one its own benchmarks use) over the
    exported program, its ops named by their modules (module_frames, named_by_module)."""
    if placement is not None:
        raise CaptureError("TorchTPU's route places no mesh here", fix="capture it without --mesh")
    with stages.stage("TorchTPU to StableHLO", hold_ctrl_c=True):
        device = tpu_device()
        try:
            from torch_tpu._internal.export import export as tpu_export

            with module_frames(tpu_export.EagerLikeFxInterpreter), on_device(ep, device):
                mlir = tpu_export.exported_to_mlir(ep)
            text = named_by_module(mlir.serialize_text(enable_debug_info=True))
        except StackwarsError:
            raise
        except Exception as e:
            raise CaptureError(f"TorchTPU export failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                               fix="docs/stacks.md: what TorchTPU's route captures") from e
    arguments, constants = _arguments(ep, inputs)
    declared = text.split("func.func @main(", 1)[-1].split(") ->", 1)[0].count("%arg")
    if declared != len(arguments):
        raise CaptureError(f"TorchTPU's program takes {declared} arguments where the exported program has "
                           f"{len(arguments)} (parameters, buffers, constants, inputs)",
                           fix="report this with the model and torch-tpu's version: its argument order changed")
    return Capture("torch", TORCH_TPU.name, text, tuple(arguments), dict(stages.seconds), constants)
