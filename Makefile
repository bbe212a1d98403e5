# make demo: set up and run the main job on bundled data.  make test: set up and run every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= vllm-queue-autoscaler

.PHONY: venv test lint prometheus demo experiments bench image deploy-config clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test,sim]'
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

# The decision log of a burst through the decision core (ours vs. HPA on the queue), then
# 20 minutes of a real trace through the fleet simulator under several policies.
demo: venv
	$(PY) -m examples.burst_decision_log
	$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/demo.yaml \
		--plot simulations/results/demo.png --json simulations/results/demo.json --markdown simulations/results/demo.md

# Long sweeps (hours on 2 cores): every scenario, each policy's knob swept to 99 % SLO attainment.
experiments: venv
	for s in azure-code azure-conv servegen-m-mid-2d servegen-m-small-2d; do \
		$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/$$s.yaml --sweep --jobs 2 \
			--json simulations/results/$$s.json --markdown simulations/results/$$s.md \
			--plot simulations/results/$$s.png || exit 1; \
	done
	$(PY) simulations/tools/cost_table.py simulations/results/servegen-m-mid-2d.json \
		simulations/results/servegen-m-small-2d.json simulations/results/azure-conv.json \
		simulations/results/azure-code.json --out simulations/results/cost_at_99.md
	$(PY) simulations/tools/misses_by_time.py --scenario simulations/scenarios/azure-code.yaml \
		--run queue-lead=96 --run queue-lead=32 --run oracle=0.22 --run oracle=0.1 --run static-peak=3.5 \
		--window-s 300 --out simulations/results/azure-code-misses.md

# Speed benchmarks; figures go to benchmarks/results/.
bench: venv
	$(PY) benchmarks/bench_sim.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_scale.py

# The controller image (needs a Docker engine).
image:
	docker build -t $(IMAGE):$(VERSION) .

# kustomize reads no file outside deploy/controller; tests/test_deploy.py fails when the copy differs.
deploy-config:
	cp config/autoscaler.yaml deploy/controller/autoscaler.yaml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis
