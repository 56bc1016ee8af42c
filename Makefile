# ascend-ready — `make demo` runs the end-to-end demo, `make test` runs the whole suite.
# Both set up everything they need (system packages as root, the .venv/ virtual environment).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The controller needs Python 3.10-3.12 (ansible-core 2.16); 3.11 is preferred because the
# CPU build of torch lies on local disk for it.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.10 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION ?= 2.13.0
VERL_VERSION ?= 0.9.1
PYTEST_ARGS ?=
# two pytest-xdist workers (tests/xdist_support.py: a module, and the provisioned fleet's modules, one group each);
# TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= 2
XDIST_ARGS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

OLDEST_SET := .venv-oldest-set

.PHONY: help setup system-deps venv lint test test-fast test-e2e test-slow test-oldest-set demo bench clean

help:
	@echo "make demo   - set up and run the end-to-end demo on a simulated Ascend cluster (root)"
	@echo "make test   - set up and run lint and the whole test suite (root)"
	@echo "make bench  - run the benchmarks in bench/"

system-deps:
	@bash scripts/system-deps.sh

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 10) <= v <= (3, 12) else "the controller needs Python 3.10-3.12, found %d.%d: set PYTHON=/path/to/python3.11" % v)'
	$(PYTHON) -m venv $(VENV)
	# uv where it can be had, else pip; the same resolution either way (CPU torch): see the script.
	bash scripts/install-venv.sh $(VENV) $(TORCH_VERSION) $(VERL_VERSION)
	touch $@

venv: $(VENV)/.installed

setup: system-deps venv

lint: venv
	$(BIN)/ruff check .
	# the layer contracts of pyproject.toml's [tool.importlinter] (docs/architecture.md)
	$(BIN)/python scripts/lint_imports.py
	@if ls playbooks/*.yml >/dev/null 2>&1; then $(BIN)/yamllint -c playbooks/.yamllint -s playbooks provision; fi
	@if ls playbooks/*.yml >/dev/null 2>&1; then (cd playbooks && ../$(BIN)/ansible-lint --profile production); fi

test: setup lint
	$(BIN)/pytest $(XDIST_ARGS) $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-oldest-set

# The trainers' tiny runs (GRPO, PPO, SFT, RM, resume, NaN stop) on the oldest training set of
# provision/training_sets.yml (TRL 0.19.1, transformers 4.51.3) in a venv of its own, on this machine's CPU
# torch (the only CPU build here: the old TRL/transformers run on a newer torch than their stack's).
$(OLDEST_SET)/.installed: pyproject.toml provision/training_sets.yml scripts/install-oldest-set.sh | venv
	$(PYTHON) -m venv $(OLDEST_SET)
	bash scripts/install-oldest-set.sh $(OLDEST_SET) $(TORCH_VERSION)
	touch $@

test-oldest-set: $(OLDEST_SET)/.installed
	$(OLDEST_SET)/bin/python -m pytest -p no:cacheprovider tests/training/test_smoke.py

test-fast: venv
	$(BIN)/pytest -m 'not slow and not device and not sim' $(PYTEST_ARGS)

# Beyond `make test`'s 20 minutes: the provisioning scenarios that each need simulated nodes of their own
# (reboots, bare nodes, os_prereqs from a mirror: test-e2e) and the long runs (learning curves, Slurm jobs,
# two jobs at once: test-slow). Run before every landing and by whoever changes playbooks/, sim/ or
# training/ (tests/README.md).
test-e2e: setup
	$(BIN)/pytest -m e2e $(PYTEST_ARGS)

test-slow: setup
	$(BIN)/pytest -m 'slow and not device' $(PYTEST_ARGS)

# The nodes' base image (debootstrap, about a minute, once) builds while the venv installs: it needs only
# the standard library. `ascend-sim up` waits for it on the base's lock, and builds it itself if it failed.
demo: system-deps
	@mkdir -p runs; $(PYTHON) scripts/sim-base.py >runs/sim-base.log 2>&1 & base=$$!; \
	$(MAKE) --no-print-directory venv && \
	{ wait $$base || { echo "warning: building the node base image failed (runs/sim-base.log):"; \
	  tail -n 5 runs/sim-base.log; }; } && \
	bash scripts/demo.sh

bench: setup
	@bash bench/run.sh

clean:
	rm -rf $(VENV) $(OLDEST_SET) build *.egg-info .pytest_cache .ruff_cache
