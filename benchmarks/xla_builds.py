"""The same StableHLO file on the two XLA builds of this stack: jaxlib's PJRT CPU client (where
`bench` runs every StableHLO row) and torch_xla's own (where its lazy rows run), each in a fresh
process, same arguments: compile time, execution time, and the outputs' largest difference.

torch_xla recompiles at every `torch_xla._XLAC._run_stablehlo` call, so each round on both sides is a
fresh compile and the first execution of that executable: torch_xla's side is timed by its own
CompileTime and ExecuteTime metrics, jax's by the wall clock around `compile_and_load` and around
one execute until its results are ready. jax's side also reports its steady execution (later runs of
one executable). The file reaches torch_xla as a portable artifact at torch_xla's StableHLO version.

Usage: .venv/bin/python benchmarks/xla_builds.py [--rounds 3] [FILE.mlir ...]
       (default: the GPT-2 and BERT base training steps captured by `make findings`)
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine_line

# torch_xla's own training steps: the graphs its lazy loop compiles and runs (bench's torch_xla rows).
DEFAULT = [ROOT / "out" / "bench-captures" / f"{m}-base" / "torch-torch_xla-train.mlir" for m in ("gpt2", "bert")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", choices=("jax", "torch_xla"), help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps((jax_side if a.worker == "jax" else torch_xla_side)(a.files[0], a.scratch, a.rounds)))
        return
    files = a.files or [f for f in DEFAULT if f.exists()]
    if not files:
        sys.exit("no StableHLO files: run `make findings` first, or name files")
    import torch_xla.version as txv
    from jax._src.lib import version_str as jaxlib_version

    print(f"machine: {machine_line()}\njaxlib {jaxlib_version}; torch_xla {txv.__version__} "
          f"(XLA {txv.__xla_gitrev__[:12]}); {a.rounds} rounds, each a fresh compile and a first execution\n")
    print("| file | jax compile ms | torch_xla compile ms | compile ratio | jax first execute ms | "
          "torch_xla first execute ms | execute ratio | compile + first execute ratio | jax steady execute ms "
          "| outputs' max abs difference |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in files:
        name = "/".join(path.resolve().parts[-2:])
        with tempfile.TemporaryDirectory() as scratch:
            j = worker("jax", path, Path(scratch), a.rounds)
            t = worker("torch_xla", path, Path(scratch), a.rounds)
        if "error" in t:  # e.g. jax's own modules: not all of them serialize to a portable artifact
            print(f"| {name} | {statistics.median(j['compile_ms']):,.0f} | not run: {t['error']} | | "
                  f"{statistics.median(j['execute_ms']):,.0f} | | | | {j['steady_ms']:,.0f} | |")
            continue
        cj, ct = statistics.median(j["compile_ms"]), statistics.median(t["compile_ms"])
        ej, et = statistics.median(j["execute_ms"]), statistics.median(t["execute_ms"])
        print(f"| {name} | {cj:,.0f} | {ct:,.0f} | {ct / cj:.2f} | {ej:,.0f} | {et:,.0f} | {et / ej:.2f} | "
              f"{(ct + et) / (cj + ej):.2f} | {j['steady_ms']:,.0f} | {t['max_abs_difference']:.2g} |")
    print("\nratio: torch_xla's XLA / jaxlib's, medians over the rounds (compile + first execute: the time to "
          "a first result, since a build may leave work to the first execution); the difference: torch_xla's "
          "outputs against jax's for the same arguments")


def worker(side: str, path: Path, scratch: Path, rounds: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", side, "--scratch", str(scratch), "--rounds",
                          str(rounds), str(path)], capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        last = (out.stderr.strip().splitlines() or ["no message"])[-1]
        if side == "jax":
            sys.exit(f"jax's side failed on {path}: {last}")
        return {"error": last}
    return json.loads(out.stdout.strip().splitlines()[-1])


def jax_side(path: Path, scratch: Path, rounds: int) -> dict:
    """Arguments from the capture's sidecar (its real weights and state), saved for torch_xla's side."""
    import numpy as np

    from stackwars_ir.bench import signature_arguments
    from stackwars_ir.common.files import read_sidecar
    from stackwars_ir.ir import load_one
    from stackwars_ir.common.runtime import Runtime, runtime

    text = path.read_text()
    arrays, _, _ = signature_arguments(load_one(path), read_sidecar(path), np.random.default_rng(0))
    np.savez(scratch / "arguments.npz", *arrays)
    rt = runtime("cpu")
    buffers = rt.put(arrays)
    compile_ms, execute_ms = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        exe = rt.compile(text, str(path))
        compile_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        outs = Runtime.run(exe, buffers)
        execute_ms.append((time.perf_counter() - t0) * 1e3)
    steady = []
    for _ in range(rounds + 2):
        t0 = time.perf_counter()
        outs = Runtime.run(exe, buffers)
        steady.append((time.perf_counter() - t0) * 1e3)
    np.savez(scratch / "outputs.npz", *[np.asarray(o) for o in outs])
    return {"compile_ms": compile_ms, "execute_ms": execute_ms, "steady_ms": statistics.median(steady[2:])}


def torch_xla_side(path: Path, scratch: Path, rounds: int) -> dict:
    import os
    import re

    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    from jaxlib.mlir.dialects import stablehlo

    dev = torch_xla.device()
    probe = xm.get_stablehlo_bytecode([torch.ones(1, device=dev) * 2])
    version = re.search(rb"StableHLO_v(\d+\.\d+\.\d+)", probe).group(1).decode()
    artifact = stablehlo.serialize_portable_artifact_str(path.read_text(), version)
    saved = np.load(scratch / "arguments.npz")
    args = [torch.from_numpy(saved[f"arr_{i}"]).to(dev) for i in range(len(saved.files))]
    torch_xla.sync()
    xm.wait_device_ops()
    met.clear_all()
    for _ in range(rounds):
        outs = torch_xla._XLAC._run_stablehlo(artifact, args)
        torch_xla.sync()
        xm.wait_device_ops()
    samples = {name: [s[1] / 1e6 for s in met.metric_data(name)[2]] for name in ("CompileTime", "ExecuteTime")}
    if len(samples["CompileTime"]) != rounds or len(samples["ExecuteTime"]) != rounds:
        raise RuntimeError(f"expected {rounds} compiles and executions, torch_xla's metrics say {samples}")
    ref = np.load(scratch / "outputs.npz")
    diff = max((float(np.max(np.abs(o.cpu().numpy().astype(np.float64) - ref[f"arr_{i}"])))
                for i, o in enumerate(outs) if o.numel()), default=0.0)
    return {"compile_ms": samples["CompileTime"], "execute_ms": samples["ExecuteTime"], "stablehlo": version,
            "max_abs_difference": diff}


if __name__ == "__main__":
    main()
