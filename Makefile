# The two quick-start commands: `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
EXAMPLES := examples/otel-genai.otlp.jsonl examples/openinference.otlp.jsonl

.PHONY: demo test install install-dev bench calibrate examples docs conformance

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-dev: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'

## Score the bundled example conversations: SQLite, deterministic metrics, no key, no server.
demo: install
	$(BIN)/tracing-eval run --once $(foreach f,$(EXAMPLES),--source otlp-file:$(f))

## The whole test suite (CI runs exactly this through .ci/run).
test: install-dev
	$(BIN)/python -m pytest

## Regenerate docs/configuration.md from the settings model (tests/test_configdoc.py checks it is current).
docs: install
	$(BIN)/python -m tracing_eval.configdoc --write docs/configuration.md

## Regenerate examples/ with the real instrumentations (see examples/README.md).
examples: install-dev
	$(BIN)/python examples/generate.py

## Re-record the framework conformance corpus (see tests/conformance/README.md).
conformance: install-dev
	$(BIN)/python -m tests.conformance.record --setup

## Benchmarks (figures go to docs/benchmarks.md).
bench: install-dev
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/deterministic.py

## Agreement of every deterministic signal with the human labels of ../shared/datasets (docs/metrics.md).
calibrate: install-dev
	$(BIN)/python bench/calibration.py
