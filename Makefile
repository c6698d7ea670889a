# Two entry points for a fresh machine (Python 3.11, Java 17, Maven, Rust/cargo; make test also Node.js/npm; no Docker):
#   make demo   set up .venv, resolve the Kafka jars, start Apache Kafka, run the router end to end
#   make test   set up .venv, resolve the Kafka and Spark-connector jars, run ruff, mypy --strict and every test
# SUBROUTE_TEST_BROKER=tansu make test runs the broker tests on Tansu instead (see README).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# checkov pins an older `packaging` than pytest accepts, so it lives in its own venv (tests/deploy finds it).
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

.PHONY: demo test lint typecheck pytest bench soak clean jars

# The editable install also compiles the native core (router/native, Rust): its sources are inputs too.
NATIVE_SOURCES := router/routing/native/Cargo.toml router/routing/native/Cargo.lock $(wildcard router/routing/native/src/*.rs)

# Two stamps, one per set of extras, each true of the venv it stands beside: $(DEMO_STAMP) says the `demo` extra
# is installed (the product, Spark and the local brokers), $(STAMP) says `dev` is too (what `make test` runs;
# `dev` includes `demo`, so its install renews both). A venv made by `make demo` has no $(STAMP): the first
# `make test` installs the dev extra into it. A venv made by `make test` already has all the demo needs: the
# demo stamp is then renewed without a second install (and a second compile of the native core).
DEMO_STAMP := $(VENV)/.installed-demo
INPUTS := pyproject.toml $(NATIVE_SOURCES)

$(STAMP): $(INPUTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEMO_STAMP) $(STAMP)

$(DEMO_STAMP): $(INPUTS)
	if [ -f $(STAMP) ] && [ -z "$$(find $(INPUTS) -newer $(STAMP))" ]; then \
		touch $(DEMO_STAMP); \
	else \
		$(PYTHON) -m venv $(VENV) \
		&& $(BIN)/python -m pip install --quiet --upgrade pip \
		&& $(BIN)/python -m pip install --quiet -e '.[demo]' \
		&& touch $(DEMO_STAMP); \
	fi

# Node.js validators of Strimzi's KafkaTopic CRD, for tests/deploy/test_strimzi_topics.py (npm ci: the lock file's
# exact versions, installed once; the machine's node and npm).
STRIMZI_CHECK := tests/deploy/strimzi
STRIMZI_STAMP := $(STRIMZI_CHECK)/node_modules/.installed

$(STRIMZI_STAMP): $(STRIMZI_CHECK)/package.json $(STRIMZI_CHECK)/package-lock.json
	cd $(STRIMZI_CHECK) && npm ci --no-audit --no-fund --loglevel=error
	touch $(STRIMZI_STAMP)

$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet checkov
	touch $(CHECKOV_STAMP)

# Maven resolves jars/pom.xml's profiles from Maven Central once; later runs find them cached (.cache/jars).
jars: $(DEMO_STAMP)
	$(BIN)/python -m subroute.dev.jars kafka spark-kafka schema-registry

demo: $(DEMO_STAMP) jars
	$(BIN)/python -m subroute.dev.demo

lint: $(STAMP)
	$(BIN)/ruff check expressions router schemas spark deploy tests examples
	$(BIN)/ruff format --check expressions router spark examples
	cargo fmt --check --manifest-path router/routing/native/Cargo.toml
	cargo clippy --quiet --manifest-path router/routing/native/Cargo.toml --all-targets -- -D warnings
	# and the PyO3 module (python*.rs, boundary.rs), which only the extension-module feature compiles
	cargo clippy --quiet --manifest-path router/routing/native/Cargo.toml --features extension-module -- -D warnings
	cargo test --quiet --manifest-path router/routing/native/Cargo.toml
	# the benchmark's native pipe: its format only (clippy would build librdkafka, minutes, for a bench tool)
	cargo fmt --check --manifest-path tests/perf/native_pipe/Cargo.toml

# mypy cannot follow the editable install's import hook for the `subroute` package (pyproject.toml), so it checks
# a tree of links with the wheel's layout: subroute/ = router/'s entries plus expressions/, schemas/, spark/.
TYPECHECK_TREE := .build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/subroute
	ln -s $(CURDIR)/router/* $(CURDIR)/expressions $(CURDIR)/schemas $(CURDIR)/spark $(TYPECHECK_TREE)/subroute/
	cd $(TYPECHECK_TREE) && $(CURDIR)/$(BIN)/mypy --strict --config-file $(CURDIR)/pyproject.toml -p subroute

# Two processes, each with its own broker, a test file kept in one process (its module fixtures): the suite mostly
# waits on brokers and workers, so two halve its time even on two cores. PYTEST_PROCESSES=0 runs it in one.
PYTEST_PROCESSES ?= 2
pytest: $(STAMP) $(CHECKOV_STAMP) $(STRIMZI_STAMP) jars
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q --durations=15 -n $(PYTEST_PROCESSES) --dist loadfile

test: lint typecheck pytest

bench: $(STAMP) jars
	for f in tests/perf/bench_*.py; do $(BIN)/python $$f || exit 1; done

# The soak sizes run longer than the per-test limits in pyproject.toml allow the everyday suite.
soak: $(STAMP) jars
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q --soak --timeout 1800 -o faulthandler_timeout=1920 tests/reliability

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) build .build *.egg-info .pytest_cache .mypy_cache .ruff_cache .cache $(STRIMZI_CHECK)/node_modules
