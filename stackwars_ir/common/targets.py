"""The compile targets (cpu, gpu, each TPU generation): one table for the CLI, estimates, plans, grids.

A TPU generation's entry holds its slices, peaks and one chip's memory; the CLI, estimates, memory
plans and grids all read the table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True)
class Chip:
    """A TPU generation's published peaks (Google Cloud's TPU pages) and the clock its cycles are
    read at. Google publishes no clock: it is the bf16 peak over the MXUs' multiply-adds per cycle
    (4 MXUs of mxu x mxu, 2 flops each), which gives v5e's 1.5 GHz; an assumption, stated with
    every figure. Ratios of two estimates on one chip do not depend on it."""

    name: str
    bf16_flops_per_s: float
    hbm_bytes_per_s: float
    mxu: int
    mxus: int = 4

    @property
    def clock_hz(self) -> float:
        return self.bf16_flops_per_s / (self.mxus * self.mxu * self.mxu * 2)

    def clock_text(self) -> str:
        return (f"{self.clock_hz / 1e9:.2f} GHz (assumed: {self.bf16_flops_per_s / 1e12:.0f} TFLOP/s bf16 over "
                f"{self.mxus} MXUs of {self.mxu}x{self.mxu}; Google publishes no clock)")


@dataclass(frozen=True)
class Target:
    """A compile target. A TPU generation compiles on this machine without a TPU, through libtpu's
    compile-only client: a module on one device for the first chip of the smallest slice (one chip's
    devices are the same in any slice), a module sharded over N devices for the first N devices of the
    smallest slice that has N (libtpu describes no slice under 4 chips)."""

    name: str  # as users spell it: cpu, gpu, tpu-v6e
    slices: tuple[str, ...] = ()  # a TPU generation's slice shapes, smallest first
    chip: Chip | None = None  # the peaks `bench --target` estimates with; None: no estimates for it
    chip_gib: int = 0  # one chip's nominal memory (GiB): the budget `v6e-1`

    @property
    def is_tpu(self) -> bool:
        return bool(self.slices)

    @property
    def generation(self) -> str:
        """`v6e` of tpu-v6e ("" for cpu and gpu)."""
        return self.name[len("tpu-"):] if self.is_tpu else ""

    @property
    def topology(self) -> str:
        """libtpu's name of the smallest slice: `v6e:2x2`."""
        return f"{self.generation}:{self.slices[0]}" if self.is_tpu else ""

    @property
    def one_chip(self) -> str:
        """The budget name of one chip of it: `v6e-1`."""
        return f"{self.generation}-1" if self.is_tpu else ""


_TWO_D = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
TABLE = {t.name: t for t in (
    Target("cpu"),
    Target("gpu"),
    Target("tpu-v6e", _TWO_D, Chip("TPU v6e", 918e12, 1640e9, 256), 32),
    Target("tpu-v5e", _TWO_D, Chip("TPU v5e", 197e12, 819e9, 128), 16),
    Target("tpu-v5p", ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4"), chip_gib=95),
    Target("tpu-v4", ("2x2x1", "2x2x2", "2x2x4", "2x4x4"), chip_gib=32),
)}
TPUS = tuple(t for t in TABLE.values() if t.is_tpu)
ESTIMATED = tuple(t for t in TPUS if t.chip is not None)


def is_tpu(name: str) -> bool:
    """Whether `name` is a TPU generation of the table (compile-only here); `tpu`, the TPU a bench runs
    on, is not one."""
    target = TABLE.get(name)
    return target is not None and target.is_tpu


def names(targets: Iterable[Target], last: str = ", ") -> str:
    """`tpu-v6e, tpu-v5e, tpu-v5p, tpu-v4` (with last=" or ": `tpu-v6e or tpu-v5e`), for help and errors."""
    listed = [t.name for t in targets]
    return ", ".join(listed[:-1]) + last + listed[-1] if len(listed) > 1 and last != ", " else ", ".join(listed)
