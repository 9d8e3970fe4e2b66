# Two commands do everything: `make run` and `make test` (`make dist` builds the sdist and wheel).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Spark 4 (the spark extra, tests/spark) runs on Java 17 or 21: JAVA_HOME if set, else a JDK here.
JAVA_HOME ?= $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk* /usr/lib/jvm/java-21-openjdk* /usr/lib/jvm/temurin-17* /usr/lib/jvm/temurin-21*))
ifneq ($(JAVA_HOME),)
export JAVA_HOME
endif

.PHONY: run test test-pythons check typecheck install system-deps lint clean bench bench-pythons soak docs docs-serve dist

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# setup.py and the C source: the native record walk is rebuilt when they change.
NATIVE := setup.py trikafka/protocol/_recordwalk.c

$(STAMP): pyproject.toml $(NATIVE) | $(PY)
	$(PY) -m pip install -q -e '.[test,spark,docs]'
	touch $(STAMP)

install: $(STAMP)

# The stream processors (quixstreams, faust) in a venv of their own: quixstreams caps
# confluent-kafka below 2.13, the main venv tests the newest (docs/testing-environments.md).
STREAMS_VENV  := .venv-streams
STREAMS_PY    := $(STREAMS_VENV)/bin/python
STREAMS_STAMP := $(STREAMS_VENV)/.installed

$(STREAMS_PY):
	$(PYTHON) -m venv $(STREAMS_VENV)
	$(STREAMS_PY) -m pip install -q --upgrade pip

$(STREAMS_STAMP): pyproject.toml $(NATIVE) | $(STREAMS_PY)
	$(STREAMS_PY) -m pip install -q -e '.[streams]'
	touch $(STREAMS_STAMP)

# System tools the compat and HTTP proxy tests drive (curl runs Confluent's documented examples as written). CI runs as root; elsewhere sudo is used when present.
system-deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat >/dev/null; }
	@command -v curl >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq curl >/dev/null; }
	@command -v tmux >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq tmux >/dev/null; }
	@command -v chromedriver >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }
	@[ -n "$(JAVA_HOME)" ] || command -v java >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }

# kafkajs and its codecs for the compat tests, from the committed lock file. kafkajs-lz4 builds a
# native addon (node-gyp: python3, make, a C++ compiler).
KAFKAJS := tests/compat/kafkajs/node_modules
$(KAFKAJS): tests/compat/kafkajs/package.json tests/compat/kafkajs/package-lock.json
	cd tests/compat/kafkajs && npm ci --no-audit --no-fund
	touch $(KAFKAJS)

# `make run`: the dev broker, from a venv of its own with the package and the registry extra
# only (no test, Spark or docs dependencies). Each port is a variable, -1 turns that server
# off; ARGS for any other flag, e.g. make run PORT=19092 REGISTRY_PORT=-1 ARGS="--in-memory".
RUN_VENV  := .venv-run
RUN_PY    := $(RUN_VENV)/bin/python
RUN_STAMP := $(RUN_VENV)/.installed
PORT          ?= 9092
METRICS_PORT  ?= 9404
REGISTRY_PORT ?= 8081
REST_PROXY_PORT ?= 8082
ARGS          ?=
# One flag a line: a server of its own (a port variable) adds its line here.
RUN_FLAGS = --listeners PLAINTEXT://127.0.0.1:$(PORT) \
	--override metrics.port=$(METRICS_PORT) \
	--override schema.registry.port=$(REGISTRY_PORT) \
	--rest-proxy-port $(REST_PROXY_PORT) \
	--ui

$(RUN_PY):
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_PY) -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml $(NATIVE) | $(RUN_PY)
	$(RUN_PY) -m pip install -q -e '.[registry]'
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(RUN_PY) -m trikafka $(RUN_FLAGS) $(ARGS)

# The main suite, then the stream processors' tests in their own venv, then the suite on the
# other Pythons (test-pythons); one command, and it fails if any does.
# The tests that need no real client process run on two workers (pytest-xdist), the compat tests
# (real clients against broker processes, timing-sensitive) one at a time after them.
test: $(STAMP) $(STREAMS_STAMP) system-deps $(KAFKAJS) docs typecheck
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not compat and not streams"
	$(PY) -m pytest -q -m "compat and not streams"
	$(STREAMS_PY) -m pytest -q -m streams tests/compat/test_stream_changelogs.py
	@$(MAKE) --no-print-directory test-pythons

# The suite on the other Pythons the package claims (pyproject's classifiers), each in a venv of
# its own (.venv-py3.12, ...) with the test and docs extras (the suite builds the site): all but the real-client (compat), stream
# processor and Spark tests, on two workers (pytest-xdist; a group of tests that shares one
# built wheel stays on one worker). A Python not installed is named in one line and skipped:
# the default one above has run the whole suite. PYTHONS="3.13" (or "") to choose.
PYTHONS ?= 3.12 3.13
OTHER_PYTHONS_SUITE := -n 2 --dist loadgroup -m "not compat and not streams" --ignore=tests/spark

test-pythons:
	@for version in $(PYTHONS); do \
	  python=$$(tools/find-python $$version) || { \
	    echo "make test: no Python $$version here, so the suite did not run on it (pyenv install $$version; PYTHONS= to choose)"; \
	    continue; }; \
	  $(MAKE) --no-print-directory .venv-py$$version/.installed BASE_PYTHON=$$python || exit 1; \
	  echo "make test: the suite on Python $$version ($$python)"; \
	  .venv-py$$version/bin/python -m pytest -q $(OTHER_PYTHONS_SUITE) || exit 1; \
	done

.venv-py%/.installed: pyproject.toml $(NATIVE)
	$(or $(BASE_PYTHON),$(shell tools/find-python $*)) -m venv .venv-py$*
	.venv-py$*/bin/python -m pip install -q --upgrade pip
	.venv-py$*/bin/python -m pip install -q -e '.[test,docs]'
	touch $@

# The sdist and the wheel in dist/ (python -m build), checked as PyPI checks an upload
# (twine check --strict). TRIKAFKA_NO_EXTENSIONS=1 make dist: a pure-Python wheel.
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

# The fast gate for the edit-test loop (under four minutes on two cores): ruff, the type checker
# and every test that needs no real client process (compat), stream processor or Spark. On four
# pytest-xdist workers, though the machine has two cores: many of these tests wait on a
# subprocess or a socket rather than compute, and four finish them sooner than two. Bytecode is
# cached (__pycache__, ignored by git) even where PYTHONDONTWRITEBYTECODE is set: the tests start
# a few hundred Python processes that import the package, and each would compile it again, as
# each worker would rewrite every test module's asserts. `make test` stays the whole gate
# (.ci/run runs it).
check: $(STAMP) typecheck
	$(VENV)/bin/ruff check trikafka tests examples benchmarks tools
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n 4 --dist loadgroup -m "not compat and not streams" --ignore=tests/spark

# mypy over trikafka/ ([tool.mypy] in pyproject.toml), then the public API as a user's strict
# checker sees it (tests/type_tests/; tests/type_tests/test_public_api_types.py runs the same).
typecheck: $(STAMP)
	$(PY) -m mypy
	$(PY) -m mypy --strict --disallow-any-expr tests/type_tests/check_public_api.py tests/type_tests/user_app.py

# The docs site (mkdocs.yml, docs/): built strictly — a broken link or anchor, or a page missing
# from disk, fails the build. Its code blocks run in the suite (tests/test_docs.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

# Benchmarks: trikafka beside librdkafka's mock cluster and a bare Trio server, all on 127.0.0.1
# (benchmarks/run.py). BENCH_ARGS="--quick" for a seconds-long smoke run, "--rounds N" to vary.
BENCH_STAMP := $(VENV)/.bench-installed
LOADGEN     := benchmarks/build/loadgen
BENCH_ARGS  ?=
# The Spark rows (benchmarks/spark.py): "--records 200000" on a busy machine.
SPARK_BENCH_ARGS ?=

$(BENCH_STAMP): pyproject.toml $(NATIVE) | $(PY)
	$(PY) -m pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

$(LOADGEN): benchmarks/loadgen.c
	mkdir -p $(dir $@)
	gcc -O2 -Wall -o $@ $<

bench: $(BENCH_STAMP) $(LOADGEN)
	$(PY) -m benchmarks $(BENCH_ARGS)
	$(PY) -m benchmarks.fetch_sessions --partitions 100
	$(PY) -m benchmarks.request_cost
	$(PY) -m benchmarks.card_hops
	$(PY) -m benchmarks.spark $(SPARK_BENCH_ARGS)

# The same rows on the other Pythons (PYTHONS, as test-pythons) beside .venv's, side by side
# (benchmarks/pythons.py): each one's .venv-py<version> with the bench extra added.
bench-pythons: $(BENCH_STAMP) $(LOADGEN)
	@for version in $(PYTHONS); do \
	  python=$$(tools/find-python $$version) || { echo "make bench-pythons: no Python $$version here"; continue; }; \
	  $(MAKE) --no-print-directory .venv-py$$version/.installed BASE_PYTHON=$$python || exit 1; \
	  .venv-py$$version/bin/python -m pip install -q -e '.[bench]' || exit 1; \
	done
	$(PY) -m benchmarks.pythons

# kill -9 durability, the long run: a broker process on a data directory is SIGKILLed at a
# random moment of acks=all produce traffic, CYCLES times; every acknowledged record must
# survive each restart. `make test` runs 3 cycles. TRIKAFKA_KILL_SEED replays a run.
CYCLES ?= 100
soak: $(STAMP)
	TRIKAFKA_KILL_CYCLES=$(CYCLES) $(PY) -m pytest -q -s -p no:cacheprovider tests/resilience/test_kill9_durability.py

lint: $(STAMP)
	$(VENV)/bin/ruff check trikafka tests examples benchmarks tools

clean:
	rm -rf $(VENV) $(STREAMS_VENV) $(RUN_VENV) .venv-py3.* build dist site *.egg-info trikafka/protocol/*.so
