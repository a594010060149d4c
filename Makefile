# kaflet: `make run` starts the broker, `make test` installs what the tests need and runs them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

# Debian packages the tests use, and only them (docs/tests.md lists everything make test installs):
# - kcat: tests/clients drive it as one more real client (librdkafka's command-line tool).
# None of them ships a service. promtool is not among them: see `promtool` below. The Go quick
# starts are built by `make go` with the modules from the Go module proxy.
APT_PACKAGES := kcat
# KafkaJS tests (tests/clients/test_alter_configs_clients.py) need node and npm: apt-deps adds
# nodejs and npm when either command is missing (a machine may have its own Node).

.PHONY: run test test-fast test-image bench fuzz lint apt-deps promtool java jvm go clean

# What the build downloads and compiles for the tests (Maven's classpaths and classes, Go
# binaries) lives here, outside the source tree; Maven's own repository stays in ~/.m2.
KAFLET_CACHE ?= $(HOME)/.cache/kaflet
export KAFLET_CACHE

# kaflet needs Python 3.11 or newer: say so before anything is created.
define CHECK_PYTHON
@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
  echo >&2 "kaflet needs Python 3.11 or newer, and '$(PYTHON)' is $$(command -v $(PYTHON) >/dev/null && $(PYTHON) --version 2>&1 || echo 'not found')."; \
  echo >&2 "Install one (apt-get install python3.11, or newer) and run: make PYTHON=python3.11 ..."; exit 1; }
endef

# The venv is made whole or not at all: a failed step removes it, so no later run builds on a
# broken one. A venv left by an older Python (or broken by hand) is made again.
$(BIN)/python:
	$(CHECK_PYTHON)
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "installing python3-venv (venv needs ensurepip)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends python3-venv; }
	@rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
	$(BIN)/python -m pip install -q --upgrade pip || { rm -rf $(VENV); exit 1; }

define CHECK_VENV
@$(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
  echo "$(VENV) is broken or was made by a Python older than 3.11: making it again"; \
  rm -rf $(VENV) && $(MAKE) --no-print-directory $(BIN)/python; }
endef

# Byte-compile kaflet's own modules: editable installs are not compiled, and where
# PYTHONDONTWRITEBYTECODE is set every start would compile them from source again.
COMPILE := $(BIN)/python -m compileall -q broker protocol storage pipeline

# An editable install in "compat" mode puts the checkout on sys.path with one .pth line;
# the default mode's import finder costs every start ~30 ms (a tenth of kaflet's start-up).
# Should setuptools drop compat mode, the default one serves.
EDITABLE := --config-settings editable_mode=compat

$(VENV)/.installed: pyproject.toml setup.py protocol/_speedups.c | $(BIN)/python
	$(CHECK_VENV)
	$(BIN)/python -m pip install -q -e . $(EDITABLE) || $(BIN)/python -m pip install -q -e .
	$(COMPILE)
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py protocol/_speedups.c | $(BIN)/python
	$(CHECK_VENV)
	$(BIN)/python -m pip install -q -e '.[test,pipeline]' $(EDITABLE) || $(BIN)/python -m pip install -q -e '.[test,pipeline]'
	$(COMPILE)
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	@$(COMPILE)
	$(BIN)/kaflet serve --host 127.0.0.1 --port 9092 --data-dir ./data

# Missing packages only, without recommended ones. A policy-rc.d that answers 101 ("action
# forbidden") keeps a package's service from starting; one already there is left alone.
apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing (no recommended packages, no service started)"; \
	  policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=1; \
	    printf '#!/bin/sh\n# kaflet make apt-deps: start no service\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null; \
	    $(SUDO) chmod 755 /usr/sbin/policy-rc.d; fi; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $$missing; status=$$?; \
	  if [ -n "$$policy" ]; then $(SUDO) rm -f /usr/sbin/policy-rc.d; fi; exit $$status; fi

# promtool checks that /metrics is valid exposition text and that docker/'s Prometheus config
# loads (tests/observability). Debian ships it only inside the Prometheus server's package, whose
# install enables prometheus.service at boot; so the package is downloaded, not installed, and
# promtool alone (one static binary) is unpacked into the cache. A promtool on PATH is used as is.
PROMTOOL := $(KAFLET_CACHE)/bin/promtool
promtool:
	@command -v promtool >/dev/null 2>&1 || [ -x $(PROMTOOL) ] || { \
	  echo "unpacking promtool from Debian's prometheus package into $(KAFLET_CACHE)/bin (nothing installed)"; \
	  tmp=$$(mktemp -d) && cd $$tmp && mkdir -p $(KAFLET_CACHE)/bin && \
	  { apt-get download prometheus >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && apt-get download prometheus; }; } && \
	  dpkg-deb -x prometheus_*.deb unpacked && install -m 755 unpacked/usr/bin/promtool $(PROMTOOL); \
	  status=$$?; rm -rf $$tmp; exit $$status; }

# A JDK 17+ and Maven: Spark (the pipeline's tests and bench) and Kafka 4.4 (the reference broker
# of tests/differential) run on it, and tests/jvm's Java programs are compiled with it.
java:
	@missing=""; javac -version >/dev/null 2>&1 || missing="openjdk-17-jdk-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	if [ -n "$$missing" ]; then echo "installing$$missing for the JVM pieces of the tests"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $$missing; fi

# The JVM pieces of the tests (tests/jvm/pom.xml: Kafka 4.4 itself, ...), fetched from Maven
# Central into ~/.m2 and described in $(KAFLET_CACHE)/jvm. A second run finds them there. When
# Maven fails, the tests that need it fail with Maven's reason (tests/support/jvm.py); the rest run.
# Spark's Kafka connector (tests/jvm/spark-kafka) must be the installed PySpark's version: read from
# the venv when there is one (pom.xml's default otherwise).
SPARK_VERSION = $(shell $(BIN)/python -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)

jvm: java
	@mkdir -p $(KAFLET_CACHE)/jvm
	@if mvn -B -q -Dstyle.color=never -f tests/jvm/pom.xml -Dkaflet.cache=$(KAFLET_CACHE) $(if $(SPARK_VERSION),-Dspark.version=$(SPARK_VERSION)) package > $(KAFLET_CACHE)/jvm/maven.log 2>&1; \
	then rm -f $(KAFLET_CACHE)/jvm/maven.error; \
	else tail -n 40 $(KAFLET_CACHE)/jvm/maven.log > $(KAFLET_CACHE)/jvm/maven.error; \
	  echo >&2 "Maven could not build tests/jvm (see $(KAFLET_CACHE)/jvm/maven.log); the tests that need it will fail with its reason"; fi

# The Go quick starts (docs/examples/go/*: franz-go and Sarama from the Go module proxy, pinned by
# their go.sum), built into $(KAFLET_CACHE)/go with the module cache outside the tree (GOMODCACHE,
# ~/go/pkg/mod by default). They need Go 1.26 or newer (their go.mod says so); `go` missing is
# installed from Debian. When a build fails, its tests fail with the reason (GO_EXAMPLES.error).
GO_EXAMPLES := franz sarama
go:
	@command -v go >/dev/null 2>&1 || { echo "installing golang-go for the Go quick starts"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends golang-go; }
	@mkdir -p $(KAFLET_CACHE)/go
	@for ex in $(GO_EXAMPLES); do \
	  if (cd docs/examples/go/$$ex && GOFLAGS=-mod=readonly go build -o $(KAFLET_CACHE)/go/$$ex-quickstart .) > $(KAFLET_CACHE)/go/$$ex.log 2>&1; \
	  then rm -f $(KAFLET_CACHE)/go/$$ex.error; \
	  else { go version; cat $(KAFLET_CACHE)/go/$$ex.log; } > $(KAFLET_CACHE)/go/$$ex.error 2>&1; \
	    echo >&2 "could not build docs/examples/go/$$ex (see $(KAFLET_CACHE)/go/$$ex.error); its test will fail with the reason"; fi; done

# The tests of the code that has a compiled twin (protocol/_speedups.c) run once more on the
# pure-Python path, which is what runs where no C compiler was found at install time.
PURE_TESTS := tests/unit/test_commit_codec.py tests/unit/test_records.py tests/unit/test_commit_batching.py \
	tests/conformance/test_offset_commit.py tests/conformance/test_offset_fetch.py tests/conformance/test_txn_offset_commit.py \
	tests/api/test_offsets.py

# The suite runs in TEST_WORKERS processes (pytest-xdist): it mostly waits on JVMs, real clients
# and the brokers' timers, so three processes share two cores well. Whole modules go to one
# process, longest first (tests/support/parallel.py). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3
PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope)

test: $(VENV)/.installed-test apt-deps promtool jvm go
	$(BIN)/python -m pytest -q $(PARALLEL)
	KAFLET_PURE_PYTHON=1 $(BIN)/python -m pytest -q $(PURE_TESTS)

# The container image, built from docker/Dockerfile and checked against a local Docker daemon
# (tests/image: healthy, compiled path, non-root, produce/consume, classic and KIP-848 groups,
# records and offsets kept across `docker restart`). Not part of `make test`, which never needs a
# daemon. Builds use the host's network (DOCKER_BUILD_FLAGS), which also serves daemons without a
# bridge network.
IMAGE ?= kaflet:test
DOCKER_BUILD_FLAGS ?= --network host
test-image: $(VENV)/.installed-test
	@docker info >/dev/null 2>&1 || { echo >&2 "make test-image needs a running Docker daemon (docker info failed; DOCKER_HOST=$${DOCKER_HOST:-unset})"; exit 1; }
	docker build $(DOCKER_BUILD_FLAGS) -f docker/Dockerfile -t $(IMAGE) .
	KAFLET_TEST_IMAGE=$(IMAGE) $(BIN)/python -m pytest -q -p no:cacheprovider tests/image

# The quicker loop while editing: codecs, storage and the coordinator's rules, with a fifth of the
# assignors' hypothesis examples (KAFLET_TEST_FAST; make test runs them all).
test-fast: $(VENV)/.installed-test
	KAFLET_TEST_FAST=1 $(BIN)/python -m pytest -q $(PARALLEL) tests/unit tests/conformance

bench: $(VENV)/.installed-test jvm
	@$(COMPILE)
	$(BIN)/python -m bench

# The protocol fuzzer at length (tests/support/fuzz.py): FUZZ_SEED picks the mutations (default:
# the time), FUZZ_FRAMES and FUZZ_SECONDS bound the run; exit status 1 when the broker misbehaved.
FUZZ_SEED ?= $(shell date +%s)
FUZZ_FRAMES ?= 5000000
FUZZ_SECONDS ?= 1800
fuzz: $(VENV)/.installed-test
	FUZZ_SEED=$(FUZZ_SEED) FUZZ_FRAMES=$(FUZZ_FRAMES) FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python -m tests.support.fuzz

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Removes the venv, caches and build output; the broker's data in ./data is kept (rm -rf data).
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build dist *.egg-info
