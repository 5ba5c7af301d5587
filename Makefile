# Quick start: `make repro` (set-up + pipeline on the bundled sample) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
STAMP  := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export YOLO_OFFLINE := 1
# Python writes each module's bytecode on its first import (make setup compiles none up front): without it, every
# stage, test and CLI process would compile torch, pandas and the rest again (~4 s each)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup repro test lint bench nightly clean

PIP    := $(BIN)/python -m pip

# uv installs what pip would, from pip's own package sources (.ci/install.py), linking from its cache: seconds, not ~100
INSTALL := $(BIN)/python .ci/install.py

$(STAMP): pyproject.toml .ci/install.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --no-compile --upgrade pip uv==0.13.9
	$(INSTALL) -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

repro: setup
	dvc repro

test: setup
	python -m pytest -n auto --dist loadfile --no-loadscope-reorder

lint: setup
	ruff check .
	ruff format --check .

nightly: setup
	python -m flows.nightly --once

bench: setup
	$(INSTALL) -e '.[test,bench]'
	python -m bench.run

clean:
	rm -rf $(VENV) .egoeval-cache
