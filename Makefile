# Both README commands start here: they create .venv once (the MindSpore wheel is downloaded once,
# then reused from uv's cache) and re-install only when pyproject.toml changes. uv installs the same
# versions pip resolves, in 24 s against pip's 155 s from empty caches here (README, CHANGELOG).
# --compile-bytecode writes the installed packages' .pyc once: where PYTHONDONTWRITEBYTECODE is set (it is on
# these machines) every process otherwise compiles what it imports from source, MindSpore's 2,142 modules
# included: `import mindspore` took 3.4 s against 1.4 s, and each extraction child and training pays it.
PYTHON ?= python3.11
UV_VERSION ?= 0.13.9
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.msbench-installed
TARGET ?=                      # empty: the matrix's own targets (the nightly: the 910A and the 910B models)
MATRIX ?= matrices/nightly.toml
RUN_ID = nightly$(if $(strip $(TARGET)),-$(subst :,-,$(strip $(TARGET))))
export OMP_NUM_THREADS ?= 2
export OPENBLAS_NUM_THREADS ?= 1
export ONEDNN_MAX_CPU_ISA ?= AVX2

.PHONY: setup bench lint test test-long test-fast docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python "pip>=25" -e ".[dev,ray,zoo]"
	touch $(STAMP)

bench: $(STAMP)
	$(BIN)/msbench run $(MATRIX) $(if $(strip $(TARGET)),--target $(strip $(TARGET))) --resume --run-id $(RUN_ID)
	$(BIN)/msbench report results/runs/$(RUN_ID).jsonl --html results/report.html --md results/report.md

# The layers contract (pyproject.toml, [tool.importlinter]): application -> hardware -> workloads -> base, each
# importing only the layers below it (imports inside functions too). `make test` runs it first.
lint: $(STAMP)
	$(BIN)/lint-imports

# Then two invocations: the suite on two pytest-xdist workers (speed claims skipped under --benchmark-disable;
# most of its time is single-threaded compiles and child processes, so two workers use both cores), then
# the speed claims alone, as benchmarks with thresholds (tests/benchmarks, --benchmark-enable).
test: lint docs
	$(BIN)/python -m pytest -q --ignore=tests/benchmarks --durations=25 -n 2 --dist loadfile
	$(BIN)/python -m pytest -q tests/benchmarks --benchmark-enable --benchmark-columns=min,median,max,rounds

# Before a release or nightly: `make test` plus the `long` tier (further cases of what slow tests already cover:
# more YOLO and Transformer trainings, the zoo sample walk, more LLM configs and count formulas, mindyolo's
# device-model pair, and the slow generated pages computed again and compared whole).
test-long:
	MSBENCH_LONG=1 $(MAKE) test

# Everyday work: the tests marked neither `slow` nor a speed claim (nothing trains, compiles a graph or starts
# MindSpore children), on the same two workers; every test gets an empty msbench cache (tests/conftest.py).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" --ignore=tests/benchmarks -n 2 --dist loadfile --durations=10

# The documentation site (site/, ignored; make test builds it before the suite, in seconds): strict, so a broken
# link or a page missing from the nav fails. The tables under docs/generated/ are written by
# `python -m msbench.docs_gen` (a test checks they are current).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site .asv results/runs results/asv results/html .msbench-cache .msbench-data
