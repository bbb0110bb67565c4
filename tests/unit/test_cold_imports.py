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
# on the first MCP call, JSON Schema validation on the first schema check, the local stack never in Lambda, the
# DynamoDB and S3 stores (each imports shared.storage.ddb) only when the ports are built.
NEVER_AT_IMPORT = (
    "boto3",
    "botocore.client",
    "botocore.session",
    "mcp",
    "httpx",
    "anyio",
    "jsonschema",
    "referencing",
    "moto",
    "jsonata",
    "werkzeug",
    "openwop_client",
    "requests",
    "cachetools.func",
    "shared.local",
    "shared.providers.bedrock",
    "shared.providers.openai",
    "shared.storage.ddb",
    "shared.orchestration.step_functions",
    "shared.transports.mcp",
)
# Powertools' other resolvers (AppSync and its asyncio, ...) never load (functions._common.resolver).
NOT_NEEDED = ("aws_lambda_powertools.event_handler.appsync", "asyncio")
# No handler loads pydantic (~90 ms) at import: the run-lifecycle bodies are msgspec Structs (~15 ms), loaded by the
# handlers every route of which validates one; registration bodies load pydantic in their routes; the OpenAPI
# document is served from its stored file; the Step Functions tasks read their input without either.
BODY_ON_EVERY_ROUTE = ("create_run", "cancel_run", "run_actions")

_PROBE = """
import json, sys
import {module} as handler
from shared import wiring
assert callable(handler.lambda_handler)
print(json.dumps({{"loaded": [m for m in {watch!r} if m in sys.modules],
                   "ports_built": wiring._cached.cache_info().currsize, "clients": wiring.clients_built()}}))
"""


def _probe(module: str) -> dict:
    watch = (*NEVER_AT_IMPORT, *NOT_NEEDED, "pydantic", "msgspec")
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module, watch=watch)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fn", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_handler_import_builds_nothing_and_loads_no_heavy_module(fn: manifest.Function) -> None:
    got = _probe(fn.module)
    assert got["ports_built"] == 0 and got["clients"] == {}
    assert [m for m in got["loaded"] if m != "msgspec"] == []
    assert ("msgspec" in got["loaded"]) == (fn.name in BODY_ON_EVERY_ROUTE)


def test_the_probe_sees_a_heavy_import(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe can fail: a handler module that imports boto3 at import time is reported."""
    (tmp_path / "heavy_handler.py").write_text("import boto3\n\ndef lambda_handler(event, context):\n    return {}\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    got = _probe("heavy_handler")
    assert "boto3" in got["loaded"] and "botocore.session" in got["loaded"]


def test_the_lazy_event_handler_package_still_serves_every_name() -> None:
    """Importing the resolver shim first, any other Powertools event_handler name still resolves (loaded then)."""
    code = (
        "import sys, functions._common.resolver as r\n"
        "assert 'aws_lambda_powertools.event_handler.appsync' not in sys.modules\n"
        "from aws_lambda_powertools.event_handler import AppSyncResolver, Response, content_types\n"
        "print(AppSyncResolver.__module__, Response is r.Response, content_types.APPLICATION_JSON)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["aws_lambda_powertools.event_handler.appsync", "True", "application/json"]


_DISCOVERY = """
import json, sys
from functions.get_capabilities import handler
from shared import wiring
from shared.local.context import context_for
from shared import manifest
event = {"version": "2.0", "routeKey": "GET /.well-known/openwop", "rawPath": "/.well-known/openwop",
         "rawQueryString": "", "headers": {}, "requestContext": {"http": {"method": "GET",
         "path": "/.well-known/openwop", "sourceIp": "127.0.0.1", "protocol": "HTTP/1.1"}, "requestId": "r",
         "stage": "$default"}, "isBase64Encoded": False}
out = handler.lambda_handler(event, context_for(manifest.function("get_capabilities")))
loaded = [m for m in WATCH if m in sys.modules]
from shared.services import discovery
full = discovery.capabilities(wiring.build_ports(wiring.get_settings()))
print(json.dumps({"status": out["statusCode"], "doc": json.loads(out["body"]), "loaded": loaded,
                  "ports_built": wiring._cached.cache_info().currsize, "full": full}))
"""


def test_the_discovery_document_is_answered_without_any_store_or_sdk() -> None:
    """Every client's first request, ``GET /.well-known/openwop``, reads only the settings, the clock and the model
    providers (``wiring.get_discovery``): its cold start builds no ports and loads no AWS SDK, and its document is
    the one the whole ports give."""
    watch = ("boto3", "botocore.client", "botocore.session", "shared.storage.ddb", "jsonschema")
    out = subprocess.run(
        [sys.executable, "-c", _DISCOVERY.replace("WATCH", repr(watch))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "OPENWOP_CONFORMANCE_SEAMS": ""},
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] == 200 and got["loaded"] == [] and got["ports_built"] == 0
    assert got["doc"]["protocolVersion"] == "2.0" and got["doc"]["fixtures"]
    assert got["doc"] == got["full"]
