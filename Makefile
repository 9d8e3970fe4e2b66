# Two commands do everything: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test install system-deps lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# System tools the compat tests drive. CI runs as root; elsewhere sudo is used when present.
system-deps:
	@command -v kcat >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq kcat >/dev/null; }

# kafkajs and its codecs for the compat tests, from the committed lock file. kafkajs-lz4 builds a
# native addon (node-gyp: python3, make, a C++ compiler).
KAFKAJS := tests/compat/kafkajs/node_modules
$(KAFKAJS): tests/compat/kafkajs/package.json tests/compat/kafkajs/package-lock.json
	cd tests/compat/kafkajs && npm ci --no-audit --no-fund
	touch $(KAFKAJS)

run: $(STAMP)
	$(PY) -m trikafka --listeners PLAINTEXT://127.0.0.1:9092

test: $(STAMP) system-deps $(KAFKAJS)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check trikafka tests examples

clean:
	rm -rf $(VENV) build *.egg-info
