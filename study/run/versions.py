"""The versions pages: the study's models under other library releases, against the lock.

GPT-2 and LLaMA (tiny) under the last JAX releases of each minor line, (--pytorch) under torch_xla 2.8,
(--torchax) the study's models under torch_xla's bundled torchax, against the lock, and (--upgrade) the
previous lock against the lock.

Makes the stacks it needs (jax-VERSION: jax==V jaxlib==V, cached outside the repository and reused;
about 900 MB and a minute each), then for each model and each stack runs `regress MODEL --from STACK
--to lock`: the JAX side captured by each stack's jax on the same weights, diffed block by block,
compiled by each stack's XLA (kernels per block), timed in turns (5 rounds each, time per block
profiled) and planned. Prints docs/findings-versions.md (rendered by
study.versions); `make findings-versions` writes it. Each page's regressions are kept as one record
(benchmarks/records/versions/PAGE.json.xz, with the day, machine and lock they were measured with);
--render words the page from it alone, making no stack.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
RELEASES = ("0.9.2", "0.10.2", "0.11.2")  # the last of each minor line before the lock's 0.12.0.1
MODELS = ("gpt2", "llama")
# torch_xla pins its torch: the release before the lock's, in a stack of its own (jax as the lock's)
PYTORCH = ("torch-2.8", ("torch==2.8.0", "torch_xla==2.8.1", "torchax==0.0.13", "jax==0.12.0.1", "jaxlib==0.12.0.1"))
# The previous lock's torchax route: the lock's torch, torch_xla, jax and jaxlib pinned without torchax, so
# `import torchax` runs torch_xla's bundled copy, as the lock did before `make setup` reinstalled the pinned
# torchax over it; the study's three models, forward and training step.
BUNDLED = ("torchax-bundled", ("torch", "torch-xla", "jax", "jaxlib"))
STUDY = ("gpt2", "bert", "resnet50")
# The previous lock (before issue 55 moved it to Python 3.12): its Python, jax, flax and transformers, and
# no torchax pin, so `import torchax` runs torch_xla 2.9.0's bundled copy as that lock did. The upgrade is
# measured from it to the lock on the study's models: their JAX side and their torchax route.
PREVIOUS = ("lock-0.10", ("torch==2.9.0", "torch_xla==2.9.0", "jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8",
                          "transformers==5.23.0"), "3.11")
ROUTES = ("jax", "torchax")
BISECT = ("0.10.2", "0.12.0.1")  # stackwars-ir bisect gpt2 --good jax==0.10.2 --bad jax==0.12.0.1 --metric fusions


def run(out: Path, releases, models) -> dict:
    from stackwars_ir.isolate import stacks as stack
    from stackwars_ir.versions.regress import Thresholds, regress_model
    from stackwars_ir.workload import Request

    def progress(message: str) -> None:
        print(f"findings_versions: {message}", file=sys.stderr, flush=True)

    got, failed = {}, {}
    for v in releases:
        try:
            s = stack.add(f"jax-{v}", [f"jax=={v}", f"jaxlib=={v}"], progress=progress)
        except Exception as e:  # a release that does not install here: named on the page
            failed[v] = str(e)
            continue
        for m in models:
            progress(f"{m} tiny: jax {v} -> lock")
            try:
                got[(m, v)] = regress_model(Request(m, "tiny", "jax"), s, stack.lock(), out, Thresholds(),
                                            progress=progress)
            except Exception as e:
                failed[f"{m} {v}"] = " ".join(str(e).split())[:300]
    for v in releases:  # GPT-2 base from shapes (bfloat16): kernels and memory plans at a published size
        if v in failed:  # its stack did not install
            continue
        try:
            req = Request("gpt2", "base", "jax", abstract=True, dtype="bfloat16")
            got[("gpt2-base", v)] = regress_model(req, stack.find(f"jax-{v}"), stack.lock(), out / "abstract",
                                                  Thresholds(), timing=False, progress=progress)
        except Exception as e:
            failed[f"gpt2 base {v}"] = " ".join(str(e).split())[:300]
    found = None
    try:  # the first release whose XLA fuses GPT-2 differently: stacks reused, the lock for its own version
        from stackwars_ir.versions.bisection import bisect_model

        found = bisect_model(Request("gpt2", "tiny", "jax"), BISECT[0], BISECT[1], "fusions", out / "bisect",
                             progress=progress)
    except Exception as e:
        failed["bisect"] = " ".join(str(e).split())[:300]
    return {"results": got, "failed": failed, "bisect": found}


def run_pytorch(out: Path, models) -> dict:
    """Each model's torch_xla side under the PyTorch stack and the lock (regress --exporter torch_xla)."""
    from stackwars_ir.isolate import stacks as stack
    from stackwars_ir.versions.regress import Thresholds, regress_model
    from stackwars_ir.workload import Request

    got, failed = {}, {}
    try:
        s = stack.add(PYTORCH[0], list(PYTORCH[1]), progress=lambda m: print(f"findings_versions: {m}", file=sys.stderr))
    except Exception as e:
        return {"results": got, "failed": {PYTORCH[0]: " ".join(str(e).split())[:300]}, "stack": None}
    for m in models:
        for step in ("forward", "train"):
            req = Request(m, "tiny", "torch", exporters=("torch_xla",), step=step)
            try:
                got[(m, step)] = regress_model(req, s, stack.lock(), out / "pytorch", Thresholds())
            except Exception as e:
                failed[f"{m} {step}"] = " ".join(str(e).split())[:300]
    return {"results": got, "failed": failed, "stack": s}


def run_torchax(out: Path, models) -> dict:
    """Each model's torchax side under torch_xla's bundled copy (the stack BUNDLED) and the lock's
    pinned release (regress --exporter torchax); the location names only one side's captures hold."""
    from stackwars_ir.isolate import stacks as stack
    from stackwars_ir.ir.locations import name_changes
    from stackwars_ir.versions.regress import Thresholds, regress_model
    from stackwars_ir.workload import Request

    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = [x for x in lines if x.split("==")[0] in BUNDLED[1]]
    got, failed, names = {}, {}, {}
    try:
        s = stack.add(BUNDLED[0], pins, progress=lambda m: print(f"findings_versions: {m}", file=sys.stderr))
    except Exception as e:
        return {"results": got, "failed": {BUNDLED[0]: " ".join(str(e).split())[:300]}, "stack": None, "pins": pins}
    for m in models:
        for step in ("forward", "train"):
            print(f"findings_versions: {m} {step}: torchax bundled -> lock", file=sys.stderr, flush=True)
            req = Request(m, "tiny", "torch", exporters=("torchax",), step=step)
            try:
                r = got[(m, step)] = regress_model(req, s, stack.lock(), out / "torchax", Thresholds())
            except Exception as e:
                failed[f"{m} {step}"] = " ".join(str(e).split())[:300]
                continue
            names[(m, step)] = name_changes(Path(r.a["file"]).read_text(), Path(r.b["file"]).read_text())
    return {"results": got, "failed": failed, "stack": s, "pins": pins, "names": names}


def run_upgrade(out: Path, models) -> dict:
    """Each model's JAX side and torchax route under the previous lock (the stack PREVIOUS) and the lock
    (regress --from PREVIOUS --to lock), forward and training step."""
    from stackwars_ir.isolate import stacks as stack
    from stackwars_ir.versions.regress import Thresholds, regress_model
    from stackwars_ir.workload import Request

    got, failed = {}, {}
    try:
        s = stack.add(PREVIOUS[0], list(PREVIOUS[1]), python=PREVIOUS[2],
                      progress=lambda m: print(f"findings_versions: {m}", file=sys.stderr))
    except Exception as e:
        return {"results": got, "failed": {PREVIOUS[0]: " ".join(str(e).split())[:300]}, "stack": None}
    for m in models:
        for step in ("forward", "train"):
            for route in ROUTES:
                print(f"findings_versions: {m} {step} {route}: {PREVIOUS[0]} -> lock", file=sys.stderr, flush=True)
                req = (Request(m, "tiny", "jax", step=step) if route == "jax" else
                       Request(m, "tiny", "torch", exporters=(route,), step=step))
                try:
                    got[(m, step, route)] = regress_model(req, s, stack.lock(), out / "upgrade", Thresholds())
                except Exception as e:
                    failed[f"{m} {step} {route}"] = " ".join(str(e).split())[:300]
    return {"results": got, "failed": failed, "stack": s}


KEPT = ROOT / "benchmarks" / "records" / "versions"  # each page's record (xz), restored for --render


def record_json(data: dict) -> dict:
    """A page's data (run, run_pytorch, run_torchax, run_upgrade) as JSON: each regression with its key's
    words, the bisection and the stack as their own JSON, and when, where and with what it was measured
    (study.versions.made_with), so --render words the page as the run did."""
    from study.versions import made_with

    out = {"made": made_with(data), "failed": dict(data.get("failed") or {}),
           "results": [[list(k), r.as_json()] for k, r in data["results"].items()]}
    if "bisect" in data:
        out["bisect"] = data["bisect"].as_json() if data["bisect"] else None
    if "stack" in data:
        out["stack"] = data["stack"].as_json() if data["stack"] else None
    if "pins" in data:
        out["pins"] = list(data["pins"])
    if "names" in data:
        out["names"] = [[list(k), [list(a), list(b)]] for k, (a, b) in data["names"].items()]
    return out


def record_data(d: dict) -> dict:
    """record_json's inverse: the data the page functions take."""
    from stackwars_ir.isolate.stacks import Stack
    from stackwars_ir.versions.bisection import Bisection
    from stackwars_ir.versions.regress import Regression

    data = {"made": d["made"], "failed": d["failed"],
            "results": {tuple(k): Regression.from_json(r) for k, r in d["results"]}}
    if "bisect" in d:
        data["bisect"] = Bisection.from_json(d["bisect"]) if d["bisect"] else None
    if "stack" in d:
        data["stack"] = Stack.from_json(d["stack"]) if d["stack"] else None
    if "pins" in d:
        data["pins"] = d["pins"]
    if "names" in d:
        data["names"] = {tuple(k): (tuple(a), tuple(b)) for k, (a, b) in d["names"]}
    return data


def measured(page: str, out: Path, kept: Path | None, render: bool, run_it) -> dict:
    """The page's data: with `render`, from its record (under OUT/records, else restored from KEPT);
    otherwise run_it(), written to OUT/records/PAGE.json and kept (xz) in KEPT."""
    import json

    from stackwars_ir.common.files import write_set
    from stackwars_ir.sweep.kept import keep, restore

    records = out / "records"
    record = records / f"{page}.json"
    if render:
        if kept:
            restore(kept, records)
        if not record.exists():
            where = f"{records} or {kept}" if kept else str(records)
            print(f"findings_versions: error: no record of the {page} page under {where} (fix: run without "
                  "--render: it makes the version stacks and measures)", file=sys.stderr)
            sys.exit(2)
        return record_data(json.loads(record.read_text()))
    data = run_it()
    write_set([(record, json.dumps(record_json(data), indent=1, sort_keys=True) + "\n")])
    if kept:
        keep(records, kept, only={page})
    return record_data(json.loads(record.read_text()))


def main() -> None:
    from study import versions_page, versions_torch_page

    ap = argparse.ArgumentParser()
    # relative (make runs from the repository's root): the page names the files, never this machine's paths
    ap.add_argument("--out", type=Path, default=Path("out") / "findings-versions")
    ap.add_argument("--releases", default=",".join(RELEASES))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pytorch", action="store_true", help="the PyTorch/XLA page (findings-versions-torch.md)")
    ap.add_argument("--torchax", action="store_true",
                    help="torch_xla's bundled torchax against the pinned release (findings-versions-torchax.md)")
    ap.add_argument("--upgrade", action="store_true",
                    help="the previous lock (a Python 3.11 stack) against the lock (findings-upgrade.md)")
    ap.add_argument("--render", action="store_true",
                    help="compute nothing: the page from its record (OUT/records, else benchmarks/records/versions)")
    ap.add_argument("--kept", default=str(KEPT),
                    help="the records kept in the repository (benchmarks/records/README.md; '' for none)")
    args = ap.parse_args()
    releases, models = tuple(args.releases.split(",")), tuple(args.models.split(","))
    kept = Path(args.kept) if args.kept else None

    def data(page: str, run_it) -> dict:
        return measured(page, args.out, kept, args.render, run_it)

    if args.upgrade:
        from study import upgrade_page

        models = STUDY if args.models == ",".join(MODELS) else models
        print(upgrade_page(data("upgrade", lambda: run_upgrade(args.out, models)), models, PREVIOUS, ROUTES), end="")
        return
    if args.torchax:
        from study import versions_torchax_page

        models = STUDY if args.models == ",".join(MODELS) else models
        print(versions_torchax_page(data("torchax", lambda: run_torchax(args.out, models)), models, BUNDLED[0]),
              end="")
        return
    if args.pytorch:
        print(versions_torch_page(data("pytorch", lambda: run_pytorch(args.out, models)), models, PYTORCH), end="")
        return
    print(versions_page(data("jax", lambda: run(args.out, releases, models)), releases, models, BISECT), end="")


if __name__ == "__main__":
    main()
