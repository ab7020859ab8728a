"""Version stacks, regress and bisect: pins checked, the search's cost, an injected regression, a real second stack."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from stackwars_ir.isolate import stacks as stack
from stackwars_ir.common.errors import StackwarsError
from stackwars_ir.versions.bisection import changed, released_between, search

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from stackwars_ir.cli.commands import main; main()"]


def cli(*args, env=None, timeout=600):
    import os

    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name, reqs, said", [
    ("lock", ["jax==0.9.2", "jaxlib==0.9.2"], "'lock' is the project's own stack"),
    ("a/b", ["jax==0.9.2", "jaxlib==0.9.2"], "letters, digits"),
    ("old", ["jax>=0.9"], "not an exact pin"),
    ("old", ["jax==0.9.2"], "jax is pinned without jaxlib"),
    ("old", [], "at least one requirement"),
])
def test_a_stack_needs_a_name_and_exact_pins(tmp_path, monkeypatch, name, reqs, said):
    monkeypatch.setenv(stack.HOME_ENV, str(tmp_path))
    with pytest.raises(StackwarsError, match=said):
        stack.add(name, reqs)
    assert list(tmp_path.iterdir()) == []  # refused before anything is made


def test_stack_commands_say_one_line_and_exit_2(tmp_path):
    env = {stack.HOME_ENV: str(tmp_path)}
    for args, said in ((["stack", "add", "x", "jax>=0.9"], "not an exact pin"),
                       (["stack", "remove", "nope"], "no stack 'nope'"),
                       (["capture", "gpt2", "--framework", "jax", "--stack", "nope"], "no stack 'nope'"),
                       (["bench", "a.mlir", "--stack", "nope"], "no stack 'nope'"),
                       (["regress", "gpt2", "--from", "nope"], "no stack 'nope'"),
                       (["regress", "a.mlir"], "give a MODEL or two files"),
                       (["bisect", "gpt2", "--good", "torch==2.8", "--bad", "jax==0.10.2"], "given as jax==VERSION")):
        done = cli(*args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_stack_list_names_the_lock_with_this_process_versions(tmp_path):
    done = cli("stack", "list", "--json", "-", env={stack.HOME_ENV: str(tmp_path)})
    assert done.returncode == 0, done.stderr
    (only,) = json.loads(done.stdout)["stacks"]
    from stackwars_ir.common.files import versions

    assert only["name"] == "lock" and only["versions"] == versions()


def test_a_stack_record_is_found_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv(stack.HOME_ENV, str(tmp_path))
    (tmp_path / "jax-0.9.2").mkdir()
    (tmp_path / "jax-0.9.2" / "stack.json").write_text(json.dumps(
        {"format": 1, "name": "jax-0.9.2", "requirements": ["jax==0.9.2", "jaxlib==0.9.2"],
         "versions": {"jax": "0.9.2", "jaxlib": "0.9.2"}}))
    found = stack.find("jax-0.9.2")
    assert found.python == str(tmp_path / "jax-0.9.2" / "env" / "bin" / "python") and not found.is_lock
    assert [s.name for s in stack.list_stacks()] == ["jax-0.9.2"]
    assert stack.remove("jax-0.9.2") == tmp_path / "jax-0.9.2" and not (tmp_path / "jax-0.9.2").exists()


@pytest.mark.slow  # over 20 s here (issue 52)
def test_a_jax_stack_refuses_a_pytorch_side_in_one_line(tmp_path):
    """A stack without torch (or without the exporter asked for) says so before any framework loads."""
    (tmp_path / "jax-0.9.2").mkdir()
    (tmp_path / "jax-0.9.2" / "stack.json").write_text(json.dumps(
        {"format": 1, "name": "jax-0.9.2", "requirements": ["jax==0.9.2", "jaxlib==0.9.2"],
         "versions": {"jax": "0.9.2", "jaxlib": "0.9.2", "torch": None}}))
    env = {stack.HOME_ENV: str(tmp_path)}
    for args in (["capture", "gpt2", "--stack", "jax-0.9.2", "--out", str(tmp_path / "c")],
                 ["regress", "gpt2", "--exporter", "torchax", "--from", "jax-0.9.2", "--out", str(tmp_path / "r")]):
        done = cli(*args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert "no PyTorch side in this stack: it holds no torch" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "c").exists()
    (tmp_path / "torch-2.8").mkdir()  # a PyTorch stack's record: from shapes it still lowers JAX alone
    (tmp_path / "torch-2.8" / "stack.json").write_text(json.dumps(
        {"format": 1, "name": "torch-2.8", "requirements": ["torch==2.8.0", "torch_xla==2.8.1"],
         "versions": {"jax": "0.10.2", "jaxlib": "0.10.2", "torch": "2.8.0", "torch_xla": "2.8.1"}}))
    done = cli("capture", "gpt2", "--stack", "torch-2.8", "--abstract", "--out", str(tmp_path / "c"), env=env)
    assert done.returncode == 2 and "lowers the JAX twin alone" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "c").exists()
    # Its torchax installed but not importable (torch_xla 2.8.1's copy on jax 0.10.2): the route is refused.
    record = json.loads((tmp_path / "torch-2.8" / "stack.json").read_text())
    record["versions"]["torchax"] = "0.0.4 (torch_xla 2.8.1's copy)"
    record["broken"] = {"torchax": "ImportError: cannot import name 'mutable_array' from 'jax.experimental'"}
    (tmp_path / "torch-2.8" / "stack.json").write_text(json.dumps(record))
    done = cli("capture", "gpt2", "--framework", "torch", "--exporter", "torchax", "--stack", "torch-2.8",
               "--out", str(tmp_path / "c"), env=env)
    assert done.returncode == 2, done.stderr
    assert "torchax does not import in this stack (ImportError: cannot import name 'mutable_array'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def test_stacks_of_the_same_jax_and_jaxlib_time_together():
    """A PyTorch stack beside the lock's jax compiles with the same XLA: regress then times both files
    in one worker, run by run (versions.regress._timed_pair); other stacks take turns."""
    from stackwars_ir.versions.regress import same_xla

    lock = stack.lock()
    torch_28 = stack.Stack("torch-2.8", Path("/x"), (), {**lock.versions, "torch": "2.8.0", "torch_xla": "2.8.1"})
    jax_092 = stack.Stack("jax-0.9.2", Path("/y"), (), {"jax": "0.9.2", "jaxlib": "0.9.2"})
    assert same_xla(torch_28, lock) and same_xla(lock, lock)
    assert not same_xla(jax_092, lock) and not same_xla(stack.Stack("none", Path("/z")), stack.Stack("none", Path("/z")))


def _fake_distribution(site: Path, name: str, version: str, files: dict) -> None:
    """A dist-info whose RECORD lists `files` (relative path -> bytes) with their sha256, as pip writes it."""
    import base64
    import hashlib

    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = [f"{rel},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
            for rel, data in files.items()]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def test_a_torchax_overwritten_by_torch_xla_is_recorded_as_the_copy_that_runs(tmp_path, monkeypatch):
    """torch_xla's wheels carry a torchax of their own; installed after torchax, its files win. The
    recorded version is then the copy's, named after its owner, not the torchax distribution's."""
    from stackwars_ir.common.files import distribution_version

    own, copy = b'__version__ = "0.0.13"\n', b'__version__ = "0.0.6"\n'
    _fake_distribution(tmp_path, "torchax", "0.0.13", {"torchax/__init__.py": own})
    _fake_distribution(tmp_path, "torch_xla", "2.9.0", {"torchax/__init__.py": copy})
    (tmp_path / "torchax").mkdir()
    (tmp_path / "torchax" / "__init__.py").write_bytes(copy)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert distribution_version("torchax") == "0.0.6 (torch_xla 2.9.0's copy)"
    (tmp_path / "torchax" / "__init__.py").write_bytes(own)  # torchax installed last: its own files
    assert distribution_version("torchax") == "0.0.13"


def test_a_stack_s_interpreter_must_run(tmp_path, monkeypatch):
    """`stack add --python`: jax 0.11 and later need Python 3.12; an interpreter that does not run is
    one line, and nothing is made."""
    monkeypatch.setenv(stack.HOME_ENV, str(tmp_path / "stacks"))
    with pytest.raises(StackwarsError, match="--python /no/such/python: cannot run it"):
        stack.add("jax-new", ["jax==0.12.0.1", "jaxlib==0.12.0.1"], python="/no/such/python")
    assert not (tmp_path / "stacks").exists()
    assert stack._interpreter(sys.executable)[1] == ".".join(map(str, sys.version_info[:3]))
    with pytest.raises(StackwarsError, match="--python 3.99: "):  # a version: python3.99, then pyenv's
        stack._interpreter("3.99")
    done = cli("stack", "add", "jax-new", "jax==0.12.0.1", "jaxlib==0.12.0.1", "--python", "/no/such/python",
               env={stack.HOME_ENV: str(tmp_path / "stacks")})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_torch_xla_s_copy_without_a_torchax_distribution_is_recorded(tmp_path):
    """A stack that pins torch_xla and no torchax (the previous lock's torchax route) imports
    torch_xla's copy: recorded as that copy, not as absent. Run where no other site-packages is seen."""
    copy = b'__version__ = "0.0.6"\n'
    _fake_distribution(tmp_path, "torch_xla", "2.9.0", {"torchax/__init__.py": copy})
    (tmp_path / "torchax").mkdir()
    probe = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if 'site-packages' not in p] + "
             "[sys.argv[2]]; from stackwars_ir.common.files import distribution_version; print(distribution_version('torchax'))")

    def recorded() -> str:
        done = subprocess.run([sys.executable, "-c", probe, str(tmp_path), str(ROOT)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    (tmp_path / "torchax" / "__init__.py").write_bytes(b'__version__ = "0.0.5"\n')  # not torch_xla's file
    assert recorded() == "None"
    (tmp_path / "torchax" / "__init__.py").write_bytes(copy)
    assert recorded() == "0.0.6 (torch_xla 2.9.0's copy)"


def test_a_pin_is_a_mismatch_when_other_code_imports():
    versions = {"jax": "0.10.2", "torchax": "0.0.6 (torch_xla 2.9.0's copy)", "torch_xla": "2.9.0", "numpy": None}
    lines = ["# a comment", "jax==0.10.2", "torch-xla==2.9.0", "torchax==0.0.13", "numpy==2.4.6", "absl-py==2.5.1", ""]
    assert stack.mismatches(lines, versions) == [
        "torchax==0.0.13 is pinned, but 0.0.6 (torch_xla 2.9.0's copy) imports",
        "numpy==2.4.6 is pinned, but nothing imports"]
    assert stack.mismatches(["jax==0.10.2", "torchax==0.0.6 (x)"], versions) == []


def test_the_lock_imports_at_its_pins(tmp_path):
    """`make setup` leaves the pinned torchax importable, not torch_xla's copy: `import jax, torchax`
    in a fresh process reports the versions requirements.lock pins, and `stack check` agrees."""
    pins = dict(line.split("==") for line in (ROOT / "requirements.lock").read_text().splitlines()
                if line.startswith(("jax==", "torchax==")))
    done = subprocess.run([sys.executable, "-c", "import os; os.environ.setdefault('PJRT_DEVICE', 'CPU'); "
                           "import jax, torchax; print(jax.__version__, torchax.__version__)"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == [pins["jax"], pins["torchax"]]
    ok = cli("stack", "check")
    assert ok.returncode == 0 and f"torchax {pins['torchax']}" in ok.stdout, ok.stderr
    other = tmp_path / "other.lock"
    other.write_text("jax==0.10.2\ntorchax==0.0.1\n")
    bad = cli("stack", "check", "--lock", str(other))
    assert bad.returncode == 2 and "torchax==0.0.1 is pinned, but" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    missing = cli("stack", "check", "--lock", str(tmp_path / "none.lock"))
    assert missing.returncode == 2 and "cannot read the lock" in missing.stderr


def test_the_recorded_torchax_is_the_one_that_imports():
    """In this process's environment (whichever order pip installed it in): the version recorded for
    torchax is the `__version__` of the code `import torchax` runs."""
    from stackwars_ir.common.files import versions

    done = subprocess.run([sys.executable, "-c", "import os; os.environ.setdefault('PJRT_DEVICE', 'CPU'); "
                           "import torchax; print(torchax.__version__)"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert versions()["torchax"].split()[0] == done.stdout.strip().splitlines()[-1]


def test_released_between_keeps_final_releases_in_order():
    available = ["0.8.3", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0rc1", "0.10.0", "0.10.1", "0.10.2", "0.4.38"]
    assert released_between("0.9.1", "0.10.1", available) == ["0.9.1", "0.9.2", "0.10.0", "0.10.1"]
    assert released_between("0.10.1", "0.9.2", available) == ["0.10.1", "0.10.0", "0.9.2"]  # a regression fixed later
    with pytest.raises(StackwarsError, match="0.9.3: not a released version"):
        released_between("0.9.3", "0.10.2", available)


@pytest.mark.parametrize("n", range(2, 40))
def test_bisect_finds_the_first_bad_version_in_log2_probes(n):
    versions = [f"0.{i}.0" for i in range(n)]
    for first_bad in range(1, n):  # the metric steps at every possible place
        probed = []

        def probe(v):
            probed.append(v)
            return 1 if versions.index(v) >= first_bad else 0

        found = search(versions, probe, lambda good, x: x != good)
        assert found.first_bad == versions[first_bad] and found.last_good == versions[first_bad - 1]
        assert len(probed) == len(set(probed)) == found.probes  # no version measured twice
        # the good end, then a binary search of the N - 1 steps; the bad end only when the step is there
        assert found.probes <= 1 + math.ceil(math.log2(n - 1)) + (first_bad == n - 1)
        if first_bad < n - 1:  # the bad end taken as the user says: ceil(log2 N) + 1 captures at most
            assert found.probes <= math.ceil(math.log2(n)) + 1


def test_bisect_says_when_nothing_changes():
    found = search(["1", "2", "3", "4"], lambda v: 7, lambda g, x: x != g, "kernels")
    assert found.first_bad is None and found.probes == 4 and "measures as" in found.note  # 1 + 2 + the bad end


def test_changed_reads_each_metric_with_its_noise():
    assert changed("kernels", 67, 68) and not changed("kernels", 67, 67)
    assert changed("fusions", ("loop_fusion", "ynn_fusion"), ("broadcast_divide_fusion", "loop_fusion"))
    assert not changed("fusions", ("loop_fusion",), ("loop_fusion",))
    assert changed("memory", 1000, 1200) and not changed("memory", 1000, 1050)
    quiet = tuple(1e-3 * (1 + 0.01 * (i % 5)) for i in range(40))
    assert not changed("steady", quiet, quiet)
    assert changed("steady", quiet, tuple(2 * x for x in quiet))


ADD = """module @regress_probe {
  func.func public @main(%arg0: tensor<512x512xf32>, %arg1: tensor<512x512xf32>) -> tensor<512x512xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<512x512xf32>
    return %0 : tensor<512x512xf32>
  }
}
"""
# The one op changed: the same shapes, a 512^3 matrix product instead of an element-wise add.
DOT = ADD.replace("stablehlo.add %arg0, %arg1 : tensor<512x512xf32>",
                  "stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
                  "(tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>")


@pytest.mark.slow
def test_regress_exits_1_on_an_injected_regression_and_0_on_the_same_program(tmp_path):
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    a.write_text(ADD)
    b.write_text(DOT)
    # CI mode (issue 53): A timed against a copy of itself first, the time threshold widened by the noise
    # that shows; the injected regression still fails.
    done = cli("regress", str(a), str(b), "--ci", "--rounds", "3", "--json", "-", "--markdown", str(tmp_path / "r.md"))
    assert done.returncode == 1, done.stderr
    page = (tmp_path / "r.md").read_text()
    assert "**REGRESSION:** steady time" in page and "only in A" in page
    got = json.loads(done.stdout)
    assert got["regressed"] and got["time"]["low"] > 2  # a 512^3 product against an add: many times slower
    assert any("steady time" in x for x in got["breaches"])
    assert got["memory"]["a"] == got["memory"]["b"]  # same arguments and result: the plan does not move
    c = got["time"]["calibration"]
    assert c["low"] <= c["ratio"] <= c["high"] and c["noise"] >= 0 and c["how"] == "together"
    # The same program on both sides (an A/A run): the IR identical, no threshold passed at the default
    # 10%: the interval is taken across rounds, each pairing A and A in one worker, so a loaded test
    # machine's drift between the rounds widens it instead of reading as a regression. (CI mode's A/A
    # only widens that threshold, by a noise of 0 or more: it passes where this does.)
    same = cli("regress", str(a), str(a), "--rounds", "3")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "IR: identical" in same.stdout and "no threshold passed" in same.stdout


@pytest.mark.slow
def test_regress_names_a_kernel_added_to_a_block(tmp_path):
    """--no-time: kernels and the memory plan only; a block that gains a kernel passes --kernels 0."""
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    a.write_text(ADD)
    b.write_text(ADD.replace("return %0", "%1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : "
                                          "(tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>\n"
                                          "    return %1"))
    done = cli("regress", str(a), str(b), "--no-time", "--json", "-")
    got = json.loads(done.stdout)
    assert got["time"] is None and got["kernels"]["b"] > got["kernels"]["a"]
    assert done.returncode == 1 and got["breaches"], done.stderr


@pytest.mark.slow
def test_regress_names_a_modules_backward_apart_from_its_forward():
    """A training step's backward blocks carry their module's name too: regress labels them
    `h.0.mlp (backward)`, not a second `h.0.mlp` (the upgrade page listed two h.1.mlp rows)."""
    step = ROOT / "captures" / "gpt2-tiny" / "jax-train.mlir"
    done = cli("regress", str(step), str(step), "--no-time", "--json", "-")
    assert done.returncode == 0, done.stderr
    labels = [b["label"] for b in json.loads(done.stdout)["blocks"]]
    assert "h.0.mlp" in labels and "h.0.mlp (backward)" in labels
    assert len(labels) == len(set(labels)), labels


@pytest.mark.slow
def test_a_second_jax_stack_captures_benches_and_regresses(tmp_path):
    """A real stack: jax 0.9.2 from the package index, made once in the stacks folder (about 900 MB:
    jax, jaxlib, flax, optax, transformers and their dependencies; a minute to make) and reused by
    every later run; nothing of it is inside the repository."""
    made = stack.add("jax-0.9.2", ["jax==0.9.2", "jaxlib==0.9.2"])
    assert made.versions["jax"] == "0.9.2" and ROOT not in Path(made.root).parents
    done = cli("capture", "gpt2", "--framework", "jax", "--stack", "jax-0.9.2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "parity jax" in done.stdout and "ok" in done.stdout
    mlir = tmp_path / "gpt2-tiny" / "jax.mlir"
    side = json.loads(mlir.with_suffix(".json").read_text())
    assert side["stack"]["name"] == "jax-0.9.2" and side["versions"]["jax"] == "0.9.2"
    assert side["versions"]["torch"] is not None  # the weights and reference: this process's torch
    from stackwars_ir.capture.sanitize import absolute_paths

    assert not absolute_paths(mlir.read_text()) and str(made.root) not in mlir.read_text()
    bench = cli("bench", str(mlir), "--stack", "jax-0.9.2", "--runs", "5", "--json", "-")
    assert bench.returncode == 0, bench.stderr
    row = json.loads(bench.stdout)
    assert row["machine"]["stack"]["name"] == "jax-0.9.2" and row["results"][0]["proof"]["ok"]
    reg = cli("regress", "gpt2", "--from", "jax-0.9.2", "--to", "lock", "--no-time", "--out", str(tmp_path / "r"),
              "--json", "-")
    assert reg.returncode in (0, 1), reg.stderr
    got = json.loads(reg.stdout)
    assert got["a"]["versions"]["jax"] == "0.9.2" and got["b"]["stack"] == "lock"
    assert len(got["blocks"]) >= 10 and not got["unaligned"]  # GPT-2's blocks, aligned across releases
    # private functions' numbering (`_where_40` against `_where_2`) is not a change worth a line
    assert not any("callee" in c for b in got["blocks"] for c in b["changes"])
    # From shapes alone (no weight, no torch in the stack): the stack lowers the twin, its sidecar says so
    done = cli("capture", "gpt2", "--framework", "jax", "--abstract", "--stack", "jax-0.9.2", "--out",
               str(tmp_path / "abstract"))
    assert done.returncode == 0, done.stderr
    side = json.loads((tmp_path / "abstract" / "gpt2-tiny" / "jax.json").read_text())
    assert side["abstract"] and side["stack"]["name"] == "jax-0.9.2" and side["versions"]["jax"] == "0.9.2"
    plan = cli("memory", str(tmp_path / "abstract" / "gpt2-tiny" / "jax.mlir"), "--stack", "jax-0.9.2", "--json", "-")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["versions"]["jax"] == "0.9.2"


@pytest.mark.slow
@pytest.mark.download  # 7.8 GB from the package index on a new machine: make test-download
def test_a_pytorch_stack_captures_and_regresses_torch_xla(tmp_path):
    """A real PyTorch stack: torch 2.8.0 with torch_xla 2.8.1 (torch_xla pins its torch, so it cannot
    sit beside the lock's torch 2.9.0), made once in the stacks folder and reused (about 7.8 GB: torch's
    CUDA libraries come with it from the package index; about 3 minutes to make here)."""
    # the requirements of study/run/versions.py's stack of that name (jax as the lock's), so
    # the page and this test share one stack rather than refuse each other's
    made = stack.add("torch-2.8", ["torch==2.8.0", "torch_xla==2.8.1", "torchax==0.0.13", "jax==0.12.0.1",
                                   "jaxlib==0.12.0.1"])
    assert made.versions["torch"] == "2.8.0" and ROOT not in Path(made.root).parents
    # torch_xla 2.8.1's wheel carries its own torchax (0.0.4, which needs jax.experimental.mutable_array,
    # gone since jax 0.10.2); the stack installs the pinned torchax over it, so the release imports and
    # the stack has a torchax route (a stack whose torchax does not import is refused in one line:
    # test_a_jax_stack_refuses_a_pytorch_side_in_one_line)
    assert made.versions["torchax"] == "0.0.13" and not made.broken, made.broken
    done = cli("capture", "gpt2", "--framework", "torch", "--exporter", "torchax", "--stack", "torch-2.8",
               "--out", str(tmp_path / "torchax"))
    assert done.returncode == 0 and "parity torch-torchax" in done.stdout, done.stderr
    side = json.loads((tmp_path / "torchax" / "gpt2-tiny" / "torch-torchax.json").read_text())
    assert side["versions"]["torchax"] == "0.0.13" and side["versions"]["torch"] == "2.8.0"
    done = cli("capture", "gpt2", "--framework", "torch", "--exporter", "torch_xla", "--stack", "torch-2.8",
               "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "parity torch-torch_xla" in done.stdout and "ok" in done.stdout
    mlir = tmp_path / "gpt2-tiny" / "torch-torch_xla.mlir"
    side = json.loads(mlir.with_suffix(".json").read_text())
    assert side["stack"]["name"] == "torch-2.8"
    assert side["versions"]["torch"] == "2.8.0" and side["versions"]["torch_xla"] == "2.8.1"
    from stackwars_ir.capture.sanitize import absolute_paths

    text = mlir.read_text()
    assert not absolute_paths(text) and str(made.root) not in text
    assert "stackwars_ir/models/" not in text and "models/_torch.py" in text  # the lock's spelling
    reg = cli("regress", "gpt2", "--exporter", "torch_xla", "--from", "torch-2.8", "--to", "lock", "--no-time",
              "--out", str(tmp_path / "r"), "--json", "-")
    assert reg.returncode in (0, 1), reg.stderr
    got = json.loads(reg.stdout)
    assert got["a"]["versions"]["torch_xla"] == "2.8.1" and got["b"]["stack"] == "lock"
    assert got["a"]["file"].endswith("torch-torch_xla.mlir") and len(got["blocks"]) >= 10 and not got["unaligned"]


def test_regress_says_the_stablehlo_is_identical_when_only_xla_fusions_changed():
    """issue 53: "IR: 4 of 14 aligned blocks changed (IR or kernels)" was said of op-for-op identical
    StableHLO, beside a set difference of fusion kinds; a block's time change carried no noise mark."""
    from stackwars_ir.report.versions import regress_lines
    from stackwars_ir.versions.regress import BlockChange, Regression

    side = {"stack": "lock", "file": "a.mlir", "versions": {"jax": "0.10.2"}, "sha256": "1"}
    fused = BlockChange("h.0.mlp", (40, 40), (3, 3), (("loop_fusion", "loop_fusion"), ("loop_fusion", "ynn_fusion")),
                        (62e-6, 88e-6), (), (-5e-6, 40e-6))
    same = BlockChange("h.0.attn", (70, 70), (7, 7), (("loop_fusion",), ("loop_fusion",)), (50e-6, 51e-6))
    text = "\n".join(regress_lines(Regression(side, dict(side, sha256="2"), (fused, same), None, None, None)))
    assert "IR: StableHLO identical op for op (only names differ); XLA's fusions changed in 1 of 2 blocks" in text
    assert "fusions by kind loop_fusion 2 -> 1, ynn_fusion 0 -> 1" in text
    assert "within the noise: 95% interval of B - A -5.0 to +40.0 us" in text
    assert not fused.ir_changed and fused.compiled_changed and not same.changed
    grown = BlockChange("h.0.mlp", (40, 41), None, None, None, ("stablehlo.add added",))
    text = "\n".join(regress_lines(Regression(side, dict(side, sha256="2"), (grown, same), None, None, None)))
    assert "IR: 1 of 2 aligned blocks changed (IR or kernels)" in text


@pytest.mark.slow
def test_regress_of_one_program_spelled_otherwise_names_no_change_in_a_block(tmp_path):
    """torch_xla 2.8.1 and 2.9.0 export GPT-2's training step op for op alike, but one location names
    another phase (`transpose(jvp())/aten__view` against `jvp()/aten__view`): the diff's verdict is the
    same program, yet the versions page listed "stablehlo.multiply changed: operand 0 reads reshape (line
    395) in A, reshape (line 395) in B" for blocks whose ops the two spellings cut otherwise. Such a
    block is `placement`, no IR change; its words say so; the record keeps the verdict."""
    from stackwars_ir.report.versions import block_sentence, regress_lines
    from stackwars_ir.versions.regress import Regression

    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    text = (ROOT / "captures" / "gpt2-tiny" / "torch-torch_xla-train.mlir").read_text()
    moved = text.replace('#loc101 = loc("transpose(jvp())/aten__view")', '#loc101 = loc("jvp()/aten__view")')
    assert moved != text
    a.write_text(text)
    b.write_text(moved)
    done = cli("regress", str(a), str(b), "--no-time", "--json", "-")
    assert done.returncode == 0, done.stderr
    got = Regression.from_json(json.loads(done.stdout))
    assert got.same_program is True and not got.breaches
    placed = [x for x in got.blocks if x.placement]
    assert placed and not any(x.ir_changed or x.changes for x in got.blocks)
    assert "the same program, its ops cut into blocks otherwise" in block_sentence(placed[0])
    assert f"IR: the same program, spelled otherwise (the diff's verdict); its ops cut into blocks otherwise in " \
           f"{len(placed)} of {len(got.blocks)} blocks" in "\n".join(regress_lines(got))


def test_regress_and_bisect_results_read_back_from_their_json():
    """Every result type has from_json (issue 52): a regress and a bisection written as JSON and read back
    render the same lines and judge the same breaches."""
    import json

    from stackwars_ir.report.versions import regress_lines
    from stackwars_ir.versions.bisection import Bisection
    from stackwars_ir.versions.regress import BlockChange, Regression, Thresholds, _judged

    side = {"stack": "lock", "file": "a.mlir", "versions": {"jax": "0.10.2"}, "sha256": "1"}
    blocks = (BlockChange("h.0.mlp", (40, 41), (3, 5), (("loop_fusion",), ("loop_fusion", "ynn_fusion")),
                          (62e-6, 88e-6), ("stablehlo.add added",), (5e-6, 40e-6)),)
    time_ = {"a": 1e-3, "b": 1.3e-3, "ratio": 1.3, "low": 1.2, "high": 1.4, "rounds": [[1e-3, 1.3e-3]],
             "compile_a": 0.5, "compile_b": 0.6}
    r = _judged(Regression(side, dict(side, sha256="2"), blocks, time_, {"a": 100, "b": 200, "temp_a": 1, "temp_b": 2},
                           {"a": 3, "b": 5}, ("B: loss (4 ops)",), Thresholds(0.1, 0.1, 0)))
    assert len(r.breaches) == 3  # time, memory and the block's kernels
    back = Regression.from_json(json.loads(json.dumps(r.as_json())))
    assert back == r and regress_lines(back) == regress_lines(r) and _judged(back).breaches == r.breaches
    b = Bisection("kernels", ("1", "2", "3"), {"1": 7, "3": 9}, "3", "2", 2, boundary=r)
    assert Bisection.from_json(json.loads(json.dumps(b.as_json()))) == b


def test_a_ratio_interval_across_rounds_is_as_wide_as_the_rounds_disagree():
    """regress's B/A interval comes from the rounds (each a fresh process), not from the pooled samples."""
    import math

    from stackwars_ir.common.runstats import rounds_ratio, t975

    ratio, low, high = rounds_ratio([1.03] * 5)
    assert ratio == pytest.approx(1.03) and low == pytest.approx(1.03) and high == pytest.approx(1.03)
    ratio, low, high = rounds_ratio([1.065, 0.992, 1.032])  # three reruns' ratios, as issue 53 read them
    assert low < 1.0 < high and low < ratio < high
    logs = [math.log(x) for x in (1.065, 0.992, 1.032)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert math.log(high) - math.log(ratio) == pytest.approx(t975(2) * sd / math.sqrt(3))
    assert rounds_ratio([1.2]) == (pytest.approx(1.2), 0.0, math.inf)  # one round: no interval


_LOC_A = '''module @m {
  func.func public @main(%arg0: tensor<4xf32> loc("x")) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32> loc(#loc1)
    return %0 : tensor<4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc1 = loc("h.0/_aten_add"("f.py":3:1))
'''


def test_two_captures_with_the_same_ops_and_other_locations_have_one_ops_digest(tmp_path):
    """regress's IR column: the module printed without locations (MLIR bindings), so a torchax whose
    op functions moved (0.0.6 -> 0.0.13: `_run_binary_pointwise_operator`) reads as the same ops."""
    from stackwars_ir.ir.locations import name_changes
    from stackwars_ir.versions.regress import ops_digest

    a, b, c = tmp_path / "a.mlir", tmp_path / "b.mlir", tmp_path / "c.mlir"
    a.write_text(_LOC_A)
    b.write_text(_LOC_A.replace('"h.0/_aten_add"', '"h.0/_run_binary_pointwise_operator"').replace(":3:1", ":9:2"))
    c.write_text(_LOC_A.replace("stablehlo.add", "stablehlo.multiply"))
    assert ops_digest(a) == ops_digest(b) != ops_digest(c) and ops_digest(a) is not None
    assert name_changes(a.read_text(), b.read_text()) == (("h.0/_aten_add",), ("h.0/_run_binary_pointwise_operator",))
    assert name_changes(a.read_text(), c.read_text()) == ((), ())  # file locations ("f.py":3:1) are not names
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { not mlir")
    assert ops_digest(bad) is None


def test_the_torchax_page_says_what_its_records_show():
    """docs/findings-versions-torchax.md from two regressions: one with the same ops (other locations)
    whose interval holds 1, one whose kernels changed; a failure is named, not dropped."""
    from study import versions_torchax_page
    from stackwars_ir.versions.regress import Regression

    def side(sha, ops_sha, torchax):
        return {"stack": "s", "file": "f.mlir", "versions": {"torchax": torchax}, "sha256": sha, "ops_sha256": ops_sha}

    def reg(a, b, kernels, time):
        block = {"label": "attention[0]#0", "ops": [68, 68 if kernels[0] == kernels[1] else 70],
                 "fusions": None, "changes": [] if kernels[0] == kernels[1] else ["+2 stablehlo.transpose"]}
        return Regression.from_json({"a": a, "b": b, "blocks": [block], "time": time, "memory": None,
                                     "kernels": {"a": kernels[0], "b": kernels[1]},
                                     "thresholds": {"time": 0.1, "memory": 0.1, "kernels": 0}})

    same = reg(side("1", "x", "0.0.6 (torch_xla 2.9.0's copy)"), side("2", "x", "0.0.13"), (30, 30),
               {"ratio": 1.01, "low": 0.97, "high": 1.05})
    other = reg(side("3", "y", "0.0.6"), side("4", "z", "0.0.13"), (40, 42), {"ratio": 1.20, "low": 1.12, "high": 1.3})
    data = {"results": {("gpt2", "forward"): same, ("bert", "forward"): other}, "failed": {"resnet50 train": "refused"},
            "stack": None, "pins": ["torch==2.9.0"],
            "names": {("gpt2", "forward"): ((), ("_run_binary_pointwise_operator",)), ("bert", "forward"): ((), ())}}
    page = versions_torchax_page(data, ("gpt2", "bert"), "torchax-bundled")
    assert "| gpt2 | forward | same 68 ops; locations differ | 0 of 1 |" in page
    assert "| bert | forward | 68 -> 70 | 1 of 1 | 40 -> 42 |" in page
    assert "- 1 of 2 captures have the same ops, types and attributes under both torchax releases" in page
    assert "only under the release: `_run_binary_pointwise_operator`" in page
    assert "- gpt2 forward: the same ops, compiled to the same 30 kernels by the same XLA; steady time lock/from " \
           "1.01 (0.97-1.05): indistinguishable." in page
    assert "- bert forward: 1 blocks differ in IR or kernels (40 -> 42 kernels); steady time lock/from 1.20 " \
           "(1.12-1.30): the release slower in this one run (a finding only if a rerun holds it)." in page
    assert "- resnet50 train: refused" in page and "`torchax-bundled` (torch==2.9.0, no torchax)" in page


def test_the_pytorch_page_words_each_verdict_by_its_interval():
    """docs/findings-versions-torch.md: an interval holding 1 is indistinguishable, one off 1 names its
    direction as one run's, never a finding (issue 53: the page printed a ratio with no word)."""
    from study import versions_torch_page
    from stackwars_ir.versions.regress import Regression

    def reg(ops_b, kernels_b, time):
        a = {"stack": "s", "file": "f.mlir", "versions": {"jaxlib": "0.12.0.1"}, "sha256": "1", "ops_sha256": "x"}
        b = {**a, "sha256": "2", "ops_sha256": ops_b}
        return Regression.from_json({"a": a, "b": b,
                                     "blocks": [{"label": "mlp[0]#0", "ops": [45, 45 if ops_b == "x" else 46],
                                                 "fusions": None, "changes": [] if ops_b == "x" else ["+1 op"]}],
                                     "time": time, "memory": None, "kernels": {"a": 20, "b": kernels_b},
                                     "thresholds": {"time": 0.1, "memory": 0.1, "kernels": 0}})

    data = {"stack": None, "failed": {},
            "results": {("gpt2", "forward"): reg("x", 20, {"ratio": 1.0, "low": 0.99, "high": 1.01}),
                        ("gpt2", "train"): reg("y", 21, {"ratio": 1.004, "low": 1.002, "high": 1.008}),
                        ("llama", "forward"): reg("x", 20, {"ratio": 0.99, "low": 0.985, "high": 0.995})}}
    page = versions_torch_page(data, ("gpt2", "llama"), ("torch-2.8", ("torch==2.8.0",)))
    assert "- gpt2 forward: the same ops and kernels compiled by the same XLA; steady time lock/from 1.00 " \
           "(0.99-1.01): indistinguishable." in page
    assert "- gpt2 train: 1 blocks differ in IR or kernels; steady time lock/from 1.00 (1.00-1.01): the release " \
           "slower in this one run (a finding only if a rerun holds it)." in page
    assert "- llama forward: the same ops and kernels compiled by the same XLA; steady time lock/from 0.99 " \
           "(0.98-0.99): away from 1 in this one run, which with the same ops and kernels comes from the runs" in page


def test_the_upgrade_page_words_each_verdict_by_its_interval():
    """docs/findings-upgrade.md: the same ops with an interval off 1 in one run is not called a finding;
    an interval holding 1 is indistinguishable; a failed row is named; each route's row and versions."""
    from study import upgrade_page
    from stackwars_ir.versions.regress import Regression

    def reg(sha_b, ops_b, time):
        side = {"stack": "s", "file": "f.mlir", "versions": {"jax": "0.10.2", "torchax": "0.0.6 (copy)"},
                "sha256": "1", "ops_sha256": "x"}
        b = {**side, "sha256": sha_b, "ops_sha256": ops_b, "versions": {"jax": "0.12.0.1", "torchax": "0.0.13"}}
        return Regression.from_json({"a": side, "b": b,
                                     "blocks": [{"label": "mlp[0]#0", "ops": [45, 45], "fusions": None}],
                                     "time": time, "memory": None, "kernels": {"a": 20, "b": 20},
                                     "thresholds": {"time": 0.1, "memory": 0.1, "kernels": 0}})

    data = {"stack": None, "failed": {"resnet50 train torchax": "ResNet-50's step: no"},
            "results": {("gpt2", "forward", "jax"): reg("2", "x", {"ratio": 0.9, "low": 0.85, "high": 0.95}),
                        ("gpt2", "forward", "torchax"): reg("2", "y", {"ratio": 1.0, "low": 0.9, "high": 1.1}),
                        ("bert", "forward", "jax"): reg("1", "x", {"ratio": 1.0, "low": 0.96, "high": 1.04})}}
    previous = ("lock-0.10", ("jax==0.10.2", "jaxlib==0.10.2"), "3.11")
    page = upgrade_page(data, ("gpt2", "bert"), previous, ("jax", "torchax"))
    assert "- gpt2 forward, jax: the same StableHLO ops (other locations); kernels 20 -> 20; steady time " \
           "lock/previous 0.90 (0.85-0.95) in this one run: the lock faster here until a rerun holds it." in page
    assert "- bert forward, jax: the same StableHLO ops and text; kernels 20 -> 20; steady time lock/previous " \
           "1.00 (0.96-1.04): indistinguishable." in page
    assert "- gpt2 forward, torchax: 0 blocks differ in IR or kernels" in page
    assert "**gpt2 forward, torchax: torchax 0.0.6 (copy), jax 0.10.2 -> torchax 0.0.13, jax 0.12.0.1:**" in page
    assert "| gpt2 | forward | jax | same 45 ops; locations differ |" in page
    assert "| bert | forward | jax | identical |" in page
    assert page.index("| gpt2 | forward | jax |") < page.index("| gpt2 | forward | torchax |") < \
        page.index("| bert | forward | jax |")
    assert "- resnet50 train torchax: ResNet-50's step: no" in page and "made with `--python 3.11`" in page


def test_a_block_whose_profile_names_none_of_its_kernels_claims_no_time():
    """jaxlib 0.12's profile named none of GPT-2's attention kernels (13 compiled) on the upgrade page's
    first run: that block's time is 0 on one side, which is not a -100% change."""
    from stackwars_ir.report.versions import block_sentence
    from stackwars_ir.versions.regress import BlockChange

    lost = BlockChange("h.0.attn", (68, 68), (12, 13), None, (109e-6, 0.0), (), (-156.7e-6, -85e-6))
    said = block_sentence(lost)
    assert "time not attributed on B (its profile names none of the block's 13 kernels)" in said
    assert "-100%" not in said and "+1 kernel (12 -> 13)" in said
    kept = BlockChange("h.0.mlp", (26, 31), (5, 5), None, (120.9e-6, 104.6e-6), (), (-67.1e-6, -6.6e-6))
    assert "-13% of the block's time (120.9 -> 104.6 us, 95% interval of B - A -67.1 to -6.6 us)" in block_sentence(kept)


def test_a_versions_page_renders_the_same_from_its_kept_record():
    """Issue 76: the versions pages keep a record (study/run/versions.py: benchmarks/records/versions) and
    `--render` words the page from it alone, with the day, machine and lock it was measured with, not the
    rendering machine's."""
    import json

    from study import upgrade_page, versions_torchax_page
    from study.run.versions import record_data, record_json
    from stackwars_ir.isolate.stacks import Stack
    from stackwars_ir.versions.regress import Regression

    side = {"stack": "s", "file": "f.mlir", "versions": {"jax": "0.10.2", "torchax": "0.0.6 (copy)"},
            "sha256": "1", "ops_sha256": "x"}
    reg = Regression.from_json({"a": side, "b": {**side, "sha256": "2"},
                                "blocks": [{"label": "mlp[0]#0", "ops": [45, 46], "fusions": None, "changes": ["+1 op"]}],
                                "time": {"ratio": 1.2, "low": 1.1, "high": 1.3}, "memory": None,
                                "kernels": {"a": 20, "b": 21}, "thresholds": {"time": 0.1, "memory": 0.1, "kernels": 0}})
    made = {"date": "2026-01-02", "machine": "Test CPU (2 cpus)", "lock": {"jax": "9.9.9", "torchax": "0.0.99"},
            "python": "3.99.0"}
    stack = Stack("torchax-bundled", None, ("torch==2.9.0",), {"torchax": "0.0.6"}, {"torchax": "it would not import"})
    torchax = {"made": made, "results": {("gpt2", "forward"): reg}, "failed": {"bert train": "refused"},
               "stack": stack, "pins": ["torch==2.9.0"], "names": {("gpt2", "forward"): (("a/b",), ())}}
    upgrade = {"made": made, "results": {("gpt2", "forward", "jax"): reg}, "failed": {}, "stack": stack}
    for data, page in ((torchax, lambda d: versions_torchax_page(d, ("gpt2", "bert"), "torchax-bundled")),
                       (upgrade, lambda d: upgrade_page(d, ("gpt2",), ("lock-0.10", ("jax==0.10.2",), "3.11")))):
        record = json.loads(json.dumps(record_json(data)))
        assert page(record_data(record)) == page(data)
        text = page(record_data(record))
        assert "on 2026-01-02; machine: Test CPU (2 cpus)." in text
    assert "Python 3.99.0" in upgrade_page(record_data(json.loads(json.dumps(record_json(upgrade)))), ("gpt2",),
                                           ("lock-0.10", ("jax==0.10.2",), "3.11"))
