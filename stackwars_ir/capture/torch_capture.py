"""Export a PyTorch model with torch.export, then to StableHLO through torch_xla or torchax."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..common.errors import CaptureError, MissingExtra, StackwarsError, held_interrupts
from ..common.hostmem import release
from ..common.progress import Stages
from ..common.routes import PACKAGE, TORCHAX
from ..workload import Argument
from ..workload.exported import needs_x64, torchax_function
from ..workload.mesh import Mesh
from ..workload.train import OpNames
from ..workload.values import copy_on
from .artifact import Capture
from .export_errors import torch_export_failure
from .lowering import Placement, lower_text

if TYPE_CHECKING:
    import torch
    from torch.export.graph_signature import InputSpec

    from ..models import Entry


def export_program(model: torch.nn.Module, inputs: dict[str, np.ndarray], stages: Stages,
                   entry: Entry | None = None) -> torch.export.ExportedProgram:
    """torch.export's program of `model` on `inputs`; a failure as one line at the model's line (`entry`: the
    catalogue entry whose adapter file is searched for it)."""
    import torch

    said = io.StringIO()
    with stages.stage("torch.export", hold_ctrl_c=True):
        try:
            # torch.export prints the partial FX graph of a failed trace to stderr: kept off the terminal
            # (the error names the line); what it writes on success is passed on.
            with contextlib.redirect_stderr(said):
                ep = torch.export.export(model, tuple(torch.from_numpy(v) for v in inputs.values()))
        except Exception as e:  # torch.export raises many types; export_errors says which line and why
            from ..models import _contract as contract

            raise torch_export_failure(e, contract.adapter_path(entry), contract.adapter_frames(entry, e)) \
                if entry is not None else torch_export_failure(e, None, []) from e
    sys.stderr.write(said.getvalue())
    return ep


def spec_kind(spec: InputSpec) -> str:
    from torch.export.graph_signature import InputKind

    return {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer",
            InputKind.CONSTANT_TENSOR: "constant"}.get(spec.kind, "input")


def portable_to_text(bytecode: bytes) -> str:
    """StableHLO text with locations, from torch_xla's portable (VHLO) bytecode.

    torch_xla 2.9's own `get_stablehlo_text` prints node metadata as bare strings where MLIR
    expects `loc(...)`, which no MLIR parser accepts; its bytecode carries proper locations.
    """
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir.dialects import stablehlo

    with jmlir.make_ir_context() as ctx:
        module = stablehlo.deserialize_portable_artifact(ctx, bytecode)
        return module.operation.get_asm(enable_debug_info=True)


_WARM = []


def _warm_up_torch_xla(convert, options) -> None:
    """Export a trivial program once per process before the real one.

    Measured here (torch_xla 2.9): the first export of a process drops the node metadata of
    some models (ResNet-50 lost every location), later ones keep it; setting XLA_HLO_DEBUG
    before import instead breaks the ResNet export ("Error while lowering ... prim::Constant").
    """
    if _WARM:
        return
    import torch

    with held_interrupts("torch_xla's first export"):
        ep = torch.export.export(torch.nn.Linear(2, 2).eval(), (torch.zeros(1, 2),))
        convert(ep, options(export_node_metadata=True)).get_stablehlo_bytecode("forward")
    _WARM.append(True)


def capture_torch_xla(ep: torch.export.ExportedProgram, inputs: dict[str, np.ndarray], stages: Stages,
                      placement: Placement | None = None) -> Capture:
    """torch_xla's exporter over the exported program. A mesh is placed by torch_xla's lazy path
    (capture_torch_xla_lazy), never here: `placement` is refused."""
    if placement is not None:
        raise CaptureError("torch_xla's exporter places no mesh: a capture with --mesh goes through its lazy tensors",
                           fix="report this as a bug in stackwars-ir")
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    try:
        from torch_xla.stablehlo import StableHLOExportOptions, exported_program_to_stablehlo
    except Exception as e:
        raise MissingExtra("torch_xla", e) from e

    _warm_up_torch_xla(exported_program_to_stablehlo, StableHLOExportOptions)  # not timed
    with stages.stage("torch_xla to StableHLO", hold_ctrl_c=True):
        try:
            shlo = exported_program_to_stablehlo(ep, StableHLOExportOptions(export_node_metadata=True))
            text = portable_to_text(shlo.get_stablehlo_bytecode("forward"))
        except Exception as e:
            raise CaptureError(f"torch_xla export failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    bundle = shlo._bundle  # the exporter's own record of which argument is which tensor
    meta = bundle.stablehlo_funcs[0].meta
    kinds = {s.target: spec_kind(s) for s in ep.graph_signature.input_specs if s.target}
    input_names = list(inputs)
    arguments, constants = [], {}
    for i, (loc, sig) in enumerate(zip(meta.input_locations, meta.input_signature)):
        kind = loc.type_.value
        if kind == "parameter":
            name, kind = loc.name, kinds.get(loc.name, "parameter")
            if kind == "constant":  # a tensor made inside forward, lifted by torch.export: its value recorded
                constants[name] = ep.constants[name].detach().cpu().numpy()
        elif kind == "constant":
            name = f"constant.{loc.position}"
            constants[name] = np.asarray(bundle.additional_constants[loc.position])
        else:
            name, kind = input_names[loc.position], "input"
        arguments.append(Argument(i, kind, name, tuple(sig.shape), sig.dtype))
    return Capture("torch", "torch_xla", text, tuple(arguments), dict(stages.seconds), constants)


def capture_torchax(ep: torch.export.ExportedProgram, inputs: dict[str, np.ndarray], stages: Stages,
                    placement: Placement | None = None) -> Capture:
    """torchax's interpreter over the decomposed program, lowered by jax.jit.

    Each FX node runs under a JAX named scope holding its nn_module_stack path, so torchax
    captures carry the same `h.3.attn.c_attn` provenance as JAX ones (torchax adds none itself).
    """
    try:
        import jax
        import torchax
        from torchax import export as tx_export
    except Exception as e:
        raise MissingExtra(PACKAGE[TORCHAX.name], e) from e

    with stages.stage("torchax to StableHLO", hold_ctrl_c=True):
        try:
            names, states, func = torchax_function(ep, tx_export)
            # torch's int64 stays int64, as in torch_xla captures
            wide = needs_x64(inputs)
            with jax.enable_x64(wide):
                states = torchax.default_env().t2j_copy(states)
                args = [jax.numpy.asarray(v) for v in inputs.values()]
            kinds = {s.target: spec_kind(s) for s in ep.graph_signature.input_specs if s.target}
            text = lower_text(func, states, args, x64=wide, named=torchax_named(names, kinds, inputs),
                              placement=placement)
        except StackwarsError:
            raise
        except Exception as e:
            raise CaptureError(f"torchax export failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    arguments = [Argument(i, kinds.get(n, "constant"), n, tuple(s.shape), str(s.dtype))
                 for i, (n, s) in enumerate(zip(names, states))]
    arguments += [Argument(len(arguments) + j, "input", n, tuple(v.shape), str(v.dtype))
                  for j, (n, v) in enumerate(inputs.items())]
    # Tensors made inside forward and lifted by torch.export (GPT-Neo's mask value): values recorded.
    constants = {n: np.asarray(v) for n, v in zip(names, states) if kinds.get(n) == "constant"}
    return Capture("torch", TORCHAX.name, text, tuple(arguments), dict(stages.seconds), constants)


def torchax_named(names: Iterable[str], kinds: dict, inputs: dict) -> list[tuple[str, str]]:
    """(kind, name) of each argument of torchax's function: the program's states, then the inputs."""
    return [(kinds.get(n, "constant"), n) for n in names] + [("input", n) for n in inputs]


# ---------------------------------------------------------------------------------------------------
# torch_xla on lazy tensors: what torch.export cannot trace (the training loop, scan_layers).


@contextlib.contextmanager
def hlo_debug() -> Iterator[None]:
    """XLA_HLO_DEBUG=1 while inside: torch_xla then puts op metadata (loc("aten__addmm")) on the
    graphs it builds, as its exporter does. It reads the variable once per process, so a capture
    checks the text for it (require_op_names)."""
    saved = os.environ.get("XLA_HLO_DEBUG")
    os.environ["XLA_HLO_DEBUG"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("XLA_HLO_DEBUG", None)
        else:
            os.environ["XLA_HLO_DEBUG"] = saved


def require_op_names(text: str, what: str) -> None:
    if "aten__" not in text:  # loc("aten__addmm"), or named: loc("jvp(h.0.attn)/aten__addmm")
        raise CaptureError(f"torch_xla left its op metadata out of the {what} (this process built a lazy graph "
                           "before with XLA_HLO_DEBUG unset), so the capture would differ from a fresh process's",
                           fix="run the capture in a fresh process, or set XLA_HLO_DEBUG=1 before the first "
                               "torch_xla graph")


def capture_torch_xla_lazy(model: torch.nn.Module, inputs: dict[str, np.ndarray], stages: Stages, layers: str | None,
                           scan: bool = False, mesh: Mesh | None = None,
                           tensor_parallel: dict | None = None) -> Capture:
    """The forward as a torch_xla user runs it, on lazy tensors, its layers under torch_xla's
    scan_layers (models/_torch.py layers_as) or its tensors sharded over `mesh` with SPMD's
    mark_sharding: torch.export traces neither. The pending graph
    of the output is the capture; its arguments are matched to the parameters, buffers and inputs by
    torch_xla's tensor ids, and each op is named after its module as in the training capture."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    try:
        import torch
        import torch_xla
    except Exception as e:
        raise MissingExtra("torch_xla", e) from e
    from ..models._torch import layers_as

    dev = torch_xla.device()
    m = copy_on(model, dev)
    xs = {k: torch.from_numpy(v).to(dev) for k, v in inputs.items()}
    known = {tensor_id(t): ("parameter", n) for n, t in m.named_parameters()}
    known.update({tensor_id(t): ("buffer", n) for n, t in m.named_buffers()})
    known.update({tensor_id(t): ("input", n) for n, t in xs.items()})
    if mesh is not None:
        mark_shardings(mesh, tensor_parallel, [(kind, name, t) for kind, name, t in
                                               [("parameter", n, t) for n, t in m.named_parameters()]
                                               + [("buffer", n, t) for n, t in m.named_buffers()]
                                               + [("input", n, t) for n, t in xs.items()]])
    program = layers_as(m, layers, scan=scan) if layers else contextlib.nullcontext()

    def graph(m, xs, program):  # its lazy output dies on return, unrun: the sync below has nothing of it to execute
        with torch.no_grad(), program, OpNames(m, phases=False):
            out = m(*xs.values())
        return lazy_graph([("output", "output", out)], known)

    with stages.stage("torch_xla lazy forward" + (" (scan_layers)" if scan else ""), hold_ctrl_c=True), hlo_debug():
        try:
            text, arguments, constants = graph(m, xs, program)
        except StackwarsError:
            raise
        except Exception as e:
            raise CaptureError(f"torch_xla lazy forward failed: {type(e).__name__}: {str(e).splitlines()[0]}") from e
        finally:
            del m, xs, program  # the lazy copy's device buffers go back before parity puts the weights on XLA CPU
            torch_xla.sync()
            release()  # the copy is a cycle of modules and hooks: freed by the collector, its pages given back
    require_op_names(text, "forward graph")
    return Capture("torch", "torch_xla", text, arguments, dict(stages.seconds), constants)


def spmd(devices: int) -> None:
    """torch_xla's SPMD mode over `devices` CPU devices, switched on before its runtime starts (the
    switch is for the whole process: every later torch_xla graph in it is an SPMD one)."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch_xla
    import torch_xla.runtime as xr

    if not torch_xla._XLAC._xla_runtime_is_initialized():
        os.environ["CPU_NUM_DEVICES"] = str(devices)
    elif xr.global_runtime_device_count() < devices and not xr.is_spmd():
        raise CaptureError(f"torch_xla started in this process on {xr.global_runtime_device_count()} device(s), "
                           f"before the mesh asked for {devices}", fix="capture a --mesh with torch_xla in a fresh "
                                                                       "process (the CLI is one)")
    xr.use_spmd()
    if xr.global_runtime_device_count() < devices:
        raise CaptureError(f"torch_xla has {xr.global_runtime_device_count()} devices here, the mesh needs {devices}",
                           fix=f"set CPU_NUM_DEVICES={devices} before torch_xla starts, or use a smaller --mesh")


def mark_shardings(mesh: Mesh, tensor_parallel: dict | None, named: Iterable[tuple[str, str, torch.Tensor]]) -> None:
    """Each (kind, name, lazy tensor) placed on `mesh` by workload/mesh.py's rule, with mark_sharding."""
    import torch_xla.distributed.spmd as xs

    grid = xs.Mesh(np.arange(mesh.devices), tuple(n for _, n in mesh.axes), mesh.names)
    for kind, name, t in named:
        spec = mesh.spec(kind, name, tuple(t.shape), tensor_parallel)
        if any(spec):
            xs.mark_sharding(t, grid, tuple(None if not d else d[0] if len(d) == 1 else d for d in spec))


def lazy_graph(named: Iterable[tuple[str, str, torch.Tensor]],
               known: dict) -> tuple[str, tuple[Argument, ...], dict[str, np.ndarray]]:
    """The pending graph of the outputs `named` ((kind, name, tensor) each) as StableHLO, and the
    meaning of its arguments.

    Its arguments are torch_xla's device-data nodes: the tensors the graph reads, matched to `known`
    by torch_xla's tensor ids as its dynamo bridge matches them (device data keeps the id of the
    tensor that owned it before a training step's in-place updates), and the Python scalars the code
    passed (AdamW's learning-rate and bias-correction factors), recorded as constants with their values.
    """
    import torch_xla
    import torch_xla.core.xla_model as xm

    tensors = [t for _, _, t in named]
    try:
        bytecode = xm.get_stablehlo_bytecode(tensors)
        ids, values = torch_xla._XLAC._get_tensors_xla_device_data_node(tensors)
    except Exception as e:
        raise CaptureError(f"torch_xla could not export the graph: {type(e).__name__}: "
                           f"{str(e).splitlines()[0]}") from e
    import torch

    arguments, constants = [], {}
    for i, (tid, value) in enumerate(zip(ids, values)):
        # A parameter's shape and dtype only, not a host copy of it (LLaMA-3.2-1B: 4.9 GiB more at the
        # capture's peak); a constant's values are kept.
        dtype = str(torch.empty(0, dtype=value.dtype).numpy().dtype)
        if tid in known:
            kind, name = known[tid]
        else:
            kind, name = "constant", f"constant.{len(constants)}"
            constants[name] = value.detach().cpu().numpy().copy()
        arguments.append(Argument(i, kind, name, tuple(value.shape), dtype))
    return portable_to_text(bytecode), tuple(arguments), constants


def tensor_id(t: torch.Tensor) -> int:
    import torch_xla

    return torch_xla._XLAC._xla_get_tensor_id(t)
