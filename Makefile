# The README's two commands are `make demo` and `make test`; both set up .venv first.
# The lock is frozen on Python 3.12 (jax >= 0.11 requires it): python3.12 on PATH, else pyenv's 3.12.
PY_VERSION := 3.12
PYTHON ?= $(firstword $(foreach c,$(shell command -v python$(PY_VERSION)) $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(PY_VERSION).*/bin/python$(PY_VERSION)),$(shell "$(c)" -c 'import venv' >/dev/null 2>&1 && echo "$(c)")))
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PJRT_DEVICE ?= CPU

.PHONY: setup setup-gpu setup-tpu setup-ray findings-main findings-memory findings-programs findings-zoo findings-host findings-versions findings-ablations demo test test-download test-fast captures diff-goldens docs findings fuzz clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -n "$(PYTHON)" || { echo "make setup: no Python $(PY_VERSION) with venv found (python$(PY_VERSION) on PATH or pyenv's); install one, or name it: make PYTHON=/path/to/python$(PY_VERSION)" >&2; exit 2; }
	# A .venv of another Python (the lock before 3.12's) is made anew.
	$(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(PY_VERSION)".split("."))))' 2>/dev/null || { rm -rf $(VENV); "$(PYTHON)" -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	# torch_xla's wheel carries a torchax copy of its own (0.0.6) that overwrites the pinned torchax's files:
	# the pinned release is installed again over it, then every recorded package is checked at its pin.
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall $$(grep '^torchax==' requirements.lock)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/stackwars-ir stack check --lock requirements.lock
	touch $(STAMP)

# The main job: capture GPT-2 from both frameworks, diff the two, write the HTML report.
demo: setup
	$(BIN)/stackwars-ir capture gpt2 --framework both --exporter all --size tiny --out out/captures --force
	$(BIN)/stackwars-ir diff out/captures/gpt2-tiny/jax.mlir out/captures/gpt2-tiny/torch-torch_xla.mlir --markdown out/gpt2-diff.md || test $$? -eq 1
	$(BIN)/stackwars-ir bench out/captures/gpt2-tiny/jax.mlir out/captures/gpt2-tiny/torch-torch_xla.mlir out/captures/gpt2-tiny/torch-torchax.mlir --json out/gpt2-bench.json
	$(BIN)/stackwars-ir report out/captures/gpt2-tiny/jax.mlir out/captures/gpt2-tiny/torch-torch_xla.mlir --bench out/gpt2-bench.json --html out/gpt2-report.html

# The suite runs `sweep` on a local Ray cluster too (tests/test_sweep_run.py), so it installs Ray first.
# It leaves out the tests marked `download`, which make a version stack of gigabytes from the package
# index (a PyTorch stack is 7.8 GB, torch's CUDA libraries with it): `make test-download` runs those.
# Two pytest processes, each running whole test files (--dist loadfile: a file's shared fixtures are
# made once): on 2 cores the suite took 22:52 against 33:48 in one process (docs/benchmarks.md).
# --durations: the 25 longest tests named at the end (where the suite's time goes, in every CI log).
TEST_JOBS ?= 2
test: setup-ray
	$(BIN)/python -m pytest -q -ra -m "not download" -n $(TEST_JOBS) --dist loadfile --durations=25

test-download: setup-ray
	$(BIN)/python -m pytest -q -ra -m download

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not browser and not download"

# Regenerate the committed golden captures (tiny, every adapter, both frameworks and exporters;
# training steps of every adapter that has parameters).
captures: setup
	for m in gpt2 bert resnet50 gemm ffn mha llama vit gpt_neo elementwise matmul matmul_skinny fft sort; do \
	  $(BIN)/stackwars-ir capture $$m --framework both --exporter all --size tiny --out captures --force || exit 1; \
	done
	# ResNet-50's training step: not through torch_xla (models/resnet50.py says why; --exporter all skips it)
	for m in gpt2 bert resnet50 gemm ffn mha llama vit gpt_neo; do \
	  $(BIN)/stackwars-ir capture $$m --step train --framework both --exporter all --size tiny --out captures --force || exit 1; \
	done
	$(MAKE) diff-goldens

# The terminal text of each adapter's JAX-vs-PyTorch diff, pinned (tests/test_diff.py compares it).
diff-goldens: setup
	mkdir -p tests/diffs
	for d in captures/*-tiny; do \
	  m=$$(basename $$d -tiny); b=$$d/torch-torch_xla.mlir; [ -f $$b ] || b=$$d/torch-torchax.mlir; \
	  $(BIN)/stackwars-ir diff $$d/jax.mlir $$b > tests/diffs/$$m.txt; [ $$? -le 1 ] || exit 1; \
	  if [ -f $$d/jax-train.mlir ] && [ -f $$d/torch-torchax-train.mlir ]; then \
	    $(BIN)/stackwars-ir diff $$d/jax-train.mlir $$d/torch-torchax-train.mlir > tests/diffs/$$m-train.txt; \
	    [ $$? -le 1 ] || exit 1; fi; \
	done

clean:
	rm -rf out .pytest_cache

# The CUDA PJRT plugin for jax (GPU machines only): `bench --backend gpu`, `make findings BACKEND=gpu`.
setup-gpu: setup
	$(BIN)/python -m pip install --quiet -r requirements-gpu.lock -c requirements.lock

# Ray for `sweep --ray local|auto|ADDRESS` (an optional extra: the sweep runs on local workers without it).
RAY_STAMP := $(VENV)/.ray-installed
setup-ray: $(RAY_STAMP)
$(RAY_STAMP): $(STAMP) requirements-ray.lock
	$(BIN)/python -m pip install --quiet -r requirements-ray.lock -c requirements.lock
	touch $(RAY_STAMP)

# libtpu for jax 0.12.0.1 (any machine, no TPU needed): `memory --target tpu-v6e` and `bench --target tpu-v6e` compile for TPU
# generations on this CPU and reads the TPU compiler's own memory plan.
setup-tpu: setup
	$(BIN)/python -m pip install --quiet -r requirements-tpu.lock -c requirements.lock

# The docs that are generated: the CLI reference and the findings pages (base models, minutes).
# `make findings` writes every findings page: docs/findings.md, then findings-memory.md,
# findings-programs.md and findings-zoo.md (measured 2026-11-27 with one round of timed benches: about
# 120 + 40 + 23 + 45 minutes here: findings.md's 88 untimed jobs took 30 minutes on 2 workers, its 15 timed
# benches of base models about 6 minutes each, one at a time; findings-programs' 40 jobs, LLaMA-3.2-1B's
# captures and runs among them, 23 minutes. The grids now time three rounds of each bench (issue 53):
# findings.md's timed part about three times 90 minutes; findings-programs' 48 jobs 26 minutes of jobs
# (2026-11-28, Intel Xeon 2 cpus: its twelve 1B benches 60-78 s each; 2026-12-01, AMD EPYC 2 cpus, slowed:
# 38 minutes in all, its 1B benches 70-99 s); every sweep resumes where it was killed);
# BACKEND=gpu writes docs/findings-gpu.md
# alone (after `make setup-gpu`: the other two pages are compile-only TPU plans and CPU runs).
BACKEND ?= cpu
FINDINGS := docs/findings$(if $(filter cpu,$(BACKEND)),,-$(BACKEND)).md
docs: setup
	$(BIN)/python -m stackwars_ir.cli.reference > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md
findings: findings-main $(if $(filter cpu,$(BACKEND)),findings-memory findings-programs findings-zoo findings-host)
# A sweep of study/grids/findings.toml into out/sweeps/findings (killed, it resumes; timed jobs run
# last, one at a time), then the page from its records (`python -m study.run.findings --render`: without recomputing).
# Its records are kept in benchmarks/records/findings (xz): restored before it runs, the finished ones added
# after, so it resumes on a fresh machine (timed jobs again where the kind of machine differs); commit them.
findings-main: setup-tpu
	$(BIN)/python -m study.run.findings --backend $(BACKEND) > $(FINDINGS).tmp && mv $(FINDINGS).tmp $(FINDINGS)

# GPT-2 and LLaMA tiny under the last release of each of the three JAX minor lines before the lock's
# (version stacks, made once in ~/.cache/stackwars-ir/stacks, about 900 MB each; 10-15 minutes here);
# then torch_xla 2.8 against the lock's 2.9, and torch_xla's bundled torchax against the pinned release
# (two PyTorch stacks, about 7.8 GB each); then the previous lock against the lock (a PyTorch stack made
# with Python 3.11: pyenv's or python3.11 on PATH).
findings-versions: setup
	$(BIN)/python -m study.run.versions > docs/findings-versions.md.tmp && mv docs/findings-versions.md.tmp docs/findings-versions.md
	$(BIN)/python -m study.run.versions --pytorch > docs/findings-versions-torch.md.tmp && mv docs/findings-versions-torch.md.tmp docs/findings-versions-torch.md
	$(BIN)/python -m study.run.versions --torchax > docs/findings-versions-torchax.md.tmp && mv docs/findings-versions-torchax.md.tmp docs/findings-versions-torchax.md
	$(BIN)/python -m study.run.versions --upgrade > docs/findings-upgrade.md.tmp && mv docs/findings-upgrade.md.tmp docs/findings-upgrade.md

# The study's OOM rows recomputed by the TPU v6e compiler, on this machine (after `make setup-tpu`): a sweep of
# study/grids/findings-memory.toml into out/sweeps/findings-memory (killed, it resumes), then the page;
# its records kept in benchmarks/records/findings-memory (restored before, the finished ones added after).
findings-memory: setup-tpu
	$(BIN)/python -m study.run.memory > docs/findings-memory.md.tmp && mv docs/findings-memory.md.tmp docs/findings-memory.md

# What scanning and rematerializing the layers cost or save: LLaMA-3.1-8B's training step on a TPU v6e
# chip (compile-only, after `make setup-tpu`) and LLaMA tiny on XLA CPU, JAX and torch_xla (minutes): a sweep
# of study/grids/findings-programs.toml into out/sweeps/findings-programs, then the page from its records
# (kept in benchmarks/records/findings-programs: restored before, the finished ones added after).
findings-programs: setup-tpu
	$(BIN)/python -m study.run.programs > docs/findings-programs.md.tmp && mv docs/findings-programs.md.tmp docs/findings-programs.md

# Every architecture of study/grids/zoo.toml through torch_xla and torchax, tiny, forward and
# training step, as a resumable sweep into out/sweeps/zoo (killed, it resumes; about 45 minutes here with
# one round of benches: three rounds add two more rounds of its 60 timed benches, not measured yet).
# The study's timing protocols measured in three rounds of fresh processes (study/run/protocols.py,
# records kept in benchmarks/records/host-protocols; about 47 minutes here), then the study's table
# predicted for its TPU v6e from host phases measured here and the v6e compiler's estimates
# (docs/findings-host.md; records under out/findings-host, never recomputed, kept in
# benchmarks/records/host with the day and commit each was made at; about 25 minutes).
findings-host: setup-tpu
	$(BIN)/python -m study.run.host > docs/findings-host.md.tmp && mv docs/findings-host.md.tmp docs/findings-host.md

# What the study's three IR differences cost: GPT-2 and BERT at base, forward and training step, each
# torch_xla capture rewritten into JAX's form (stackwars-ir ablate) and timed in 3 rounds of fresh
# workers (docs/findings-ablations.md; records kept in benchmarks/records/ablations, never recomputed).
findings-ablations: setup
	$(BIN)/python -m study.run.ablations > docs/findings-ablations.md.tmp && mv docs/findings-ablations.md.tmp docs/findings-ablations.md

findings-zoo: setup
	$(BIN)/python -m study.run.zoo > docs/findings-zoo.md.tmp && mv docs/findings-zoo.md.tmp docs/findings-zoo.md

# 100,000 mutated StableHLO inputs through parse, stats and segmentation (about 6 minutes here).
fuzz: setup
	$(BIN)/python benchmarks/fuzz.py --count 100000
