"""The study's table predicted for its device (bench.predict): the arithmetic of a cell from host phases and a
target's estimate, on phases written out by hand (their figures are inputs here, not measurements)."""
from __future__ import annotations

import pytest

from study.table import factor_needed, study_s, within


def _phases(*rows):
    from stackwars_ir.bench.host import Phase

    return tuple(Phase(name, seconds, source, parent) for name, seconds, source, parent in rows)


def _torch_xla_host():
    """A torch_xla lazy forward as bench --host records it: steady, first and second runs."""
    from stackwars_ir.bench.host import HostPhases

    steady = _phases(("forward", 0.030, "timer", ""), ("lazy tracing in torch_xla's ops", 0.010, "torch_xla LazyTracing",
                                                         "forward"),
                     ("graphs cut and run mid-trace", 0.001, "torch_xla ExecuteTime+CompileTime", "forward"),
                     ("Python and PyTorch's dispatcher", 0.019, "timer", "forward"),
                     ("sync", 0.003, "timer", ""), ("wait", 0.400, "timer", ""),
                     ("device executing (ExecuteTime)", 0.400, "torch_xla ExecuteTime", "wait"))
    first = _phases(("forward", 0.130, "timer", ""), ("sync", 2.200, "timer", ""),
                    ("XLA compile", 2.190, "torch_xla CompileTime", "sync"), ("wait", 0.490, "timer", ""))
    return HostPhases(10, 0.433, steady, first=first, second=steady)


def test_a_steady_cell_spans_overlapped_to_serial_at_the_host_factor():
    from stackwars_ir.bench.predict import host_seconds, predict

    host = _torch_xla_host()
    h, parts = host_seconds(host.phases)
    # The host's part: the forward less the graph the device ran mid-trace, and the sync; never the wait.
    assert h == pytest.approx(0.030 - 0.001 + 0.003) and [n for n, _ in parts] == ["forward", "sync"]
    first, second, steady = predict("gpt2", "pytorch", host, device_s=0.0005, compile_s=3.0,
                                    compiles={"first": 1, "second": 0}, factor=(0.5, 1.0))
    assert steady.low_s == pytest.approx(max(h * 0.5, 0.0005)) and steady.high_s == pytest.approx(h + 0.0005)
    # The first run: its host work less XLA's compile here, plus the target's compile, then the device.
    h1 = 0.130 + 2.200 - 2.190
    assert first.low_s == pytest.approx((h1 + 3.0) * 0.5 + 0.0005) and first.high_s == pytest.approx(h1 + 3.0 + 0.0005)
    assert ("compile for the target x1", 3.0) in first.parts and not any("compile" in n for n, _ in second.parts)
    assert study_s(steady) == pytest.approx(0.027896) and within(steady) is True  # 27.9 ms within 2x of 16-33 ms
    assert within(first) is True and within(second) is False  # the study's second run compiled: 3.3 s


def test_the_unsynced_protocol_keeps_the_tracing_alone_and_cells_read_back():
    from stackwars_ir.bench.predict import UNSYNCED, Cell, predict_unsynced

    first, second, steady = predict_unsynced("gemm", _torch_xla_host(), factor=(0.5, 1.0))
    assert steady.framework == UNSYNCED and study_s(steady) == pytest.approx(0.055e-3)
    assert steady.low_s == pytest.approx((0.030 - 0.001) * 0.5) and steady.high_s == pytest.approx(0.030 - 0.001)
    assert first.high_s == pytest.approx(0.130) and [n for n, _ in first.parts] == ["forward"]
    assert Cell.from_json(steady.as_json()) == steady
    assert within(Cell("nope", "jax", "steady", 1.0, 2.0, ())) is None  # no study cell: no verdict


def test_a_cell_outside_2x_names_the_host_factor_that_would_reach_the_study():
    """The assumption that fails, by how much: at the factor it prints, the serial prediction (host work
    times the factor, plus the device's estimate) equals the study's cell; a device estimate above the
    study's cell reaches it with no factor."""
    from stackwars_ir.bench.predict import Cell, predict, predict_unsynced

    host = _torch_xla_host()
    first, second, steady = predict("gpt2", "pytorch", host, device_s=0.0005, compile_s=3.0,
                                    compiles={"first": 1, "second": 0}, factor=(0.5, 1.0))
    for cell in (first, second, steady) + predict_unsynced("gpt2", host, factor=(0.5, 1.0)):
        need = factor_needed(cell, (0.5, 1.0))
        device = sum(v for n, v in cell.parts if n == "device (estimate)")
        assert need * (cell.high_s - device) + device == pytest.approx(study_s(cell)), cell
    assert factor_needed(second, (0.5, 1.0)) > 100  # the study's second run compiled: no host is that slow
    slow_device = Cell("gemm", "jax", "steady", 0.001, 0.0011, (("dispatch", 0.0001), ("device (estimate)", 0.001)))
    assert factor_needed(slow_device) is None  # 1 ms of device alone is above the study's 0.192 ms
