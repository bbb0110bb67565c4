"""Operator key management: ``openwop-serverless keys create|list|revoke|rotate-pepper|finish-rotation``.

Against the local host through its moto endpoint (the same path a deployed stack takes with ``--stack``). Keys are
stored as HMAC-SHA-256 under the pepper secret, listed without the key, revoked within the auth cache TTL.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from shared.storage import schema
from tests.helpers import unique
from tests.wire import raw


@pytest.fixture()
def ports(host):
    from shared.wiring import get_ports

    return get_ports()


def _cli(host, capsys, *argv: str) -> str:
    from shared.local.commands import main

    assert main([*argv, "--endpoint", host.aws.endpoint]) == 0
    out: str = capsys.readouterr().out.strip()
    return out


def _runs_status(host, key: str) -> int:
    return raw(host.base_url, "GET", "/runs?limit=1", key=key).status


def _pepper_doc(ports) -> dict[str, str]:
    client = ports.secrets.client()
    doc: dict[str, str] = json.loads(
        client.get_secret_value(SecretId=ports.settings.apikey_pepper_secret_id)["SecretString"]
    )
    return doc


def test_keys_create_prints_a_working_key_once_and_stores_only_its_peppered_hash(host, ports, capsys, timer):
    # Given a new tenant with no key
    tenant = unique("tenant-ops")
    # When the operator creates a key for it
    created = json.loads(_cli(host, capsys, "keys", "create", "--tenant", tenant, "--name", "ci"))
    key = created["apiKey"]
    # Then the printed key authenticates as that tenant
    assert created["tenant"] == tenant and created["name"] == "ci" and key.startswith("owk_") and len(key) > 40
    assert _runs_status(host, key) == 200
    # and the host table holds HMAC-SHA-256(pepper, key), never the bare SHA-256 nor the key
    pepper = _pepper_doc(ports)["current"]
    peppered = hmac.new(pepper.encode(), key.encode(), hashlib.sha256).hexdigest()
    assert ports.host.get_item(schema.APIKEY_PK, peppered)["tenant"] == tenant
    assert ports.host.get_item(schema.APIKEY_PK, hashlib.sha256(key.encode()).hexdigest()) is None
    # and listing shows its id and metadata only
    listed = [json.loads(line) for line in _cli(host, capsys, "keys", "list", "--tenant", tenant).splitlines()]
    assert [k["keyId"] for k in listed] == [created["keyId"]]
    assert listed[0]["name"] == "ci" and listed[0]["createdAt"] and listed[0]["pepper"] == "current"
    assert key not in json.dumps(listed) and peppered not in json.dumps(listed)


def test_keys_of_two_creations_differ_and_tenants_list_only_their_own(host, capsys, timer):
    # Given two keys for one tenant and one for another
    t1, t2 = unique("tenant-x"), unique("tenant-y")
    k1 = json.loads(_cli(host, capsys, "keys", "create", "--tenant", t1))
    k2 = json.loads(_cli(host, capsys, "keys", "create", "--tenant", t1))
    k3 = json.loads(_cli(host, capsys, "keys", "create", "--tenant", t2))
    # Then every key and id is distinct, and each tenant lists exactly its own
    assert len({k1["apiKey"], k2["apiKey"], k3["apiKey"]}) == 3
    ids1 = {json.loads(x)["keyId"] for x in _cli(host, capsys, "keys", "list", "--tenant", t1).splitlines()}
    assert ids1 == {k1["keyId"], k2["keyId"]}


def test_a_revoked_key_is_refused_once_the_auth_cache_ttl_has_passed(host, ports, capsys, timer):
    from shared.errors import UnauthenticatedError
    from shared.services import auth

    # Given a created key, resolved once (so cached)
    tenant = unique("tenant-rev")
    created = json.loads(_cli(host, capsys, "keys", "create", "--tenant", tenant))
    bearer = f"Bearer {created['apiKey']}"
    assert auth.resolve_caller(ports, bearer).tenant == tenant
    # When the operator revokes it by id
    out = json.loads(_cli(host, capsys, "keys", "revoke", created["keyId"]))
    assert out["revoked"] is True and out["effectiveWithinSeconds"] == auth.HIT_TTL_S
    # Then it still resolves from the cache just before the TTL, and is refused after it
    timer.now += auth.HIT_TTL_S - 1
    assert auth.resolve_caller(ports, bearer).tenant == tenant
    timer.now += 2
    with pytest.raises(UnauthenticatedError):
        auth.resolve_caller(ports, bearer)
    assert _runs_status(host, created["apiKey"]) == 401
    # and it is no longer listed; revoking it again is a one-line error
    assert _cli(host, capsys, "keys", "list", "--tenant", tenant).startswith("(no keys")
    from shared.local.commands import main

    with pytest.raises(SystemExit) as err:
        main(["keys", "revoke", created["keyId"], "--endpoint", host.aws.endpoint])
    assert str(err.value) == f"error: no API key with id {created['keyId']}"


def test_pepper_rotation_keeps_old_keys_working_until_it_is_finished(host, ports, capsys, timer):
    original = ports.secrets.client().get_secret_value(SecretId=ports.settings.apikey_pepper_secret_id)
    tenant = unique("tenant-rot")
    try:
        # Given a key hashed under the current pepper
        old = json.loads(_cli(host, capsys, "keys", "create", "--tenant", tenant, "--name", "old"))
        # When the pepper is rotated and a new key created
        _cli(host, capsys, "keys", "rotate-pepper")
        doc = _pepper_doc(ports)
        assert doc["previous"] and doc["current"] != doc["previous"]
        new = json.loads(_cli(host, capsys, "keys", "create", "--tenant", tenant, "--name", "new"))
        # Then both keys work, and the list tells which one still uses the previous pepper
        timer.now += 3600
        assert _runs_status(host, old["apiKey"]) == 200
        assert _runs_status(host, new["apiKey"]) == 200
        states = {
            json.loads(x)["name"]: json.loads(x)["pepper"]
            for x in _cli(host, capsys, "keys", "list", "--tenant", tenant).splitlines()
        }
        assert states == {"old": "previous", "new": "current"}
        # When the rotation is finished
        _cli(host, capsys, "keys", "finish-rotation")
        timer.now += 3600
        # Then only the key hashed under the current pepper still works
        assert _runs_status(host, old["apiKey"]) == 401
        assert _runs_status(host, new["apiKey"]) == 200
    finally:
        ports.secrets.update_secret(ports.settings.apikey_pepper_secret_id, original["SecretString"])
        from shared.services import auth

        auth.reset_cache()
    # and the seeded keys work again under the restored pepper
    assert _runs_status(host, host.key_a) == 200


def test_keys_create_without_a_stack_or_tenant_is_a_one_line_error(host, capsys):
    from shared.local.commands import main

    # Given no tenant: argparse refuses (exit 2) before anything runs
    with pytest.raises(SystemExit) as err:
        main(["keys", "create", "--endpoint", host.aws.endpoint])
    assert err.value.code == 2
    # Given a blank tenant: a one-line error
    with pytest.raises(SystemExit) as err:
        main(["keys", "create", "--tenant", " ", "--endpoint", host.aws.endpoint])
    assert str(err.value) == "error: a tenant is required"
