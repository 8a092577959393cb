# kvplan: `make test` and `make run` do all their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
RUN_STAMP := $(VENV)/.runtime-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
AXE := build/axe/node_modules/axe-core/axe.min.js
# The engines' own sizing code is the test oracle (tests/oracle). `make test` reads its stored
# answers (tests/oracle/fixtures/<engine>/<release>/) and installs no engine. `make oracle
# RELEASE=x` installs release x into its own virtualenv (.venv-oracle-x: CPU torch, the release's
# pinned set in tests/oracle/requirements-x.txt, the wheel --no-deps), runs its harnesses live and
# fails on any difference from the fixture; `make oracle-update RELEASE=x` rewrites the fixture.
# The releases are listed once, in tests/oracle/versions.txt (newest first: the default RELEASE).
# ENGINE=sglang takes its releases from tests/oracle/versions-sglang.txt and its virtualenvs
# from .venv-oracle-sglang-x (requirements-sglang-x.txt).
ENGINE ?= vllm
ORACLE_LIST := tests/oracle/$(if $(filter vllm,$(ENGINE)),versions.txt,versions-$(ENGINE).txt)
ORACLE_VERSIONS := $(shell grep -v '^\#' $(ORACLE_LIST) | awk '{print $$1}')
RELEASE ?= $(firstword $(ORACLE_VERSIONS))
ORACLE_VENV := .venv-oracle-$(if $(filter vllm,$(ENGINE)),,$(ENGINE)-)$(RELEASE)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: test lint types pytest run install clean bench oracle oracle-update catalog

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch==2.13.0 (crosscheck extra) resolves to the local CPU wheel on these machines.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,crosscheck,postgres]'
	rm -f $(VENV)/.installed-* && touch $(STAMP) $(RUN_STAMP)

# `make run` needs the service alone: no torch, transformers, playwright or kubernetes.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $(RUN_STAMP)

# axe-core for the page's accessibility tests, from the npm registry, kept out of the repo.
$(AXE):
	npm install --no-audit --no-fund --silent --prefix build/axe axe-core@4.14.1

install: $(STAMP)

# One rule per engine, from one recipe: the engine's wheel is downloaded on its own so its file
# name and sha256 go into the fixtures' provenance (.venv-oracle-x/.wheel), then installed
# --no-deps over the pinned pure-Python set in requirements-<release>.txt: vLLM's full dependency
# list is the CUDA stack, and the stubs SGLang's sizing code needs on CPU are in its harness.
# $(1): the venv/requirements prefix ("" for vLLM, "sglang-"), $(2): the package on PyPI.
define ORACLE_VENV_RULE
.venv-oracle-$(1)%/.installed: tests/oracle/requirements-$(1)%.txt
	rm -rf .venv-oracle-$(1)$$* build/wheels/$(2)-$$*
	$$(PYTHON) -m pip download -q --no-deps --dest build/wheels/$(2)-$$* $(2)==$$*
	$$(PYTHON) -m venv .venv-oracle-$(1)$$*
	.venv-oracle-$(1)$$*/bin/python -m pip install -q --upgrade pip
	.venv-oracle-$(1)$$*/bin/python -m pip install -q -r $$<
	.venv-oracle-$(1)$$*/bin/python -m pip install -q --no-deps build/wheels/$(2)-$$*/$(2)-*.whl
	cd build/wheels/$(2)-$$* && sha256sum $(2)-*.whl | awk '{print $$$$2, $$$$1}' > ../../../.venv-oracle-$(1)$$*/.wheel
	rm -rf build/wheels/$(2)-$$*
	touch $$@
endef
$(eval $(call ORACLE_VENV_RULE,,vllm))
$(eval $(call ORACLE_VENV_RULE,sglang-,sglang))

ORACLE_ENV = KVPLAN_ORACLE_ENGINE=$(ENGINE) KVPLAN_ORACLE_RELEASE=$(RELEASE) KVPLAN_REQUIRE_ORACLE=1

oracle: $(STAMP) $(ORACLE_VENV)/.installed
	$(ORACLE_ENV) $(BIN)/python -m pytest tests/oracle

oracle-update: $(STAMP) $(ORACLE_VENV)/.installed
	$(ORACLE_ENV) KVPLAN_ORACLE_WRITE=1 $(BIN)/python -m pytest tests/oracle

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench

types: $(STAMP)
	$(BIN)/mypy planner

# pytest-xdist: most of the suite's time is spent waiting on the servers, browsers and hostile
# Hubs it starts, so more workers than cores pay. A file at a time and in collection order
# (tests/conftest.py puts the browser files last on every worker). PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 4
pytest: $(STAMP) $(AXE)
	$(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# ruff and mypy run beside pytest (and npm's axe-core beside pip's install): on two cores the
# checks take no time of their own. Any failure fails the target.
test:
	$(MAKE) --no-print-directory -j3 lint types pytest

run: $(RUN_STAMP)
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

# planner/catalog/models.json from catalog/sources/ (README "Adding a model").
catalog: $(RUN_STAMP)
	$(BIN)/python scripts/catalog_build.py

bench: $(STAMP)
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) .venv-oracle-* build/axe .pytest_cache .mypy_cache .ruff_cache .hypothesis
