# brain: `make run` starts everything; `make test` runs the whole suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python

# Python 3.12+: python3.12/python3.13 on PATH when they actually run, else an installed pyenv
# version (its shim may point at an older global), else nothing.
FIND_PYTHON = for c in python3.13 python3.12; do \
    if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then command -v $$c; exit 0; fi; \
  done; \
  root=$$(pyenv root 2>/dev/null || echo "$$HOME/.pyenv"); \
  for p in $$(ls -d "$$root"/versions/3.1[2-9]*/bin/python3.1[2-9] 2>/dev/null | sort -V -r); do \
    if "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then echo "$$p"; exit 0; fi; \
  done

.PHONY: help run dev test lint format bench demo stop chromium

help:
	@echo "make run    start brain at http://127.0.0.1:8000 (BRAIN_PORT): web, worker, beat; production, no debug pages"
	@echo "make dev    the same for developers: Django's debug server, its error pages and reload on save"
	@echo "make test   run the whole test suite"
	@echo "make lint   ruff check, format check and mypy (the files pyproject.toml lists)"
	@echo "make bench  run the benchmarks (a 2-minute load test among them) and write docs/BENCHMARKS.md"
	@echo "make demo   load the demo household into a memory (MEMORY=slug; default home); twice adds nothing"
	@echo "make stop   stop the embedded PostgreSQL and Valkey if something left them running"

$(PY):
	@python=$$($(FIND_PYTHON)); \
	if [ -z "$$python" ]; then echo "brain needs Python 3.12 or newer: install python3.12 (or a pyenv 3.12 version) and run make again." >&2; exit 1; fi; \
	echo "Creating $(VENV) with $$python"; \
	"$$python" -m venv $(VENV) && $(PY) -m pip install --quiet --upgrade pip

# requirements-nodeps.txt: packages whose declared dependencies we must not install (torch).
# The first run takes a few minutes: one line per package as pip takes it (brain/install_progress.py);
# all pip said is kept in .venv/pip.log.
PIP_PROGRESS := $(PY) -m brain.install_progress $(VENV)/pip.log
$(VENV)/.runtime: requirements.txt requirements-nodeps.txt | $(PY)
	@echo "brain: installing the pinned requirements into $(VENV) (the first time takes a few minutes)…"
	@set -o pipefail; $(PY) -m pip install --progress-bar off -r requirements.txt 2>&1 | $(PIP_PROGRESS) \
	  || { echo "brain: pip failed; what it said is in $(VENV)/pip.log" >&2; exit 1; }
	@$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime | $(PY)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

run: $(VENV)/.runtime
	@$(PY) -m brain.run

# For developers: runserver with Django's debug pages (tracebacks), reloading on every save.
dev: $(VENV)/.runtime
	@DJANGO_DEBUG=1 $(PY) -m brain.run

# Browser tests drive Debian's chromium; install it when it is missing (as root, or with sudo).
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  echo "Installing Debian chromium for the browser tests…"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; \
	fi

# The suite on every core: a file's tests run on one worker (-n auto --dist loadfile); each worker
# has its own test and broker databases. PYTEST_ARGS="-n 0" runs it in one process.
test: $(VENV)/.dev chromium
	@$(PY) -m pytest -n auto --dist loadfile $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests — that is a failure, not a pass." >&2; fi; \
	exit $$status

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(VENV)/.dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

demo: $(VENV)/.runtime
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py demo $(if $(MEMORY),--memory $(MEMORY))

# make bench: every benchmark, rewriting docs/BENCHMARKS.md (under 10 minutes).
# make bench SIZES=1m: recall at scale at those sizes alone (1M: under 40 minutes), its section
# put into docs/BENCHMARKS.md in place of the last one.
# make bench ONLY="gate_quality conversations": those benchmarks alone, their sections replaced.
bench: $(VENV)/.runtime
ifdef SIZES
	BRAIN_BENCH_SIZES=$(SIZES) $(PY) manage.py shell -c "from bench.knowledge import main; main()"
else ifdef ONLY
	$(PY) manage.py bench --only $(ONLY)
else
	$(PY) manage.py bench
endif

stop: $(VENV)/.runtime
	@$(PY) -c "from brain import embedded; embedded.postgres.stop(); embedded.valkey.stop(); print('embedded servers stopped')"
