"""Lean Lambda import paths: importing any handler of ``shared.manifest.FUNCTIONS`` (in a fresh interpreter, as a
cold Lambda does) builds no AWS client and no ports, and loads no heavy module the import does not need.

Figures (milliseconds) are the bench's (``make bench``); this only asserts what is loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from shared import manifest

# Never needed to import a handler: clients are built on first use (shared.wiring), the MCP SDK and its HTTP stack
# on the first MCP call, JSON Schema validation on the first schema check, the local stack never in Lambda.
NEVER_AT_IMPORT = ("boto3", "botocore.client", "botocore.session", "mcp", "httpx", "anyio", "jsonschema",
                   "referencing", "moto", "jsonata", "werkzeug", "openwop_client", "requests", "cachetools.func",
                   "shared.local", "shared.providers.bedrock", "shared.providers.openai", "shared.storage.dynamodb",
                   "shared.orchestration.step_functions", "shared.transports.mcp")
# A handler that parses no request body with a pydantic model has no reason to load pydantic when it is imported.
NO_PYDANTIC = ("get_run", "list_runs", "poll_run_events", "stream_run_events", "not_found",
               "erase_run", "delete_run")

_PROBE = """
import json, sys
import {module} as handler
from shared import wiring
assert callable(handler.lambda_handler)
print(json.dumps({{"loaded": [m for m in {watch!r} if m in sys.modules],
                   "ports_built": wiring._cached.cache_info().currsize, "clients": wiring.clients_built()}}))
"""


def _probe(module: str) -> dict:
    watch = (*NEVER_AT_IMPORT, "pydantic")
    out = subprocess.run([sys.executable, "-c", _PROBE.format(module=module, watch=watch)], capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fn", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_handler_import_builds_nothing_and_loads_no_heavy_module(fn: manifest.Function) -> None:
    got = _probe(fn.module)
    assert got["ports_built"] == 0 and got["clients"] == {}
    assert [m for m in got["loaded"] if m != "pydantic"] == []
    if fn.name in NO_PYDANTIC:
        assert "pydantic" not in got["loaded"]


def test_the_probe_sees_a_heavy_import(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe can fail: a handler module that imports boto3 at import time is reported."""
    (tmp_path / "heavy_handler.py").write_text("import boto3\n\ndef lambda_handler(event, context):\n    return {}\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    got = _probe("heavy_handler")
    assert "boto3" in got["loaded"] and "botocore.session" in got["loaded"]
