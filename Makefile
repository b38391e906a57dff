# Squadron — the two commands of the README are `make local` and `make test`.
# Every target installs what it needs first, so both work on a fresh clone.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# GitHub's REST OpenAPI description for the contract tests. The npm package unpacks
# to ~385 MB (every GHES version); only this 13 MB file is kept, fetched once.
OPENAPI_VERSION := 23.0.2
# The suite's temporary files, in a directory of its own: the end-to-end tests run agents as
# other users, who must traverse it, and any pytest started without --basetemp (a developer's,
# a helper's) resets /tmp/pytest-of-<user> to 0700. pytest empties it at each start.
PYTEST_TMP := /tmp/squadron-pytest-$(shell id -u)
OPENAPI := tests/.cache/openapi-$(OPENAPI_VERSION)/api.github.com.json
# Debian's Chromium, for the browser test of `squadron app create`'s page (no browser download).
CHROMIUM := /usr/bin/chromium

# Node 22 LTS for the CDK app, the CDK CLI and the Copilot CLI (aws-cdk-lib's jsii reports Node 20
# end-of-life): the npm registry's node-<platform>-<arch> package carries Node's official binary,
# installed under .node/ once and put first on PATH for every target (docs/development.md).
NODE_VERSION := 22.23.3
NODE_PACKAGE := node-$(shell uname -s | tr A-Z a-z)-$(subst aarch64,arm64,$(subst x86_64,x64,$(shell uname -m)))
NODE_BIN := $(CURDIR)/.node/node_modules/$(NODE_PACKAGE)/bin
NODE := $(NODE_BIN)/node
export PATH := $(NODE_BIN):$(PATH)

export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: test-under-load setup local test lint typecheck docs unit browser synth deploy bench fuzz clean

setup: $(PY_STAMP) $(NODE_STAMP)

## What setup installs and how far it is, step by step (scripts/setup_progress.py: a header naming
## the packages, progress as pip and npm report them, the time each step took; a failing step
## shows its command's last lines).
PROGRESS := $(PYTHON) scripts/setup_progress.py

$(PY_STAMP): pyproject.toml layers/squadron/requirements.txt
	@$(PROGRESS) --step 1/3 --title "the virtual environment $(VENV) ($(PYTHON) -m venv; pip, setuptools and wheel up to date)" -- \
	  $(SHELL) -c 'set -e; test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	    $(BIN)/pip install --disable-pip-version-check --upgrade pip setuptools wheel'
	@$(PROGRESS) --step 2/3 --kind pip -- $(BIN)/pip install --disable-pip-version-check -e '.[dev]'
	@touch $@

$(NODE): Makefile
	@echo "setup: Node $(NODE_VERSION) LTS ($(NODE_PACKAGE) from the npm registry) under .node/"
	npm install --no-audit --no-fund --no-save --loglevel=error --prefix .node $(NODE_PACKAGE)@$(NODE_VERSION)
	@test "$$($(NODE) --version)" = "v$(NODE_VERSION)" && touch $@

$(NODE_STAMP): package.json package-lock.json $(NODE)
	@$(PROGRESS) --step 3/3 --kind npm -- npm ci --no-audit --no-fund --loglevel=http
	@touch $@

$(OPENAPI):
	@echo "setup: GitHub's REST OpenAPI description $(OPENAPI_VERSION) (13 MB of a 385 MB npm package, once: the sandbox and the contract tests check every request against it)"
	mkdir -p $(@D)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  (cd "$$tmp" && npm pack @octokit/openapi@$(OPENAPI_VERSION) --silent --loglevel=error >/dev/null && \
	   tar -xzf octokit-openapi-$(OPENAPI_VERSION).tgz package/generated/api.github.com.json) && \
	  mv "$$tmp/package/generated/api.github.com.json" $@

## make local: set everything up, then run the local stack (Ctrl-C stops it).
local: setup $(OPENAPI)
	$(BIN)/squadron local

## make test: set everything up, then lint, type-check, build the docs and run every test.
test: setup lint typecheck docs unit

lint: $(PY_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(PY_STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --config-file pyproject.toml infra tests bench scripts
	@# Every function's module is called handler: check them one at a time.
	for handler in functions/*/handler.py; do $(BIN)/mypy --config-file pyproject.toml $$handler || exit 1; done

## The docs behind the README (docs/, mkdocs.yml), strict: a link to a missing page or anchor fails.
## docs/configuration.md is generated (python -m squadron.config.reference); a test keeps it current.
docs: $(PY_STAMP)
	$(BIN)/mkdocs build --strict --quiet

unit: setup $(OPENAPI) browser
	$(BIN)/pytest -n 2 --dist loadgroup --basetemp=$(PYTEST_TMP) --durations=30

## Installs Debian's chromium once, only where it is missing and apt is available; elsewhere
## the browser test is skipped and says why.
browser:
	@if [ ! -x $(CHROMIUM) ] && command -v apt-get >/dev/null 2>&1; then \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing Debian's chromium (the browser test of the App-creation page)"; \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; } \
	    || echo "could not install chromium: the browser test will be skipped"; \
	fi

synth: setup
	npx --no-install cdk synth --quiet

## make deploy: set everything up, refuse a deploy whose stage was never chosen
## (`squadron configure --stage NAME` keeps it in cdk.context.json) or that would fail
## (`squadron doctor`: credentials, CDK bootstrap, Docker, the Lambda concurrency budget of the
## template just synthesized), then deploy that very template (--app cdk.out).
## CDK_DEPLOY_ARGS passes options to cdk deploy (e.g. --require-approval never).
deploy: setup
	$(BIN)/squadron configure --check
	npx --no-install cdk synth --quiet
	$(BIN)/squadron doctor --before-deploy
	npx --no-install cdk deploy --app cdk.out $(CDK_DEPLOY_ARGS)

bench: setup
	$(BIN)/python -m bench

## make test-under-load: the whole suite LOAD_RUNS times (default 3) in a row while stress-ng keeps
## every core busy (`stress-ng --cpu 0`: one CPU hog per core; Debian's package, installed here when
## missing and apt is available). A test that passes on a quiet machine and fails here waits for a
## duration instead of a condition: a bug in the test or the product.
test-under-load: setup $(OPENAPI) browser
	@command -v stress-ng >/dev/null 2>&1 || { sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq stress-ng >/dev/null; }
	@stress-ng --cpu 0 --quiet --timeout 3h & hog=$$!; trap 'kill $$hog 2>/dev/null' EXIT; \
	  for run in $$(seq 1 $(or $(LOAD_RUNS),3)); do \
	    echo "== run $$run of $(or $(LOAD_RUNS),3) under load"; \
	    $(BIN)/pytest -p no:cacheprovider -n 2 --dist loadgroup --basetemp=$(PYTEST_TMP) || exit 1; \
	  done

## make fuzz: the fuzzers of untrusted input (configuration, globs, webhook bodies) at length:
## FUZZ_EXAMPLES random inputs per fuzzer (default 2000; `make test` runs 20 fixed ones).
fuzz: setup
	FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),2000) $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

clean:
	rm -rf $(VENV) node_modules .node cdk.out .pytest_cache .mypy_cache .ruff_cache build/docs
