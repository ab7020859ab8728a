"""The study's measured table (seed 001, a TPU v6e-1) and a predicted cell read against it."""
from __future__ import annotations

from stackwars_ir.bench.predict import HOST_FACTOR, UNSYNCED, Cell

# The study's table (seed 001, a v6e-1 TPU): (workload, framework) -> (first, second, steady), in ms.
STUDY = {
    ("gemm", "jax"): (41.243, 0.451, 0.192), ("gemm", "pytorch"): (0.198, 0.086, 0.055),
    ("ffn", "jax"): (1081.837, 0.474, 0.225), ("ffn", "pytorch"): (256.368, 2.729, 0.347),
    ("mha", "jax"): (1118.373, 0.619, 0.363), ("mha", "pytorch"): (987.797, 15.758, 0.946),
    ("resnet50", "jax"): (7328.458, 1.442, 0.931), ("resnet50", "pytorch"): (7659.820, 7271.575, 10.562),
    ("bert", "jax"): (9103.082, 1.351, 0.913), ("bert", "pytorch"): (4098.641, 3774.402, 21.723),
    ("gpt2", "jax"): (2128.444, 1.061, 0.708), ("gpt2", "pytorch"): (3545.754, 3256.955, 27.896),
}
RUNS = ("first", "second", "steady")


def study_s(cell: Cell) -> float | None:
    """The study's figure for the cell's workload, framework and run, in seconds (a cell of
    bench.predict.predict_unsynced reads the PyTorch row); None where the study has none."""
    got = STUDY.get((cell.workload, "pytorch" if cell.framework == UNSYNCED else cell.framework))
    return got[RUNS.index(cell.run)] / 1e3 if got else None


def within(cell: Cell, factor: float = 2.0) -> bool | None:
    """Whether the study's cell lies within `factor` of the predicted range (None: no cell)."""
    s = study_s(cell)
    return None if s is None else cell.low_s / factor <= s <= cell.high_s * factor


def factor_needed(cell: Cell, factor: tuple = HOST_FACTOR) -> float | None:
    """The host factor at which the cell's serial prediction (its high end) equals the study's cell,
    every other input as measured and estimated: (study - device) / the host work at a factor of 1 (a
    compile for the target included: it is scaled alike). None where there is no study cell or no
    host work, or the device's estimate alone is at least the study's cell (then no host factor
    reaches it)."""
    s = study_s(cell)
    device = sum(v for n, v in cell.parts if n == "device (estimate)")
    host = (cell.high_s - device) / factor[1]
    if s is None or host <= 0 or s <= device:
        return None
    return (s - device) / host
