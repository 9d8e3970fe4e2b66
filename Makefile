# Two commands do everything: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Spark 4 (the spark extra, tests/spark) runs on Java 17 or 21: JAVA_HOME if set, else a JDK here.
JAVA_HOME ?= $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk* /usr/lib/jvm/java-21-openjdk* /usr/lib/jvm/temurin-17* /usr/lib/jvm/temurin-21*))
ifneq ($(JAVA_HOME),)
export JAVA_HOME
endif

.PHONY: run test check typecheck install system-deps lint clean bench soak docs docs-serve

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

# System tools the compat tests drive. CI runs as root; elsewhere sudo is used when present.
system-deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat >/dev/null; }
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

REST_PROXY_PORT ?= 8082
run: $(STAMP)
	$(PY) -m trikafka --listeners PLAINTEXT://127.0.0.1:9092 --override metrics.port=9404 --override schema.registry.port=8081 --rest-proxy-port $(REST_PROXY_PORT) --ui

# The main suite, then the stream processors' tests in their own venv; one command, and it
# fails if either does.
test: $(STAMP) $(STREAMS_STAMP) system-deps $(KAFKAJS) docs
	$(PY) -m pytest -q -m "not streams"
	$(STREAMS_PY) -m pytest -q -m streams tests/compat/test_stream_changelogs.py

# The fast gate for the edit-test loop (under four minutes on two cores): ruff, the type checker
# and every test that needs no real client process (compat), stream processor or Spark, on two
# pytest-xdist workers. `make test` stays the whole gate (.ci/run runs it).
check: $(STAMP) typecheck
	$(VENV)/bin/ruff check trikafka tests examples benchmarks tools
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not compat and not streams" --ignore=tests/spark

# The type checker over trikafka/ (its configuration is pyproject.toml's); skipped, saying so, where mypy is not installed.
typecheck: $(STAMP)
	@if $(PY) -c "import mypy" 2>/dev/null; then $(PY) -m mypy trikafka; else echo "typecheck: mypy is not installed: skipped"; fi

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

# kill -9 durability, the long run: a broker process on a data directory is SIGKILLed at a
# random moment of acks=all produce traffic, CYCLES times; every acknowledged record must
# survive each restart. `make test` runs 3 cycles. TRIKAFKA_KILL_SEED replays a run.
CYCLES ?= 100
soak: $(STAMP)
	TRIKAFKA_KILL_CYCLES=$(CYCLES) $(PY) -m pytest -q -s -p no:cacheprovider tests/resilience/test_kill9_durability.py

lint: $(STAMP)
	$(VENV)/bin/ruff check trikafka tests examples benchmarks tools

clean:
	rm -rf $(VENV) $(STREAMS_VENV) build site *.egg-info trikafka/protocol/*.so
