# kvplan: `make test` and `make run` do all their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
RUN_STAMP := $(VENV)/.runtime-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
AXE := build/axe/node_modules/axe-core/axe.min.js
# vLLM's own sizing code, run on CPU as the test oracle (tests/oracle), one virtualenv per release:
# their pins (transformers<5.21 for 0.33, 4.x for 0.11) stay apart from the service's. The
# releases are listed once, in tests/oracle/versions.txt.
ORACLE_VERSIONS := $(shell grep -v '^\#' tests/oracle/versions.txt)
ORACLE_STAMPS := $(foreach v,$(ORACLE_VERSIONS),.venv-oracle-$(v)/.installed)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: test lint types pytest run install clean bench oracle

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

# vLLM --no-deps: its full dependency list is the CUDA stack; the sizing code needs only the
# pinned pure-Python set in requirements-<release>.txt (CPU torch, transformers, ...).
.venv-oracle-%/.installed: tests/oracle/requirements-%.txt
	rm -rf .venv-oracle-$*
	$(PYTHON) -m venv .venv-oracle-$*
	.venv-oracle-$*/bin/python -m pip install -q --upgrade pip
	.venv-oracle-$*/bin/python -m pip install -q -r $<
	.venv-oracle-$*/bin/python -m pip install -q --no-deps vllm==$*
	touch $@

oracle: $(ORACLE_STAMPS)

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench

types: $(STAMP)
	$(BIN)/mypy planner

pytest: $(STAMP) $(AXE) $(ORACLE_STAMPS)
	KVPLAN_REQUIRE_ORACLE=1 $(BIN)/python -m pytest

test: lint types pytest

run: $(RUN_STAMP)
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

bench: $(STAMP)
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) .venv-oracle-* build/axe .pytest_cache .mypy_cache .ruff_cache .hypothesis
