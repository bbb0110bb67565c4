"""The event log stored in pages (decisions 0133, 0170), on moto: one item holds a run of consecutive events,
compressed, keyed by its first sequence; racing writers never overlap or leave a gap; every read finds its events
across pages, among rows of the older layout too, and a stream image of a page yields each of its events."""

from __future__ import annotations

import base64
import json
import os
import random
import threading
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.errors import ConflictError
from shared.ports import RunRecord
from shared.storage import schema
from tests.helpers import lagging_queries, requests_sent, stored_run


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _run(ports: Any) -> RunRecord:
    return stored_run(ports, "r-pages")


def _ev(ports: Any, run_id: str, seq: int, **payload: Any) -> dict[str, Any]:
    return {
        "eventId": ports.ids.event_id(run_id, seq),
        "runId": run_id,
        "type": "node.started",
        "payload": payload,
        "timestamp": ports.clock.iso(),
        "sequence": seq,
        "schemaVersion": 1,
    }


def _stored(ports: Any, run_id: str) -> list[dict[str, Any]]:
    """The log's items as DynamoDB holds them, in key order."""
    return list(
        ports.events._c.query(
            TableName=ports.settings.events_table,
            KeyConditionExpression="runId = :r",
            ExpressionAttributeValues={":r": {"S": run_id}},
        )["Items"]
    )


def _span(item: dict[str, Any]) -> tuple[int, int]:
    from shared.storage.eventpages import bounds

    return bounds(item)


def test_writers_racing_with_batches_of_any_size_never_overlap_or_leave_a_gap(ports):
    # Given one run and two writers that append batches of 1 to 5 events from the head each one read, so that
    # their pages end at different sequences
    rec = _run(ports)
    barrier = threading.Barrier(2)

    def appended(name: str, n: int) -> bool:
        """``n`` events after the head read now; False when the other writer moved it first."""
        head = ports.runs.get_run(rec.run_id).last_seq
        batch = [_ev(ports, rec.run_id, head + 1 + i, writer=name) for i in range(n)]
        try:
            ports.events.append_events(rec.run_id, head + 1, batch)
        except ConflictError:
            return False
        return True

    def writer(name: str, sizes: list[int]) -> None:
        barrier.wait()
        for n in sizes:
            while not appended(name, n):
                continue

    rng = random.Random(7)
    batches = {}
    for name in ("w1", "w2"):
        sizes: list[int] = []
        while sum(sizes) < 60:
            sizes.append(min(rng.randint(1, 5), 60 - sum(sizes)))
        batches[name] = sizes
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(writer, batches, batches.values()))  # (a writer's error is raised here)
    # Then the log is exactly 0..119, each sequence once, 60 of each writer, and the head agrees
    got = ports.events.read_events(rec.run_id)
    assert ([e["sequence"] for e in got], ports.runs.get_run(rec.run_id).last_seq) == (list(range(120)), 119)
    assert Counter(e["payload"]["writer"] for e in got) == {"w1": 60, "w2": 60}
    # And the stored pages tile the log: each starts where the one before ended, none overlaps another
    spans = [_span(i) for i in _stored(ports, rec.run_id)]
    assert [first for first, _ in spans] == [0] + [last + 1 for _, last in spans[:-1]]


def test_a_stale_writer_neither_overwrites_a_page_nor_adds_one(ports):
    # Given a log of one page 0..2
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, s, who="first") for s in range(3)])
    before = _stored(ports, rec.run_id)
    # When a writer that read the head before that append writes a page with the same last sequence, and another
    # one a page of one event at 0
    with pytest.raises(ConflictError):
        ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, s, who="stale") for s in range(3)])
    with pytest.raises(ConflictError):
        ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0, who="stale")])
    # Then the stored log is the first writer's, byte for byte
    assert _stored(ports, rec.run_id) == before
    assert {e["payload"]["who"] for e in ports.events.read_events(rec.run_id)} == {"first"}


def test_one_append_is_pages_of_at_most_99_events_and_reads_cross_them(ports):
    # Given 250 events appended at once
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, s, i=s) for s in range(250)])
    # Then they are three compressed pages keyed by their first sequence
    items = _stored(ports, rec.run_id)
    assert [_span(i) for i in items] == [(0, 98), (99, 197), (198, 249)]
    assert [int(i["seq"]["N"]) for i in items] == [0, 99, 198]
    assert all(set(i) == {"runId", "seq", "last", "expiresAt", "page"} for i in items)
    docs = json.loads(zlib.decompress(items[1]["page"]["B"]))
    assert [d["sequence"] for d in docs] == list(range(99, 198))
    # And a range inside a page reads the keys that may hold it (from 98 before it), one across pages the same: one
    # Query each
    with requests_sent(ports.events._c, "Query", ports.events._t) as sent:
        assert [e["sequence"] for e in ports.events.read_page(rec.run_id, 120, 5)] == [121, 122, 123, 124, 125]
    assert [(q["ExpressionAttributeValues"][":lo"], q["ExpressionAttributeValues"][":hi"]) for q in sent] == [
        ({"N": "23"}, {"N": "125"})
    ]
    with requests_sent(ports.events._c, "Query", ports.events._t) as sent:
        got = ports.events.read_events(rec.run_id, 50, limit=100)
    assert [e["sequence"] for e in got] == list(range(51, 151)) and len(sent) == 1
    got = [e["sequence"] for page in ports.events.iter_events(rec.run_id, 97, 198) for e in page]
    assert got == list(range(98, 199))
    # And a range that ends where a page ends needs no second Query
    with requests_sent(ports.events._c, "Query", ports.events._t) as sent:
        got = [e["sequence"] for page in ports.events.iter_events(rec.run_id, -1, 197) for e in page]
    assert got == list(range(198)) and len(sent) == 1
    assert [e["sequence"] for e in ports.events.read_page(rec.run_id, 240)] == list(range(241, 250))
    assert ports.events.read_events(rec.run_id, 249) == [] and ports.events.read_page(rec.run_id, 249, 1) == []


def test_a_page_holds_at_most_350_kb_of_event_json(ports):
    # Given five events of ~150 KB each (incompressible text) appended at once
    rec = _run(ports)
    blobs = [os.urandom(75_000).hex() for _ in range(5)]
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, s, blob=blobs[s]) for s in range(5)])
    # Then no page holds more than two of them, and every byte reads back
    assert [_span(i) for i in _stored(ports, rec.run_id)] == [(0, 1), (2, 3), (4, 4)]
    assert [e["payload"]["blob"] for e in ports.events.read_events(rec.run_id)] == blobs


def test_a_poll_page_answers_about_1_mb_of_events(ports):
    # Given four pages of ~340 KB of event JSON each
    rec = _run(ports)
    events = [_ev(ports, rec.run_id, s, blob=os.urandom(56_500).hex()) for s in range(12)]
    for s in range(0, 12, 3):
        ports.events.append_events(rec.run_id, s, events[s : s + 3])
    # When a poll reads from the start
    got = ports.events.read_page(rec.run_id, -1)
    # Then it answers whole pages until 1 MB of events is reached (then the client asks again from there)
    assert [e["sequence"] for e in got] == list(range(12))[: len(got)]
    assert len(got) == 12 - 3 and len(json.dumps(got)) > 1_000_000 > len(json.dumps(got[:-3]))
    assert [e["sequence"] for e in ports.events.read_page(rec.run_id, 8)] == [9, 10, 11]


def test_a_stream_image_of_a_page_yields_each_event_and_a_large_one_is_read_from_the_log(ports):
    # Given a page of three events whose middle one is stored in S3 (over the inline limit)
    rec = _run(ports)
    big = "x" * 400_000
    written = [_ev(ports, rec.run_id, 0, i=0), _ev(ports, rec.run_id, 1, blob=big), _ev(ports, rec.run_id, 2, i=2)]
    ports.events.append_events(rec.run_id, 0, written)
    (item,) = _stored(ports, rec.run_id)
    # When its stream record's image (binary as base64 text, as DynamoDB Streams send it) is decoded
    image = {**item, "page": {"B": base64.b64encode(item["page"]["B"]).decode("ascii")}}
    pairs = ports.events.events_from_image(image)
    # Then each event comes with its sequence; the large one is None (the fan-out reads it from the log)
    assert pairs == [(0, written[0]), (1, None), (2, written[2])]
    assert ports.events.read_events(rec.run_id, 0, limit=1)[0]["payload"]["blob"] == big
    assert ports.blobs.list_keys(f"runs/{rec.run_id}/events/") == [schema.large_event_key(rec.run_id, 1)]


def test_rows_of_the_older_layout_read_with_the_pages_after_them(ports):
    from shared.storage.ddb import to_item

    # Given a log whose first events were stored one per item (the layout before pages)
    rec = _run(ports)
    rows = [_ev(ports, rec.run_id, s, old=True) for s in range(3)]
    for ev in rows:
        ports.events._c.put_item(
            TableName=ports.settings.events_table,
            Item=to_item(
                {
                    "runId": rec.run_id,
                    "seq": ev["sequence"],
                    "expiresAt": rec.expires_at,
                    "doc": json.dumps(ev, separators=(",", ":")),
                }
            ),
        )
    ports.runs.set_progress(rec.run_id, -1, 2, {})
    # When events are appended after them
    ports.events.append_events(rec.run_id, 3, [_ev(ports, rec.run_id, s, old=False) for s in range(3, 8)])
    # Then every read finds both, in order
    assert [_span(i) for i in _stored(ports, rec.run_id)] == [(0, 0), (1, 1), (2, 2), (3, 7)]
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == list(range(8))
    assert [e["payload"]["old"] for e in ports.events.read_page(rec.run_id, 1, 3)] == [True, False, False]
    assert [e["sequence"] for page in ports.events.iter_events(rec.run_id, 0, 4) for e in page] == [1, 2, 3, 4]
    row = _stored(ports, rec.run_id)[1]
    assert ports.events.events_from_image(row) == [(1, rows[1])]


def test_a_settled_read_is_eventually_consistent_and_reads_on_consistently_where_a_page_is_not_shown(ports):
    # Given 250 events in three pages (0..98, 99..197, 198..249)
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, s, i=s) for s in range(250)])
    hidden: set[int] = set()  # keys (first sequences) of the pages an eventually consistent read does not show yet
    client = ports.events._c
    with lagging_queries(client, lambda i: i.get("runId") == {"S": rec.run_id} and int(i["seq"]["N"]) in hidden):
        # When every page shows, a settled read of the whole log is eventually consistent only
        with requests_sent(client, "Query", ports.events._t) as sent:
            got = ports.events.read_events(rec.run_id, -1, limit=250, settled=True)
        assert [e["sequence"] for e in got] == list(range(250))
        assert [q["ConsistentRead"] for q in sent] == [False] * len(sent)
        # When the middle page is not shown yet, the read goes on consistently from its first event, and no event
        # is missing or read twice
        hidden.add(99)
        with requests_sent(client, "Query", ports.events._t) as sent:
            got = [e["sequence"] for page in ports.events.iter_events(rec.run_id, -1, 249, settled=True) for e in page]
        assert got == list(range(250))
        consistent = [q for q in sent if q["ConsistentRead"]]
        assert consistent and not sent[0]["ConsistentRead"]
        assert consistent[0]["ExpressionAttributeValues"][":lo"] == {"N": "1"}  # the keys that may hold event 99
        # And a read that is not settled stays consistent whatever shows
        with requests_sent(client, "Query", ports.events._t) as sent:
            assert len(ports.events.read_events(rec.run_id, 10, limit=5)) == 5
        assert [q["ConsistentRead"] for q in sent] == [True]


def test_a_staged_write_whose_condition_fails_refuses_the_last_transaction_and_says_what_was_written(ports):
    # Given a run and 10,000 events (102 pages: two transactions), with a staged write that cannot hold (the release
    # of a slot the run does not hold, decision 0183)
    from shared.errors import StagedRefusedError

    rec = _run(ports)
    events = [_ev(ports, rec.run_id, s) for s in range(10_000)]
    staged = ports.slots.stage_release(rec.tenant, rec.run_id)
    # When they are appended with it and the run's status
    with pytest.raises(StagedRefusedError) as refused:
        ports.events.append_events(rec.run_id, 0, events, run_updates={"status": "completed"}, staged=staged)
    # Then the first transaction's pages are written, the last's not, and the refusal says where the log ends
    appended = refused.value.appended
    assert appended is not None and 0 < appended < 9_999
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == list(range(appended + 1))
    assert ports.runs.get_run(rec.run_id).status != "completed"
    # And the rest appended from there without it ends the log whole, with the status
    ports.events.append_events(rec.run_id, appended + 1, events[appended + 1 :], run_updates={"status": "completed"})
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == list(range(10_000))
    assert ports.runs.get_run(rec.run_id).status == "completed"
