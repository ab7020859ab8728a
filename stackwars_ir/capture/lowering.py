"""Lower a function with jax.jit so its locations name model code only, whoever the caller is."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import models
from ..common.errors import CaptureError
from ..common.runtime import enable_x64
from ..workload import Request


@dataclass(frozen=True)
class Placement:
    """Where a lowering places its arguments: the request's mesh (workload/mesh.py's rule) and the
    adapter's tensor-parallel table."""

    mesh: object  # workload.mesh.Mesh
    tensor_parallel: dict = field(default_factory=dict)


def placement(req: Request) -> Placement | None:
    """The placement of a request's lowerings: None without --mesh (one device)."""
    if not req.mesh:
        return None

    return Placement(req.mesh_spec, models.entry(req.model).tensor_parallel or {})


def _exclude_callers() -> None:
    """Drop the frames of the standard library and of stackwars_ir itself from locations.

    The lowering runs on a fresh thread (see lower_text), so what stays is the model code:
    the same text from the CLI, from pytest or from a notebook.
    """
    from jax._src import source_info_util

    for path in (os.path.dirname(threading.__file__), str(Path(__file__).resolve().parents[1])):
        if path not in source_info_util._exclude_paths:
            source_info_util.register_exclusion(path)


def lower_text(fn: Callable[..., object], *args: object, x64: bool = False,
               named: Sequence[tuple[str, str]] | None = None, placement: Placement | None = None) -> str:
    """`jax.jit(fn, keep_unused=True).lower(*args).as_text(debug_info=True)`, caller-independent.
    With a `placement`, each argument leaf (`named`: its (kind, name), in flattened order) carries its
    NamedSharding over an abstract mesh, so the text holds the mesh and the shardings (Shardy) and no
    device: lowered for XLA CPU, compiled later for any slice of that size."""
    import jax

    _exclude_callers()
    # JAX caches some traced helpers with the source location of their first trace (lax's scatter
    # combiner, used by every gather's transpose): without a clear, a capture's locations would
    # depend on what this process lowered before (measured: BERT's torchax training step after GPT-2's).
    jax.clear_caches()
    box: dict = {}

    def work():
        try:
            with enable_x64(x64):
                # keep_unused: the argument list must match the parameter list one to one.
                if placement is not None:
                    from jax._src import config

                    # Shardy, whatever this process switched: torch_xla's mark_sharding turns it off
                    # for all jax (torch_xla/_internal/jax_workarounds.py), and a capture must not
                    # depend on what ran before it.
                    with config.use_shardy_partitioner(True):
                        lowered = jax.jit(fn, keep_unused=True).trace(*_placed(args, named, placement)).lower(
                            lowering_platforms=("cpu",))
                else:
                    lowered = jax.jit(fn, keep_unused=True).lower(*args)
                box["text"] = lowered.as_text(debug_info=True)
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=work, name="stackwars-ir-lower")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["text"]


def _placed(args, named, placement: Placement):
    """`args` as ShapeDtypeStructs, each with its sharding over the placement's mesh."""
    import jax
    import numpy as np
    from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

    mesh = placement.mesh
    leaves, tree = jax.tree_util.tree_flatten(args)
    if named is None or len(named) != len(leaves):
        raise CaptureError(f"this route does not name its {len(leaves)} arguments to the mesh's rule, so "
                           f"--mesh {mesh.text} cannot place them", fix="report this as a bug in stackwars-ir")
    abstract = AbstractMesh(tuple(n for _, n in mesh.axes), mesh.names, axis_types=(AxisType.Auto,) * len(mesh.axes))
    placed = []
    for leaf, (kind, name) in zip(leaves, named):
        shape = tuple(np.shape(leaf))
        spec = mesh.spec(kind, name, shape, placement.tensor_parallel)
        parts = PartitionSpec(*[None if not d else d[0] if len(d) == 1 else d for d in spec])
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        placed.append(jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(abstract, parts)))
    return jax.tree_util.tree_unflatten(tree, placed)
