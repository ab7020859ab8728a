"""bench --host (each native runtime's steady step by host phase, and its forward's host time by module) and
the host columns of diff --bench (issue 54)."""
from __future__ import annotations

import json
import time

import pytest


def test_a_phased_step_splits_at_its_marks_and_its_parts_add_up_to_each_phase():
    from stackwars_ir.bench.host import HostPhases, Meter, phases_of

    ticks = {"n": 0}

    def read() -> dict:  # a runtime's own cumulative clock (seconds) and count
        return {"busy": ticks["n"] * 0.001, "#graphs": ticks["n"]}

    def run(clock):
        time.sleep(0.002)
        ticks["n"] += 1  # one graph of 1 ms on the runtime's clock in the first phase
        clock.mark("trace")
        time.sleep(0.001)
        ticks["n"] += 100  # a clock of another thread: 100 ms, more than the phase lasted
        clock.mark("wait")

    def split(phase, seconds, change):
        return [("busy", change["busy"], "runtime busy"), (f"rest of {phase}", 0.0, "timer")]

    h = phases_of(run, 5, Meter(read, split, lambda change: change["busy"],
                                lambda counts: (f"{counts['graphs']:g} graphs",)))
    top = [p for p in h.phases if not p.parent]
    assert [p.name for p in top] == ["trace", "wait"] and h.runs == 5 and len(h.walls) == 5
    # The median run's figures: the phases add up to its wall time, and each phase's parts to it.
    assert h.wall_s == sorted(h.walls)[2] and h.timed_s == pytest.approx(h.wall_s, rel=1e-12)
    assert h.coverage == pytest.approx(1.0) and h.unattributed_s == pytest.approx(0.0, abs=1e-12)
    for phase in top:
        parts = [p for p in h.phases if p.parent == phase.name]
        assert sum(p.seconds for p in parts) == pytest.approx(phase.seconds, rel=1e-12)
        assert len(phase.per_run) == 5 and phase.seconds in phase.per_run
    parts = {(p.parent, p.name): p for p in h.phases if p.parent}
    assert parts[("trace", "busy")].seconds == pytest.approx(0.001)  # the runtime's clock inside the phase
    # A clock that ran longer than its phase (another thread's) is clipped to it: nothing is counted twice.
    assert parts[("wait", "busy")].seconds == pytest.approx(top[1].seconds) and ("wait", "rest of wait") in parts
    assert parts[("wait", "rest of wait")].seconds == 0.0
    assert h.counters == {"graphs": 101} and h.notes == ("101 graphs",) and h.device_s == pytest.approx(0.101)
    assert 0 < h.by_runtime <= 1
    assert HostPhases.from_json(json.loads(json.dumps(h.as_json()))) == h


def test_the_module_clock_gives_each_module_its_self_time_and_layers_group():
    import torch

    from stackwars_ir.bench.host import ModuleHost, layered, modules_of

    class Slow(torch.nn.Module):
        def __init__(self, seconds):
            super().__init__()
            self.seconds = seconds

        def forward(self, x):
            time.sleep(self.seconds)
            return x

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Slow(0.004)

        def forward(self, x):
            time.sleep(0.002)  # the layer's own code, outside its child
            return self.inner(x)

    model = torch.nn.Sequential(Layer(), Layer())
    x = torch.zeros(2)
    modules, hooked, _ = modules_of(lambda: model(x), model, 3, phase="forward")
    got = {m.path: m for m in modules}
    assert set(got) == {"", "0", "0.inner", "1", "1.inner"}
    # Self time: a layer holds its own sleep, not its child's (sleeps are lower bounds; no upper bound
    # is asserted on a shared machine).
    assert all(got[f"{i}.inner"].seconds >= 0.004 and got[str(i)].seconds >= 0.002 for i in (0, 1))
    # No second counted twice: a layer's time without its child's (were the child's counted in the
    # layer too, the sum would pass the hooked run's wall time).
    assert sum(m.seconds for m in modules) <= hooked and all(m.phase == "forward" and len(m.per_run) == 3
                                                              for m in modules)
    groups = {path: (s, n) for path, s, n, _ in layered(modules)}
    assert groups["*.inner"][1] == 2 and groups["*.inner"][0] == pytest.approx(got["0.inner"].seconds
                                                                              + got["1.inner"].seconds)
    assert ModuleHost.from_json(got["0"].as_json()) == got["0"]


def test_a_training_steps_backward_is_clocked_by_module_apart_from_its_forward():
    import torch

    from stackwars_ir.bench.host import layered, modules_of

    class SlowGrad(torch.autograd.Function):  # an op whose backward takes the host 3 ms
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            time.sleep(0.003)
            return g

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.act = torch.nn.ReLU(inplace=True)  # modifies Linear's output in place: clocked all the same

        def forward(self, x):
            return self.act(self.lin(SlowGrad.apply(x)))

    model = torch.nn.Sequential(Layer(), Layer())
    x = torch.ones(2, 4, requires_grad=True)

    def step():
        model(x).sum().backward()

    modules, hooked, _ = modules_of(step, model, 3, phase="forward")
    back = {m.path: m for m in modules if m.phase == "backward"}
    fwd = {m.path for m in modules if m.phase == "forward"}
    assert fwd == {"", "0", "0.lin", "0.act", "1", "1.lin", "1.act"}
    assert set(back) == {"0", "0.lin", "0.act", "1", "1.lin", "1.act"}  # the root made no node of its own
    # Each layer's own backward (SlowGrad's sleep, outside its Linear) is its self time, not its child's.
    assert all(back[str(i)].seconds >= 0.003 and back[f"{i}.lin"].seconds < back[str(i)].seconds for i in (0, 1))
    assert sum(m.seconds for m in modules) <= hooked
    groups = {path for path, _, _, _ in layered(modules)}
    assert "* (backward)" in groups and "*" in groups
    # A forward pass (no phase) clocks no backward.
    assert all(m.phase == "" for m in modules_of(lambda: model(x), model, 2)[0])


def test_what_a_pytorch_user_can_run_instead_has_a_training_loop_too():
    """torch_xla through dynamo and torchax's jitted step as training loops (issue 54 item 7): each
    proves its first step's loss against PyTorch eager's, and splits its steady step into phases named
    for what runs in them (dynamo's optimizer step is AdamW's lazy ops, not dynamo's guards)."""
    from stackwars_ir.bench.native import baselines_asked
    from stackwars_ir.bench.run import bench_baselines
    from stackwars_ir.bench.timing import Asked
    from stackwars_ir.capture import Request

    assert baselines_asked("torch_xla_dynamo,torchax", "train") == ("torch_xla_dynamo", "torchax")
    req = Request("ffn", step="train").validated()
    # In a worker, as bench runs them: torch_xla's device must start before the process's first backward
    # (workload.train.register_torch_xla), and this test process has run backwards already.
    rows = {e.kind: e for e in bench_baselines(req, ("torch_xla_dynamo", "torchax"), "cpu", 300,
                                               asked=Asked(runs=3, host=3))}
    assert set(rows) == {"torch_xla dynamo", "torchax jit"}, rows
    assert all(e.ok and e.proof.ok and e.host is not None for e in rows.values()), [e.error for e in rows.values()]
    dynamo = rows["torch_xla dynamo"].host
    assert [p.name for p in dynamo.phases if not p.parent] == ["forward and loss", "backward", "optimizer step",
                                                                "sync", "wait"]
    rests = {p.parent: p.name for p in dynamo.phases if p.parent and p.source == "timer"}
    assert rests["optimizer step"] == "Python and PyTorch's dispatcher (AdamW's lazy ops)"
    assert rests["backward"] == "autograd's engine and the compiled backward's launch"
    assert [p.name for p in rows["torchax jit"].host.phases if not p.parent] == ["dispatch", "wait"]


@pytest.mark.slow  # over 20 s here (issue 52): torch_xla's compiles of GPT-2 tiny's two graphs
def test_native_runtimes_steady_steps_split_into_named_phases_from_their_own_clocks():
    from stackwars_ir.bench import Executable
    from stackwars_ir.bench.native import run_baselines
    from stackwars_ir.bench.timing import Asked
    from stackwars_ir.capture import Request
    from stackwars_ir.report.text import host_text
    from stackwars_ir.workload import prepare

    req = Request("gpt2").validated()
    rows = {e.kind: e for e in run_baselines(req, ("torch_xla", "jax", "eager", "torch_xla_dynamo", "torchax"), 120,
                                             asked=Asked(runs=3, host=3))}
    assert set(rows) == {"torch_xla lazy", "jax.jit", "torch eager", "torch_xla dynamo", "torchax jit"}
    assert all(e.proof.ok for e in rows.values())  # each computed the model's output (issue 54, item 7)
    assert all(e.ok and e.host is not None for e in rows.values()), [e.error for e in rows.values()]
    paths = {name for name, _ in prepare(req).model.named_modules()}
    for e in rows.values():
        h = e.host
        assert h.runs == 3 and h.coverage >= 0.9 and h.timed_s == pytest.approx(h.wall_s, rel=1e-9)
        assert Executable.from_json(json.loads(json.dumps(e.as_json()))).host == h
    xla = rows["torch_xla lazy"].host
    assert [p.name for p in xla.phases if not p.parent] == ["forward", "sync", "wait"]
    parts = {p.name: p for p in xla.phases if p.parent}
    # torch_xla's own clocks: its lazy tracing inside the forward, the graph's execution inside the wait.
    assert parts["lazy tracing in torch_xla's ops"].seconds > 0 and parts["lazy tracing in torch_xla's ops"].source \
        == "torch_xla LazyTracing"
    assert 0 < xla.device_s and xla.by_runtime > 0
    # HF's GPT-2 reads a value back while tracing (its attention mask's check), which cuts the graph:
    # the counts per step say so, and a note explains it.
    assert xla.counters["syncs"] == 1 and xla.counters["graphs executed"] >= 1
    if xla.counters["graphs executed"] > 1:
        assert xla.counters["values read by the host"] >= 1 and "cuts the lazy graph" in xla.notes[0]
    # The forward's host time by module: every module of the model, keyed by the captures' paths.
    got = {m.path for m in xla.modules}
    assert {"h.0.attn", "h.1.mlp", ""} <= got <= paths and xla.hooked_wall_s > 0
    assert rows["torch eager"].host.modules and not rows["jax.jit"].host.modules
    assert [p.name for p in rows["jax.jit"].host.phases if not p.parent] == ["dispatch", "wait"]
    assert rows["jax.jit"].host.device_s is None  # no device clock outside jax's profiler: said, not invented
    # What a PyTorch user can run instead: torch_xla through dynamo traces nothing in a steady call
    # (torch_xla's tracing clock stays still), torchax's jitted call dispatches as jax.jit does.
    dynamo = rows["torch_xla dynamo"].host
    assert [p.name for p in dynamo.phases if not p.parent] == ["forward", "wait"] and dynamo.device_s > 0
    assert all(p.name != "lazy tracing in torch_xla's ops" for p in dynamo.phases)
    assert any(p.name == "dynamo's guards and the compiled graph's launch" for p in dynamo.phases)
    assert [p.name for p in rows["torchax jit"].host.phases if not p.parent] == ["dispatch", "wait"]
    # The timed first and second runs, marked as the steady ones (issue 54, item 3): the first compiles,
    # by the runtime's own clock, inside the phase that compiles (torch_xla's sync, jax.jit's call).
    first = {(p.parent, p.name): p.seconds for p in xla.first}
    second = {(p.parent, p.name): p.seconds for p in xla.second}
    assert first[("sync", "XLA compile")] > 0 and ("sync", "XLA compile") not in second
    jax_first = {(p.parent, p.name): p.seconds for p in rows["jax.jit"].host.first}
    assert jax_first[("dispatch", "XLA compile")] > 0 and jax_first[("dispatch", "tracing to a jaxpr")] > 0
    assert not any(p.name == "XLA compile" for p in rows["jax.jit"].host.second)
    text = "\n".join(host_text([(2, e) for e in rows.values()]))
    assert "host phases of a steady step" in text and "torch_xla LazyTracing" in text and "h.*.attn" in text


@pytest.mark.slow  # over 20 s here (issue 52): captures, a profile and torch_xla's compiles
def test_diff_bench_shows_the_hosts_time_per_block_beside_the_kernels(cli, tmp_path):
    from stackwars_ir.bench.run import BenchReport

    bench = tmp_path / "b.json"
    code, out, err = cli("bench", "gpt2", "--baselines", "torch_xla,jax", "--runs", "3", "--profile", "2",
                         "--host", "2", "--out", tmp_path / "caps", "--json", bench)
    assert code == 0, err
    assert "host phases of a steady step" in out and "lazy tracing in torch_xla's ops" in out
    report = BenchReport.from_json(json.loads(bench.read_text()))
    xla = next(e.host for _, e in report.rows if e.kind == "torch_xla lazy")
    folder = tmp_path / "caps" / "gpt2-tiny"
    diff = tmp_path / "d.json"
    code, out, err = cli("diff", folder / "jax.mlir", folder / "torch-torch_xla.mlir", "--bench", bench,
                         "--json", diff)
    assert code in (0, 1), err
    data = json.loads(diff.read_text())
    host = data["metrics"]["host"]
    assert host["a"]["label"] == "jax.jit (native)" and host["b"]["label"] == "torch_xla lazy tensors"
    # Every second the modules spent on the host lands in an aligned block, in an unmatched one, or is
    # named as in no block.
    in_blocks = sum(b["metrics"]["time"].get("host_b", 0.0) for b in data["blocks"])
    assert in_blocks + host["b"]["untraced_s"] + host["b"]["unaligned_s"] == \
        pytest.approx(host["b"]["in_modules_s"], rel=1e-9)
    assert host["b"]["in_modules_s"] == pytest.approx(sum(m.seconds for m in xla.modules), rel=1e-9)
    # Which blocks hold it is not asserted here: run alone or under `make test` (--dist loadfile) the
    # attention blocks held 1.0-1.2 ms each at GPT-2 tiny, but two runs beside test_bench.py's tests in
    # one xdist worker saw them at 0 (issue 54's note: not yet explained).
    assert all("host_a" not in b["metrics"]["time"] for b in data["blocks"])  # jax.jit runs no module on the host
    # each block's host time with its spread across the --host runs (issue 75, item 8)
    spreads = [b["metrics"]["time"]["host_b_p10_p90"] for b in data["blocks"] if b["metrics"]["time"].get("host_b")]
    assert spreads and all(0.0 <= low <= high for low, high in spreads)
    assert "host A  host B" in out and "torch_xla lazy tensors: step" in out
    # The HTML report stacks each block's host time on its kernel time, side by side.
    html = tmp_path / "r.html"
    code, _, err = cli("report", folder / "jax.mlir", folder / "torch-torch_xla.mlir", "--bench", bench, "-o", html)
    assert code in (0, 1), err
    page = html.read_text()
    assert "Host and device by block" in page and "host: its modules" in page and "torch_xla lazy tensors: step" in page


def test_a_training_steps_backward_host_time_lands_in_its_backward_blocks():
    """diff --bench's host columns on the golden GPT-2 tiny training steps: a module's backward self
    time goes to the backward block holding its path, its forward's to the forward block."""
    from pathlib import Path

    from stackwars_ir.bench.host import HostPhases, ModuleHost
    from stackwars_ir.diff import diff_files, with_host

    folder = Path(__file__).resolve().parents[1] / "captures" / "gpt2-tiny"
    report = diff_files(folder / "jax-train.mlir", folder / "torch-torch_xla-train.mlir")
    host = HostPhases(3, 0.05, (), modules=(ModuleHost("h.0.attn", 0.002, phase="forward"),
                                            ModuleHost("h.0.attn", 0.001, phase="backward"),
                                            ModuleHost("h.1.mlp.c_fc", 0.004, phase="backward")),
                      hooked_wall_s=0.06)
    result = with_host(report, report.result(), None, ("torch_xla lazy training loop", host))
    held = {(b.role, b.layer, b.phase): b.metrics["time"]["host_b"] for b in result.blocks
            if b.metrics["time"].get("host_b")}
    assert held == {("attention", (0,), "forward"): pytest.approx(0.002),
                    ("attention", (0,), "backward"): pytest.approx(0.001), ("mlp", (1,), "backward"): pytest.approx(0.004)}
    assert result.metrics["host"]["b"]["untraced_s"] == 0.0


def _phased(walls, hooked_walls, modules):
    from stackwars_ir.bench.host import HostPhases, Phase

    wall = sorted(walls)[len(walls) // 2]
    return HostPhases(len(walls), wall, (Phase("forward", wall, "timer", "", tuple(walls)),), modules=modules,
                      hooked_wall_s=sorted(hooked_walls)[len(hooked_walls) // 2], walls=tuple(walls),
                      hooked_walls=tuple(hooked_walls))


def test_a_modules_host_time_that_moves_more_than_itself_is_flagged_and_the_hooks_cost_has_its_interval():
    """issue 75, item 8: `h.*.mlp` read 4.27 ms in one bench and 0.242 ms in the next, with no spread
    shown, and one bench put the hooks' cost at -20%."""
    from stackwars_ir.bench.executable import Executable
    from stackwars_ir.bench.host import ModuleHost
    from stackwars_ir.report.text import host_text

    steady = (1e-3, 1.02e-3, 0.98e-3, 1.01e-3, 0.99e-3)  # one layer's mlp: 1 ms, within 2%
    shaky = (0.2e-3, 4.3e-3, 0.24e-3, 3.9e-3, 0.25e-3)  # the other's: median run 0.24 ms, p10-p90 ~4 ms
    modules = (ModuleHost("h.0.mlp", 1e-3, steady), ModuleHost("h.1.mlp", 0.24e-3, shaky),
               ModuleHost("h.0.attn", 2e-3, (2e-3,) * 5))
    host = _phased([10e-3, 9e-3, 11e-3, 10.5e-3, 9.5e-3], [10.2e-3, 9.1e-3, 11.3e-3, 9.8e-3, 10.4e-3], modules)
    text = "\n".join(host_text([(2, Executable("torch_xla", "torch_xla lazy", 1.0, None, host=host))]))
    mlp = next(line for line in text.splitlines() if line.startswith("h.*.mlp"))
    assert "1.240*" in mlp, text  # h.0's 1 ms + h.1's 0.24 ms, flagged: the spread of their sum is ~4 ms
    attn = next(line for line in text.splitlines() if line.startswith("h.*.attn"))
    assert "2.000 " in attn and "2.000*" not in attn and "2.000-2.000" in attn
    assert "*: 1 of these figures moved more across the runs than their own size" in text
    assert "(95% interval " in text and "indistinguishable from no cost" in text  # hooked and plain runs overlap
    # A cost far outside the runs' spread is a finding, with its sign.
    costly = _phased([10e-3, 9e-3, 11e-3, 10.5e-3, 9.5e-3], [15e-3, 14e-3, 16e-3, 15.5e-3, 14.5e-3], modules)
    cost, low, high = costly.hooks_cost()
    assert 0.2 < low <= cost <= high < 0.9 and abs(cost - 0.5) < 1e-9  # excludes no cost
    said = "\n".join(host_text([(2, Executable("torch_xla", "torch_xla lazy", 1.0, None, host=costly))]))
    assert "+50% against the phased runs (95% interval +" in said and "indistinguishable" not in said


def test_a_bench_from_before_the_hooked_totals_says_its_cost_has_no_interval():
    from stackwars_ir.bench.host import HostPhases
    from stackwars_ir.report.text import host_text
    from stackwars_ir.bench.executable import Executable

    host = _phased([10e-3, 9e-3, 11e-3], [8e-3, 8e-3, 8e-3], ())
    old = HostPhases.from_json({k: v for k, v in host.as_json().items() if k != "hooked_walls"})
    assert old.hooks_cost() is None and host.hooks_cost()[2] < 0  # hooked faster: the runs moved more
    from stackwars_ir.bench.host import ModuleHost

    old = HostPhases.from_json(dict(old.as_json(), modules=[ModuleHost("fc", 1e-3, (1e-3,) * 3).as_json()]))
    text = "\n".join(host_text([(None, Executable("eager", "torch eager", 1.0, None, host=old))]))
    assert "-20% against the phased runs (no interval: this bench kept only the median runs)" in text
