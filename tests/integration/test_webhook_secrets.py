"""Issue 27 §4 on moto: a webhook's signing secret is stored sealed (KMS) in the signing table, never in the
subscription item; a subscription stored before that (cleartext secret) keeps signing and is sealed at its first
delivery. Deliveries go the deployed path (stream → fan-out → queue → delivery) to a loopback receiver."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.cli.webhook_receiver import verify_v1
from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.integration import test_webhooks
from tests.wire import raw, wait_terminal

receiver = test_webhooks.receiver  # the loopback receiver fixture (its subscriptions end with it)


def _raw_item(host: Any, table: str, pk: str, sk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = (
        host.aws.client("dynamodb")
        .get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True)
        .get("Item")
    )
    return item


def _noop_run(host: Any) -> str:
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, run.runId)
    return str(run.runId)


def test_a_registered_secret_is_stored_sealed_in_the_signing_table_and_nowhere_else(host, receiver):
    from shared.settings import get_settings

    settings = get_settings()
    # Given a subscription registered with a generated secret
    reg = raw(
        host.base_url,
        "POST",
        "/webhooks",
        {"url": receiver.url + "/sealed", "events": ["run.completed"]},
        key=host.key_a,
    )
    assert reg.status == 201, reg.text
    webhook_id, secret = reg.json["webhookId"], reg.json["secret"]
    # Then the subscription item in the host table holds no secret, in any attribute
    sub = _raw_item(host, settings.host_table, f"WEBHOOK#{host.tenant_a}", webhook_id)
    assert sub is not None and secret not in json.dumps(sub)
    assert "secret" not in json.loads(sub["doc"]["S"])
    # and the signing table holds it sealed: a KMS ciphertext bound to this subscription's id
    sealed = _raw_item(host, settings.signing_table, f"WEBHOOK#{host.tenant_a}", webhook_id)
    assert sealed is not None and secret not in json.dumps(sealed)
    blob = base64.b64decode(json.loads(sealed["doc"]["S"])["secret"])
    kms = host.aws.client("kms")
    opened = kms.decrypt(CiphertextBlob=blob, EncryptionContext={"webhookId": webhook_id})["Plaintext"]
    assert opened.decode() == secret
    # and moved under another subscription's id it does not open
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={"webhookId": webhook_id + "x"})
    # When a run completes, Then the delivery is signed with that secret
    run_id = _noop_run(host)
    (hit,) = eventually(lambda: receiver.deliveries(webhook_id, run_id), timeout=30, interval=0.1)
    assert verify_v1(secret, hit)
    # When it is unregistered, Then its sealed secret goes with it
    assert raw(host.base_url, "DELETE", f"/webhooks/{project_id(webhook_id)}", key=host.key_a).status == 204
    assert _raw_item(host, settings.signing_table, f"WEBHOOK#{host.tenant_a}", webhook_id) is None


def test_a_subscription_with_a_cleartext_secret_keeps_signing_and_is_sealed_at_its_first_delivery(host, receiver):
    from shared.settings import get_settings
    from shared.wiring import get_ports

    settings = get_settings()
    ports = get_ports()
    # Given a subscription stored as before the signing table: its secret in cleartext in the subscription item
    webhook_id = f"{host.tenant_a}/{ports.ids.ulid()}"
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    legacy = {
        "webhookId": webhook_id,
        "tenant": host.tenant_a,
        "url": receiver.url + "/legacy",
        "events": ["run.completed"],
        "tags": [],
        "signatureAlgorithms": ["v1"],
        "secret": secret,
        "createdAt": ports.clock.iso(),
        "createdBy": "test",
    }
    assert ports.host.put_item(f"WEBHOOK#{host.tenant_a}", webhook_id, legacy, if_absent=True)
    assert _raw_item(host, settings.signing_table, f"WEBHOOK#{host.tenant_a}", webhook_id) is None
    # When a run completes
    run_id = _noop_run(host)
    (hit,) = eventually(lambda: receiver.deliveries(webhook_id, run_id), timeout=30, interval=0.1)
    # Then the delivery is signed with the secret it always had
    assert verify_v1(secret, hit)
    # and the secret is now sealed in the signing table and gone from the subscription item
    sub = _raw_item(host, settings.host_table, f"WEBHOOK#{host.tenant_a}", webhook_id)
    assert sub is not None and secret not in json.dumps(sub)
    assert json.loads(sub["doc"]["S"]) == {k: v for k, v in legacy.items() if k != "secret"}
    sealed = _raw_item(host, settings.signing_table, f"WEBHOOK#{host.tenant_a}", webhook_id)
    assert sealed is not None and secret not in json.dumps(sealed)
    # and the next delivery signs with the same secret, from the sealed copy
    again = _noop_run(host)
    (hit2,) = eventually(lambda: receiver.deliveries(webhook_id, again), timeout=30, interval=0.1)
    assert verify_v1(secret, hit2)
