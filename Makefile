# The two set-up commands of the README are `make demo` and `make test`; both install first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PG_BIN := /usr/lib/postgresql/15/bin

.PHONY: install system-deps demo test lint format clean

install: $(VENV)/.installed

# torch is installed first and pinned to the CPU build: a looser spec, or Lightning before torch,
# pulls a CUDA build of several GB (../shared/TOOLING.md).
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $@

# Real servers for the tests: Debian's Prometheus (with promtool) and PostgreSQL 15.
system-deps:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null || [ ! -x $(PG_BIN)/initdb ] || ! command -v openssl >/dev/null; then \
		echo "Installing Debian packages prometheus, postgresql and openssl for the tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus postgresql openssl >/dev/null; \
	fi

demo: install
	$(BIN)/scaleahead demo

test: install system-deps
	OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
