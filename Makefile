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

.PHONY: help install lab test test-fast exercises bench clean

help:
	@echo "make lab        install into $(VENV) and open the course in JupyterLab"
	@echo "make test       install into $(VENV) and run the whole test suite (works without a GPU)"
	@echo "make exercises  regenerate exercises/ from solutions/ with nbgrader"
	@echo "make bench      time the reference solutions on this GPU -> docs/benchmarks.md"

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/activate pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

lab: install
	$(BIN)/jupyter lab --notebook-dir=.

# Unit tests, the nbgrader round trip, and every lecture notebook run top to bottom (nbval).
test: install
	$(BIN)/python -m pytest tests course --nbval-lax --nbval-current-env -p no:cacheprovider

test-fast: install
	$(BIN)/python -m pytest tests -p no:cacheprovider --deselect tests/test_nbgrader_pipeline.py

exercises: install
	$(BIN)/python -m grader release $(DAYS)

bench: install
	$(BIN)/python -m grader bench

clean:
	rm -rf $(VENV) grading .pytest_cache
