# The suite's commands. Every target runs `setup` first, so on a fresh machine
# `make test-all` and `make reproduce` are the only commands a person types.

SHELL := /bin/bash
# uv on PATH, else the copy `setup` installs with pip (run as a module, so no PATH change is needed)
UV = $(shell command -v uv 2>/dev/null || echo python3 -m uv)
export UV
RUN = $(UV) run --no-sync
SCALE ?= quick
SEED ?= 0
OUT ?= results
PYTEST_WORKERS ?= 2
SLOW ?=

.PHONY: setup test-all test reproduce bench lint format docs clean help base-lm

help:
	@echo "make setup                  install uv if missing, then the locked workspace (.venv)"
	@echo "make test-all [SLOW=1]      every package's tests and the cross-package checks"
	@echo "make test PKG=name          one package's tests"
	@echo "make reproduce [PKG=name] [SCALE=quick] [SEED=0]   reports under $(OUT)/"
	@echo "make bench PKG=name         the package's benchmarks"
	@echo "make base-lm                retrain the shared base LM (hours; resumable)"
	@echo "make lint | format | docs | clean"

setup:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || \
		python3 -m pip install --quiet uv
	@$(UV) sync --all-packages --all-extras --frozen --quiet

# one torch/BLAS thread per xdist worker: two workers already fill both cores
test-all: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(RUN) pytest -n $(PYTEST_WORKERS) --dist loadgroup $(if $(SLOW),,-m "not slow")

test: setup
	@test -n "$(PKG)" || { echo "usage: make test PKG=<package>" >&2; exit 2; }
	@test -d packages/$(PKG) || { echo "no package packages/$(PKG)" >&2; exit 2; }
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(RUN) pytest -n $(PYTEST_WORKERS) --dist loadgroup $(if $(SLOW),,-m "not slow") packages/$(PKG)

reproduce: setup
ifdef PKG
	$(RUN) python -m $(PKG) reproduce --scale $(SCALE) --seed $(SEED) --out $(OUT)/$(PKG)
else
	$(RUN) python -m paper_common reproduce --all --scale $(SCALE) --seed $(SEED) --out $(OUT)
endif

# the shared pretrained base LM of paper_common.lm.base: hours on a CPU, resumable from its
# checkpoint; writes the committed fp16 weights and their acceptance numbers
base-lm: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(RUN) python -m paper_common base-lm

bench: setup
	@test -n "$(PKG)" || { echo "usage: make bench PKG=<package>" >&2; exit 2; }
	@ls packages/$(PKG)/benchmarks/bench_*.py >/dev/null 2>&1 || \
		{ echo "packages/$(PKG) has no benchmarks/bench_*.py" >&2; exit 2; }
	@set -e; for f in packages/$(PKG)/benchmarks/bench_*.py; do \
		echo "== $$f"; $(RUN) python $$f; done

lint: setup
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(UV) lock --check

format: setup
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

docs: setup
	NO_MKDOCS_2_WARNING=1 $(RUN) mkdocs build --strict --quiet

clean:
	rm -rf site .pytest_cache .ruff_cache
