"""A module's argument values: recorded beside its capture, rebuilt from its model, or synthetic.

A rebuilt value comes from the catalogue's model; a synthetic one stays within the table it indexes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import models
from ..common.errors import BenchError
from ..common.files import Sidecar, read_values
from ..ir.model import Module, storage_type
from ..workload import Argument, Request, argument_values, kept_values, prepare
from ..workload.train import train_state


def signature_arguments(module: Module, sidecar: Sidecar | None, rng: np.random.Generator, staged: str | None = None
                        ) -> tuple[list, str, np.ndarray | None]:
    """Argument arrays for the entry function and the output they must give: the capture's real
    weights and inputs and PyTorch eager's output when its sidecar is there (`staged`: the .npz of them
    a parent built for a stack's worker, bench.staging), else synthetic values (integers kept inside the
    tables they index) and no reference; so also for an abstract capture."""
    if sidecar is not None and sidecar.abstract:
        sidecar = None  # captured from shapes alone: there are no weights to rebuild
    why = "synthetic (normal floats, integers within the indexed table)"
    if sidecar is not None:
        which = f"{sidecar.model}-{sidecar.size}, seed {sidecar.seed}"
        recorded = read_values(Path(module.source), sidecar, staged)
        if recorded is not None:
            arrays, reference = recorded
            if len(arrays) != len(module.entry.args):
                raise BenchError(f"{module.source}: its recorded values hold {len(arrays)} arguments, the module "
                                 f"has {len(module.entry.args)}", fix=sidecar.capture_command(module.source))
            return arrays, f"capture's recorded values ({which})", reference
        if sidecar.model in models.catalog():
            arrays, reference = sidecar_arguments(module, sidecar)
            return arrays, f"capture sidecar ({which})", reference
        why = (f"synthetic: model {sidecar.model!r} is not in the catalogue and its capture recorded no values "
               f"(name its adapter with --adapters PATH to time its own weights against PyTorch eager)")
    arrays = []
    spd = _factors_cholesky(module)
    for i, vid in enumerate(module.entry.args):
        t = module.values[vid].type
        if any(d is None for d in t.shape):
            raise BenchError(f"{module.source}: argument {i} has a dynamic shape ({t})",
                             fix="benchmark a module exported with static shapes")
        a = _synthetic(t, _index_limit(module, vid), rng, f"{module.source}: argument {i}")
        arrays.append(_positive_definite(a) if spd else a)
    if spd:
        why += "; square matrices symmetric positive definite (the module factors one by Cholesky)"
    return arrays, why, None


_CHOLESKY = ("potrf", "cholesky")


def _factors_cholesky(module) -> bool:
    """Whether the module calls a Cholesky factorization (LAPACK's potrf, cuSOLVER's): a random matrix
    is not positive definite, and its factor would be NaN."""
    return any(op.name.endswith("custom_call") and any(k in str(op.attr("call_target_name") or "").lower()
                                                      for k in _CHOLESKY) for op in module.ops)


def _positive_definite(a: np.ndarray) -> np.ndarray:
    """A square float matrix (batched: the last two dimensions) made symmetric positive definite:
    A A^T / n + I; anything else as it is."""
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or not np.issubdtype(a.dtype, np.floating):
        return a
    n = a.shape[-1]
    wide = a.astype(np.float64)
    spd = wide @ np.swapaxes(wide, -1, -2) / n + np.eye(n)
    return spd.astype(a.dtype)


_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "ui32": np.uint32, "i1": np.bool_}


def _synthetic(t, limit: int, rng, where: str):
    if t.dtype.startswith("!quant."):  # its storage integers, as the program compiled as integer math reads them

        dtype = _NUMPY.get(storage_type(t.dtype))
        if dtype is None:
            raise BenchError(f"{where}: unsupported storage type of {t.dtype}", fix="benchmark float or integer modules")
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -127), min(info.max, 127) + 1, t.shape).astype(dtype)
    if t.dtype == "bf16":
        import ml_dtypes

        return rng.standard_normal(t.shape).astype(ml_dtypes.bfloat16)
    dtype = _NUMPY.get(t.dtype)
    if dtype is None:
        raise BenchError(f"{where}: unsupported element type {t.dtype}", fix="benchmark float or integer modules")
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(t.shape) * 0.5).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, t.shape).astype(np.bool_)
    return rng.integers(0, max(limit, 1), t.shape).astype(dtype)


def _index_limit(module, vid: int) -> int:
    """Rows of the table an integer argument indexes (through converts and reshapes), else 2."""
    frontier, seen = [vid], set()
    for _ in range(6):
        nxt = []
        for v in frontier:
            for op_id, pos in module.uses[v]:
                op = module.ops[op_id]
                if op.id in seen:
                    continue
                seen.add(op.id)
                if op.name in ("stablehlo.gather", "func.call") and pos >= 1 and op.operands:
                    table = module.values[op.operands[0]].type
                    if table.rank >= 1 and table.shape[0]:
                        return table.shape[0]
                if op.name in ("stablehlo.convert", "stablehlo.reshape", "stablehlo.broadcast_in_dim"):
                    nxt.extend(op.results)
        frontier = nxt
    return 2


def sidecar_arguments(module: Module, sidecar: Sidecar) -> tuple[list, np.ndarray]:
    # Only the weights and inputs are rebuilt: no exporter runs (fft has no torch_xla route).
    req = Request(sidecar.model, sidecar.size, "torch", exporters=(), batch=sidecar.batch, seq=sidecar.seq,
                  seed=sidecar.seed, step=sidecar.step).validated()
    kept = kept_values.read(req)  # made by an earlier process: no torch, no model here
    if kept is not None:
        weights, inputs, reference = kept
    else:
        w = prepare(req)
        model, weights, inputs, reference = w.model, w.weights, w.inputs, w.reference
        if req.train:  # the captured step 2 runs from eager's state after step 1; its loss is the proof
            state = train_state(req, model, inputs, reference)
            weights, inputs, reference = state.values(), state.inputs, np.asarray(state.ref_loss, dtype=np.float32)
        kept_values.keep(req, weights, inputs, reference)
    constants = {k: np.asarray(v["values"], dtype=v["dtype"]).reshape(v["shape"])
                 for k, v in sidecar.constants.items()}
    args = tuple(Argument(a["index"], a["kind"], a["name"], tuple(a["shape"]), a["dtype"])
                 for a in sidecar.arguments)
    if len(args) != len(module.entry.args):
        raise BenchError(f"{module.source}: sidecar lists {len(args)} arguments, the module has "
                         f"{len(module.entry.args)}", fix=sidecar.capture_command(module.source))
    return argument_values(args, constants, weights, inputs, str(module.source)), reference
