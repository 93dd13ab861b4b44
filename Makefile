# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# One environment with the dev extra serves both targets (the demo needs TensorFlow and LiteRT).
# setuptools' note on every editable install ("Please be careful with folders in your working
# directory...") is information, not a problem: hidden by its message only.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m numlite.demo

# The suite runs on TEST_WORKERS processes (pytest-xdist; worksteal: an idle worker takes tests
# queued on a busy one, so a few slow files do not leave a core idle at the end); TEST_WORKERS=0
# runs it in this one. The 40 slowest tests are listed at the end, to keep the suite's time in check.
TEST_WORKERS ?= 2

test: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=40

bench: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python benchmarks/run.py
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python benchmarks/control_flow.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
