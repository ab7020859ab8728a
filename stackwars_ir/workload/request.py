"""The typed request (a model, its size and shapes, the step and its routes) and its file names."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.routes import EXPORTERS, ROUTES, STEPS, Step  # noqa: F401 (workload's API)
from .. import models
from ..common.errors import StackwarsError
from .mesh import Mesh
from .train import loss_of

FRAMEWORKS = ("jax", "torch", "both")
DTYPES = ("float32", "bfloat16")

# What the capture code writes: bumped whenever a capture's text or meaning changes for the same
# request (2: torch_xla's training step names its ops' modules and phases; 3: its loss's ops too;
# 4: its sidecar records the host reads of each step; 5: the JAX twin's buffers are named buffers, not
# parameters).
# `bench MODEL` reuses a capture on disk only from the same revision; the sidecar records it under
# `run`, beside the parts that differ between runs, so the goldens compare as before.
CAPTURE_REVISION = 5


@dataclass(frozen=True)
class Request:
    """What to make real: a model, its size and shapes, the step and the routes that export it
    (the options of capture, bench and memory; `validated()` fills in the defaults)."""

    model: str
    size: str = "tiny"
    framework: str = "both"
    exporters: tuple[str, ...] = ("torch_xla",)
    batch: int | None = None
    seq: int | None = None
    seed: int = 0
    attn: str = "eager"
    step: str = "forward"  # "train": loss, backward and one AdamW update (workload/train.py)
    abstract: bool = False  # shapes only, no weight materialized, no parity (capture/abstract.py)
    dtype: str = "float32"  # of the weights; bfloat16 with --abstract
    # How the program runs the model's layers, on every side (models/_nnx.py and _torch.py layers_as):
    scan_layers: bool = False  # in a loop over stacked weights (jax.lax.scan; torch_xla's scan_layers)
    remat: bool = False  # each layer rematerialized in the backward (jax.checkpoint; torch_xla's checkpoint)
    # The device mesh the program is sharded over ("fsdp=4,tp=2"; workload/mesh.py), "" for one device.
    mesh: str = ""

    def validated(self) -> "Request":
        entry = models.entry(self.model)
        _choose("size", self.size, tuple(entry.sizes))
        _choose("framework", self.framework, FRAMEWORKS)
        _choose("step", self.step, STEPS)
        if self.step == "train":
            loss_of(self.model)
        for e in self.exporters:
            _choose("exporter", e, EXPORTERS)
            if self.step == "train" and self.framework != "jax" and ROUTES[e].train:
                raise StackwarsError(f"--step train cannot be captured through {e}: {ROUTES[e].train}",
                                     fix="use another --exporter, or --step forward")
        if self.framework != "jax":
            _, cannot = models.exporters_for(self.model, self.exporters, self.step)
            for e, why in cannot.items():
                what = "'s training step" if self.step == "train" and e in models.entry(self.model).train_unsupported \
                    else ""
                raise StackwarsError(f"{self.model}{what} cannot be captured through {e}: {why}",
                                     fix="use another --exporter, or --framework jax")
        self._check_program(entry)
        mesh = self._check_mesh(entry)
        _choose("dtype", self.dtype, DTYPES)
        if self.dtype != "float32" and not self.abstract:
            raise StackwarsError(f"--dtype {self.dtype} is captured abstractly only, for now (parity in bfloat16 "
                                 "needs its own tolerances)", fix="add --abstract, or use --dtype float32")
        if self.attn != "eager":
            raise StackwarsError(
                f"attention implementation {self.attn!r} cannot be captured: the sdpa decomposition fails in "
                "both exporters (\"Cannot view a tensor with shape ...\")", fix="use --attn eager (the default)")
        shape = entry.shapes[self.size]
        # 0 is a value, and an error below: only a missing option takes the adapter's default.
        batch = shape["batch"] if self.batch is None else self.batch
        seq = shape["seq"] if self.seq is None else self.seq
        if batch < 1 or seq < 1:
            raise StackwarsError("--batch and --seq must be positive integers", fix="e.g. --batch 2 --seq 64")
        return dataclasses.replace(self, batch=batch, seq=seq, mesh=mesh.text if mesh else "")

    def check_weightless(self) -> None:
        """An abstract request's PyTorch routes: those that capture from shapes (not torch_xla: its
        lazy tensors hold data)."""
        if not self.abstract or self.framework == "jax":
            return
        for exporter in self.exporters:
            if not ROUTES[exporter].weightless:
                raise StackwarsError(f"{exporter} cannot capture without weights: {ROUTES[exporter].shapes}",
                                     fix="use --exporter torchax with --abstract, or a size whose weights fit")

    def _check_mesh(self, entry):
        """--mesh: parsed, and a tp axis only where the adapter names its tensor-parallel dimensions."""

        if not self.mesh:
            return None
        mesh = Mesh.parse(self.mesh)
        if mesh.size("tp") > 1 and not entry.tensor_parallel:
            raise StackwarsError(f"{self.model}: the adapter names no tensor-parallel dimensions, so the mesh's tp "
                                 "axis has nothing to split", fix="use fsdp/dp axes only, or set tensor_parallel= in "
                                                                  "its ENTRY (docs/adapters.md)")
        return mesh

    @property
    def mesh_spec(self) -> Mesh | None:
        """The Mesh of --mesh, or None."""

        return Mesh.parse(self.mesh) if self.mesh else None

    def _check_program(self, entry) -> None:
        """--scan-layers and --remat: the adapter names its layers, the step and the routes can take them."""
        if not (self.scan_layers or self.remat):
            return
        flag = "--scan-layers" if self.scan_layers else "--remat"
        if entry.layers is None:
            raise StackwarsError(f"{self.model}: the adapter names no list of identical layers, so {flag} has "
                                 "nothing to apply to", fix="set layers= in its ENTRY (docs/adapters.md), or use "
                                                            "a model that has one: " + ", ".join(_layered()))
        if self.remat and self.step != "train":
            raise StackwarsError("--remat recomputes forward ops in the backward, and a forward capture has no "
                                 "backward", fix="add --step train, or drop --remat")
        for e in self.exporters if self.framework != "jax" else ():
            why = ROUTES[e].scan_layers if self.scan_layers else ROUTES[e].remat
            if why:
                able = [r for r in EXPORTERS if not (ROUTES[r].scan_layers if self.scan_layers else ROUTES[r].remat)]
                raise StackwarsError(f"{flag} cannot be captured through {e}: {why}",
                                     fix=f"use --exporter {' or '.join(able)}, or --framework jax")

    @property
    def program(self) -> str:
        """The file-stem suffix of the program: "", "-scan", "-remat", "-scan-remat", then the mesh's
        ("-fsdp8", "-fsdp2-tp2")."""
        return ("-scan" if self.scan_layers else "") + ("-remat" if self.remat else "") + \
            (self.mesh_spec.stem if self.mesh else "")

    @property
    def train(self) -> bool:
        return self.step == Step.TRAIN

    @property
    def routes(self) -> tuple:
        """The routes.Route of each capture the request names, in stem order: jax, then each exporter."""
        frameworks = self.frameworks()
        return ((ROUTES["jax"],) if "jax" in frameworks else ()) + \
            (tuple(ROUTES[e] for e in self.exporters) if "torch" in frameworks else ())

    def frameworks(self) -> tuple[str, ...]:
        """The frameworks to capture: `both` is the PyTorch routes alone for an adapter without a JAX twin."""
        from ..models import _contract as contract

        entry = models.entry(self.model)
        with contract.blame(entry):  # its import fails: one line naming its file and line
            adapter = models.adapter(self.model)
        if self.framework == "both":
            return ("jax", "torch") if callable(getattr(adapter, "jax_model", None)) else ("torch",)
        if self.framework == "jax":
            contract.require(entry, adapter, "jax_model", why=", so there is no JAX route to capture")
        return (self.framework,)

    def stems(self, frameworks: tuple[str, ...] | None = None) -> list[str]:
        """The file stems the request's captures are written under: jax, then each exporter's, with
        -train for a training step."""
        frameworks = self.frameworks() if frameworks is None else frameworks
        return ([stem("jax", "jax", self.step, self.program)] if "jax" in frameworks else []) + \
            ([stem("torch", e, self.step, self.program) for e in self.exporters] if "torch" in frameworks else [])

    def paths(self, out_dir: Path, capture_stem: str) -> tuple[Path, Path]:
        """The .mlir and sidecar .json of one of the request's captures."""
        return target_paths(out_dir, self.model, self.size, capture_stem)


def model_named(targets: Sequence[str]) -> str | None:
    """The model a command's TARGETS name (one catalogue name that is not a file), or None for
    StableHLO files; an unknown name is one line with a did-you-mean. `gpt3` is a mistyped model,
    `x.mlir`, `dir/x`, `FILE#K` or `DUMP#NAME` (a module of a file of several, of an XLA dump folder)
    a file, missing or not (the parser says which)."""
    from ..models import entry

    name = targets[0] if len(targets) == 1 else ""
    if not name or Path(name).exists() or "/" in name or "." in name or "#" in name:
        return None
    entry(name)
    return name


def batch_list(text: str) -> tuple:
    """--batch 1,4,16: positive integers."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise StackwarsError(f"--batch {text!r} is not a list of integers", fix="e.g. --batch 1,4,16") from None
    if any(v < 1 for v in values):
        raise StackwarsError("--batch sizes must be positive", fix="e.g. --batch 1,4,16")
    return values


def stem(framework: str, exporter: str, step: str = "forward", program: str = "") -> str:
    """The file stem of one capture: jax, torch-torch_xla, jax-train, jax-train-scan-remat ... (routes.Route.stem)."""
    return ROUTES["jax" if framework == "jax" else exporter].stem(step, program)


def _layered() -> list[str]:
    return [n for n, e in models.catalog().items() if e.layers]


def target_paths(out_dir: Path, model: str, size: str, capture_stem: str) -> tuple[Path, Path]:
    folder = Path(out_dir) / f"{model}-{size}"
    return folder / f"{capture_stem}.mlir", folder / f"{capture_stem}.json"


def _choose(what: str, value: str, allowed) -> None:
    if value not in allowed:
        raise StackwarsError(f"unknown {what} {value!r}", fix=f"choose one of: {', '.join(allowed)}")
