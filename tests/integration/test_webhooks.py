"""Webhooks end to end through openwop-client against the local host, with a real loopback receiver.

The delivery path is the deployed one: the events table's stream → fanout_webhooks → the SQS FIFO queue on moto →
deliver_webhooks (driven by the local event-source mapping) → a signed POST through the egress guard.
Signatures are checked with the ``standardwebhooks`` library (Standard Webhooks) and by recomputing the v1 HMAC.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest, RegisterWebhookRequest, RotateWebhookSecretRequest

from shared.cli.webhook_receiver import Hit, WebhookReceiver, verify_standard, verify_v1
from shared.protocol.ids import project_id
from tests.helpers import eventually
from tests.wire import all_events, raw, wait_terminal

TERMINAL = ["run.completed", "run.failed", "run.cancelled"]
ALL = ["run.started", "node.started", "node.completed", *TERMINAL]


@pytest.fixture
def receiver(host):
    from shared.storage.webhooks import SUB_PK
    from shared.wiring import get_ports

    rx = WebhookReceiver()
    rx.start()
    yield rx
    rx.stop()
    # the subscriptions aimed at this receiver end with it (other tests' runs must not queue deliveries to it)
    store = get_ports().host
    for tenant in (host.tenant_a, host.tenant_b):
        for sk, doc in store.query(SUB_PK + tenant):
            if str(doc.get("url", "")).startswith(rx.url):  # not the tenant's rules version
                store.delete_item(SUB_PK + tenant, sk)


def _whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def _register(host: Any, key: str, url: str, events: list[str], **extra: Any) -> Any:
    return raw(host.base_url, "POST", "/webhooks", {"url": url, "events": events, **extra}, key=key)


# run-event.schema.json is not vendored here: its closed envelope (required members, no others) stands in for it,
# the event types and formats are the log's own business (and the body's event is compared with the stored one).
_RUN_EVENT_SHAPE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://openwop.dev/spec/v2/run-event.schema.json",
    "type": "object",
    "additionalProperties": False,
    "required": ["eventId", "payload", "runId", "schemaVersion", "sequence", "timestamp", "type"],
    "properties": {
        k: {}
        for k in (
            "eventId",
            "runId",
            "nodeId",
            "type",
            "payload",
            "timestamp",
            "sequence",
            "schemaVersion",
            "engineVersion",
            "causationId",
        )
    },
}


def _delivery_errors(body: Any) -> list[str]:
    from pathlib import Path

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    folder = Path(__file__).resolve().parents[2] / "shared" / "protocol" / "schemas" / "openwop-v2"
    docs = {n: json.loads((folder / n).read_text("utf-8")) for n in ("webhook-delivery.schema.json", "ids.schema.json")}
    registry = Registry().with_resources(
        [(d["$id"], Resource.from_contents(d)) for d in (*docs.values(), _RUN_EVENT_SHAPE)]
    )
    validator = Draft202012Validator(docs["webhook-delivery.schema.json"], registry=registry)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]


def _noop_run(client: Any) -> str:
    run = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, run.runId)
    return str(run.runId)


def _wait(rx: WebhookReceiver, webhook_id: str, run_id: str, n: int, timeout: float = 20.0) -> list[Hit]:
    return eventually(
        lambda: (d := rx.deliveries(webhook_id, run_id)) and len(d) >= n and d, timeout=timeout, interval=0.1
    )


def _queued(ids: set[str]) -> list[Any]:
    """The delivery queue's messages (waiting or in flight, not dead-lettered) whose body names one of ``ids`` as
    its run or its subscription."""
    from shared.local.moto_data import backends
    from shared.manifest.resources import WEBHOOKS, queue

    found = backends()["sqs"].queues.get(queue(WEBHOOKS).local_name)
    messages = list(found._messages) if found is not None else []
    return [
        m
        for m in messages
        if any(i in m.body for i in ids) and {json.loads(m.body).get(k) for k in ("runId", "webhookId")} & ids
    ]


def _settled(*ids: str, timeout: float = 30.0) -> None:
    """Wait until nothing more of the runs or subscriptions ``ids`` can be delivered: every stream record written so
    far was fanned out (its messages sent) and the delivery queue holds no message of theirs (each one was
    delivered, dropped or dead-lettered; a message is deleted only after its request was answered, and the receiver
    records a hit before it answers). What a test then asserts about their deliveries is final, where a fixed sleep
    only hoped that a late attempt had come."""
    from shared.local.ddb_streams import wait_for_stream_idle

    assert wait_for_stream_idle(timeout), "stream records still undelivered"
    eventually(lambda: not _queued(set(ids)), timeout=timeout, interval=0.05)


def _attempted(*run_ids: str, timeout: float = 30.0) -> None:
    """Wait until each run's first queued message has had a failed delivery attempt and backs off: it was received
    (the poller uncounts the receives of messages held behind a failed one, so only a head's count is an attempt)
    and its invisibility no longer runs to the queue's in-flight timeout but only to the retry delay the handler set
    after the attempt failed (with the receiver down, every attempt fails). A received count alone is not enough:
    the attempt may still be on its way, read the run before a step of the test and post after it."""
    from moto.core.utils import unix_time_millis

    from shared.services import webhooks
    from shared.wiring import get_ports

    ports = get_ports()

    def backing_off(run_id: str) -> bool:
        queued = _queued({run_id})
        if not queued or queued[0].approximate_receive_count < 1:
            return False
        head = queued[0]
        return bool(
            head.visible_at - unix_time_millis() <= webhooks.retry_delay_s(ports, head.approximate_receive_count) * 1000
        )

    for run_id in run_ids:
        eventually(lambda r=run_id: backing_off(r), timeout=timeout)


def test_registration_returns_the_generated_secret_once_and_deliveries_verify_under_it(host, receiver):
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/a", events=["run.completed"]))
    assert reg.secret.startswith("whsec_") and reg.eventTypes == ["run.completed"]
    assert reg.subscriptionId.startswith(host.tenant_a + "/")
    run_id = _noop_run(client)
    (hit,) = _wait(receiver, reg.subscriptionId, run_id, 1)
    body = hit.json()
    # the delivery envelope: {runId, event} with the verbatim stored event, headers of webhooks.md §Headers
    stored = [e for e in all_events(client, run_id) if e.type == "run.completed"][0]
    assert body["runId"] == run_id and set(body) == {"runId", "event"}
    assert _delivery_errors(body) == []
    assert _delivery_errors({**body, "workspaceId": host.tenant_a, "extra": 1}) != []  # the check can fail
    assert body["event"]["eventId"] == stored.eventId and body["event"]["type"] == "run.completed"
    assert hit.headers["openwop-webhook-id"] == reg.subscriptionId
    assert hit.headers["openwop-event-type"] == "run.completed"
    assert verify_v1(reg.secret, hit)
    assert not verify_v1(reg.secret[:-4] + "AAA=", hit)
    # a subscription that did not opt in carries no Standard Webhooks header and was never verified
    assert not [k for k in hit.headers if k.startswith("webhook-")]
    assert not [h for h in receiver.hits if h.verification]
    # nothing of the caller's credentials travels
    assert not {"authorization", "cookie", "proxy-authorization"} & set(hit.headers)
    # a supplied secret is never echoed
    supplied = "conformance-" + "s" * 24
    own = _register(host, host.key_a, receiver.url + "/b", ["run.completed"], secret=supplied)
    assert own.status == 201 and supplied not in own.text and "secret" not in own.json


def test_standard_webhooks_delivery_is_verified_by_the_library_and_the_id_is_stable(host, receiver):
    client = host.client(host.key_a)
    secret = _whsec()
    reg = _register(
        host,
        host.key_a,
        receiver.url + "/sw",
        ["run.started", "run.completed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=secret,
    )
    assert reg.status == 201, reg.text
    doc = reg.json
    assert doc["signatureAlgorithms"] == ["v1", "standard-webhooks-1"] and secret not in reg.text
    webhook_id = doc["webhookId"]
    (verification,) = [h for h in receiver.hits if h.verification]
    assert "openwop-event-type" not in verification.headers and verify_standard(secret, verification)
    run_id = _noop_run(client)
    hits = _wait(receiver, webhook_id, run_id, 2)
    assert [h.json()["event"]["type"] for h in hits] == ["run.started", "run.completed"]
    for h in hits:
        assert verify_standard(secret, h) and verify_v1(secret, h)
        assert h.headers["webhook-timestamp"] == h.headers["openwop-timestamp"]
        assert not verify_standard(_whsec(), h)
    ids = [h.headers["webhook-id"] for h in hits]
    assert len(set(ids)) == 2 and all(len(i) >= 16 for i in ids)


def test_opted_in_registration_is_refused_without_the_echoed_challenge_and_persists_nothing(host, receiver):
    secret = _whsec()
    refused = _register(
        host,
        host.key_a,
        receiver.url + "/no-echo",
        ["run.completed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=secret,
    )
    assert refused.status == 400 and refused.json["error"] == "webhook_endpoint_unverified"
    assert len([h for h in receiver.hits if h.verification]) == 1  # one request, never retried
    ok = _register(
        host,
        host.key_a,
        receiver.url + "/echo",
        ["run.completed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=secret,
    )
    run_id = _noop_run(host.client(host.key_a))
    _wait(receiver, ok.json["webhookId"], run_id, 1)
    _settled(run_id)
    assert not [h for h in receiver.deliveries(run_id=run_id) if h.path.endswith("/no-echo")]


def test_a_receiver_that_is_down_gets_every_event_once_in_order_when_it_returns(host, receiver):
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/down", events=ALL))
    # Given the receiver is down (its port refuses connections) while two runs emit their events
    receiver.stop()
    runs = [_noop_run(client), _noop_run(client)]
    _attempted(*runs)  # at least one failed attempt per run, backing off
    # When it comes back on the same port
    receiver.start()
    # Then every event of each run arrives exactly once, in log order
    for run_id in runs:
        expected = [e.sequence for e in all_events(client, run_id) if e.type in ALL]
        hits = _wait(receiver, reg.subscriptionId, run_id, len(expected), timeout=30)
        _settled(run_id)
        hits = receiver.deliveries(reg.subscriptionId, run_id)
        assert [h.json()["event"]["sequence"] for h in hits] == expected
    dead = client.webhooks_dead_letters(reg.subscriptionId)
    assert dead.deliveries == []


def test_nothing_of_an_erased_run_is_delivered_after_its_erasure_answered(host, receiver):
    from shared.local.moto_data import sqs_messages_naming

    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/erased", events=ALL))
    # Given a receiver that is down while a run emits its events: their deliveries wait in the queue, backing off
    receiver.stop()
    erased = _noop_run(client)
    eventually(lambda: sqs_messages_naming({erased}), timeout=30, interval=0.1)
    _attempted(erased)  # at least one failed attempt
    # When the run is erased, and only then the receiver comes back on the same port
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(erased)}", key=host.key_a).status == 204
    receiver.start()
    # Then a later run of the same subscription is delivered (the queue and the receiver work)
    later = _noop_run(client)
    _wait(receiver, reg.subscriptionId, later, len(ALL) - 2, timeout=30)
    # and every waiting delivery of the erased run was dropped without a request: none is left in any queue, none
    # arrived, and none was dead-lettered
    eventually(lambda: not sqs_messages_naming({erased}), timeout=60, interval=0.2)
    _settled(erased)  # and no stream record of it is left to fan out
    assert receiver.deliveries(reg.subscriptionId, erased) == []
    assert client.webhooks_dead_letters(reg.subscriptionId).deliveries == []


def test_secret_rotation_signs_with_both_secrets_during_the_overlap(host, receiver):
    client = host.client(host.key_a)
    s1, s2 = _whsec(), _whsec()
    reg = _register(
        host,
        host.key_a,
        receiver.url + "/rot",
        ["run.completed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=s1,
    )
    webhook_id = reg.json["webhookId"]
    rotated = client.webhooks_rotate_secret(webhook_id, RotateWebhookSecretRequest(secret=s2))
    span = time.mktime(time.strptime(rotated.previousSecretExpiresAt[:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(
        time.strptime(rotated.rotatedAt[:19], "%Y-%m-%dT%H:%M:%S")
    )
    caps = raw(host.base_url, "GET", "/.well-known/openwop").json
    assert span == caps["webhooks"]["secretRotation"]["overlapSeconds"]
    run_id = _noop_run(client)
    (hit,) = _wait(receiver, webhook_id, run_id, 1)
    entries = hit.headers["webhook-signature"].split(" ")
    assert len(entries) == 2
    assert verify_standard(s2, hit) and verify_standard(s1, hit)
    assert verify_v1(s1, hit) and not verify_v1(s2, hit)  # OpenWOP-Signature stays on the previous secret
    # a plain (v1-only) subscription cannot rotate; a foreign tenant's id is refused before any lookup
    plain = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/plain", events=["run.completed"]))
    assert (
        raw(
            host.base_url,
            "POST",
            f"/webhooks/{project_id(plain.subscriptionId)}/rotate-secret",
            {"secret": s2},
            key=host.key_a,
        ).status
        == 400
    )
    cross = raw(
        host.base_url, "POST", f"/webhooks/{project_id(webhook_id)}/rotate-secret", {"secret": s2}, key=host.key_b
    )
    assert cross.status == 403 and cross.json["error"] == "id_tenant_mismatch"
    assert s2 not in json.dumps(rotated.__dict__)


def test_nothing_is_delivered_after_unregister(host, receiver):
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/gone", events=["run.completed"]))
    first = _noop_run(client)
    _wait(receiver, reg.subscriptionId, first, 1)
    client.webhooks_unregister(reg.subscriptionId)
    second = _noop_run(client)
    # a sync point: another subscription of the same tenant hears the second run
    other = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/sync", events=["run.completed"]))
    third = _noop_run(client)
    _wait(receiver, other.subscriptionId, third, 1)
    _settled(reg.subscriptionId, second, third)
    assert receiver.deliveries(reg.subscriptionId, second) == []
    assert receiver.deliveries(reg.subscriptionId, third) == []
    again = raw(host.base_url, "DELETE", f"/webhooks/{project_id(reg.subscriptionId)}", None, key=host.key_a)
    assert again.status == 404 and again.json["error"] == "not_found"


def test_a_replay_fork_delivers_no_copied_prefix_event_and_a_branch_only_its_own(host, receiver):
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/fork", events=ALL))
    source = _noop_run(client)
    n = len([e for e in all_events(client, source) if e.type in ALL])
    _wait(receiver, reg.subscriptionId, source, n)
    replay = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, replay.runId).status == "completed"
    branch = client.runs_fork(source, ForkRunRequest(fromSeq=2, mode="branch"))
    assert wait_terminal(client, branch.runId).status == "completed"
    own = [e.sequence for e in all_events(client, branch.runId) if e.type in ALL and e.sequence >= 2]
    assert own  # the branch re-executed from 2: its own events are new facts
    hits = _wait(receiver, reg.subscriptionId, branch.runId, len(own))
    _settled(branch.runId, replay.runId)
    assert [h.json()["event"]["sequence"] for h in receiver.deliveries(reg.subscriptionId, branch.runId)] == own
    # the replay fork's log carries the re-emitted events, and none of them was delivered
    assert [e for e in all_events(client, replay.runId) if e.type in ALL]
    assert receiver.deliveries(reg.subscriptionId, replay.runId) == []
    assert hits


def test_tenant_b_receiver_gets_nothing_from_tenant_a_runs(host, receiver):
    a, b = host.client(host.key_a), host.client(host.key_b)
    reg_b = b.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/b", events=ALL))
    reg_a = a.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/a", events=["run.completed"]))
    run_a = _noop_run(a)
    run_b = _noop_run(b)
    _wait(receiver, reg_a.subscriptionId, run_a, 1)
    _wait(receiver, reg_b.subscriptionId, run_b, 1)
    _settled(reg_b.subscriptionId, run_a, run_b)
    assert receiver.deliveries(reg_b.subscriptionId, run_a) == []
    assert all(h.json()["runId"].startswith(host.tenant_b + "/") for h in receiver.deliveries(reg_b.subscriptionId))
    # tenant B cannot see or remove A's subscription; an unknown id of its own tenant is 404
    wire_a = project_id(reg_a.subscriptionId)
    for method, path in (("DELETE", f"/webhooks/{wire_a}"), ("GET", f"/webhooks/{wire_a}/dead-letters")):
        r = raw(host.base_url, method, path, None, key=host.key_b)
        assert r.status == 403 and r.json["error"] == "id_tenant_mismatch"
    unknown = [
        raw(
            host.base_url,
            "GET",
            f"/webhooks/{project_id(host.tenant_b + '/' + 'x' * 26)}/dead-letters",
            None,
            key=host.key_b,
        )
        for _ in range(2)
    ]
    assert unknown[0].status == 404 and unknown[0].text == unknown[1].text


def test_an_exhausted_delivery_is_dead_lettered_with_its_reason_and_no_content(host, receiver):
    client = host.client(host.key_a)
    reg = _register(
        host,
        host.key_a,
        receiver.url + "/fail",
        ["run.completed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=_whsec(),
    )
    webhook_id = reg.json["webhookId"]
    run_id = _noop_run(client)
    from shared.wiring import get_ports

    attempts = get_ports().settings.webhook_max_attempts
    assert attempts == 8  # the deployed count (the queue's maxReceiveCount); only the delays are shortened
    page = eventually(
        lambda: (p := client.webhooks_dead_letters(webhook_id)).deliveries and p, timeout=60, interval=0.2
    )
    (dead,) = page.deliveries
    assert (dead.runId, dead.eventType, dead.reason, dead.attempts, dead.lastStatus) == (
        run_id,
        "run.completed",
        "retries_exhausted",
        attempts,
        500,
    )
    assert dead.deliveryId.startswith("msg_")
    hits = receiver.deliveries(webhook_id, run_id)
    assert len(hits) == attempts
    # the message id is the same on every attempt (and is the dead letter's deliveryId); the backoff grew
    assert {h.headers["webhook-id"] for h in hits} == {dead.deliveryId}
    gaps = [b.at - a.at for a, b in zip(hits, hits[1:], strict=False)]
    assert gaps[0] >= 0.9 and gaps[-1] >= gaps[0]
    record = raw(host.base_url, "GET", f"/webhooks/{project_id(webhook_id)}/dead-letters", None, key=host.key_a).json[
        "deliveries"
    ][0]
    assert set(record) <= {
        "deliveryId",
        "webhookId",
        "runId",
        "eventId",
        "eventType",
        "attempts",
        "deadLetteredAt",
        "expiresAt",
        "reason",
        "lastStatus",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"url": "https://hooks.example.com/x"},
        {"url": "https://hooks.example.com/x", "events": []},
        {"url": "https://hooks.example.com/x", "events": ["Run Completed"]},
        {"url": "https://hooks.example.com/x", "events": ["run.completed"], "extra": 1},
        {
            "url": "https://hooks.example.com/x",
            "events": ["run.completed"],
            "signatureAlgorithms": ["standard-webhooks-1"],
        },
        {"url": "https://hooks.example.com/x", "events": ["run.completed"], "signatureAlgorithms": ["v1", "nope"]},
        {
            "url": "https://hooks.example.com/x",
            "events": ["run.completed"],
            "signatureAlgorithms": ["v1", "standard-webhooks-1"],
            "secret": "not-a-whsec-secret-at-all",
        },
        {"events": ["run.completed"]},
        [],
    ],
)
def test_bad_bodies_are_400_validation_error(host, body):
    r = raw(host.base_url, "POST", "/webhooks", body, key=host.key_a)
    assert r.status == 400 and r.json["error"] == "validation_error"


@pytest.mark.parametrize(
    "url",
    [
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00::1]/x",
        "http://93.184.216.34/hook",
        "ftp://93.184.216.34/hook",
        "https://user:pw@93.184.216.34/x",
    ],
)
def test_private_metadata_and_plain_http_callback_urls_are_refused(host, url):
    r = raw(host.base_url, "POST", "/webhooks", {"url": url, "events": ["run.completed"]}, key=host.key_a)
    assert r.status == 400 and r.json["error"] == "webhook_url_rejected"
    assert url.split("//", 1)[1].split("/")[0] not in r.json["message"]


def test_the_listen_command_prints_verified_deliveries(host, receiver):
    from shared.cli.webhooks import describe_hit

    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/cli", events=["run.completed"]))
    run_id = _noop_run(client)
    (hit,) = _wait(receiver, reg.subscriptionId, run_id, 1)
    assert describe_hit(hit, [reg.secret]) == (
        f"run.completed run={run_id} seq={hit.json()['event']['sequence']} webhook={reg.subscriptionId} v1 verified"
    )
    assert describe_hit(hit, [_whsec()]).endswith("v1 NOT VERIFIED")


def test_no_delivery_carries_the_callers_credentials(host, receiver):
    # inbound-credential-no-passthrough: the API key and two canaries sent on the run-creating request
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/creds", events=ALL))
    c1, c2 = "c1-" + os.urandom(16).hex(), base64.b64encode(b"canary:" + os.urandom(16)).decode()
    created = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop"},
        key=host.key_a,
        headers={"Cookie": f"ow_canary={c1}", "Proxy-Authorization": f"Basic {c2}"},
    )
    assert created.status == 201
    run_id = created.json["runId"]
    wait_terminal(client, run_id)
    hits = _wait(receiver, reg.subscriptionId, run_id, 4)
    for hit in hits:
        blob = "\n".join(f"{k}: {v}" for k, v in hit.headers.items()) + hit.body.decode()
        for canary in (host.key_a, c1, c2):
            assert canary not in blob
        assert not {"authorization", "cookie", "proxy-authorization"} & set(hit.headers)


def test_an_event_too_large_for_the_message_is_read_from_the_log_at_delivery(host, receiver):
    from shared.protocol.webhooks import delivery_id
    from shared.services import webhooks
    from shared.wiring import get_ports

    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/large", events=["node.started"]))
    run_id = _noop_run(client)
    stored = [e for e in get_ports().events.read_events(run_id) if e["type"] == "run.completed"][0]
    big = {**stored, "payload": {"blob": "x" * (webhooks.MAX_INLINE_EVENT_BYTES + 1)}}
    message = json.loads(webhooks._message(reg.subscriptionId, run_id, big).body)
    assert "event" not in message and message["deliveryId"] == delivery_id(
        reg.subscriptionId, run_id, stored["sequence"]
    )
    # the delivery reads the stored event itself
    message = json.loads(webhooks._message(reg.subscriptionId, run_id, stored).body)
    del message["event"]
    assert webhooks.deliver(get_ports(), message, 1).status == 200
    (hit,) = [
        h for h in receiver.deliveries(reg.subscriptionId, run_id) if h.json()["event"]["type"] == "run.completed"
    ]
    assert hit.json()["event"] == stored and verify_v1(reg.secret, hit)


def test_tags_narrow_delivery_to_runs_with_an_overlapping_tag(host, receiver):
    client = host.client(host.key_a)
    reg = raw(
        host.base_url,
        "POST",
        "/webhooks",
        {"url": receiver.url + "/tags", "events": ["run.completed"], "tags": ["ci", "nightly"]},
        key=host.key_a,
    ).json
    tagged = client.runs_create(CreateRunRequest(workflowId="conformance-noop", tags=["nightly"])).runId
    plain = _noop_run(client)
    wait_terminal(client, tagged)
    _wait(receiver, reg["webhookId"], tagged, 1)
    _settled(reg["webhookId"], tagged, plain)
    assert receiver.deliveries(reg["webhookId"], plain) == []


def test_an_unknown_event_type_is_400_naming_it_and_stores_nothing(host, receiver):
    # Given a registration whose events[] mixes a v2 type with one that is not registered
    before = raw(host.base_url, "GET", "/webhooks", None, key=host.key_a).json["webhooks"]
    # When it is posted
    r = _register(host, host.key_a, receiver.url + "/bogus", ["run.completed", "run.bogus"])
    # Then it is 400 validation_error naming the unknown type (and only it), and nothing was stored
    assert r.status == 400 and r.json["error"] == "validation_error"
    assert "run.bogus" in r.json["message"] and "run.completed" not in r.json["message"]
    assert r.json["details"]["unknownEventTypes"] == ["run.bogus"]
    assert raw(host.base_url, "GET", "/webhooks", None, key=host.key_a).json["webhooks"] == before
    # an entry outside the type-name grammar is named by its index, never echoed
    odd = _register(host, host.key_a, receiver.url + "/bogus", ["run.completed", "<b>Run Done</b>"])
    assert odd.status == 400 and "events[1]" in odd.json["message"] and "<b>" not in odd.text
    assert odd.json["details"]["unknownEventTypes"] == ["events[1]"]  # its fault points at it, as every 400's does
    assert [e["pointer"] for e in odd.json["details"]["errors"]] == ["/events/1"]
    # every registered v2 type is accepted, including ones this host never emits
    ok = _register(host, host.key_a, receiver.url + "/ok", ["run.completed", "artifact.created", "approval.granted"])
    assert ok.status == 201


def test_list_webhooks_shows_the_callers_subscriptions_without_secrets_and_no_other_tenants(host, receiver):
    # Given tenant A registers two subscriptions (one generated secret, one opted into Standard Webhooks)
    # and tenant B one
    gen = _register(host, host.key_a, receiver.url + "/list-1", ["run.completed"], tags=["blue"])
    whsec = _whsec()
    std = _register(
        host,
        host.key_a,
        receiver.url + "/list-2",
        ["run.started", "run.failed"],
        signatureAlgorithms=["v1", "standard-webhooks-1"],
        secret=whsec,
    )
    other = _register(host, host.key_b, receiver.url + "/list-b", ["run.completed"])
    assert (gen.status, std.status, other.status) == (201, 201, 201)
    # When each tenant lists its webhooks
    page_a = raw(host.base_url, "GET", "/webhooks", None, key=host.key_a)
    page_b = raw(host.base_url, "GET", "/webhooks", None, key=host.key_b)
    # Then A sees its own two as registered, with the applied signing schemes, and never a secret
    assert page_a.status == 200
    mine = {w["webhookId"]: w for w in page_a.json["webhooks"]}
    assert mine[gen.json["webhookId"]] == {
        "webhookId": gen.json["webhookId"],
        "subscriptionId": gen.json["webhookId"],
        "url": receiver.url + "/list-1",
        "events": ["run.completed"],
        "eventTypes": ["run.completed"],
        "tags": ["blue"],
        "signatureAlgorithms": ["v1"],
        "createdAt": gen.json["createdAt"],
    }
    # the registration's answer is the listed entry without the secret
    assert {k: v for k, v in gen.json.items() if k != "secret"}.items() <= mine[gen.json["webhookId"]].items()
    assert mine[std.json["webhookId"]]["signatureAlgorithms"] == ["v1", "standard-webhooks-1"]
    assert mine[std.json["webhookId"]]["events"] == ["run.started", "run.failed"]
    assert gen.json["secret"] not in page_a.text and whsec not in page_a.text and "secret" not in page_a.text
    # and nothing of B's; B sees only its own
    assert all(w["webhookId"].startswith(host.tenant_a + "/") for w in page_a.json["webhooks"])
    assert other.json["webhookId"] not in page_a.text
    assert other.json["webhookId"] in {w["webhookId"] for w in page_b.json["webhooks"]}
    assert all(w["webhookId"].startswith(host.tenant_b + "/") for w in page_b.json["webhooks"])
    # an unregistered subscription leaves the list
    raw(host.base_url, "DELETE", f"/webhooks/{project_id(gen.json['webhookId'])}", None, key=host.key_a)
    after = raw(host.base_url, "GET", "/webhooks", None, key=host.key_a).json["webhooks"]
    assert gen.json["webhookId"] not in {w["webhookId"] for w in after}


def test_list_webhooks_pages_with_a_cursor_no_other_tenant_can_use(host, receiver):
    # Given tenant A holds at least three subscriptions
    ids = {
        _register(host, host.key_a, receiver.url + f"/page-{i}", ["run.completed"]).json["webhookId"] for i in range(3)
    }
    # When it lists them two at a time
    seen: list[str] = []
    first = raw(host.base_url, "GET", "/webhooks?limit=2", None, key=host.key_a).json
    assert len(first["webhooks"]) == 2 and first["nextCursor"]
    page, cursor = first, None
    for _ in range(30):  # bounded: the tenant holds at most 50
        seen += [w["webhookId"] for w in page["webhooks"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
        page = raw(host.base_url, "GET", f"/webhooks?limit=2&cursor={cursor}", None, key=host.key_a).json
    # Then every subscription appears exactly once, in id order
    assert ids <= set(seen) and len(seen) == len(set(seen)) and seen == sorted(seen)
    # and A's cursor is refused to B with the same bytes as a forged one
    stolen = raw(host.base_url, "GET", f"/webhooks?cursor={first['nextCursor']}", None, key=host.key_b)
    forged = raw(host.base_url, "GET", "/webhooks?cursor=" + "A" * 40, None, key=host.key_b)
    assert stolen.status == 400 and stolen.json["error"] == "validation_error" and stolen.text == forged.text
    bad_limit = raw(host.base_url, "GET", "/webhooks?limit=0", None, key=host.key_a)
    assert bad_limit.status == 400 and bad_limit.json["error"] == "validation_error"


def test_register_honours_idempotency_key_like_create_run(host, receiver):
    body = {"url": receiver.url + "/idem", "events": ["run.completed"]}
    key = {"Idempotency-Key": "webhook-idem-" + os.urandom(6).hex()}
    # Given a registration sent with an Idempotency-Key
    first = raw(host.base_url, "POST", "/webhooks", body, key=host.key_a, headers=key)
    # When the same request is sent again with the same key
    again = raw(host.base_url, "POST", "/webhooks", body, key=host.key_a, headers=key)
    # Then the stored answer comes back (marked as a replay) and one subscription exists
    assert first.status == again.status == 201 and again.json == first.json
    assert again.headers.get("openwop-idempotent-replay") == "true" and "openwop-idempotent-replay" not in first.headers
    listed = raw(host.base_url, "GET", "/webhooks", None, key=host.key_a).json["webhooks"]
    assert [w["webhookId"] for w in listed if w["url"] == body["url"]] == [first.json["webhookId"]]
    # the same key with another body is 409 idempotency_key_mismatch; another tenant's same key is its own
    changed = raw(host.base_url, "POST", "/webhooks", {**body, "events": ["run.failed"]}, key=host.key_a, headers=key)
    assert changed.status == 409 and changed.json["error"] == "idempotency_key_mismatch"
    theirs = raw(host.base_url, "POST", "/webhooks", body, key=host.key_b, headers=key)
    assert theirs.status == 201 and theirs.json["webhookId"].startswith(host.tenant_b + "/")
    assert "openwop-idempotent-replay" not in theirs.headers
    # a refusal is not stored: the corrected retry under the same key registers
    key2 = {"Idempotency-Key": "webhook-idem-" + os.urandom(6).hex()}
    refused = raw(host.base_url, "POST", "/webhooks", {**body, "events": ["run.bogus"]}, key=host.key_a, headers=key2)
    assert refused.status == 400
    fixed = raw(host.base_url, "POST", "/webhooks", body, key=host.key_a, headers=key2)
    assert fixed.status == 201 and "openwop-idempotent-replay" not in fixed.headers


def test_messages_behind_a_failing_delivery_wait_in_order_and_keep_every_attempt(host, receiver):
    # Given a receiver that refuses the first event of each run (sequence 0) every time and takes the others
    base = receiver.answer

    def answer(hit: Hit) -> tuple[int, Any]:
        if not hit.verification and hit.path.endswith("/head-fails") and hit.json()["event"]["sequence"] == 0:
            return 500, {"error": "failing on purpose"}
        return base(hit)

    receiver.answer = answer  # type: ignore[method-assign]
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/head-fails", events=ALL))
    # When a run emits its events (one message group: the later ones queue behind sequence 0)
    run_id = _noop_run(client)
    expected = [e.sequence for e in all_events(client, run_id) if e.type in ALL]
    # Then sequence 0 is dead-lettered after all its attempts, and only then the others arrive, once each, in order:
    # being handed over behind the failing one never counted as an attempt of theirs (none reached the DLQ unsent)
    from shared.wiring import get_ports

    attempts = get_ports().settings.webhook_max_attempts
    page = eventually(
        lambda: (p := client.webhooks_dead_letters(reg.subscriptionId)).deliveries and p, timeout=60, interval=0.2
    )
    assert [(d.attempts, d.reason) for d in page.deliveries] == [(attempts, "retries_exhausted")]
    hits = _wait(receiver, reg.subscriptionId, run_id, attempts + len(expected) - 1, timeout=30)
    _settled(run_id)  # the dead-lettered one is no longer in the delivery queue
    hits = receiver.deliveries(reg.subscriptionId, run_id)
    seqs = [h.json()["event"]["sequence"] for h in hits]
    assert seqs == [expected[0]] * attempts + expected[1:]
    assert client.webhooks_dead_letters(reg.subscriptionId).deliveries == page.deliveries


def test_different_runs_deliver_concurrently_while_one_runs_receiver_is_slow(host, receiver):
    # Given a receiver that holds some runs' deliveries until the test releases them (8 s at most, under the 10 s
    # delivery timeout, then 503: retried later), so those runs' groups cannot finish first however loaded the
    # machine is, and answers the others at once
    base = receiver.answer
    slow: set[str] = set()
    sealed, released = threading.Event(), threading.Event()
    answered: dict[str, set[int]] = {}
    holding = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def hold() -> bool:
        with lock:
            holding["now"] += 1
            holding["peak"] = max(holding["peak"], holding["now"])
        try:
            return released.wait(8)
        finally:
            with lock:
                holding["now"] -= 1

    def answer(hit: Hit) -> tuple[int, Any]:
        body = {} if hit.verification else hit.json()
        # (until the slow runs are all known, every delivery is one of theirs: a run's first events can arrive
        # before its create call has returned)
        if not body or not hit.path.endswith("/lanes") or (sealed.is_set() and body.get("runId") not in slow):
            return base(hit)
        if not hold():
            return 503, {"error": "held by the test"}
        answered.setdefault(body["runId"], set()).add(body["event"]["sequence"])
        return base(hit)

    receiver.answer = answer  # type: ignore[method-assign]
    client = host.client(host.key_a)
    reg = client.webhooks_register(RegisterWebhookRequest(url=receiver.url + "/lanes", events=ALL))
    try:
        # (three slow runs: more groups than the two delivery threads the local mapping used to have)
        slow_runs = [str(client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId) for _ in range(3)]
        slow.update(slow_runs)
        sealed.set()
        for run_id in slow_runs:
            wait_terminal(client, run_id)
        # When another run follows
        other = _noop_run(client)
        n = len([e for e in all_events(client, other) if e.type in ALL])
        # Then the other run's deliveries all arrive, in order, while no slow run's group got past its first event
        hits = _wait(receiver, reg.subscriptionId, other, n, timeout=40)  # at most 5 of a held event's 8 attempts
        assert [h.json()["event"]["sequence"] for h in hits] == sorted(h.json()["event"]["sequence"] for h in hits)
        assert answered == {}
        # each slow group is tried, the first event of each held (groups are independent: the other run's
        # deliveries may all arrive before the last slow group's first attempt)
        eventually(lambda: all(receiver.deliveries(reg.subscriptionId, r) for r in slow_runs), timeout=30)
        assert answered == {}
        # and slow groups were held at the same time: their lanes run side by side (one lane holds one at most)
        assert holding["peak"] >= 2
        released.set()
        # and once released, every slow group is delivered whole
        for run_id in slow_runs:
            wanted = {e.sequence for e in all_events(client, run_id) if e.type in ALL}
            eventually(lambda r=run_id, w=wanted: answered.get(r, set()) >= w, timeout=120, interval=0.2)
    finally:
        released.set()
        receiver.answer = base  # type: ignore[method-assign]


def test_negotiation_decided_is_delivered_like_any_other_event(host, receiver):
    import uuid

    from shared.local.demo_mcp import DemoMcpServer
    from tests.workflows import run_script

    client = host.client(host.key_a)
    reg = client.webhooks_register(
        RegisterWebhookRequest(url=receiver.url + "/negotiations", events=["negotiation.decided"])
    )
    with DemoMcpServer() as mcp:
        # When an MCP server is registered (its negotiation on an audit run) and a run calls one of its tools
        server_id = "s" + uuid.uuid4().hex[:8]
        registered = raw(
            host.base_url,
            "POST",
            "/host/openwop-serverless/mcp-servers",
            {"serverId": server_id, "url": mcp.url},
            key=host.key_a,
        )
        assert registered.status == 201, registered.text
        audit = registered.json["negotiation"]["runId"]
        run_id = run_script(client, [(f"mcp:{server_id}.lookup_customer", {"id": "w-1"})])
    # Then each negotiation.decided reaches the subscriber, signed, as the stored event, and nothing else does
    for rid in (audit, run_id):
        (hit,) = _wait(receiver, reg.subscriptionId, rid, 1)
        body = hit.json()
        stored = [e for e in all_events(client, rid) if e.type == "negotiation.decided"]
        assert len(stored) == 1 and body["event"]["eventId"] == stored[0].eventId
        assert body["event"]["payload"] == stored[0].payload and body["event"]["payload"]["outcome"] == "accepted"
        assert hit.headers["openwop-event-type"] == "negotiation.decided"
        assert _delivery_errors(body) == [] and verify_v1(reg.secret, hit)
    _settled(reg.subscriptionId)
    assert {h.json()["event"]["type"] for h in receiver.deliveries(reg.subscriptionId)} == {"negotiation.decided"}
