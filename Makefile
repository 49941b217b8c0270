# corral: `make run` starts the whole stack locally, `make test` proves it. `make help` lists all.
SHELL := bash
.DEFAULT_GOAL := help

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEVKUBE := tools/devkube/bin/devkube

##@ Everyday

.PHONY: run
run: $(STAMP) devkube netbins console ## Start the clusters (a provisioned one with a real worker as root), operator, API server and console; Ctrl-C stops all
	$(PY) -m corral.devenv run

.PHONY: test
test: lint-imports test-console test-unit test-contract test-e2e ## Layering contracts, console, unit, contract, then end-to-end tests

.PHONY: test-unit
test-unit: $(STAMP) devkube ## Unit tests only (no cluster; under a minute; helm from devkube lints the chart)
	$(PY) -m pytest tests/unit

.PHONY: test-contract
test-contract: $(STAMP) devkube console ## The API in-process against a real kube-apiserver, no operator (seconds per family)
	$(PY) -m pytest tests/contract

# The e2e tests wait on clusters far more than they compute (about half a core of two), so two
# pytest-xdist workers share them, each module on one worker (tests/e2e/conftest.py groups them).
# E2E_WORKERS=0 runs them one after another in one process.
E2E_WORKERS ?= 2

.PHONY: test-e2e
test-e2e: $(STAMP) devkube netbins node-deps browser-deps console keycloak s3server ## End-to-end tests (starts its own control planes)
	$(PY) -m pytest tests/e2e --durations=15 -n $(E2E_WORKERS)

.PHONY: lint
lint: $(STAMP) lint-imports ## ruff (lint and format check), mypy and the layering contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

.PHONY: lint-imports
lint-imports: $(STAMP) ## import-linter: which layer may import which (contracts in pyproject.toml)
	$(VENV)/bin/lint-imports

.PHONY: fmt
fmt: $(STAMP) ## Format and auto-fix the Python code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# BENCH=<name> runs one (tests/bench/__main__.py lists them); the machines benchmark needs root.
BENCH ?=

.PHONY: bench
bench: $(STAMP) devkube netbins bench-deps ## Benchmarks; they print figures, they do not pass or fail on speed
	$(PY) -m tests.bench $(BENCH)

.PHONY: bench-deps
bench-deps: ## Install wrk, the HTTP load generator the benchmarks drive (when missing)
	@command -v wrk >/dev/null && exit 0; \
	if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
	  echo "bench-deps: install wrk (apt-get install wrk)" >&2; exit 1; fi; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends wrk >/dev/null

##@ Building blocks

.PHONY: devkube
devkube: ## Build tools/devkube and its slim 1.35 control plane (each cached by a hash of its inputs)
	tools/devkube/build.sh
	tools/devkube/v1.35/build.sh

.PHONY: netbins
netbins: ## Build flanneld, kube-router and the CNI plugins real machines use (cached)
	tools/netbins/build.sh

# What a real node (kubelet + containerd), a machine of the local cloud (catatonit as its PID 1,
# sshd) and `make image` need from Debian.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables ipset umoci busybox-static \
  debootstrap catatonit openssh-server

# $(call apt-install,target,what needs them,packages): install the Debian packages missing.
define apt-install
	@missing=$$(for p in $(3); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(uname -s)" != Linux ] || ! command -v apt-get >/dev/null; then \
	  echo "$(1): $(2) need Debian/Ubuntu Linux with: $$missing" >&2; exit 1; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "$(1): run as root, or install: apt-get install $$missing" >&2; exit 1; fi; \
	echo "$(1): installing $$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends $$missing >/dev/null
endef

.PHONY: node-deps
node-deps: ## Install the Debian packages real nodes and the image build need (when missing)
	$(call apt-install,node-deps,real nodes,$(NODE_PACKAGES))

# The browser the console's tests drive (Playwright's own browser downloads are not used).
BROWSER_PACKAGES := chromium

.PHONY: browser-deps
browser-deps: ## Install Debian's Chromium for the console's browser tests (when missing)
	$(call apt-install,browser-deps,the console's browser tests,$(BROWSER_PACKAGES))

# The console's sources: a build is redone only when one changes.
CONSOLE_BUILT := apiserver/corral/apiserver/webconsole/index.html
CONSOLE_SOURCES := $(shell find console/src -type f 2>/dev/null) \
  console/index.html console/vite.config.ts console/tsconfig.json console/package-lock.json
CONSOLE_MODULES := console/node_modules/.installed

.PHONY: console
console: $(CONSOLE_BUILT) ## Build the web console into the API server's package (npm, cached)

.PHONY: test-console
test-console: $(CONSOLE_MODULES) ## The console's lint (eslint, tsc) and unit tests (vitest)
	cd console && npm run --silent lint && npm test --silent

$(CONSOLE_BUILT): $(CONSOLE_MODULES) $(CONSOLE_SOURCES)
	cd console && npm run --silent build

# `npm ci` installs exactly the lock (npm's own cache makes a repeat quick); skipped while
# node_modules is newer than the lock.
$(CONSOLE_MODULES): console/package-lock.json
	@command -v npm >/dev/null || { echo "console: Node.js 20.19 or later with npm is needed" >&2; exit 1; }
	cd console && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: keycloak
keycloak: $(STAMP) ## Keycloak (the OIDC provider of the e2e tests) into ~/.cache/corral (177 MB once)
	$(PY) -m corral.devenv.keycloak fetch

.PHONY: s3server
s3server: $(STAMP) ## moto's S3 server (the S3 target of the e2e tests) in a virtualenv of its own (once)
	$(PY) -m corral.devenv.s3server fetch

.PHONY: image
image: $(STAMP) node-deps console ## corral's OCI image, no registry or Docker (cached; a no-op when unchanged)
	tools/image/build.sh

.PHONY: venv
venv: $(STAMP) ## Create .venv and install corral with its test tools

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

.PHONY: clean
clean: ## Remove the virtualenv, the devkube and netbins links and local state (.corral)
	rm -rf $(VENV) tools/devkube/bin tools/netbins/bin .corral .pytest_cache .mypy_cache .ruff_cache \
	  .import_linter_cache console/node_modules apiserver/corral/apiserver/webconsole

.PHONY: help
help: ## This list
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} \
	  /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
