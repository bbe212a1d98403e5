# make demo: set up and run the main job on bundled data.  make test: set up and run every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= vllm-queue-autoscaler

.PHONY: venv test test-compiled lint prometheus demo experiments sensitivity seed-study tuning bench compiled pure image image-check release clean

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

# Tests run in pytest-xdist workers, two more than the cores: many of them wait on the Prometheus
# they start (its first scrape of a new target comes ~5 s after it), and the spare workers fill
# those waits (2 cores, 2026-12-05: 355 s with 4 workers, 416 s with 2). TEST_JOBS=0 runs them in
# this process.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 2 )))
# Then the policy's (and the fast reader's) tests once more against the mypyc build (`make compiled`, below), which
# must give the same decisions to the last bit (tests/policy/test_compiled.py); the extensions
# are removed again whatever the outcome. TEST_COMPILED=0 skips that pass (about 1 min); so does
# a machine without a C compiler or the Python headers (said in one line: mypyc needs both).
TEST_COMPILED ?= 1
# The recording reader's fast path is compiled too: its tests (it reads what the reference reads).
COMPILED_READ_TESTS = tests/replay/test_fast_read.py tests/replay/test_format_and_cli.py tests/replay/test_format_v2.py tests/replay/test_format_v3.py tests/replay/test_format_v4.py
CAN_COMPILE = $(PY) -c 'import os, shutil, sys, sysconfig; cc = (sysconfig.get_config_var("CC") or "cc").split()[0]; \
	sys.exit(0 if shutil.which(cc) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'
test: venv prometheus lint
	$(VENV)/bin/pytest -q -n $(TEST_JOBS)
	@if [ "$(TEST_COMPILED)" != 1 ]; then :; elif $(CAN_COMPILE); then $(MAKE) --no-print-directory test-compiled; \
	else echo "make test: the compiled pass skipped: no C compiler or Python headers (make test-compiled needs both)"; fi

test-compiled: venv
	$(MAKE) --no-print-directory compiled
	$(VENV)/bin/pytest -q -n $(TEST_JOBS) tests/policy $(COMPILED_READ_TESTS); status=$$?; $(MAKE) --no-print-directory pure; exit $$status

# The decision log of a burst through the decision core (ours vs. HPA on the queue), then
# 20 minutes of a real trace through the fleet simulator under several policies. Outputs go to
# build/demo/ (not tracked): a fresh clone keeps a clean `git status`. The demo needs the package
# and its `sim` extra only (numpy, matplotlib), not the test tools; `make test` adds those to the
# same virtualenv.
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[sim]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m examples.burst_decision_log
	$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/demo.yaml \
		--plot build/demo/demo.png --output-file build/demo/demo.json --markdown build/demo/demo.md

# The published benchmark (docs/benchmark.md), from a fresh clone: every evaluation scenario of
# simulations/preregistered.yaml, every policy x its 8 grid points x seeds 0-2 (~2.5 h on 2 cores),
# the routing-sensitivity sweeps (~40 min more), the 10-seed study (~50 min), then the summary of all scenarios. Tuning traces:
# `make tuning`.
EVALUATION := azure-conv azure-code azure-code-long servegen-m-mid-1d servegen-m-small-1d
TUNING := tuning-servegen-m-small-d9 tuning-servegen-m-mid-d9 tuning-servegen-m-mid-d2-2h tuning-servegen-m-small-d5-2h tuning-servegen-m-mid-d7-1h
JOBS ?= 2
experiments: venv
	for s in $(EVALUATION); do \
		$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/$$s.yaml --sweep --jobs $(JOBS) \
			--output-file simulations/results/$$s.json --markdown simulations/results/$$s.md \
			--plot simulations/results/$$s.png || exit 1; \
	done
	$(PY) simulations/tools/slo_defaults.py --jobs $(JOBS)
	$(MAKE) sensitivity
	$(MAKE) seed-study
	$(PY) simulations/tools/summary.py

# The routing-sensitivity sweeps (docs/benchmark.md#routing-sensitivity): an evaluation scenario
# routed at random. The ServeGen day runs the policies whose routing changes and that reach a
# target in its published table (kpa and ray keep their own routers: identical runs).
SENSITIVITY_SUBSET := --policy queue-lead --policy hpa --policy keda --policy kpa-soft --policy aibrix-apa --policy static
sensitivity: venv
	for s in azure-conv azure-code servegen-m-mid-1d; do \
		subset=""; [ $$s = servegen-m-mid-1d ] && subset="$(SENSITIVITY_SUBSET)"; \
		$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/sensitivity-$$s-random-routing.yaml --sweep \
			--jobs $(JOBS) $$subset \
			--output-file simulations/results/sensitivity/$$s-random-routing.json \
			--markdown simulations/results/sensitivity/$$s-random-routing.md \
			--plot simulations/results/sensitivity/$$s-random-routing.png || exit 1; \
	done

# How far the protocol's 3 seeds are from 10 (docs/benchmark.md#how-far-3-seeds-are-from-10): the
# Azure conversation hour's sweep with seeds 0-9 (~15 min on 2 cores; seeds 0-2 are the published
# runs, bit for bit), then every 3-seed subset scored against all 10; and queue-lead's shipped
# defaults on the tuning slices and on every evaluation scenario with seeds 0-9 (is a seed the
# defaults were tuned on favoured?). ~50 min in all.
seed-study: venv
	mkdir -p simulations/results/seeds
	$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/azure-conv.yaml --sweep --seeds 10 --jobs $(JOBS) \
		--policy queue-lead --policy hpa --policy keda --policy kpa --policy kpa-soft --policy ray --policy aibrix-apa \
		--policy static --output-file simulations/results/seeds/azure-conv-10-seeds.json \
		--markdown simulations/results/seeds/azure-conv-10-seeds.md
	$(PY) simulations/tools/seed_study.py simulations/results/seeds/azure-conv-10-seeds.json \
		--markdown simulations/results/seeds/azure-conv-10-seeds-study.md
	for s in tuning-servegen-m-mid-d7-1h tuning-servegen-m-mid-d2-2h tuning-servegen-m-small-d5-2h \
		tuning-servegen-m-small-d9 tuning-servegen-m-mid-d9; do \
		$(PY) simulations/tools/start_size.py $$s --seeds 0 1 2 3 4 5 6 7 8 9 || exit 1; \
	done > simulations/results/seeds/tuning-shipped-defaults.txt.tmp
	mv simulations/results/seeds/tuning-shipped-defaults.txt.tmp simulations/results/seeds/tuning-shipped-defaults.txt
	$(PY) simulations/tools/defaults_seeds.py --seeds 10 --jobs $(JOBS)

# The same sweep on the tuning traces (queue-lead's defaults are tuned on these only), with the tuning
# seeds of simulations/tuning.yaml (none an evaluation seed); not published.
tuning: venv
	for s in $(TUNING); do \
		$(VENV)/bin/autoscaler simulate --scenario simulations/scenarios/$$s.yaml --sweep --jobs $(JOBS) \
			--output-file build/tuning/$$s.json --markdown build/tuning/$$s.md --plot build/tuning/$$s.png || exit 1; \
	done

# Speed benchmarks; figures go to benchmarks/results/.
bench: venv
	$(PY) benchmarks/bench_sim.py
	$(PY) benchmarks/bench_bound.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_scale.py

# Opt-in: the decision core compiled with mypyc (setup.py; docs/scale.md), the extensions built
# in place beside the .py files, which Python then imports instead (`make test` then tests the
# compiled build). About 1 min on 2 cores. `make pure` removes them: back to pure Python.
# `python -c 'import autoscaler.policy as p; print(p.COMPILED_MODULES)'` says which is in use.
compiled: venv
	$(PIP) install -q --require-hashes -r requirements-build.lock  # the image's build tools (mypy, setuptools), hash-locked
	AUTOSCALER_MYPYC=1 $(PY) setup.py -q build_ext --inplace
	touch autoscaler/policy/*.so autoscaler/replay/*.so  # built from the sources as they are now (an unchanged one is copied with its old time)
	$(PY) -c 'import autoscaler.policy as p; assert p.COMPILED_MODULES; print("compiled:", len(p.COMPILED_MODULES), "modules")'

pure:
	rm -f autoscaler/policy/*.so autoscaler/replay/*.so autoscaler_policy__mypyc.*.so
	rm -rf build/lib.* build/temp.* build/__native* build/autoscaler build/ops.txt

# The controller image (needs a Docker engine). It ships the decision core compiled with mypyc
# (Dockerfile, docs/scale.md); `autoscaler --version` in it says "(policy: compiled, 16 modules)".
image:
	docker build -t $(IMAGE):$(VERSION) .

# Without a Docker engine: the Dockerfile's RUN steps on this machine (tools/image_check.py), in a
# scratch directory: the locks installed with their hashes, the wheel compiled, its extensions
# imported by a virtualenv of requirements.lock alone, tests/policy/test_compiled.py against it.
# Needs a C compiler and the Python headers; 1.5-2 min on 2 cores. Not part of `make test`.
image-check: venv
	$(PY) tools/image_check.py

# deploy/release.yaml, the kit in one file: `kubectl kustomize deploy/release` (the venv's kubectl);
# tests/test_deploy.py fails when it is not a fresh build.
release: venv
	$(PY) tools/build_release.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis
