"""Appends at the physical bound (decision 0170), on moto: a page's conditional put is the log's ordering point, so
a task's middle pages go plain (one write unit per KB, no head) once its first transaction opened the tail; a
reader of an open run reads past the head; a writer whose tail is stale collides and writes nothing; a cancel
appended at the tail stops the task's next page; an erasure takes the pages a task put after it (by the task, or
by the execution that waits until no task of the erased run can write, decision 0179); a log begun in the older
layout (pages keyed by their last sequence) reads whole across the change."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.errors import ConflictError, RunGoneError
from shared.ports import RunRecord
from shared.storage import schema
from tests.helpers import naming, requests_sent, stored_run


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _run(ports: Any) -> RunRecord:
    return stored_run(ports, "r-plain")


def _evs(ports: Any, run_id: str, lo: int, n: int, **payload: Any) -> list[dict[str, Any]]:
    return [
        {
            "eventId": ports.ids.event_id(run_id, seq),
            "runId": run_id,
            "type": "node.started",
            "payload": {"i": seq, **payload},
            "timestamp": ports.clock.iso(),
            "sequence": seq,
            "schemaVersion": 1,
        }
        for seq in range(lo, lo + n)
    ]


def _head(ports: Any, run_id: str) -> dict[str, Any]:
    """The run item as stored."""
    return ports.runs._c.get_item(
        TableName=ports.settings.runs_table,
        Key={"pk": {"S": run_id}, "sk": {"S": schema.RUN_SK}},
        ConsistentRead=True,
    )["Item"]


def _keys(ports: Any, run_id: str) -> list[int]:
    items = ports.events._c.query(
        TableName=ports.settings.events_table,
        KeyConditionExpression="runId = :r",
        ExpressionAttributeValues={":r": {"S": run_id}},
        ConsistentRead=True,
    )["Items"]
    return [int(i["seq"]["N"]) for i in items]


def test_middle_pages_go_plain_and_a_reader_of_an_open_tail_reads_past_the_head(ports):
    # Given a task's first append, a transaction that opens the tail
    rec = _run(ports)
    ev = ports.events
    with requests_sent(ev._c, "TransactWriteItems") as txs:
        assert ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 99), open_tail=True) == 98
    assert len(naming(txs, rec.run_id)) == 1 and _head(ports, rec.run_id)[schema.OPEN_TAIL] == {"BOOL": True}
    # When its next two pages go plain
    with (
        requests_sent(ev._c, "PutItem", ports.settings.events_table) as puts,
        requests_sent(ev._c, "TransactWriteItems") as txs,
    ):
        assert ev.append_events(rec.run_id, 99, _evs(ports, rec.run_id, 99, 150), plain=True) == 248
    # Then each page is one conditional put and the head is not written
    conditions = [p["ConditionExpression"] for p in naming(puts, rec.run_id)]
    assert conditions == ["attribute_not_exists(seq)"] * 2 and naming(txs, rec.run_id) == []
    assert _head(ports, rec.run_id)["lastSeq"] == {"N": "98"}
    # And a reader of the run reads the log's tail past the head
    assert ports.runs.get_run(rec.run_id).last_seq == 248
    assert [e["sequence"] for e in ev.read_events(rec.run_id)] == list(range(249))
    # When the task's last append, a transaction, closes the tail
    assert ev.append_events(rec.run_id, 249, _evs(ports, rec.run_id, 249, 3), run_updates={"status": "running"}) == 251
    # Then the head is the log's end again, the tail closed, and a read of the run reads the run's items only
    head = _head(ports, rec.run_id)
    assert head["lastSeq"] == {"N": "251"} and schema.OPEN_TAIL not in head
    with requests_sent(ev._c, "Query", ports.settings.events_table) as reads:
        assert ports.runs.get_run(rec.run_id).last_seq == 251
    assert naming(reads, rec.run_id) == []
    assert _keys(ports, rec.run_id) == [0, 99, 198, 249]
    # And a known-length read of the log (a suite's source) starts from its page keyed 0 and reads on past it
    with requests_sent(ev._c, "BatchGetItem") as batches:
        logs = ev.read_logs({rec.run_id: 251})
    assert [e["sequence"] for e in logs[rec.run_id]] == list(range(252)) and len(naming(batches, rec.run_id)) == 1


def test_a_writer_whose_tail_is_stale_collides_and_writes_nothing(ports):
    # Given a log whose task opened the tail and put a page past the head
    rec = _run(ports)
    ev = ports.events
    ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 10), open_tail=True)
    ev.append_events(rec.run_id, 10, _evs(ports, rec.run_id, 10, 10), plain=True)
    before = _keys(ports, rec.run_id)
    # When writers append from the head (10), from inside a page (5) and plainly from the head
    for nxt, kw in ((10, {}), (10, {"plain": True}), (10, {"run_updates": {"status": "running"}})):
        with pytest.raises(ConflictError):
            ev.append_events(rec.run_id, nxt, _evs(ports, rec.run_id, nxt, 3, stale=True), **kw)
    # Then each collided and nothing of theirs is stored: the log is the first writer's, whole
    assert _keys(ports, rec.run_id) == before
    got = ev.read_events(rec.run_id)
    assert [e["sequence"] for e in got] == list(range(20)) and not any(e["payload"].get("stale") for e in got)
    # And the head never moved past the tail it guarded
    assert _head(ports, rec.run_id)["lastSeq"] == {"N": "9"}


def test_a_cancel_at_the_tail_stops_the_tasks_next_page(ports):
    # Given a running task that opened the tail and put pages past the head, and a cancel requested
    from shared.services.runs import finish_cancel

    rec = _run(ports)
    ev = ports.events
    ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 5), open_tail=True)
    ev.append_events(rec.run_id, 5, _evs(ports, rec.run_id, 5, 99), plain=True)
    assert ports.runs.update_status(rec.run_id, "cancelling", allowed_from=("running",))
    # When the cancel appends its events
    finish_cancel(ports, rec.run_id)
    # Then they follow the task's pages, the run is cancelled and its tail closed
    got = ev.read_events(rec.run_id)
    assert [e["sequence"] for e in got] == list(range(105)) and got[-1]["type"] == "run.cancelled"
    done = ports.runs.get_run(rec.run_id)
    assert (done.status, done.last_seq) == ("cancelled", 104)
    assert schema.OPEN_TAIL not in _head(ports, rec.run_id)
    # And the task's next plain page collides with the cancel's: nothing lands after run.cancelled
    with pytest.raises(ConflictError):
        ev.append_events(rec.run_id, 104, _evs(ports, rec.run_id, 104, 3), plain=True)
    assert ev.read_events(rec.run_id)[-1]["type"] == "run.cancelled" and len(ev.read_events(rec.run_id)) == 105


def test_an_erasure_takes_the_pages_a_task_put_after_it(ports):
    # Given a task that opened the tail and put a page, and its run erased meanwhile (run item and log deleted)
    from shared.engine.workflowrun import _after_conflict
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.services.erasure import erase_now

    rec = _run(ports)
    ev = ports.events
    ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 5), open_tail=True)
    erase_now(ports, rec.run_id)
    # (the runs table's stream hands the erasure hook the run item's removal: it erases the log again, so the task's
    # page is put once the hook is done, or the hook would take it before the task does)
    assert wait_for_stream_idle(20)
    assert _keys(ports, rec.run_id) == []
    # When the task goes on: a plain page lands (a put checks no run item), its last append finds the run gone
    ev.append_events(rec.run_id, 5, _evs(ports, rec.run_id, 5, 10), plain=True)
    assert _keys(ports, rec.run_id) == [5]
    with pytest.raises(RunGoneError):
        ev.append_events(rec.run_id, 15, _evs(ports, rec.run_id, 15, 2), run_updates={"status": "running"})
    # Then the task, having opened the tail, deletes the log again: nothing of the erased run is left
    assert _after_conflict(ports, rec.run_id, True)["next"] == "done"
    assert _keys(ports, rec.run_id) == []
    late = _late(ports, rec.run_id)
    assert late is not None and late["status"] == "RUNNING"  # and the late writes' execution waits, as below
    ports.orchestrator.stop(late["executionArn"])


def test_a_log_begun_keyed_by_last_sequences_reads_whole_across_the_change(ports):
    # Given a run whose first 150 events were stored in the older layout (pages keyed by their last sequence, the
    # first page's first sequence in ``first``) and whose next 100 in today's
    import zlib

    rec = _run(ports)
    ev = ports.events
    older = _evs(ports, rec.run_id, 0, 150)
    for lo, hi in ((0, 98), (99, 148), (149, 149)):
        texts = [json.dumps(e, separators=(",", ":")) for e in older[lo : hi + 1]]
        item: dict[str, Any] = {
            "runId": {"S": rec.run_id},
            "seq": {"N": str(hi)},
            schema.TTL_ATTRIBUTE: {"N": str(rec.expires_at)},
            "page": {"B": zlib.compress(("[" + ",".join(texts) + "]").encode())},
        }
        if lo != hi:
            item["first"] = {"N": str(lo)}
        ev._c.put_item(TableName=ports.settings.events_table, Item=item)
    ports.runs.set_progress(rec.run_id, -1, 149, {})
    ev.append_events(rec.run_id, 150, _evs(ports, rec.run_id, 150, 100))
    assert _keys(ports, rec.run_id) == [98, 148, 149, 150, 249]

    # Then every read finds each event once, in order: whole, from inside an older page, across the change, by poll,
    # settled, and as a known-length log
    def seqs(events: list[dict[str, Any]]) -> list[int]:
        return [e["sequence"] for e in events]

    assert seqs(ev.read_events(rec.run_id)) == list(range(250))
    assert seqs(ev.read_events(rec.run_id, 120, limit=40)) == list(range(121, 161))
    assert seqs(ev.read_page(rec.run_id, 100)) == list(range(101, 250))
    assert seqs(ev.read_events(rec.run_id, 140, limit=5, settled=True)) == list(range(141, 146))
    assert seqs(ev.read_events(rec.run_id, 10, limit=3)) == [11, 12, 13]
    assert seqs(ev.read_logs({rec.run_id: 249})[rec.run_id]) == list(range(250))
    # And an append at a stale position of the older pages is refused by the head
    with pytest.raises(ConflictError):
        ev.append_events(rec.run_id, 120, _evs(ports, rec.run_id, 120, 2))


def _late(ports: Any, run_id: str) -> dict[str, Any] | None:
    """The execution that erases the run's late writes (decision 0179), described; None if none was started."""
    from shared.orchestration.step_functions import execution_name
    from shared.services.erasure import LATE_WRITES

    sfn = ports.orchestrator._c
    arn = ports.orchestrator._machines["timer"].replace(":stateMachine:", ":execution:")
    try:
        return dict(sfn.describe_execution(executionArn=f"{arn}:{execution_name(run_id, LATE_WRITES)}"))
    except sfn.exceptions.ExecutionDoesNotExist:
        return None


def test_a_run_erased_while_its_task_may_write_has_its_late_writes_erased_once_none_can(ports):
    # Given a task that opened the tail of a run and put a plain page, and another run's task likewise
    from functions.tasks.fail_run.handler import lambda_handler as fail_run
    from shared import manifest
    from shared.clock import ms_from_iso
    from shared.local.context import LambdaContext
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.services.erasure import request_erasure

    rec, kept = _run(ports), _run(ports)
    ev = ports.events
    for r in (rec, kept):
        ev.append_events(r.run_id, 0, _evs(ports, r.run_id, 0, 5), open_tail=True)
        ev.append_events(r.run_id, 5, _evs(ports, r.run_id, 5, 5), plain=True)
    # When the first run is erased (its execution stopped, its item removed: the runs table's stream hands the
    # erasure hook its REMOVE record, whose old image says it was running)
    before = ports.clock.now_ms()
    request_erasure(ports, rec.run_id)
    assert wait_for_stream_idle(20)
    after = ports.clock.now_ms()
    # Then its log is erased, and an execution of its own (the timer machine's) waits until no task of it can write:
    # its input the run id, that moment (the longest task function's timeout and a minute, from the hook's clock) and
    # the task the fail_run function is then given
    assert _keys(ports, rec.run_id) == []
    late = _late(ports, rec.run_id)
    assert late is not None and late["status"] == "RUNNING"
    given = json.loads(late["input"])
    assert set(given) == {"runId", "at", "task"} and given["runId"] == rec.run_id
    assert given["task"] == {"runId": rec.run_id, "lateWrites": True}
    end = ms_from_iso(given["at"])
    assert manifest.TASK_WRITES_END_S == 360
    assert before + 360_000 <= end <= after + 360_000
    # And a page the task put after the erasure, before it died, goes when that execution's task runs; a run with no
    # tombstone is left as it is
    ev.append_events(rec.run_id, 10, _evs(ports, rec.run_id, 10, 5), plain=True)
    assert _keys(ports, rec.run_id) == [10]
    context = LambdaContext("openwop-fail-run")
    late_task = given["task"]  # what the execution's Act task sends
    assert fail_run(late_task, context) == {"runId": rec.run_id, "erased": True}
    assert fail_run({**late_task, "runId": kept.run_id}, context) == {"runId": kept.run_id, "erased": False}
    assert ports.runs.get_run(kept.run_id).status == "running"  # a late-writes task fails no run
    assert _keys(ports, rec.run_id) == [] and _keys(ports, kept.run_id) == [0, 5]
    ports.orchestrator.stop(late["executionArn"])


def test_an_ended_run_erased_starts_no_late_writes_execution(ports):
    # Given a run that ended (no task of it can write) and one still running
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.services.erasure import request_erasure

    ended, running = stored_run(ports, "r-plain", "completed"), _run(ports)
    # When both are erased
    request_erasure(ports, ended.run_id)
    request_erasure(ports, running.run_id)
    assert wait_for_stream_idle(20)
    # Then only the running one's late writes are waited for
    late = _late(ports, running.run_id)
    assert _late(ports, ended.run_id) is None and late is not None
    ports.orchestrator.stop(late["executionArn"])


def test_the_late_writes_execution_deletes_what_landed_after_the_erasure(ports):
    # Given an erased run (its tombstone, its items gone) and a page its task put after the erasure's sweep
    from shared.local.sfn_patches import fast_waits
    from shared.services import erasure
    from tests.helpers import unique, wait_for_execution

    run_id = f"tenant-c/{unique('r-late')}"
    ports.runs.write_tombstone(run_id, "tenant-c", ports.clock.iso(), ports.clock.now_ms() // 1000 + 86400)
    ports.events.append_events(run_id, 7, _evs(ports, run_id, 7, 3), plain=True)
    assert _keys(ports, run_id) == [7]
    # When its late writes' execution runs through the run state machine (its wait passed at once)
    with fast_waits():
        erasure._after_tasks(ports, run_id)
        late = _late(ports, run_id)
        assert late is not None
        done = wait_for_execution(ports.orchestrator._c, late["executionArn"], timeout=60)
    # Then it succeeded and nothing of the run's log is left
    assert done["status"] == "SUCCEEDED"
    assert _keys(ports, run_id) == []


def test_the_fan_out_reads_no_run_for_a_plain_page_of_a_tenant_without_subscribers(ports):
    # Given a run of a tenant this process knows has no webhook subscription, and a plain page of its open tail
    from functions.fanout_webhooks.handler import lambda_handler
    from shared.local.context import LambdaContext
    from shared.services import stream_interest
    from tests.helpers import unique

    rec = stored_run(ports, "r-plain", tenant=unique("quiet"))
    assert stream_interest.read(ports, rec.tenant).subscriptions == []  # its answer is kept (2 s)
    ev = ports.events
    with requests_sent(ev._c, "PutItem", ports.settings.events_table) as puts:
        ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 5), open_tail=True)
        ev.append_events(rec.run_id, 5, _evs(ports, rec.run_id, 5, 5), plain=True)
    (page,) = [p["Item"] for p in puts]
    record = {
        "eventName": "INSERT",
        "dynamodb": {"Keys": {"runId": page["runId"], "seq": page["seq"]}, "NewImage": page, "SequenceNumber": "1"},
    }
    # When the events table's stream hands the fan-out that page
    with (  # (batch requests name their tables inside: each run's are found by its id)
        requests_sent(ports.runs._c, "BatchGetItem") as gets,
        requests_sent(ports.runs._c, "Query", ports.settings.runs_table) as queries,
        requests_sent(ev._c, "BatchWriteItem") as deletes,
    ):
        answer = lambda_handler({"Records": [record]}, LambdaContext("openwop-fanout-webhooks"))
    # Then it is done without reading the run (an erased run's late pages go by its own execution, decision 0179)
    # and without writing the log
    assert answer == {"batchItemFailures": []}
    assert naming(gets, rec.run_id) == [] and naming(queries, rec.run_id) == [] and naming(deletes, rec.run_id) == []
    assert _keys(ports, rec.run_id) == [0, 5]


def test_a_listing_of_runs_with_open_tails_reads_no_log(ports):
    # Given a run whose task opened the tail and put a page past the head
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 5), open_tail=True)
    ports.events.append_events(rec.run_id, 5, _evs(ports, rec.run_id, 5, 5), plain=True)
    # When the tenant's runs are listed, and the run is read
    with requests_sent(ports.events._c, "Query", ports.settings.events_table) as reads:
        listed = ports.runs.list_runs("tenant-c", 100, None, {})
        assert rec.run_id in [r.run_id for r in listed.runs]
    # Then the listing read no log (a snapshot names no sequence); a read of the run reads past the head, once
    assert naming(reads, rec.run_id) == []
    with requests_sent(ports.events._c, "Query", ports.settings.events_table) as reads:
        assert ports.runs.get_run(rec.run_id).last_seq == 9
    mine = naming(reads, rec.run_id)
    assert len(mine) == 1 and mine[0]["ScanIndexForward"] is False and mine[0]["Limit"] == 1


def test_an_append_of_no_events_leaves_an_open_tail_open_unless_its_opener_closes_it(ports):
    # Given a task that opened the tail and put a page past the head
    rec = _run(ports)
    ev = ports.events
    ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 5), open_tail=True)
    ev.append_events(rec.run_id, 5, _evs(ports, rec.run_id, 5, 5), plain=True)
    # When another writer stores run updates with no events (it cannot know the task has finished)
    ev.append_events(rec.run_id, 10, [], run_updates={"cursor": {"at": 9}})
    # Then the tail stays open: a reader still reads past the head
    assert _head(ports, rec.run_id)[schema.OPEN_TAIL] == {"BOOL": True}
    assert ports.runs.get_run(rec.run_id).last_seq == 9
    # And when the task that opened it ends with no events of its own, its append closes it at the log's end
    ev.append_events(rec.run_id, 10, [], run_updates={"cursor": {"at": 10}}, open_tail=False)
    head = _head(ports, rec.run_id)
    assert head["lastSeq"] == {"N": "9"} and schema.OPEN_TAIL not in head


def test_every_append_request_is_one_dynamodb_accepts(ports):
    # Given appends of every kind: a bare one, one that opens the tail, a plain one, one with run updates and a
    # status guard, and an opener's close with no events
    rec = _run(ports)
    ev = ports.events
    with (
        requests_sent(ev._c, "TransactWriteItems") as txs,
        requests_sent(ev._c, "PutItem", ports.settings.events_table) as puts,
    ):
        ev.append_events(rec.run_id, 0, _evs(ports, rec.run_id, 0, 3))
        ev.append_events(rec.run_id, 3, _evs(ports, rec.run_id, 3, 3), open_tail=True)
        ev.append_events(rec.run_id, 6, _evs(ports, rec.run_id, 6, 3), plain=True)
        ev.append_events(
            rec.run_id, 9, _evs(ports, rec.run_id, 9, 3), run_updates={"status": "running"}, require_status=("running",)
        )
        ev.append_events(rec.run_id, 12, [], run_updates={"cursor": {"at": 11}}, open_tail=False)
    # Then each request's expression maps are non-empty and every placeholder in them is used (DynamoDB refuses an
    # empty map or an unused name or value; moto lets both pass)
    writes = [next(iter(i.values())) for t in naming(txs, rec.run_id) for i in t["TransactItems"]]
    writes += naming(puts, rec.run_id)
    assert len(writes) >= 9
    for w in writes:
        text = " ".join(str(w.get(k, "")) for k in ("UpdateExpression", "ConditionExpression"))
        for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            if field in w:
                assert w[field] and all(placeholder in text for placeholder in w[field]), (field, w)
