# The two set-up commands of the README are `make demo` and `make test`; both install first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PG_BIN := /usr/lib/postgresql/15/bin

.PHONY: install system-deps demo test lint format clean

install: $(VENV)/.installed

# torch is installed first and pinned: on the project's machines `torch==2.13.0` takes the CPU
# build that lies on disk (../shared/TOOLING.md); a looser spec, or Lightning before torch, pulls a
# CUDA build of several GB. Elsewhere PyPI's Linux torch 2.13.0 is that CUDA build: there run
# `make install TORCH_INDEX=https://download.pytorch.org/whl/cpu` for the CPU build, as
# deploy/Dockerfile does. Empty by default: here only the package registries are reachable.
TORCH_INDEX ?=
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $@

# Real servers for the tests: Debian's Prometheus (with promtool) and PostgreSQL 15.
system-deps:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null || [ ! -x $(PG_BIN)/initdb ] || ! command -v openssl >/dev/null; then \
		if [ "$$(id -u)" -eq 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; else \
			echo "system-deps: not root and no sudo: install the Debian packages prometheus, postgresql and openssl as root" >&2; \
			exit 1; \
		fi; \
		echo "Installing Debian packages prometheus, postgresql and openssl for the tests"; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus postgresql openssl >/dev/null; \
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
