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

run: $(STAMP)
	$(PY) -m trikafka --listeners PLAINTEXT://127.0.0.1:9092

test: $(STAMP) system-deps
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check trikafka tests examples

clean:
	rm -rf $(VENV) build *.egg-info
