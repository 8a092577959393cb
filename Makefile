# kvplan: `make test` and `make run` do all their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
# vLLM's own sizing code, run on CPU as the test oracle (tests/oracle), in its own virtualenv: its
# pins (transformers<5.21, ...) stay apart from the service's. The version lives in one file.
ORACLE_VENV ?= .venv-oracle
VLLM_ORACLE_VERSION := $(shell cat tests/oracle/vllm_version.txt)
ORACLE_STAMP := $(ORACLE_VENV)/.installed-$(VLLM_ORACLE_VERSION)-$(shell cat tests/oracle/requirements.txt | sha1sum | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: test lint types pytest run install clean bench oracle

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch==2.13.0 (crosscheck extra) resolves to the local CPU wheel on these machines.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,crosscheck,postgres]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

# vLLM --no-deps: its full dependency list is the CUDA stack; the sizing code needs only the
# pinned pure-Python set in requirements.txt (CPU torch, transformers, ...).
$(ORACLE_STAMP): tests/oracle/requirements.txt tests/oracle/vllm_version.txt
	rm -rf $(ORACLE_VENV)
	$(PYTHON) -m venv $(ORACLE_VENV)
	$(ORACLE_VENV)/bin/python -m pip install -q --upgrade pip
	$(ORACLE_VENV)/bin/python -m pip install -q -r tests/oracle/requirements.txt
	$(ORACLE_VENV)/bin/python -m pip install -q --no-deps vllm==$(VLLM_ORACLE_VERSION)
	touch $(ORACLE_STAMP)

oracle: $(ORACLE_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench

types: $(STAMP)
	$(BIN)/mypy planner

pytest: $(STAMP) $(ORACLE_STAMP)
	VLLM_ORACLE_PYTHON=$(ORACLE_VENV)/bin/python $(BIN)/python -m pytest

test: lint types pytest

run: $(STAMP)
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

bench: $(STAMP)
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) $(ORACLE_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
