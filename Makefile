# Two commands are the whole set-up: `make demo` and `make test`.
# Each creates (or refreshes) the local virtualenv in .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The reference server of the MCP project, from the npm registry, for interoperability tests.
EVERYTHING_VERSION := 2026.8.31
EVERYTHING := .tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js

.PHONY: demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mcpfleet demo

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

$(EVERYTHING):
	npm install --silent --no-audit --no-fund --prefix .tools/everything \
		@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)

pytest: $(STAMP) $(EVERYTHING)
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
