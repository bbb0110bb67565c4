"""A cold function's first request builds only the AWS clients it uses (``shared.wiring`` builds each port's client
lazily, once per process). Each case runs in a fresh interpreter against the local stack, as a cold Lambda would."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import unique

_COLD = """
import json, sys
from shared import manifest, wiring
from shared.local.context import context_for
fn = manifest.function(sys.argv[1])
import importlib
handler = importlib.import_module(fn.module).lambda_handler
out = handler(json.loads(sys.argv[2]), context_for(fn))
print(json.dumps({"status": out["statusCode"], "clients": wiring.clients_built()}))
"""


def _event(key: str, method: str, path: str, route: str, body: Any = None) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": f"Bearer {key}", "openwop-version": "2.0", "content-type": "application/json"},
        "requestContext": {
            "http": {
                "method": method,
                "path": path,
                "sourceIp": "127.0.0.1",
                "userAgent": "test",
                "protocol": "HTTP/1.1",
            },
            "requestId": "cold",
            "stage": "$default",
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def _cold(function: str, event: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _COLD, function, json.dumps(event)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


UNKNOWN = "tenant-a~2F01JAAAAAAAAAAAAAAAAAAAAAAA"


def _tenant_key(tenant: str) -> str:
    """A key of a tenant of its own (other tests' runs in tenant-a may hold facts large enough for S3)."""
    from shared.services.auth import put_api_key
    from shared.wiring import get_ports

    key = f"cold-key-{tenant}"
    put_api_key(get_ports(), key, tenant)
    return key


@pytest.mark.parametrize(
    ("function", "method", "path", "route", "status"),
    [
        ("get_run", "GET", f"/runs/{UNKNOWN}", "/runs/{runId}", 404),
        ("list_runs", "GET", "/runs", "/runs", 200),
        ("poll_run_events", "GET", f"/runs/{UNKNOWN}/events/poll", "/runs/{runId}/events/poll", 404),
    ],
)
def test_a_cold_read_builds_only_the_dynamodb_client(
    host: Any, function: str, method: str, path: str, route: str, status: int
) -> None:
    key = host.key_a
    if function == "list_runs":  # a tenant of its own, one small run to list
        key = _tenant_key(unique("tenant-cold"))
        host.client(key).runs_create({"workflowId": "conformance-noop", "inputs": {"n": 1}})
    got = _cold(function, _event(key, method, path, route))
    assert got["status"] == status
    assert set(got["clients"]) <= {"dynamodb", "secretsmanager"} and got["clients"].get("dynamodb") == 1


def test_a_cold_listing_reads_s3_only_for_a_run_whose_facts_live_there(host: Any) -> None:
    tenant = unique("tenant-cold")
    key = _tenant_key(tenant)
    host.client(key).runs_create({"workflowId": "conformance-noop", "inputs": {"blob": "x" * 70_000}})
    got = _cold("list_runs", _event(key, "GET", "/runs", "/runs"))
    assert got["status"] == 200 and got["clients"].get("dynamodb") == 1 and got["clients"].get("s3") == 1


def test_a_cold_create_builds_dynamodb_and_step_functions_but_not_s3(host: Any) -> None:
    got = _cold("create_run", _event(host.key_a, "POST", "/runs", "/runs", {"workflowId": "conformance-noop"}))
    assert got["status"] == 201
    assert got["clients"].get("dynamodb") == 1 and got["clients"].get("stepfunctions") == 1
    assert "s3" not in got["clients"]
