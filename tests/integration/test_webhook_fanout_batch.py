"""The fan-out by the batch (decision 0151), on moto through the local host.

The events stream's mapping waits a batching window for more pages, so the fan-out is invoked about once per window
and lane, not once per stored page; the warm fan-out keeps a tenant's subscriptions for
``webhook_subscription_cache_s`` (read again, eventually consistent, once that has passed); a batch whose handling
fails is retried from the first record not done, and nothing is delivered twice.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import time
from typing import Any

from openwop_client.types import CreateRunRequest

from shared.storage.events import PAGE, pack_page
from shared.storage.webhooks import SUB_PK
from tests.helpers import eventually, unique
from tests.integration import test_webhooks
from tests.integration.test_quotas import FixedClock
from tests.integration.test_webhook_fanout_cache import _Queries
from tests.wire import all_events, raw, wait_terminal

receiver = test_webhooks.receiver  # the same loopback receiver fixture and its clean-up
ALL = ["run.started", "node.started", "node.completed", "run.completed", "run.failed"]
APPENDED = 1_089  # eleven full pages of 99 events
DONE = "node.completed"


def _event(run_id: str, seq: int, event_type: str = "node.started") -> dict[str, Any]:
    return {
        "eventId": f"ev-{run_id}-{seq}",
        "runId": run_id,
        "nodeId": "n",
        "type": event_type,
        "sequence": seq,
        "timestamp": "2026-12-06T00:00:00.000Z",
        "schemaVersion": 1,
        "payload": {"n": seq},
    }


def _queue_drained(host: Any) -> bool:
    from shared import manifest

    attrs = host.aws.client("sqs").get_queue_attributes(
        QueueUrl=os.environ[manifest.queue("webhooks").env_var],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return all(int(v) == 0 for v in attrs.values())


def test_a_thousand_events_are_fanned_out_by_one_invocation_and_delivered_once_each(host, receiver):
    from shared.local.ddb_streams import stream_batch_partitions, stream_window_s, wait_for_stream_idle
    from shared.wiring import get_ports

    ports = get_ports()
    client = host.client(host.key_b)
    # (a subscription to one type of event: one FIFO group delivers a few a second here, and which events match is
    # the fan-out's choice over every record of the batch all the same)
    reg = raw(host.base_url, "POST", "/webhooks", {"url": receiver.url + "/batch", "events": [DONE]}, key=host.key_b)
    assert reg.status == 201, reg.text
    webhook_id = reg.json["webhookId"]
    # Given a subscribed run whose own events have been fanned out and delivered
    run_id = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, run_id)
    stored = all_events(client, run_id)
    first = [e.sequence for e in stored if e.type == DONE]
    eventually(lambda: len(receiver.deliveries(webhook_id, run_id)) >= len(first), timeout=30.0, interval=0.1)
    assert wait_for_stream_idle(30)
    before = len(stream_batch_partitions("fanout_webhooks"))
    # When 1,089 more events are appended to its log, a page of 99 at a time (as the engine flushes them), every
    # eleventh a node.completed
    nxt = len(stored)
    kinds = {s: DONE if s % 11 == 0 else "node.started" for s in range(nxt, nxt + APPENDED)}
    window = stream_window_s("fanout_webhooks")
    began = time.monotonic()
    for start in range(nxt, nxt + APPENDED, 99):
        ports.events.append_events(run_id, start, [_event(run_id, s, kinds[s]) for s in range(start, start + 99)])
    took = time.monotonic() - began
    assert wait_for_stream_idle(60)
    batches = stream_batch_partitions("fanout_webhooks")[before:]
    ours = [b for b in batches if json.dumps({"S": run_id}) in b]
    # Then the fan-out was invoked once per batching window the appends spanned (one, for eleven pages appended
    # within a window), never once per page; another run's record (a run of an earlier test still going) may have
    # opened its lane's window before the first page, so the pages may straddle one more window's end
    others = any(b != {json.dumps({"S": run_id})} for b in batches)
    spanned = 1 + int(took / window) + int(others)
    assert 1 <= len(ours) <= spanned, (len(ours), len(batches), took, window)
    assert len(ours) < APPENDED // 99, len(ours)
    # and every node.completed of the run reaches the receiver exactly once, in log order
    expected = first + [s for s, kind in kinds.items() if kind == DONE]
    assert len(expected) >= 100
    eventually(
        lambda: len(receiver.deliveries(webhook_id, run_id)) >= len(expected) and _queue_drained(host),
        timeout=120.0,
        interval=0.25,
    )
    assert [h.json()["event"]["sequence"] for h in receiver.deliveries(webhook_id, run_id)] == expected


def test_a_kept_subscription_list_is_read_again_once_its_time_has_passed(host):
    from shared.services import stream_interest
    from shared.wiring import get_ports

    base = get_ports()
    clock = FixedClock(1_900_000_000_000)
    ports = dataclasses.replace(
        base, clock=clock, settings=dataclasses.replace(base.settings, webhook_subscription_cache_s=5.0)
    )
    tenant = unique("kept")

    def subscribe(name: str) -> str:
        webhook_id = f"{tenant}/{name}"
        doc = {"webhookId": webhook_id, "tenant": tenant, "url": "http://127.0.0.1:1/", "events": ["run.completed"]}
        base.host.put_item(SUB_PK + tenant, webhook_id, {**doc, "createdAt": clock.iso(), "createdBy": "test"})
        return webhook_id

    def ids(interest: stream_interest.Interest) -> list[str]:
        return sorted(str(s["webhookId"]) for s in interest.subscriptions)

    a = subscribe("a")
    with _Queries(base.host._c, SUB_PK + tenant) as queries:
        # Given a fan-out that has read the tenant's one subscription (one eventually consistent Query)
        assert ids(stream_interest.read(ports, tenant)) == [a]
        assert len(queries.bodies) == 1 and not queries.bodies[0].get("ConsistentRead")
        # When a second subscription is written
        b = subscribe("b")
        # Then the kept list answers without a request while it is younger than the setting (5 s)
        clock.ms += 4_999
        assert ids(stream_interest.read(ports, tenant)) == [a]
        assert len(queries.bodies) == 1
        # and once its time has passed the tenant is read again, the new subscription with it
        clock.ms += 1
        assert ids(stream_interest.read(ports, tenant)) == [a, b]
        assert len(queries.bodies) == 2
        # and a read for a run the fan-out has not seen yet asks again while the list is kept
        assert ids(stream_interest.read(ports, tenant, fresh=True)) == [a, b]
        assert len(queries.bodies) == 3
        # and a clock that went back does not keep the new answer alive
        clock.ms -= 10_000
        assert ids(stream_interest.read(ports, tenant)) == [a, b]
        assert len(queries.bodies) == 4


def test_a_batch_with_an_unreadable_record_reports_it_and_fans_out_the_records_before_it(host, receiver):
    from functions.fanout_webhooks.handler import lambda_handler
    from shared.local.context import LambdaContext

    client = host.client(host.key_b)
    reg = raw(host.base_url, "POST", "/webhooks", {"url": receiver.url + "/bad", "events": ALL}, key=host.key_b)
    assert reg.status == 201, reg.text
    webhook_id = reg.json["webhookId"]
    run_id = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, run_id)
    first = [e.sequence for e in all_events(client, run_id)]
    eventually(lambda: len(receiver.deliveries(webhook_id, run_id)) >= len(first), timeout=30.0, interval=0.1)
    # Given a stream batch: a page of the run's next events, a record whose image cannot be read, another page
    nxt = len(first)
    good = [_event(run_id, s) for s in range(nxt, nxt + 3)]
    later = [_event(run_id, s) for s in range(nxt + 3, nxt + 6)]

    def record(seq: int, number: str, image: dict[str, Any]) -> dict[str, Any]:
        keys = {"runId": {"S": run_id}, "seq": {"N": str(seq)}}
        return {
            "eventID": f"e-{number}",
            "eventName": "INSERT",
            "dynamodb": {"Keys": keys, "NewImage": {**keys, **image}, "SequenceNumber": number},
        }

    def page(events: list[dict[str, Any]]) -> dict[str, Any]:
        texts = [json.dumps(e, separators=(",", ":")) for e in events]
        item = pack_page(run_id, int(events[0]["sequence"]), texts, 0).item
        return {k: {"B": base64.b64encode(v["B"]).decode()} if "B" in v else v for k, v in item.items()}

    unreadable = {**page(later), PAGE: {"B": base64.b64encode(b"not a compressed page").decode()}}
    batch = [record(nxt, "100", page(good)), record(nxt + 3, "200", unreadable), record(nxt + 3, "300", page(later))]
    # When the fan-out handles it
    answer = lambda_handler({"Records": batch}, LambdaContext("openwop-fanout-webhooks"))
    # Then the unreadable record is reported (the mapping retries from it), and the page before it is delivered
    assert answer == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    expected = first + [e["sequence"] for e in good]
    eventually(
        lambda: len(receiver.deliveries(webhook_id, run_id)) >= len(expected) and _queue_drained(host),
        timeout=30.0,
        interval=0.1,
    )
    # (and the page after it is not: the mapping hands it over again with the retried record)
    assert [h.json()["event"]["sequence"] for h in receiver.deliveries(webhook_id, run_id)] == expected
