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

.PHONY: setup repro test lint bench nightly clean

# setuptools says "Editable installation." in a banner on every editable install: information, not a problem
PIP    := $(BIN)/python -W "ignore:Editable installation" -m pip

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
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
	$(PIP) install --quiet -e '.[test,bench]'
	python -m bench.run

clean:
	rm -rf $(VENV) .egoeval-cache
