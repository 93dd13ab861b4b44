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

# The suite runs on TEST_WORKERS processes (pytest-xdist); TEST_WORKERS=0 runs it in this one.
TEST_WORKERS ?= 2

test: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python -m pytest -n $(TEST_WORKERS)

bench: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python benchmarks/run.py
	TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python benchmarks/control_flow.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
