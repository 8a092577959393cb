# kvplan: `make test` and `make run` do all their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: test lint types pytest run install clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch==2.13.0 (crosscheck extra) resolves to the local CPU wheel on these machines.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,crosscheck,postgres]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check planner tests bench

types: $(STAMP)
	$(BIN)/mypy planner

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint types pytest

run: $(STAMP)
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

bench: $(STAMP)
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
