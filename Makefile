# Tidemark: the two commands are `make run` and `make test`; everything else supports them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps kafka kafka-stop lint test test-long test-docker test-cluster test-kafka39 run chaos clean

# The Kafka version of `make kafka`, `make test`, `make run` and `make chaos`: empty for the
# default (4.3.2, streams/dev/broker/versions.py), e.g. `make test KAFKA_VERSION=3.9.2`.
KAFKA_VERSION ?= $(TIDEMARK_KAFKA_VERSION)
export TIDEMARK_KAFKA_VERSION := $(KAFKA_VERSION)

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# What the tests need beyond Python: Debian packages (Prometheus and promtool, Chromium), and
# Helm for the chart's tests, built once per machine into ~/.cache/tidemark/tools (about 5
# minutes the first time); each a no-op when present.
system-deps:
	bash scripts/install-system-deps.sh
	bash scripts/install-browser.sh
	bash scripts/install-helm.sh

kafka: setup
	$(PY) -m streams.dev.broker start

kafka-stop: setup
	$(PY) -m streams.dev.broker stop

lint: setup
	$(VENV)/bin/ruff check streams tests bench examples
	$(VENV)/bin/ruff format --check streams tests bench examples
	$(VENV)/bin/mypy

# Two pytest workers (pytest-xdist). Each module's tests stay together on one worker (module
# fixtures), and the three-node cluster tests share one (tests/conftest.py's groups); each
# worker starts its own broker. Most broker tests wait on timeouts, not CPU, so two halve the
# run on 2 cores. Three were faster (863 s) but lost 4 timing-bound tests in one of two fresh
# runs (README, Developing). PYTEST_WORKERS=0 runs serially.
# `make test` leaves out the tests marked `long` (fault scenarios beyond the one of each kind it
# keeps), which `make test-long` runs alone, and those marked `docker` (`make test-docker`).
# CI (.ci/run) runs all three.
PYTEST_WORKERS ?= 2
test: lint system-deps
	$(PY) -m streams.dev.broker fetch
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not long and not docker" $(PYTEST_ARGS)

test-long: setup system-deps
	$(PY) -m streams.dev.broker fetch
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m long $(PYTEST_ARGS)

# docker-compose.yml started for real, and Kafka in a container through testcontainers (the
# tests marked `docker`, tests/deploy). Installs Debian's Docker engine where it is missing,
# starts dockerd where none runs, and builds the images locally (streams/dev/docker: about 2
# minutes the first time). CI (.ci/run) runs it after `make test-long`. Apart from `make test`:
# its containers (a JVM healthcheck every 5 s among them) would compete for the 2 cores with the
# timing-bound broker tests, and on a fresh machine it adds 201 s to make test's 770 s of pytest
# (2026-12-05).
test-docker: setup
	bash scripts/install-docker.sh
	$(VENV)/bin/pytest -m docker $(PYTEST_ARGS)

# The three-node cluster tests (tests/kafka/test_cluster.py, test_cluster_eos.py) alone.
test-cluster: lint
	$(PY) -m streams.dev.broker fetch
	$(VENV)/bin/pytest -m cluster $(PYTEST_ARGS)

# The broker suites (`pytest -m broker`) on Kafka 3.9.2, the version that is not the default.
test-kafka39: setup
	TIDEMARK_KAFKA_VERSION=3.9.2 $(PY) -m streams.dev.broker fetch
	TIDEMARK_KAFKA_VERSION=3.9.2 $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m broker $(PYTEST_ARGS)

run: setup
	$(PY) -m streams.dev.demo

# The fault-injection run on a broker of its own (tests/chaos; docs/reliability.md).
CHAOS_KILLS ?= 100
CHAOS_ENGINE ?= confluent
CHAOS_BROKERS ?= 1
chaos: setup
	$(PY) -m streams.dev.broker fetch
	$(PY) -m tests.chaos --kills $(CHAOS_KILLS) --engine $(CHAOS_ENGINE) --brokers $(CHAOS_BROKERS)

clean:
	-$(PY) -m streams.dev.broker stop 2>/dev/null
	rm -rf $(VENV) .kafka .data .run .mypy_cache .ruff_cache .pytest_cache .hypothesis test-output *.egg-info
