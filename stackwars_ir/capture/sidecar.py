"""What a capture writes beside its file: the sidecar's contents and the argument values recorded."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .. import models
from ..common import files
from ..common.routes import TORCH_SIDE
from ..workload import CAPTURE_REVISION, Request, argument_values
from ..workload.mesh import spec_text
from ..workload.train import ADAMW, TrainState
from . import parity
from .abstract import NOT_CHECKED
from .artifact import Capture

# The sidecar's words for workload/mesh.py's rule.
MESH_RULE = ("inputs: batch on dp and fsdp; parameters and their AdamW moments: the adapter's tensor-parallel "
             "dimension on tp, the largest other dimension fsdp divides on fsdp; buffers and constants whole")


def _versions(cap: Capture) -> dict:
    """The packages that made the capture: a stack's for what lowered it (JAX's side: its jax, jaxlib,
    flax, numpy; a PyTorch side: its torch and exporters too), this process's for the rest (the
    weights and the reference of a JAX side captured in a stack: this process's torch built them)."""
    here = files.versions()
    stack = cap.extra.get("stack")
    lowered = ("jax", "jaxlib", "flax", "numpy") + (() if cap.framework == "jax" else TORCH_SIDE)
    if stack is None:
        return here
    out = {k: stack.versions.get(k) if k in lowered else v for k, v in here.items()}
    if cap.framework != "jax":  # TorchTPU's and its plugin's, where the stack holds them
        out |= {k: stack.versions[k] for k in files.OPTIONAL_PACKAGES if stack.versions.get(k)}
    return out


def _not_checked() -> str:
    return NOT_CHECKED


VALUES_LIMIT = 64 << 20  # bytes of argument values recorded beside a capture of a user's model


def recorded_values_of(cap: Capture, req: Request, weights: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                       reference: np.ndarray, state: TrainState | None) -> list | None:
    """The arrays a capture of a user's model is called with, and the output they must give, to be
    recorded beside it: its readers (bench, memory --measure) may not have the adapter. A built-in
    model's are rebuilt from its adapter, which every reader has."""

    if Path(models.entry(req.model).path).parent == models.HERE:
        return None
    if state is not None:
        args, reference = argument_values(cap.arguments, cap.constants, state.values(), state.inputs, cap.stem), \
            np.asarray(state.ref_loss, dtype=np.float32)
    else:
        args = argument_values(cap.arguments, cap.constants, weights, inputs, cap.stem)
    return [(f"arg{i}", a) for i, a in enumerate(args)] + [("reference", np.asarray(reference))]


def _recorded(values: list | None, mlir_path: Path) -> tuple[dict | None, list]:
    """The sidecar's `"values"` entry and the .npz to write, or why none is written."""
    if values is None:
        return None, []
    total = sum(a.nbytes for _, a in values)
    if total > VALUES_LIMIT:
        return {"file": None, "bytes": total,
                "why": f"{total / 2**20:.0f} MiB of arguments, over the {VALUES_LIMIT >> 20} MiB recorded beside a "
                       "capture: bench and memory --measure rebuild them with the adapter (--adapters PATH)"}, []
    data = files.values_bytes(values)
    path = mlir_path.with_suffix(".npz")
    return {"file": path.name, "bytes": total, "sha256": hashlib.sha256(data).hexdigest()}, [(path, data)]


def sidecar_contents(cap: Capture, req: Request, inputs: dict[str, np.ndarray], result: parity.Parity | None,
                     out_dir: Path, state: TrainState | None = None, values: list | None = None,
                     routes: dict | None = None) -> list[tuple[Path, str | bytes]]:
    mlir_path, json_path = req.paths(out_dir, cap.stem)
    entry = models.entry(req.model)
    recorded, extra_files = _recorded(values, mlir_path)
    sidecar = {
        "format": files.SIDECAR_FORMAT,
        "model": req.model, "size": req.size, "seed": req.seed, "batch": req.batch, "seq": req.seq,
        "config": models.entry(req.model).sizes[req.size],
        "framework": cap.framework, "exporter": cap.exporter,
        "stablehlo": mlir_path.name,
        "sha256": hashlib.sha256(cap.text.encode()).hexdigest(),
        "inputs": [{"name": k, "shape": list(v.shape), "dtype": str(v.dtype)} for k, v in inputs.items()],
        "arguments": [a.as_json() for a in cap.arguments],
        "constants": {k: {"shape": list(v.shape), "dtype": str(v.dtype), "values": v.ravel().tolist()}
                      for k, v in sorted(cap.constants.items())},
        "versions": _versions(cap),
        # What a reader without the adapter file needs: the differ's role words (docs/adapters.md).
        "adapter": {"file": Path(entry.path).name, "roles": dict(sorted(entry.roles.items()))},
        "parity": result.as_json() if result is not None else {"checked": False, "why": _not_checked()},
        # The one part that differs between two runs of the same capture.
        "run": {"seconds": cap.seconds, "host": files.host(), "capture_revision": CAPTURE_REVISION},
    }
    if "stack" in cap.extra:  # captured by another stack's jax (absent: the project's lock)
        sidecar["stack"] = cap.extra["stack"].as_json()
    if req.scan_layers or req.remat:  # how the layers run (--scan-layers, --remat); absent: unrolled, as written
        sidecar["program"] = {"scan_layers": req.scan_layers, "remat": req.remat}
    if req.mesh:  # the mesh and each argument's split (absent: one device)
        mesh = req.mesh_spec
        sidecar["mesh"] = {"axes": dict(mesh.axes), "devices": mesh.devices, "rule": MESH_RULE,
                           "shardings": {a.name: spec_text(mesh.spec(a.kind, a.name, a.shape, entry.tensor_parallel))
                                         for a in cap.arguments}}
    if req.abstract:
        sidecar["abstract"] = True
        sidecar["dtype"] = req.dtype
    if state is not None:
        sidecar["step"] = "train"
        sidecar["train"] = {
            "loss": state.loss, "optimizer": {"name": "AdamW", **ADAMW},
            "captured step": 2, "state": "PyTorch eager's after step 1 on the same weights and batch",
            "outputs": list(cap.outputs), **{k: v for k, v in cap.extra.items() if k != "stack"}}
    if recorded is not None:
        sidecar["values"] = recorded
    if routes is not None:  # a route differs: each sidecar says how every route of this capture fared
        sidecar["parity"]["routes"] = routes
    return [(mlir_path, cap.text), (json_path, files.dump_json(sidecar)), *extra_files]
