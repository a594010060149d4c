# kaflet: `make run` starts the broker, `make test` installs what the tests need and runs them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
APT_PACKAGES := kcat prometheus
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

.PHONY: run test bench lint apt-deps java clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip

# Byte-compile kaflet's own modules: editable installs are not compiled, and where
# PYTHONDONTWRITEBYTECODE is set every start would compile them from source again.
COMPILE := $(BIN)/python -m compileall -q broker protocol storage pipeline

# An editable install in "compat" mode puts the checkout on sys.path with one .pth line;
# the default mode's import finder costs every start ~30 ms (a tenth of kaflet's start-up).
# Should setuptools drop compat mode, the default one serves.
EDITABLE := --config-settings editable_mode=compat

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e . $(EDITABLE) || $(BIN)/python -m pip install -q -e .
	$(COMPILE)
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,pipeline]' $(EDITABLE) || $(BIN)/python -m pip install -q -e '.[test,pipeline]'
	$(COMPILE)
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	@$(COMPILE)
	$(BIN)/kaflet serve --host 127.0.0.1 --port 9092 --data-dir ./data

apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi

# Spark (the pipeline's tests and bench) needs a Java 17+ runtime; any java on PATH serves.
java:
	@java -version >/dev/null 2>&1 || { echo "installing a Java runtime for Spark"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends openjdk-17-jre-headless; }

test: $(VENV)/.installed-test apt-deps java
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-test java
	@$(COMPILE)
	$(BIN)/python -m bench

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data .pytest_cache
