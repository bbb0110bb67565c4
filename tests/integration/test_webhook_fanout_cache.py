"""The fan-out's cached "no subscription" answer (decision 0116), on moto through the local host.

A tenant without webhooks costs one eventually consistent Query of its subscriptions per
``NO_SUBSCRIBER_CACHE_S`` and warm fan-out process, not one per stream batch; a tenant's first registration answers
only once every such answer given before its write has expired, so no event stored after the 201 is missed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from openwop_client.types import CreateRunRequest

from shared.clock import SystemClock
from shared.storage.webhooks import SUB_PK
from tests.helpers import eventually, stored_run, unique
from tests.integration import test_webhooks
from tests.wire import all_events, raw, wait_terminal

receiver = test_webhooks.receiver  # the same loopback receiver fixture and its clean-up
ALL = ["run.started", "node.started", "node.completed", "run.completed", "run.failed"]


class _Queries:
    """Query requests the host table's client sends for one partition (the botocore request bodies)."""

    def __init__(self, client: Any, pk: str) -> None:
        self.client, self.pk, self.bodies = client, pk, []

    def __call__(self, request: Any = None, **_: Any) -> None:
        body = json.loads(request.body or b"{}")
        if body.get("ExpressionAttributeValues", {}).get(":p", {}).get("S") == self.pk:
            self.bodies.append(body)

    def __enter__(self) -> _Queries:
        self.client.meta.events.register("before-send.dynamodb.Query", self)
        return self

    def __exit__(self, *_: Any) -> None:
        self.client.meta.events.unregister("before-send.dynamodb.Query", self)


def _event(run_id: str, seq: int) -> dict[str, Any]:
    return {
        "eventId": f"ev-{seq}",
        "runId": run_id,
        "type": "node.started",
        "sequence": seq,
        "timestamp": "2026-12-04T00:00:00.000Z",
        "schemaVersion": 1,
        "payload": {},
    }


class _MovedClock(SystemClock):
    """The system clock plus an offset the test moves: the cache's life passes without the test sleeping it."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.offset_ms


def test_a_tenant_without_subscriptions_is_queried_once_per_cache_life_not_per_batch(host):
    from shared.services import stream_interest, webhooks
    from shared.wiring import get_ports

    clock = _MovedClock()
    ports = dataclasses.replace(get_ports(), clock=clock)  # the fan-out reads the cache's age on its ports' clock
    tenant = unique("no-hooks")
    run_id = f"{tenant}/r-{unique('run')}"
    with _Queries(ports.host._c, SUB_PK + tenant) as queries:
        # Given a tenant that has no subscription
        # When five stream batches of its run are fanned out within the cache's life
        queued = [webhooks.fan_out(ports, [(run_id, seq, _event(run_id, seq))]) for seq in range(5)]
        # Then nothing is queued and one eventually consistent Query was sent, not five (decision 0151)
        assert queued == [0, 0, 0, 0, 0]
        assert len(queries.bodies) == 1 and queries.bodies[0].get("ConsistentRead", False) is False
        # When the cache's life has passed, the next batch asks again (once)
        clock.offset_ms += int(stream_interest.NO_SUBSCRIBER_CACHE_S * 1000)
        assert webhooks.fan_out(ports, [(run_id, 5, _event(run_id, 5))]) == 0
        assert webhooks.fan_out(ports, [(run_id, 6, _event(run_id, 6))]) == 0
        assert len(queries.bodies) == 2


def test_a_first_registration_outlasts_a_cached_answer_and_every_later_event_is_delivered(host, receiver):
    from shared.services import stream_interest, webhooks
    from shared.wiring import get_ports

    ports = get_ports()
    tenant = host.tenant_b
    probe = f"{tenant}/r-{unique('probe')}"
    with _Queries(ports.host._c, SUB_PK + tenant) as queries:
        # Given a fan-out that has just found no subscription for tenant-b (its answer is now cached: by this Query,
        # or by the fan-out of another test's tenant-b run in this process moments before, and then none was sent)
        assert webhooks.fan_out(ports, [(probe, 0, _event(probe, 0))]) == 0
        asked = len(queries.bodies)
        assert asked <= 1 and stream_interest.known_without_subscribers(tenant)
        assert webhooks.fan_out(ports, [(probe, 1, _event(probe, 1))]) == 0
        assert len(queries.bodies) == asked  # the cached answer is in use
    # When tenant-b registers its first webhook and starts a run as soon as the 201 arrives
    started = time.monotonic()
    reg = raw(host.base_url, "POST", "/webhooks", {"url": receiver.url + "/first", "events": ALL}, key=host.key_b)
    waited = time.monotonic() - started
    assert reg.status == 201, reg.text
    client = host.client(host.key_b)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, run.runId)
    # Then the registration answered only after the cache's life, and every event of the run is delivered in order
    assert waited >= stream_interest.NO_SUBSCRIBER_CACHE_S
    stored = [e.sequence for e in all_events(client, run.runId)]
    hits = eventually(
        lambda: (d := receiver.deliveries(reg.json["webhookId"], run.runId)) and len(d) >= len(stored) and d,
        timeout=20.0,
        interval=0.1,
    )
    assert [h.json()["event"]["sequence"] for h in hits] == stored


def test_a_registration_beside_a_settled_subscription_does_not_wait(host, receiver):
    from shared.services import stream_interest
    from shared.wiring import get_ports

    ports = get_ports()
    tenant = host.tenant_a
    # Given tenant-a holds a subscription written two minutes ago (every fan-out has seen it since)
    old_id = f"{tenant}/{unique('old')}"
    created = ports.clock.iso(ports.clock.now_ms() - 120_000)
    ports.host.put_item(
        SUB_PK + tenant,
        old_id,
        {
            "webhookId": old_id,
            "tenant": tenant,
            "url": receiver.url + "/old",
            "events": ["run.completed"],
            "tags": [],
            "signatureAlgorithms": ["v1"],
            "secret": "whsec_" + "A" * 43,
            "createdAt": created,
            "createdBy": "test",
        },
    )
    # When it registers another one
    started = time.monotonic()
    reg = raw(host.base_url, "POST", "/webhooks", {"url": receiver.url + "/new", "events": ALL}, key=host.key_a)
    waited = time.monotonic() - started
    # Then the answer does not wait out the no-subscriber cache
    assert reg.status == 201, reg.text
    assert waited < stream_interest.NO_SUBSCRIBER_CACHE_S


def test_the_read_ahead_of_a_runs_facts_is_sent_in_the_callers_context(host):
    import contextvars
    import threading

    from shared.services import webhooks
    from shared.wiring import get_ports

    # Given a tenant this process has not seen (so its run's facts are read beside its subscriptions' Query)
    ports = get_ports()
    run_id = stored_run(ports, "r-ahead", tenant=unique("ahead")).run_id
    marker: contextvars.ContextVar[str | None] = contextvars.ContextVar("marker", default=None)
    seen: list[tuple[str | None, str]] = []

    def sent(request: Any = None, **_: Any) -> None:
        seen.append((marker.get(), threading.current_thread().name))

    ports.runs._c.meta.events.register("before-send.dynamodb.BatchGetItem", sent)
    token = marker.set("the fan-out's caller")
    try:
        # When one of its events is fanned out
        assert webhooks.fan_out(ports, [(run_id, 0, _event(run_id, 0))]) == 0
    finally:
        marker.reset(token)
        ports.runs._c.meta.events.unregister("before-send.dynamodb.BatchGetItem", sent)
    # Then the facts were read once, on the read-ahead thread, in the caller's context (its span, its log keys, and
    # the meter's origin: the bench counts that request against the run)
    assert seen == [("the fan-out's caller", threading.current_thread().name + "-facts")]
