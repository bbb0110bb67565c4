"""Resending unprocessed BatchWriteItem items: backoff, a bound, and every item written in the end.

The faults are injected into a moto-backed client with botocore event hooks (DynamoDB's own behaviour under
throttling: the request succeeds, part of it comes back as ``UnprocessedItems``); nothing of ours is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.errors import StorageError
from tests.helpers import unique


class UnprocessedFault:
    """For the first ``faulty_calls`` BatchWriteItem calls, moto receives only the first request of the batch and
    the response reports the others as unprocessed. Counts every call."""

    def __init__(self, client: Any, faulty_calls: int) -> None:
        self.client = client
        self.faulty_calls = faulty_calls
        self.calls = 0
        self.sent: list[int] = []
        self._withheld: dict[str, list[dict[str, Any]]] = {}
        client.meta.events.register("before-parameter-build.dynamodb.BatchWriteItem", self._before)
        client.meta.events.register("after-call.dynamodb.BatchWriteItem", self._after)

    def _before(self, params: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        self._withheld = {}
        items = params["RequestItems"]
        self.sent.append(sum(len(v) for v in items.values()))
        if self.calls <= self.faulty_calls:
            for table, reqs in items.items():
                self._withheld[table] = reqs[1:]
                items[table] = reqs[:1]

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        withheld = {t: r for t, r in self._withheld.items() if r}
        if withheld:
            parsed["UnprocessedItems"] = withheld

    def remove(self) -> None:
        self.client.meta.events.unregister("before-parameter-build.dynamodb.BatchWriteItem", self._before)
        self.client.meta.events.unregister("after-call.dynamodb.BatchWriteItem", self._after)


@pytest.fixture()
def ddb(local_aws) -> Iterator[Any]:
    # A client of its own, so hooks never leak into the ports' shared client.
    import boto3

    yield boto3.session.Session().client("dynamodb")


def _host_table() -> str:
    from shared.wiring import get_ports

    return str(get_ports().settings.host_table)


def _puts(pk: str, n: int) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"pk": {"S": pk}, "sk": {"S": f"{i:04d}"}}}} for i in range(n)]


def _count(ddb: Any, table: str, pk: str) -> int:
    resp = ddb.query(
        TableName=table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": pk}},
        Select="COUNT",
        ConsistentRead=True,
    )
    return int(resp["Count"])


def test_batch_write_resends_unprocessed_items_with_growing_backoff_until_all_are_written(ddb):
    from shared.storage.ddb import batch_write

    # Given 60 puts and a table that leaves all but one item of a request unprocessed three times in a row
    table, pk = _host_table(), unique("BATCH")
    fault = UnprocessedFault(ddb, faulty_calls=3)
    pauses: list[int] = []
    # When they are written
    try:
        batch_write(ddb, table, _puts(pk, 60), pause=pauses.append)
    finally:
        fault.remove()
    # Then every item is stored
    assert _count(ddb, table, pk) == 60
    # and the first chunk of 25 took 4 requests (25, 24, 23, 22 items sent), the other two chunks one each
    assert fault.calls == 6
    assert fault.sent == [25, 24, 23, 22, 25, 10]
    # and each resend waited its backoff, attempts 1, 2, 3
    assert pauses == [1, 2, 3]


def test_batch_write_gives_up_with_a_storage_error_after_the_attempt_limit(ddb):
    from shared.storage.ddb import BATCH_WRITE_ATTEMPTS, batch_write

    # Given a table that never accepts more than one item per request
    table, pk = _host_table(), unique("BATCH")
    fault = UnprocessedFault(ddb, faulty_calls=10**6)
    pauses: list[int] = []
    # When 20 items are written
    try:
        with pytest.raises(StorageError, match="12 items of .* still unprocessed after 8 "):
            batch_write(ddb, table, _puts(pk, 20), pause=pauses.append)
    finally:
        fault.remove()
    # Then it stopped after the bounded number of requests (one item landing per request), pausing between them
    assert BATCH_WRITE_ATTEMPTS == 8
    assert fault.calls == 8
    assert pauses == [1, 2, 3, 4, 5, 6, 7]
    assert _count(ddb, table, pk) == 8


def test_fork_prefix_copy_and_erasure_survive_unprocessed_items(local_aws, ddb):
    from shared.storage.events import DynamoEventStore
    from shared.wiring import get_ports

    # Given an event store on a client that sees two partial BatchWriteItem answers
    ports = get_ports()
    store = DynamoEventStore(ddb, ports.settings.events_table, ports.settings.runs_table, ports.blobs)
    run_id = f"tenant-c/{unique('r-batch')}"
    events = [
        {
            "eventId": ports.ids.event_id(run_id, s),
            "runId": run_id,
            "type": "node.started",
            "payload": {},
            "timestamp": ports.clock.iso(),
            "sequence": s,
            "schemaVersion": 1,
        }
        for s in range(300)
    ]
    fault = UnprocessedFault(ddb, faulty_calls=2)
    try:
        # When a fork prefix of 300 events is copied (four pages of at most 99 events: one request's worth)
        copied = store.copy_events(run_id, events, expires_at=ports.clock.now_ms() // 1000 + 3600)
        # Then all 300 are in the log, in order: two partial answers cost two extra requests
        assert copied == 300
        assert [e["sequence"] for e in store.read_events(run_id)] == list(range(300))
        assert fault.sent == [4, 3, 2]
        # And when the log is erased through the same faults
        fault.calls, fault.faulty_calls, fault.sent = 0, 1, []
        assert store.delete_all(run_id) == 4
    finally:
        fault.remove()
    # Then nothing is left
    assert store.read_events(run_id) == []
    assert fault.sent == [4, 3]
