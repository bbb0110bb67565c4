"""GET /runs cursors: HMAC-SHA-256 under a per-deployment secret (Secrets Manager, moto locally), bound to the
tenant. Forged or tampered cursors are 400, never 500, never another tenant's page; the secret costs one
Secrets Manager read per cold start."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from openwop_client.types import CreateRunRequest

from tests.wire import raw


def _encode(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def _decode(cursor: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return out


def _unkeyed(tenant: str, key: dict[str, Any]) -> str:
    """A cursor with the old, unkeyed check value: anyone who read the source could mint it."""
    body = json.dumps(key, separators=(",", ":"), sort_keys=True)
    return _encode({"k": key, "m": hashlib.sha256(f"{tenant}|{body}".encode()).hexdigest()[:16]})


def _signed(secret: bytes, tenant: str, key: dict[str, Any]) -> str:
    body = json.dumps(key, separators=(",", ":"), sort_keys=True)
    return _encode({"k": key, "m": hmac.new(secret, f"{tenant}\n{body}".encode(), hashlib.sha256).hexdigest()})


def _list(host, key: str, cursor: str, limit: int = 1):
    return raw(host.base_url, "GET", f"/runs?limit={limit}&cursor={cursor}", key=key)


def _refused(r) -> bool:
    return r.status == 400 and r.json["error"] == "validation_error"


def _start_key(tenant: str) -> dict[str, str]:
    return {"pk": f"{tenant}/r-zzzz", "sk": "RUN", "gsi1pk": tenant, "gsi1sk": "9999-12-31T00:00:00.000Z#x"}


def _pages_of_b(host) -> str:
    client = host.client(host.key_b)
    for _ in range(3):
        client.runs_create(CreateRunRequest(workflowId="conformance-noop", tags=["cursor"]))
    first = raw(host.base_url, "GET", "/runs?limit=1", key=host.key_b)
    assert first.status == 200
    cursor: str = first.json["nextCursor"]
    return cursor


def test_list_cursor_with_an_unkeyed_checksum_is_refused(host):
    # Given a cursor built the way the source code shows, with a well-formed start key of the caller's own tenant
    forged = _unkeyed(host.tenant_a, _start_key(host.tenant_a))
    # Then it is refused: only the deployment's secret can mint a cursor
    assert _refused(_list(host, host.key_a, forged))


def test_list_cursor_with_a_forged_key_of_wrong_types_is_400_not_500(host):
    # Given well-formed cursors whose start keys are not what the index pages with (types, names)
    for key in ({"pk": 1, "sk": ["RUN"], "gsi1pk": {"S": host.tenant_a}, "gsi1sk": None}, {"x": "y"}, {}):
        # Then each is a validation error, and none reaches DynamoDB as an ExclusiveStartKey
        assert _refused(_list(host, host.key_a, _unkeyed(host.tenant_a, key))), key
    # and so are cursors that are not even JSON objects, or nested past the parser's depth
    for doc in ([1, 2], "k", {"k": _start_key(host.tenant_a)}, {"k": _start_key(host.tenant_a), "m": 7}):
        assert _refused(_list(host, host.key_a, _encode(doc))), doc
    deep = base64.urlsafe_b64encode(b"[" * 1500).decode().rstrip("=")
    assert _refused(_list(host, host.key_a, deep))


def test_list_cursor_is_bound_to_its_tenant_and_its_bytes(host):
    # Given a genuine cursor of tenant-b's listing
    cursor = _pages_of_b(host)
    # Then it pages for tenant-b
    page = _list(host, host.key_b, cursor)
    assert page.status == 200 and page.json["runs"]
    assert all(r["owner"]["tenant"] == host.tenant_b for r in page.json["runs"])
    # but tenant-a presenting it is refused (never tenant-b's page)
    assert _refused(_list(host, host.key_a, cursor))
    # and any change to its start key or its check value is refused
    doc = _decode(cursor)
    moved = {**doc, "k": {**doc["k"], "gsi1sk": "9999-12-31T00:00:00.000Z#x"}}
    assert _refused(_list(host, host.key_b, _encode(moved)))
    other_tenant = {**doc, "k": {**doc["k"], "gsi1pk": host.tenant_a}}
    assert _refused(_list(host, host.key_a, _encode(other_tenant)))
    flipped = {**doc, "m": ("0" if doc["m"][0] != "0" else "1") + doc["m"][1:]}
    assert _refused(_list(host, host.key_b, _encode(flipped)))


def test_list_cursor_check_is_keyed_by_the_deployment_secret(host):
    from shared.wiring import get_ports

    # Given the secret the local bootstrap generated in (moto's) Secrets Manager
    ports = get_ports()
    secret = ports.secrets.get_secret(ports.settings.cursor_secret_id).encode()
    assert len(secret) >= 32
    key = _start_key(host.tenant_a)
    # Then a cursor signed with it verifies, and one signed with any other key does not
    assert _list(host, host.key_a, _signed(secret, host.tenant_a, key)).status == 200
    assert _refused(_list(host, host.key_a, _signed(b"guessed-" + secret, host.tenant_a, key)))
    assert _refused(_list(host, host.key_a, _signed(secret, host.tenant_b, key)))


class SecretReads:
    """GetSecretValue requests for one secret (the pepper and the tombstone key are read through the same client,
    by this request's authentication or by another test's run on the host's threads)."""

    def __init__(self, secret_id: str) -> None:
        self.secret_id = secret_id
        self.calls = 0

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("SecretId") == self.secret_id:
            self.calls += 1


def test_list_cursor_secret_costs_one_secrets_manager_read_per_cold_start(host):
    from shared.wiring import get_ports, reset_ports

    cursor = _pages_of_b(host)
    for cold_start in range(2):
        # Given a cold start (fresh ports) whose Secrets Manager client counts GetSecretValue requests
        reset_ports()
        reads = SecretReads(get_ports().settings.cursor_secret_id)
        store = get_ports().secrets
        store.client().meta.events.register("before-parameter-build.secrets-manager.GetSecretValue", reads)
        # When 10 pages are read and minted through the API
        for _ in range(5):
            page = _list(host, host.key_b, cursor)
            assert page.status == 200, cold_start
            assert raw(host.base_url, "GET", "/runs?limit=1", key=host.key_b).json["nextCursor"]
        # Then the secret was read exactly once (by the store the handlers used: this cold start's)
        assert get_ports().secrets is store, cold_start
        assert reads.calls == 1, cold_start
