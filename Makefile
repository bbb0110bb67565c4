# The two commands a newcomer needs: `make serve` and `make test`. Both install into .venv on first use.
PY := .venv/bin/python
STAMP := .venv/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
STAGE ?= dev
CDK := PATH=$(CURDIR)/.venv/bin:$$PATH npx --yes aws-cdk@2.1148.1

.PHONY: install serve test lint browser test-unit test-integration test-infra bench build synth synth-py deploy lint-cfn clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,infra]'
	rm -f .venv/.installed-*
	touch $(STAMP)

serve: $(STAMP)
	.venv/bin/openwop-serverless serve --host 127.0.0.1 --port $${PORT:-8787}

lint: $(STAMP)
	$(PY) -m ruff check shared functions infra tests bench
	.venv/bin/lint-imports
	$(PY) -m mypy

test: $(STAMP) lint browser
	$(PY) -m pytest -q

# The viewer test drives Debian's chromium (Playwright only drives it; it never downloads a browser).
# Installed once with apt-get when /usr/bin/chromium is absent (CI runs as root on a clean Debian machine).
browser:
	@test -x /usr/bin/chromium || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && \
	  apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null 2>&1 && \
	  test -x /usr/bin/chromium; } || { echo "make browser: could not install Debian chromium (needs root)" >&2; exit 1; }

test-unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

test-integration: $(STAMP)
	$(PY) -m pytest -q tests/integration tests/contract

test-infra: $(STAMP)
	$(PY) -m pytest -q tests/infra -m infra

bench: $(STAMP)
	$(PY) -m bench

build: $(STAMP)
	$(PY) -m infra.packaging

synth: build
	$(CDK) synth --quiet --no-notices

synth-py: build
	$(PY) -m infra.app

deploy: build
	$(CDK) deploy -c stage=$(STAGE) -c requireAssets=true

lint-cfn:
	.venv/bin/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json

clean:
	rm -rf build cdk.out .pytest_cache .ruff_cache
