# The course's commands. `make lab` and `make test` are all a student or a new developer needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# A pinned torch: on a Linux GPU machine PyPI's wheel is the CUDA build; where a CPU build of this
# version is provided locally (as on the course's development machines), pip takes that one.
TORCH  ?= torch==2.13.0
DAYS   := $(notdir $(wildcard solutions/day*))
# The environment's scripts first (nbgrader calls `alembic`, JupyterLab its extensions' tools).
export PATH := $(abspath $(BIN)):$(PATH)
# Triton publishes wheels for Linux only.
OS_NAME ?= $(shell uname -s)
# JupyterLab refuses to start as root (Docker, many cloud machines) unless told it is meant.
USER_ID ?= $(shell id -u)
LAB_FLAGS := $(if $(filter 0,$(USER_ID)),--allow-root,)

.PHONY: help linux-only install install-test lab lab-instructor test test-fast exercises bench clean

help:
	@echo "make lab        install into $(VENV) and open the course in JupyterLab"
	@echo "make lab-instructor  the same, with nbgrader's instructor tools (formgrader, create assignment)"
	@echo "make test       install into $(VENV) and run the whole test suite (works without a GPU)"
	@echo "make exercises  regenerate exercises/ from solutions/ with nbgrader"
	@echo "make bench      time the reference solutions on this GPU -> docs/benchmarks.md"

$(BIN)/activate: | linux-only
	$(PYTHON) -m venv $(VENV)

linux-only:
	@if [ "$(OS_NAME)" != Linux ]; then \
	  echo "Triton has no wheels for $(OS_NAME): open the course in Google Colab (README, 'Open in Colab')," \
	       "or use Linux (on Windows, WSL2)." >&2; exit 1; fi

# rfc3987-syntax costs every process that imports jsonschema over a second of CPU, for a format no notebook
# uses (grader/pipeline/nbgrader_process.py, which keeps it out of the batch's own processes wherever it is
# installed). Taken out here for every other Jupyter process; it runs after each pip install, which may bring it back.
UNINSTALL_SLOW_IMPORT = $(BIN)/python -m pip uninstall -q -y rfc3987-syntax

# What a student needs: the course and its notebooks' packages.
$(VENV)/.installed: $(BIN)/activate pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e .
	$(UNINSTALL_SLOW_IMPORT)
	touch $@

# What the test suite needs beyond that (a browser driver, a PostgreSQL driver, pytest-xdist).
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e ".[test]"
	$(UNINSTALL_SLOW_IMPORT)
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Students get JupyterLab without nbgrader's instructor tools and lists, and without the news question
# (grader/jupyter_student); instructors keep them.
lab: install
	JUPYTER_CONFIG_PATH=$(abspath grader/jupyter_student) $(BIN)/jupyter lab --notebook-dir=. $(LAB_FLAGS)

lab-instructor: install
	$(BIN)/jupyter lab --notebook-dir=. $(LAB_FLAGS)

# Test files run in TEST_WORKERS processes (pytest-xdist), a file's tests in one of them (its shared
# fixtures are built once, a notebook's cells run in order in one kernel), but the files whose tests share
# nothing (tests/conftest.py, SPREAD), whose tests are handed out one by one. Two by default: CI's cores.
TEST_WORKERS ?= 2
PARALLEL = -n $(TEST_WORKERS) --dist loadfile

# Unit tests, the nbgrader round trip, and every lecture notebook run top to bottom (nbval).
test: install-test
	$(BIN)/python -m pytest tests course --nbval-lax --nbval-current-env -p no:cacheprovider --durations=40 $(PARALLEL)

# The unit tests only: no nbgrader pipeline, browser or PostgreSQL (tests/conftest.py marks them), and a third
# of the wrong and honest variants (VARIANTS_SHARE; `make test` runs them all).
test-fast: install-test
	VARIANTS_SHARE=0/3 $(BIN)/python -m pytest tests -p no:cacheprovider -m "not e2e and not browser and not postgres" $(PARALLEL)

exercises: install
	$(BIN)/python -m grader release $(DAYS)

bench: install
	$(BIN)/python -m grader bench

clean:
	rm -rf $(VENV) grading .pytest_cache
