"""A cold function's first request builds only the AWS clients it uses (``shared.wiring`` builds each port's client
lazily, once per process). Each case runs in a fresh interpreter against the local stack, as a cold Lambda would."""

from __future__ import annotations

import json
import os
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


def _fresh(script: str, function: str, event: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``script`` prints last, run in a fresh interpreter (``env`` added to this one's environment)."""
    out = subprocess.run(
        [sys.executable, "-c", script, function, json.dumps(event)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cold(function: str, event: dict[str, Any]) -> dict[str, Any]:
    return _fresh(_COLD, function, event)


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


# In Lambda's init phase (Lambda sets AWS_LAMBDA_INITIALIZATION_TYPE), the key lookup's client and the pepper are
# prepared before the first request (functions._common.init, decision 0167).
_INIT = """
import json, sys
from shared import manifest, wiring
from shared.local.context import context_for
fn = manifest.function(sys.argv[1])
import importlib
module = importlib.import_module(fn.module)
at_init = wiring.clients_built()
secret_reads = []
if "secretsmanager" in at_init:
    wiring.get_ports().secrets.client().meta.events.register(
        "before-call.secrets-manager.GetSecretValue", lambda **kw: secret_reads.append(1)
    )
out = module.lambda_handler(json.loads(sys.argv[2]), context_for(fn))
after = wiring.clients_built()
print(json.dumps({
    "status": out["statusCode"],
    "init": at_init,
    "request": {k: n - at_init.get(k, 0) for k, n in after.items() if n != at_init.get(k, 0)},
    "secret_reads": len(secret_reads),
}))
"""


def _in_lambda(function: str, event: dict[str, Any], **env: str) -> dict[str, Any]:
    return _fresh(_INIT, function, event, {"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand", **env})


def test_lambda_init_prepares_the_key_lookup_so_the_first_request_builds_nothing(host: Any) -> None:
    # When a function that takes API keys starts in Lambda's init phase and then answers its first request
    got = _in_lambda("get_run", _event(host.key_a, "GET", f"/runs/{UNKNOWN}", "/runs/{runId}"))
    # Then its init built the DynamoDB and Secrets Manager clients, and the request built none and read no secret
    assert got["init"] == {"dynamodb": 1, "secretsmanager": 1}
    assert got["request"] == {} and got["secret_reads"] == 0
    assert got["status"] == 404


def test_a_public_functions_init_builds_no_client(host: Any) -> None:
    got = _in_lambda("get_openapi", _event(host.key_a, "GET", "/openapi.json", "/openapi.json"))
    assert got["init"] == {} and got["request"] == {} and got["status"] == 200


# A host that cannot read its pepper can authenticate nobody: a request is answered internal_error (a deployment's
# fault, not the caller's), with or without an init that tried first.
STATUS_WITHOUT_PEPPER = 500


def test_an_init_that_cannot_read_the_pepper_leaves_it_to_the_first_request(host: Any) -> None:
    # Given a function whose pepper secret does not exist
    got = _in_lambda(
        "get_run", _event(host.key_a, "GET", f"/runs/{UNKNOWN}", "/runs/{runId}"), PEPPER_SECRET_ID="no-such-pepper"
    )
    # Then its init still completed (the module loaded and answered), and the first request met the missing secret
    # again and answered it as it always has: the protocol's envelope, not a crash
    assert got["init"] == {"dynamodb": 1, "secretsmanager": 1}
    assert got["secret_reads"] == 1
    assert got["status"] == STATUS_WITHOUT_PEPPER, got
