"""Memory: XLA's plan of each executable for a target, budgets, the measured run beside the plan, bad input."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from conftest import golden, pins
from stackwars_ir.bench.memory import Budget, budgets
from stackwars_ir.bench.planning import plan_files
from stackwars_ir.common.errors import StackwarsError

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
ITEMSIZE = {"float32": 4, "int32": 4, "int64": 8, "float64": 8, "bool": 1}


def _sidecar_argument_bytes(path) -> int:
    side = json.loads(path.with_suffix(".json").read_text())
    return sum(int(np.prod(a["shape"], dtype=np.int64)) * ITEMSIZE[a["dtype"]] for a in side["arguments"])


@pytest.fixture(scope="module")
def gpt2_plans():
    files = [golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), golden("gpt2", "jax-train")]
    return files, plan_files(files, "cpu", budgets("t4,1M"), timeout=120)


def test_the_cpu_plan_holds_exactly_the_captured_arguments(gpt2_plans):
    files, report = gpt2_plans
    assert not report.failed and report.target == "cpu" and "CPU backend" in report.whose_plan
    for path, plan in zip(files, report.plans):
        assert plan.argument_bytes == _sidecar_argument_bytes(path)
        assert plan.peak_bytes == plan.argument_bytes + plan.output_bytes - plan.alias_bytes + plan.temp_bytes
        assert plan.batch == 2 and plan.sha256
    forward, train = report.plans[0], report.plans[2]
    assert forward.output_bytes == 2 * 16 * 64 * 4  # the last hidden state, float32
    # A training step returns the new parameters and both AdamW moments beside the loss: every state
    # tensor comes back, none donated, so its outputs are about as large as its arguments.
    assert train.alias_bytes == 0 and train.output_bytes > 0.9 * train.argument_bytes


def test_budgets_say_fits_or_oom_with_the_headroom(gpt2_plans):
    _, report = gpt2_plans
    data = report.as_json()
    jax_train = data["executables"][2]
    assert jax_train["budgets"]["t4"]["fits"] and jax_train["budgets"]["t4"]["headroom_bytes"] > 15 << 30
    one_mib = jax_train["budgets"]["1M"]
    assert not one_mib["fits"] and one_mib["headroom_bytes"] == (1 << 20) - jax_train["peak_bytes"] - jax_train["code_bytes"]


def test_budget_names_and_sizes():
    assert Budget.parse("v6e-1").bytes == 32 << 30 and Budget.parse("T4").bytes == 16 << 30
    assert Budget.parse("512MiB").bytes == 512 << 20 and Budget.parse("1.5G").bytes == 3 << 29
    assert [b.name for b in budgets("t4, h100-80gb,8G")] == ["t4", "h100-80gb", "8G"]
    for bad in ("3Q", "v7x-1", "0G", "-1G"):
        with pytest.raises(StackwarsError):
            Budget.parse(bad)


def test_a_measured_run_matches_its_plan(tmp_path):
    # 4 MiB output, no temporaries: what one run adds to the process's peak is the output.
    n = 1024
    path = tmp_path / "add.mlir"
    path.write_text(f"func.func @main(%a: tensor<{n}x{n}xf32>, %b: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{\n"
                    f"  %0 = stablehlo.add %a, %b : tensor<{n}x{n}xf32>\n  return %0 : tensor<{n}x{n}xf32>\n}}\n")
    (plan,) = plan_files([path], "cpu", measure=True, timeout=60).plans
    assert plan.ok and plan.argument_bytes == 2 * n * n * 4
    planned = plan.temp_bytes + plan.output_bytes
    assert planned >= n * n * 4
    assert 0.85 * planned <= plan.measured.run_bytes <= 1.15 * planned + (1 << 20)


def test_cli_table_json_and_markdown(cli, tmp_path):
    out, md = tmp_path / "m.json", tmp_path / "m.md"
    code, stdout, err = cli("memory", golden("gemm", "jax"), "--budget", "v6e-1", "--json", out, "--markdown", md)
    assert code == 0, err
    assert "CPU backend" in stdout and "fits" in stdout and "v6e-1 (32.0 GiB)" in stdout
    data = json.loads(out.read_text())
    assert data["executables"][0]["budgets"]["v6e-1"]["fits"] and data["versions"]["jax"]
    assert "| executable |" in md.read_text()


def test_bad_input_is_one_line_and_the_others_are_still_planned(cli, tmp_path):
    bad = tmp_path / "unknown.mlir"
    bad.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                   "  %0 = stablehlo.custom_call @no_such_kernel_anywhere(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
                   "  return %0 : tensor<4xf32>\n}\n")
    out = tmp_path / "m.json"
    code, stdout, err = cli("memory", bad, golden("gemm", "jax"), "--json", out)
    assert code == 2 and "Traceback" not in err
    rows = json.loads(out.read_text())["executables"]
    assert rows[0]["error"] and rows[1]["peak_bytes"] > 0
    for args, words in ((("--budget", "3Q"), "neither a size nor a device"),
                        (("--target", "tpu-v9"), "unknown --target"),
                        (("--measure", "--target", "gpu"), "needs --target cpu"),
                        (("--batch", "4"), "applies to `memory MODEL`")):
        code, stdout, err = cli("memory", golden("gemm", "jax"), *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_chips_for_a_target_that_is_no_tpu_generation_is_one_line(cli):
    # memory MODEL --chips read a local name before it was set on this path: an UnboundLocalError's
    # traceback instead of the one-line error (found by pyflakes, issue 52's review).
    code, _, err = cli("memory", "ffn", "--chips", "--target", "cpu")
    assert code == 2 and "--chips searches the slices of a TPU generation" in err and "--target tpu-v" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # a capture and a libtpu compile per slice
@pytest.mark.skipif(not HAS_LIBTPU, reason="needs libtpu (`make setup-tpu`)")
def test_chips_finds_the_smallest_slice_whose_chips_each_hold_their_share(cli, tmp_path):
    import json

    code, out, err = cli("memory", "ffn", "--chips", "--target", "tpu-v6e", "--budget", "v6e-1", "--out",
                         tmp_path / "c", "--json", tmp_path / "m.json")
    assert code == 0, err
    found = json.loads((tmp_path / "m.json").read_text())["smallest_slice"]
    assert found and all(m["chips"] == 1 for m in found), found  # a tiny FFN fits one chip


@pytest.mark.skipif(HAS_LIBTPU, reason="libtpu is installed here")
def test_a_tpu_target_without_libtpu_says_how_to_install_it(cli):
    code, _, err = cli("memory", golden("gemm", "jax"), "--target", "tpu-v6e")
    assert code == 2 and "make setup-tpu" in err and f"libtpu=={pins('requirements-tpu.lock')['libtpu']}" in err


def test_the_libtpu_the_errors_name_is_the_one_setup_tpu_installs():
    from stackwars_ir.bench.memory import LIBTPU
    from stackwars_ir.common.runtime import _INSTALL

    version = pins("requirements-tpu.lock")["libtpu"]
    assert LIBTPU == f"libtpu=={version}" and f"libtpu {version}" in _INSTALL["tpu"]
    assert f"jax-cuda12-plugin {pins('requirements-gpu.lock')['jax-cuda12-plugin[with-cuda]']}" in _INSTALL["gpu"]


@pytest.mark.skipif(not HAS_LIBTPU, reason="needs libtpu (`make setup-tpu`)")
def test_the_tpu_compiler_plans_without_a_tpu():
    files = [golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla")]
    report = plan_files(files, "tpu-v6e", budgets("v6e-1"), timeout=300)
    assert not report.failed and "TPU v6e" in report.whose_plan
    for plan in report.plans:
        # TPU layouts pad to tiles: never less than the arguments' own bytes.
        assert plan.argument_bytes >= _sidecar_argument_bytes(golden("gpt2", plan.name)) and plan.code_bytes > 0


def _search(need, budget, limit=1024):
    from stackwars_ir.bench.memory import MemoryPlan, search_max_batch

    asked = []

    def probe(b):
        asked.append(b)
        return {"x": MemoryPlan("x", "cpu", argument_bytes=need(b))}

    (m,) = search_max_batch(probe, ["x"], (Budget("b", budget),), limit)
    return m, asked


@pytest.mark.parametrize("need, budget, largest, most", [
    (lambda b: 1000 + 100 * b, 50_000, 490, 4),  # linear: the line lands on the boundary
    (lambda b: 1000 + 100 * b + (5000 if b >= 256 else 0), 27_000, 255, 12),  # XLA's plans step
    (lambda b: 1000 + 3 * b * b, 10 ** 6, 577, 16),  # not linear: bisection finishes it
    (lambda b: 1000 + 100 * b, 500, 0, 1),  # not even batch 1
])
def test_the_largest_batch_is_the_boundary_whatever_the_plans_shape(need, budget, largest, most):
    m, asked = _search(need, budget)
    assert m.largest == largest and not m.error and len(asked) <= most
    # The answer is shown by compiles on both sides of it, never by extrapolation.
    assert need(largest + 1) > budget and m.need(largest + 1) == need(largest + 1)
    assert largest == 0 or m.need(largest) == need(largest) <= budget


def test_the_search_stops_at_its_limit():
    m, asked = _search(lambda b: 100 * b, 10 ** 12, limit=1024)
    assert m.largest == 1024 and m.at_limit and asked == [1, 2, 1024]


@pytest.mark.slow  # captures and compiles models (issue 52: every such test is marked)
def test_max_batch_compiles_abstract_captures_on_both_sides_of_the_boundary(cli, tmp_path):
    from stackwars_ir.bench.planning import plan_files

    code, out, err = cli("memory", "mha", "--max-batch", "--budget", "3M", "--exporter", "torch_xla,torchax",
                         "--out", tmp_path, "--json", tmp_path / "m.json")
    assert code == 0, err
    assert "torch_xla left out" in err and "largest batch that fits" in out
    data = json.loads((tmp_path / "m.json").read_text())
    found = {m["name"]: m for m in data["max_batch"]}
    assert set(found) == {"jax", "torch-torchax"}
    for name, m in found.items():
        b = m["largest_batch"]
        assert 1 < b < m["limit"] and m["need_bytes_at_largest"] <= 3 << 20 < m["need_bytes_at_next"]
        # The boundary's captures are on disk, abstract, and plan again to the same figures.
        at, nxt = (tmp_path / f"b{x}-s16" / "mha-tiny" / f"{name}.mlir" for x in (b, b + 1))
        assert json.loads(at.with_suffix(".json").read_text())["abstract"] is True
        again = plan_files([at, nxt], "cpu")
        assert [p.peak_bytes + p.code_bytes for p in again.plans] == \
            [m["need_bytes_at_largest"], m["need_bytes_at_next"]]


def test_bad_max_batch_requests_are_one_line(cli, tmp_path):
    for args, words in [(("mha", "--max-batch"), "none was given"),
                        (("mha", "--max-batch", "--budget", "1G", "--batch", "2"), "chooses the batches itself"),
                        (("mha", "--max-batch", "--budget", "1G", "--framework", "torch", "--exporter", "torch_xla"),
                         "use --exporter torchax"),
                        ((str(golden("mha", "jax")), "--max-batch"), "applies to `memory MODEL`")]:
        code, _, err = cli("memory", *args, "--out", tmp_path)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not any(tmp_path.rglob("*.mlir"))


_ALLOCATOR_PROBE = """
import resource, sys
import numpy as np
from stackwars_ir.bench.planning import ResidentWindow
faults = []
with ResidentWindow(fresh_blocks=sys.argv[1] == "1"):
    for _ in range(4):  # 16 MiB written, freed, four times
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.ones(4 * 2**20, dtype=np.float32)
        del a
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_a_bench_rows_memory_window_leaves_the_allocator_as_users_have_it():
    """bench measures each row's resident growth in the process it times: the window must not make
    glibc map every block anew (a later block of the same size then reuses the freed one, as in any
    process); `memory --measure`, which times nothing, does, so one run's peak is its live bytes."""
    import ast
    import subprocess
    import sys

    def probe(fresh: bool) -> list:
        out = subprocess.run([sys.executable, "-c", _ALLOCATOR_PROBE, "1" if fresh else "0"], check=True,
                             capture_output=True, text=True).stdout
        return ast.literal_eval(out.strip().splitlines()[-1])

    users, fresh = probe(False), probe(True)
    assert users[0] >= 1 and fresh[0] >= 1, (users, fresh)
    assert users[-1] * 10 < users[0], users  # glibc raised its threshold: the block is reused, no new pages
    assert fresh[-1] * 2 > fresh[0], fresh  # every block mapped and zeroed again


def test_one_target_table_feeds_the_plans_the_estimates_and_the_help():
    """issue 52: the TPU generations were listed in CLI help three times, in CHIPS and in SLICES/TARGETS."""
    from stackwars_ir.bench.estimate import CHIPS
    from stackwars_ir.bench.memory import DEVICES, SLICES, TARGETS, TOPOLOGIES
    from stackwars_ir.common.targets import TABLE, TPUS, is_tpu, names

    assert TARGETS == tuple(TABLE) and TARGETS[:2] == ("cpu", "gpu")
    assert set(SLICES) == set(TOPOLOGIES) == {t.name for t in TPUS} and TOPOLOGIES["tpu-v6e"] == "v6e:2x2"
    assert {t.one_chip: DEVICES[t.one_chip] for t in TPUS} == {"v6e-1": 32, "v5e-1": 16, "v5p-1": 95, "v4-1": 32}
    assert set(CHIPS) == {"tpu-v6e", "tpu-v5e"} and all(CHIPS[n] is TABLE[n].chip for n in CHIPS)
    assert is_tpu("tpu-v4") and not is_tpu("tpu") and not is_tpu("cpu") and not is_tpu("tpu-v9")
    assert names(TPUS) == "tpu-v6e, tpu-v5e, tpu-v5p, tpu-v4" and names(TPUS[:2], " or ") == "tpu-v6e or tpu-v5e"


def test_a_stack_s_worker_plans_with_the_values_staged_for_it(tmp_path):
    """plan_files in a stack stages the catalogue's argument values, and isolate passes them to every
    task as `staged`: plan_file takes them (regress's memory column read "unexpected keyword argument
    'staged'" for every PyTorch capture before), and a measured run uses them."""
    from pathlib import Path

    from stackwars_ir.bench.planning import plan_file
    from stackwars_ir.bench.staging import staged_values

    path = golden("gemm", "torch-torch_xla")
    staged = dict(staged_values([path], tmp_path))
    assert list(staged) == [str(path)] and Path(staged[str(path)]).exists()
    plan = plan_file(path, "cpu", True, staged=staged)
    assert plan.error is None and plan.measured is not None, plan
    assert plan_file(path, "cpu", staged=staged).peak_bytes == plan.peak_bytes


# Activations offloaded to host memory, as JAX writes `jax.device_put(x, memory_kind="pinned_host")`
# inside a jit for TPU: a 4 MiB temporary and a 4 MiB result placed in host memory.
OFFLOAD = """module @offload attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1024x1024xf32>, %arg1: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32> {mhlo.memory_kind = "device"}, tensor<1024x1024xf32> {mhlo.memory_kind = "pinned_host"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    %1 = stablehlo.tanh %0 : tensor<1024x1024xf32>
    %h = stablehlo.custom_call @annotate_device_placement(%1) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    %2 = stablehlo.dot_general %1, %arg1, contracting_dims = [1] x [0] : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    %3 = stablehlo.sine %2 : tensor<1024x1024xf32>
    %b = stablehlo.custom_call @annotate_device_placement(%h) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    %4 = stablehlo.add %3, %b : tensor<1024x1024xf32>
    %5 = stablehlo.exponential %4 : tensor<1024x1024xf32>
    %o = stablehlo.custom_call @annotate_device_placement(%5) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    return %4, %o : tensor<1024x1024xf32>, tensor<1024x1024xf32>
  }
}
"""


@pytest.mark.skipif(not HAS_LIBTPU, reason="needs libtpu (`make setup-tpu`)")
def test_a_tpu_plan_shows_host_offloaded_memory_apart_from_the_device(cli, tmp_path):
    """issue 78: a program offloading activations to host memory: libtpu plans those buffers in host
    memory (host_*_size_in_bytes), which the plan did not show; the device peak and the budgets
    count device memory alone."""
    path = tmp_path / "offload.mlir"
    path.write_text(OFFLOAD)
    code, out, err = cli("memory", path, "--target", "tpu-v6e", "--budget", "64MiB", "--json", tmp_path / "m.json")
    assert code == 0, err
    (plan,) = json.loads((tmp_path / "m.json").read_text())["executables"]
    mib = 1 << 20
    assert plan["host"]["output_bytes"] == 4 * mib and plan["host"]["temp_bytes"] == 4 * mib
    assert plan["host"]["peak_bytes"] == 8 * mib
    assert plan["output_bytes"] < 5 * mib  # the device holds one result; the other is in host memory
    assert plan["peak_bytes"] == plan["argument_bytes"] + plan["output_bytes"] + plan["temp_bytes"]
    assert "host (offloaded)" in out and "8.0 MiB" in out


def test_host_memory_is_a_column_of_its_own_in_every_rendering():
    from stackwars_ir.bench.memory import MemoryPlan, MemoryReport, budgets
    from stackwars_ir.report import html_report as html
    from stackwars_ir.report.markdown import memory_markdown
    from stackwars_ir.report.text import memory_text

    mib = 1 << 20
    plan = MemoryPlan("x/off.mlir", "tpu-v6e", 8 * mib, 4 * mib, 0, 8 * mib, mib, host_output_bytes=4 * mib,
                      host_temp_bytes=4 * mib)
    report = MemoryReport("tpu-v6e", (plan, MemoryPlan("x/on.mlir", "tpu-v6e", 8 * mib, 8 * mib, 0, 0, mib)),
                          budgets("v6e-1"))
    back = MemoryReport.from_json(json.loads(json.dumps(report.as_json())))
    assert back.plans[0].host_bytes == 8 * mib and back.plans[0].peak_bytes == 20 * mib
    for text in (memory_text(back), memory_markdown(back), html._memory(back)):  # noqa: SLF001
        assert "host (offloaded)" in text and "8.0 MiB" in text, text
    assert back.plans[0].fits(back.budgets[0])[1] == back.budgets[0].bytes - 21 * mib  # host bytes not counted
