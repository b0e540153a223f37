# Set-up on a fresh machine: `make demo` (end to end on the embedded default), `make test`.

# The first Python 3.12+ that actually runs (a pyenv shim may exist and still fail).
PYTHON ?= $(shell for p in python3.12 python3.13 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= shop-kettle-chat

.PHONY: demo test test-fast chromium screenshots bench clean

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 not found: install it (e.g. pyenv install 3.12) or run make PYTHON=/path/to/python3.12"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $(STAMP)

chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's chromium"; \
		apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }; \
	else echo "Chromium is missing: run 'sudo apt-get install -y chromium' (Debian's package), then 'make demo' again"; exit 1; fi

demo: $(STAMP) chromium
	$(BIN)/spillage run --scenario $(SCENARIO) --agent browser-use --model scripted:oversharer --audit

test: $(STAMP) chromium
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not e2e"

screenshots: $(STAMP) chromium
	$(BIN)/python -m spillage.origins.screenshots --out docs/screenshots

bench: $(STAMP)
	$(BIN)/python bench/bench_capturelog.py
	$(BIN)/python bench/bench_proxy.py
	$(BIN)/python bench/bench_origins.py

clean:
	rm -rf $(VENV) runs .spillage .pytest_cache
