# The two commands a newcomer needs: `make serve` and `make test`. Both install into .venv on first use.
PY := .venv/bin/python
# Every install takes exact versions with the sha256 of their files from the locks (`make lock` writes them;
# docs/decisions/0156): two installs of one commit install the same distributions.
DEV_LOCK := requirements/dev.lock
STAMP := .venv/.installed-$(shell cat pyproject.toml $(DEV_LOCK) | sha1sum | cut -c1-12)
LOCK_TOOLS := build/lock-tools
UV := $(LOCK_TOOLS)/bin/uv
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# Bytecode is cached (__pycache__, ignored by git): without it every test process and every fresh interpreter a test
# starts compiles the project, and pytest rewrites its plugins' asserts, again.
unexport PYTHONDONTWRITEBYTECODE
STAGE ?= dev
CDK := PATH=$(CURDIR)/.venv/bin:$$PATH npx --yes aws-cdk@2.1148.1
# cfn-lint's template: a synthesis of its own (the CDK app run directly: offline, no CDK CLI), never cdk.out
LINT_OUT := build/cdk.lint.out

.PHONY: install lock serve test suite lint browser test-unit test-integration test-infra bench build synth synth-py synth-cdk \
	deploy lint-cfn e2e clean openapi

install: $(STAMP)

# The lock pins pip and setuptools too: the project itself is installed with the locked setuptools, no build isolation.
# uv (locked in requirements/tools.lock, kept in build/lock-tools) installs: it downloads the wheels and compiles
# their bytecode on every core, where pip did both one at a time (docs/decisions/0166). Where uv cannot be installed
# or cannot reach the index (it keeps its own certificates and settings), pip installs the same lock, as before.
$(STAMP): pyproject.toml $(DEV_LOCK)
	test -x $(PY) || python3 -m venv .venv
	$(MAKE) --no-print-directory $(LOCK_TOOLS)/.installed || echo "make install: no uv; pip installs" >&2
	$(UV) pip install --quiet --python $(PY) --require-hashes --compile-bytecode -r $(DEV_LOCK) \
	  || $(PY) -m pip install --quiet --require-hashes -r $(DEV_LOCK)
	$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation --compile-bytecode -e . \
	  || $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	rm -f .venv/.installed-*
	touch $(STAMP)

# Rewrites requirements/*.lock from pyproject.toml (and requirements/dev.in) with uv, keeping every pin that still
# satisfies it; `make lock UPGRADE=1` takes the newest releases pyproject admits. Needs the package index; uv is
# installed from requirements/tools.lock into build/lock-tools, never into .venv. Then `make install`.
$(LOCK_TOOLS)/.installed: requirements/tools.lock
	rm -rf $(LOCK_TOOLS) && python3 -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/pip install --quiet --require-hashes -r requirements/tools.lock
	touch $@

lock: $(LOCK_TOOLS)/.installed
	$(LOCK_TOOLS)/bin/python -m infra.lockfiles --uv $(LOCK_TOOLS)/bin/uv $(if $(UPGRADE),--upgrade)

serve: $(STAMP)
	.venv/bin/openwop-serverless serve --host 127.0.0.1 --port $${PORT:-8787}

lint: $(STAMP)
	$(PY) -m ruff check shared functions infra tests bench examples
	$(PY) -m ruff format --check shared functions infra tests bench examples
	.venv/bin/lint-imports
	$(PY) -m mypy

# The suite in TEST_WORKERS processes (pytest-xdist), a test file per worker at a time: most of a test's time is
# one Python process waiting on its own threads (moto, the handlers) and on polls, so fewer workers leave the two
# cores partly idle. Measured on 2 cores, 1,567 tests (docs/decisions/0166): 3 workers 467 s (1.35 cores busy),
# 4 workers 378 s, 5 workers 352 s (1.7 cores). Files go out in collection order (tests/conftest.py puts the longest
# first), not xdist's default of most tests first, which left the longest files to start last on one worker.
# The lints run beside the suite (their CPU fills the suite's idle share, ~45 s of a cold mypy and a synthesis); the
# suite waits only for the browser, which one test needs. Any of them failing fails `make test`. (No output sync:
# it would hold the suite's progress until its end.)
TEST_WORKERS ?= 4
test: $(STAMP)
	@$(MAKE) --no-print-directory -j 3 lint lint-cfn suite

suite: $(STAMP) browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

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

# The served OpenAPI document (shared/services/openapi.json) from the route table and the body models.
openapi: $(STAMP)
	$(PY) -m shared.services.openapi

# The code asset always (offline); the dependencies layer only when build/layer.stamp is out of date (pip, network).
build: $(STAMP)
	$(PY) -m infra.packaging

# The CDK app itself (cdk-nag on) into cdk.out: offline once the layer is built. Context: CONTEXT='-c k=v ...'.
synth: build
	$(PY) -m infra.app -c stage=$(STAGE) -c requireAssets=true $(CONTEXT)

synth-py: synth

# The same through the CDK CLI (npx fetches the CLI on first use: network).
synth-cdk: build
	$(CDK) synth --quiet --no-notices -c stage=$(STAGE) $(CONTEXT)

deploy: build
	$(CDK) deploy -c stage=$(STAGE) -c requireAssets=true $(CONTEXT)

# cfn-lint over a fresh synthesis (placeholder assets when build/ is absent: the template is what is linted).
lint-cfn: $(STAMP)
	rm -rf $(LINT_OUT)
	CDK_OUTDIR=$(LINT_OUT) $(PY) -m infra.app -c stage=prod
	.venv/bin/cfn-lint --ignore-checks W3005 -- $(LINT_OUT)/*.template.json

# Smoke test of a deployed stack: make e2e STAGE=qa REGION=eu-west-1 (needs AWS credentials; never in make test).
e2e: $(STAMP)
	@test -n "$(REGION)$(AWS_REGION)" || { echo "error: make e2e STAGE=<stage> REGION=<region>"; exit 2; }
	OPENWOP_E2E_STACK=OpenWopHost-$(STAGE) OPENWOP_E2E_REGION=$(or $(REGION),$(AWS_REGION)) \
		$(PY) -m pytest -q -m e2e tests/e2e

clean:
	rm -rf build cdk.out .pytest_cache .ruff_cache
