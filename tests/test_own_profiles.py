"""Device profiles users take outside stackwars-ir (jax.profiler.trace's *.xplane.pb) split by block (issue 74, item 3)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, golden

# What a user runs: their own jax.jit of GPT-2 tiny (the zoo's twin), traced with jax.profiler.trace.
USER_SCRIPT = '''
import sys

import jax
import numpy as np
from flax import nnx

from stackwars_ir.models import gpt2

out, steps = sys.argv[1], int(sys.argv[2])
torch_model = gpt2.torch_model("tiny")
weights = {k: v.detach().numpy() for k, v in torch_model.state_dict().items()}
graphdef, state = nnx.split(gpt2.jax_model("tiny", weights))
forward = jax.jit(lambda s, ids: nnx.merge(graphdef, s)(ids))
ids = np.random.default_rng(0).integers(0, 512, (2, 16)).astype(np.int32)
forward(state, ids).block_until_ready()
jnp_init = jax.numpy.ones((4, 4)) * 2  # another program in the same trace
with jax.profiler.trace(out):
    (jax.numpy.ones((8, 8)) + 1).block_until_ready()  # an execution of another program, inside the trace
    for _ in range(steps):
        forward(state, ids).block_until_ready()
'''


@pytest.fixture(scope="module")
def own_profiles(tmp_path_factory):
    """Two profiles of 5 and 7 steps, each taken by a script of its own."""
    root = tmp_path_factory.mktemp("own")
    (root / "user.py").write_text(USER_SCRIPT)
    out = []
    for name, steps in (("a", 5), ("b", 7)):
        subprocess.run([sys.executable, str(root / "user.py"), str(root / name), str(steps)], check=True,
                       capture_output=True, cwd=ROOT)
        out.append(root / name)
    return out


@pytest.mark.slow  # two profiles taken, GPT-2 tiny compiled twice
def test_a_jax_profile_taken_outside_the_tool_is_split_by_block_and_adds_up(cli, own_profiles, tmp_path):
    file = golden("gpt2", "jax")
    out = tmp_path / "d.json"
    code, text, err = cli("diff", file, file, "--bench-profile", *own_profiles, "--json", out)
    assert code == 0, err  # the same program on both sides
    data = json.loads(out.read_text())
    time = data["metrics"]["time"]
    assert [t["runs"] for t in (time["a"], time["b"])] == [5, 7]  # the other program's execution left out
    assert re.search(r"\d+ executions of other programs left out", time["device_profiles"][0])
    for side in ("a", "b"):
        in_blocks = sum(b["metrics"]["time"][side] for b in data["blocks"])
        # blocks plus the kernels traced to no block: the profile's kernel time in its median step
        assert in_blocks + time[side]["unattributed_s"] == pytest.approx(time[side]["kernels_sum_s"], rel=1e-9)
        assert 0 < time[side]["busy_s"] <= time[side]["wall_s"]
    attention = [b for b in data["blocks"] if b["label"].startswith("attention")]
    assert attention and all(b["metrics"]["time"]["a"] > 0 and "gap_95" in b["metrics"]["time"] for b in attention)
    assert "diff --bench-profile: device profiles taken outside stackwars-ir" in text


@pytest.mark.slow
def test_a_profile_of_another_program_is_one_line(cli, own_profiles):
    code, _, err = cli("diff", golden("bert", "jax"), golden("gpt2", "jax"), "--bench-profile", *own_profiles)
    assert code == 2 and "none of its" in err and "executions ran" in err and "Traceback" not in err, err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1


@pytest.mark.parametrize("make, words", [
    (lambda p: p.write_bytes(b"\x0a\x05hello"), "not an XProf profile"),
    (lambda p: p.mkdir(), "a folder with 0 *.xplane.pb profiles"),
])
def test_a_file_that_is_no_profile_is_one_line(cli, tmp_path, make, words):
    bad = tmp_path / "p.xplane.pb"
    make(bad)
    file = golden("gemm", "jax")
    code, _, err = cli("diff", file, file, "--bench-profile", bad, bad)
    assert code == 2 and words in err and str(bad) in err and "Traceback" not in err, err


def test_a_truncated_profile_is_one_line(cli, tmp_path, own_profiles_cheap=None):
    """A profile cut short (a copy that stopped, an upload limit) is named, not parsed into a wrong answer."""
    import jax.numpy as jnp
    import jax

    folder = tmp_path / "trace"
    with jax.profiler.trace(str(folder)):
        (jnp.ones((4, 4)) + 1).block_until_ready()
    (whole,) = folder.glob("**/*.xplane.pb")
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    file = golden("gemm", "jax")
    code, _, err = cli("diff", file, file, "--bench-profile", cut, cut)
    assert code == 2 and "not an XProf profile" in err and str(cut) in err, err


def test_bench_and_bench_profile_together_are_refused(cli, tmp_path):
    file = golden("gemm", "jax")
    code, _, err = cli("diff", file, file, "--bench", tmp_path / "b.json", "--bench-profile", tmp_path, tmp_path)
    assert code == 2 and "--bench and --bench-profile" in err


TORCH_XLA_SCRIPT = '''
import numpy as np
import torch
import torch_xla.core.xla_model as xm

from stackwars_ir.models import gpt2
from stackwars_ir.workload.train import OpNames

model = gpt2.torch_model("tiny").to(xm.xla_device())
ids = torch.from_numpy(np.random.default_rng(0).integers(0, 512, (2, 16))).to(xm.xla_device())
with torch.no_grad(), OpNames(model, phases=False):  # each op's metadata names its module (XLA_HLO_DEBUG=1)
    out = model(ids)
    xm.mark_step()
'''


def _dump(root, name, script, env_extra=None):
    """The largest module XLA dumped (--xla_dump_to, --xla_dump_hlo_as_proto) while `script` ran: its
    HloProto before optimizations, as a user finds it in DIR."""
    import os

    (root / f"user_{name}.py").write_text(script)  # not jax.py: it would be imported as jax
    folder = root / f"{name}-dump"
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={folder} --xla_dump_hlo_as_proto", PJRT_DEVICE="CPU",
               **(env_extra or {}))
    subprocess.run([sys.executable, str(root / f"user_{name}.py"), str(root / f"{name}-trace"), "1"], check=True,
                   capture_output=True, cwd=ROOT, env=env)
    return max(folder.glob("*.before_optimizations.hlo.pb"), key=lambda p: p.stat().st_size)


@pytest.mark.slow  # a jax run and a torch_xla run with XLA's dump flags
def test_xla_dumps_of_jax_and_torch_xla_are_read_and_the_jax_one_pairs_as_the_capture(cli, tmp_path):
    """issue 74: `--xla_dump_hlo_as_proto` writes an HloProto (the module inside, beside its buffer
    assignment), which was refused as "neither MLIR bytecode nor an XLA HloModuleProto"."""
    jax_dump = _dump(tmp_path, "jax", USER_SCRIPT)
    out = tmp_path / "d.json"
    code, _, err = cli("diff", jax_dump, golden("gpt2", "jax"), "--json", out)
    assert code == 1, err  # XLA's importer spells some ops otherwise (reshape for broadcast_in_dim)
    data = json.loads(out.read_text())
    capture = tmp_path / "c.json"
    assert cli("diff", golden("gpt2", "jax"), golden("gpt2", "torch-torch_xla"), "--json", capture)[0] == 1
    pairs = {b["label"] for b in data["blocks"]}
    assert pairs == {b["label"] for b in json.loads(capture.read_text())["blocks"]}  # the capture's 14 pairs
    assert data["alignment"]["method"] == "key"
    xla_dump = _dump(tmp_path, "xla", TORCH_XLA_SCRIPT, {"XLA_SAVE_TENSORS_FILE": str(tmp_path / "graphs.txt"),
                                                          "XLA_SAVE_TENSORS_FMT": "hlo", "XLA_HLO_DEBUG": "1"})
    both = tmp_path / "both.json"
    code, text, err = cli("diff", jax_dump, xla_dump, "--json", both)
    assert code == 1 and "batch_norm_training x5" in text, err  # torch_xla's LayerNorm, as in its capture
    # The user's lazy run named by module (OpNames): the two dumps pair by key, block for block as the
    # captures do, and torch_xla's own op scopes (`aten__add.2/aten__add`) are no module's blocks.
    data = json.loads(both.read_text())
    assert data["alignment"]["method"] == "key" and data["alignment"]["only_b"] == [], data["alignment"]
    assert {b["label"] for b in data["blocks"]} == pairs
    assert not any(b["name"].startswith("aten__") for b in data["alignment"]["only_a"] + data["alignment"]["only_b"])
    # torch_xla's saved graphs (HLO text, several graphs a file): each a module of its own
    code, text, err = cli("stats", tmp_path / "graphs.txt.0")
    assert code == 0 and f"graphs.txt.0#1" in text and "batch_norm_training" in text, err
    # the module as XLA optimized it (its dump's after_optimizations proto): its own kernels by block, read
    # from the file's fusions and their metadata, the same kernels this machine's XLA compiles the capture to
    after = jax_dump.with_name(jax_dump.name.replace("before_optimizations", "cpu_after_optimizations"))
    kernels = tmp_path / "k.json"
    code, text, err = cli("diff", after, golden("gpt2", "jax"), "--kernels", "--json", kernels)
    assert code == 1 and "as dumped: the file's own optimized HLO" in text, err
    data = json.loads(kernels.read_text())
    ka, kb = data["metrics"]["kernels"]["a"], data["metrics"]["kernels"]["b"]
    assert (ka["kernels"], ka["unattributed"]) == (kb["kernels"], kb["unattributed"]) and ka["kernels"] > 50
    same = [b for b in data["blocks"] if b["metrics"]["kernels"]["names_a"] == b["metrics"]["kernels"]["names_b"]]
    assert len(same) >= 0.8 * len(data["blocks"])  # the rest: the optimized module's blocks cut a little otherwise
    # the dump folder itself: its modules listed, the largest named as the one to give, by its name
    numbered = jax_dump.name.split(".before_optimizations")[0]  # module_0012.jit_forward
    name = numbered.split(".", 1)[1]
    code, _, err = cli("stats", jax_dump.parent)
    assert code == 2 and "an XLA dump folder of" in err and f"{jax_dump.parent}#{name}" in err, err
    code, by_name, err = cli("stats", f"{jax_dump.parent}#{name}")  # DIR#NAME: that module's file
    assert code == 0 and cli("stats", jax_dump)[1].split("\n", 1)[1] == by_name.split("\n", 1)[1], err
    assert cli("stats", f"{jax_dump.parent}#{numbered}")[0] == 0
    code, _, err = cli("diff", f"{jax_dump.parent}#nonesuch", golden("gpt2", "jax"))
    assert code == 2 and "holds no module 'nonesuch'" in err and name in err and "Traceback" not in err, err


def test_a_folder_that_is_neither_a_dump_nor_a_file_is_named_so_by_every_command(tmp_path, cli):
    """A folder given as a file: its .mlir files named as the fix, or, holding none, said so (a fix naming
    "the .mlir files in it" led nowhere); `DIR#NAME` is a dump module's name for bench and memory as for
    diff, never an unknown model (a new user's report)."""
    empty = tmp_path / "notdump"
    empty.mkdir()
    for args in (("diff", empty, empty), ("bench", empty), ("stats", empty)):
        code, _, err = cli(*args)
        assert code == 2 and "holding no .mlir or .mlirbc file and no XLA dump" in err and "Traceback" not in err, err
    for command in ("bench", "memory", "diff"):
        code, _, err = cli(command, f"{empty}#jit_forward", *([empty] if command == "diff" else []))
        assert code == 2 and "holds no module 'jit_forward'" in err and "unknown model" not in err, err
    (empty / "b.mlir").write_text("module {}\n")
    (empty / "a.mlir").write_text("module {}\n")
    code, _, err = cli("stats", empty)
    assert code == 2 and "name the files in it: a.mlir, b.mlir" in err, err
