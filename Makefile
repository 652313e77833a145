# ECHO on Kubernetes. `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= services,operator,local,dev

.PHONY: install run test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch is pinned to the CPU wheel available on these machines, installed first so nothing pulls a CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/echoctl serve --host 127.0.0.1 --port 9099 --data-dir ./.echo

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/ruff format --check services tests bench integrations

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format services tests bench integrations

test: install lint
	$(BIN)/pytest

bench: install
	$(BIN)/python bench/hooks_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
