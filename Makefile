# Two commands do all set-up on a fresh machine (Python 3.11+, pip, make; npm and apt for the tests):
#   make demo   — install metaharness into .venv and run the bundled two-step workflow (offline)
#   make test   — install everything the tests need (Python deps, the docs tools, the pinned vendor CLIs,
#                 Debian's chromium, bubblewrap and other shells, Arize Phoenix in its own venv) and run
#                 the whole suite, end-to-end tests on the real binaries included (the documentation site
#                 is built with --strict by a test)
#   make check  — the fast tier for a developer: everything but the real-vendor end-to-end, browser,
#                 Ray, Phoenix and long fuzz tests, in parallel; needs no npm and no apt
#   make docs   — regenerate the CLI reference and build the documentation site into site/
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_FLAGS := --quiet --disable-pip-version-check
# Bytecode is cached whatever the environment says (PYTHONDONTWRITEBYTECODE): without it every
# metaharness a test starts compiles the package again, and every pytest worker rewrites every test
# module's asserts again. The caches are __pycache__ directories, ignored by git; `make clean` goes.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-test vendor browser sandbox shells debian phoenix docs demo check test test-deps bench clean fuzz compiled durations

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[test,docs]'
	# Harbor's own ATIF models validate every export in tests/export. harbor 0.25.0 declares Python 3.12+
	# and a service stack (litellm, supabase, fastapi, ...); its ATIF package imports only pydantic.
	$(BIN)/python -m pip install $(PIP_FLAGS) --no-deps --ignore-requires-python harbor==0.25.0
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The pinned Claude Code, Codex, opencode, Gemini CLI and Qwen Code, project-local. `npm install` rather than
# `npm ci`: opencode-ai lists optional per-platform packages that the lock holds only for this
# platform, and `npm ci` refuses such a lock as out of sync; the lock still fixes every version.
vendor: .vendor/node_modules/.installed
# The install (opencode's postinstall starts it) and each CLI's --version run in a home and a
# temporary directory of their own, removed after: they write caches, logs and state there
# (opencode in the temporary directory's opencode/ too). npm keeps the user's own config and cache.
.vendor/node_modules/.installed: .vendor/package.json .vendor/package-lock.json
	@home=$$(mktemp -d "$(CURDIR)/.vendor/home.XXXXXX"); trap 'rm -rf "$$home"' EXIT; mkdir "$$home/tmp"; \
	set -- env HOME="$$home" TMPDIR="$$home/tmp" XDG_CONFIG_HOME="$$home/.config" XDG_DATA_HOME="$$home/.local/share" \
	  XDG_CACHE_HOME="$$home/.cache" XDG_STATE_HOME="$$home/.local/state"; \
	"$$@" npm_config_userconfig="$$(npm config get userconfig)" npm_config_cache="$$(npm config get cache)" \
	  npm install --prefix .vendor --no-audit --no-fund --no-save --loglevel=error || exit 1; \
	for cli in claude codex opencode gemini qwen; do "$$@" .vendor/node_modules/.bin/$$cli --version || exit 1; done
	touch $@

# Debian's chromium for the browser tests (Playwright drives it; no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; }
	@chromium --version

# Debian's bubblewrap: the sandbox Codex confines its commands with (it warns on every run without it).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; fi; }
	@command -v bwrap >/dev/null 2>&1 && bwrap --version || echo "bubblewrap is not available on this platform; Codex runs its commands unsandboxed"

# Debian's other shells, for the permission tests' oracle (tests/permissions/bash_oracle.py): each
# runs the strings the engine reads as shell (or refuses as opaque); and the programs the oracle's
# class spellings run (rsync into a directory; ssh, zip, vim and gdb running an option's value;
# ruby's in-place edits, `ruby -i`).
# PROGRAM or PROGRAM:PACKAGE. A program Debian does not package here is left out, and its oracle
# cases fail under make test (METAHARNESS_REQUIRE_VENDOR=1).
SHELLS := busybox toybox mksh yash posh fish tcsh zsh ksh dash rsync zip gdb vim ssh:openssh-client ruby
shells:
	@command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: the oracle's other shells are not installed"; exit 0; }; \
	missing=""; for p in $(SHELLS); do command -v $${p%%:*} >/dev/null 2>&1 || missing="$$missing $${p#*:}"; done; \
	[ -z "$$missing" ] || { \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq; \
	  packaged=""; for p in $$missing; do apt-cache show $$p >/dev/null 2>&1 && packaged="$$packaged $$p"; done; \
	  [ -z "$$packaged" ] || $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$packaged >/dev/null; }
	@for p in $(SHELLS); do command -v $${p%%:*} >/dev/null 2>&1 || echo "shells: $${p%%:*} is not packaged here"; done

# Arize Phoenix, the real OTLP backend the OpenTelemetry tests send spans to and read back from
# (tests/phoenix_server.py). Its own venv: its dependencies conflict with metaharness's pins.
PHOENIX_VENV := .venv-phoenix
phoenix: $(PHOENIX_VENV)/.installed
$(PHOENIX_VENV)/.installed: tests/phoenix-requirements.txt
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install $(PIP_FLAGS) -r tests/phoenix-requirements.txt
	touch $@

# The documentation site: the CLI reference is generated from the click commands and the
# troubleshooting page from its catalogue (metaharness.protocol.troubleshooting), then MkDocs builds.
docs: install-test
	$(BIN)/python tools/cli_reference.py > docs/reference/cli.md
	$(BIN)/python tools/troubleshooting.py > docs/troubleshooting.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

demo: install
	$(BIN)/metaharness demo

# The permission engine compiled: setup.py's mypyc build of its hot pure modules, built afresh into
# build/compiled — the whole package there, those modules C extensions — never into src/, which the
# editable install runs as pure Python. PYTHONPATH=build/compiled runs it (the tests below,
# bench/bench_permissions.py, which prints the build it measured). Needs a C compiler; mypy is
# pinned in the test extra. `make clean` removes build/.
COMPILED := build/compiled
compiled: install-test
	rm -rf $(COMPILED) build/mypyc
	$(BIN)/python setup.py -q build --build-base build/mypyc --build-lib $(COMPILED)

# The tiers are the markers tests/conftest.py applies. `--dist loadfile` keeps a module on one
# worker, so its module-scoped fixtures (a Ray cluster, a browser, a batch) are built once;
# `--no-loadscope-reorder` keeps conftest's order, the longest files first (tests/durations.json,
# `make durations`), where xdist's own puts the files with fewest tests last — the long
# single-test files, which left one worker running for 20 s after the others were done.
# CHECK_WORKERS is one more than the cores: most of a test's time is a child process it waits on
# (measured on 2 cores: 2 workers 3 min 16 s, 3 workers 2 min 30-41 s; on the larger suite of
# 2026-12-07 3 workers 2 min 58 s, 4 workers 3 min 3 s; with the files longest first, 2026-12-08,
# 2 min 56 s for 5,848 tests). Its property tests draw a
# quarter of the examples `make test` draws (tests/examples.py).
check: install-test
	METAHARNESS_EXAMPLES_SCALE=0.25 $(BIN)/python -m pytest -q -n $(CHECK_WORKERS) --dist loadfile --no-loadscope-reorder -m "not e2e and not browser and not slow" $(PYTEST_ARGS)

# The whole suite: the tests that drive no real vendor binary in parallel (as many workers as
# `make check`: they mostly wait on the children they start), then the end-to-end tests on the
# real binaries, two workers with a module on one worker (`--dist loadfile`): they
# measure deadlines and signal timing, so they get no more workers than cores (on 2 cores: 24 min
# serially, 14 min with two workers on a fresh clone). The `waits` cases (a vendor's minute-long
# retry back-off, next to no CPU; a third of the end-to-end tier's time) run beside the first tier,
# their report printed after it (none selected, as under a PYTEST_ARGS -k, is no failure); every
# part runs whatever another's result, and any failure fails. The compiled engine is built first:
# the first tier compares its decisions with pure Python's (tests/permissions/
# test_compiled_equivalence.py), and the permission tests run once more on it at the end, the
# bash-oracle fuzzer a slice of its count (COMPILED_FUZZ_COUNT).
test: test-deps
	@waits=$$(mktemp); trap 'rm -f "$$waits"' EXIT; export METAHARNESS_REQUIRE_COMPILED=1; \
	METAHARNESS_REQUIRE_VENDOR=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n $(WAITS_WORKERS) --dist load \
	  -m waits $(PYTEST_ARGS) > "$$waits" 2>&1 & beside=$$!; \
	METAHARNESS_REQUIRE_VENDOR=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not e2e" $(PYTEST_ARGS); tier=$$?; \
	wait $$beside; slept=$$?; [ $$slept != 5 ] || slept=0; echo "== the end-to-end cases that wait out a vendor's back-off, run beside the tier above"; \
	cat "$$waits"; \
	METAHARNESS_REQUIRE_VENDOR=1 $(BIN)/python -m pytest -n $(E2E_WORKERS) --dist loadfile --no-loadscope-reorder -m "e2e and not waits" $(PYTEST_ARGS); e2e=$$?; \
	echo "== the permission tests on the compiled engine ($(COMPILED))"; \
	METAHARNESS_REQUIRE_VENDOR=1 METAHARNESS_EXPECT_BUILD=compiled PYTHONPATH=$(COMPILED) OH_FUZZ_COUNT=$(COMPILED_FUZZ_COUNT) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not e2e" tests/permissions $(PYTEST_ARGS); compiled=$$?; \
	exit $$(( tier || slept || e2e || compiled ))
TEST_WORKERS ?= $(CHECK_WORKERS)
# What the suite needs, the independent installs at once (pip into two venvs, npm, and apt — one
# Debian package step at a time, as they share dpkg's lock), and the compiled engine built while
# npm and apt still download.
test-deps:
	@$(MAKE) --no-print-directory -j5 install-test vendor phoenix debian compiled
debian:
	@$(MAKE) --no-print-directory browser && $(MAKE) --no-print-directory sandbox && $(MAKE) --no-print-directory shells
E2E_WORKERS ?= 2
COMPILED_FUZZ_COUNT ?= 600
WAITS_WORKERS ?= 2
CHECK_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

bench: install-test vendor
	for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# A long bash-oracle fuzzing session of the permission engine (tests/permissions): a fresh seed,
# FUZZ_COUNT commands (and a sixth as many composed into the other shells and the deny classes),
# the benign generator's false-refusal rate printed beside the bypass count; every bypass found is
# appended to the regression file that tests/permissions/test_fuzz_regressions.py replays (review
# and commit it).
FUZZ_COUNT ?= 50000
FUZZ_BYPASSES := tests/permissions/data/fuzz_bypasses.jsonl
fuzz: install-test shells
	@before=$$(wc -l < $(FUZZ_BYPASSES)); \
	OH_FUZZ_COUNT=$(FUZZ_COUNT) OH_FUZZ_SEED=$${FUZZ_SEED:-$$(date +%s)} OH_FUZZ_RECORD=$(CURDIR)/$(FUZZ_BYPASSES) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/permissions/test_fuzz_bash_oracle.py \
	  -k "no_bypass or ran_its_count or benign"; \
	after=$$(wc -l < $(FUZZ_BYPASSES)); \
	echo "fuzz: $$((after - before)) new bypass(es) recorded in $(FUZZ_BYPASSES)"; \
	test $$after -eq $$before

# Each test file's seconds, for the order above: the whole suite run once in parallel, its JUnit
# report read by tools/durations.py into tests/durations.json (commit it).
durations: test-deps
	@reports=$$(mktemp -d); trap 'rm -rf "$$reports"' EXIT; \
	METAHARNESS_REQUIRE_VENDOR=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
	  --junitxml="$$reports/tier.xml" $(PYTEST_ARGS) >/dev/null; \
	$(BIN)/python tools/durations.py "$$reports/tier.xml"

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) .vendor/node_modules .pytest_cache .hypothesis test-artifacts site build
	find src tests tools bench -name __pycache__ -type d -prune -exec rm -rf {} +
