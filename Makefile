# make demo: set up and run the main job on bundled data.  make test: set up and run every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: venv test lint prometheus demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# Tests start a real Prometheus; install Debian's package when it is missing (we run as root).
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
		echo "installing Debian's prometheus package"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }
	@command -v prometheus >/dev/null 2>&1 || { echo "prometheus is not on PATH and could not be installed" >&2; exit 1; }

lint: venv
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test: venv prometheus lint
	$(VENV)/bin/pytest -q

# The decision log of a burst through the decision core, ours vs. HPA on the queue.
demo: venv
	$(PY) -m examples.burst_decision_log

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis
