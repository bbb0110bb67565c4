"""The DynamoDB/S3 storage contract on moto: the rules the engine and services rely on."""

from __future__ import annotations

import json
import threading

import pytest

from shared.errors import ConflictError, RunGoneError
from shared.ports import RunRecord, ToolCallRecord
from tests.helpers import unique


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _record(ports, tenant="tenant-c", expires_at=None, status="running") -> RunRecord:
    """A new run's record, not stored."""
    return RunRecord(
        run_id=f"{tenant}/{unique('r-contract')}",
        tenant=tenant,
        status=status,
        last_seq=-1,
        created_at=ports.clock.iso(),
        data={"kind": "workflow", "owner": {"tenant": tenant}},
        expires_at=expires_at if expires_at is not None else ports.clock.now_ms() // 1000 + 3600,
    )


def _run(ports, tenant="tenant-c", expires_at=None) -> RunRecord:
    rec = _record(ports, tenant, expires_at)
    ports.runs.create_run(rec)
    return rec


def _ev(ports, run_id, seq, **payload):
    return {
        "eventId": ports.ids.event_id(run_id, seq),
        "runId": run_id,
        "type": "node.started",
        "payload": payload,
        "timestamp": ports.clock.iso(),
        "sequence": seq,
        "schemaVersion": 1,
    }


def test_two_writers_racing_never_leave_a_gap_or_a_duplicate(ports):
    # Given one run and two writers that each append 40 events, re-reading the head on every conflict
    rec = _run(ports)
    wins = {"w1": 0, "w2": 0}
    conflicts = {"w1": 0, "w2": 0}
    barrier = threading.Barrier(2)

    def writer(name: str) -> None:
        barrier.wait()
        done = 0
        while done < 40:
            head = ports.runs.get_run(rec.run_id).last_seq
            try:
                ports.events.append_events(rec.run_id, head + 1, [_ev(ports, rec.run_id, head + 1, writer=name)])
                done += 1
                wins[name] += 1
            except ConflictError:
                conflicts[name] += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then the log is exactly 0..79, each sequence once, and the run item agrees
    events = ports.events.read_events(rec.run_id)
    assert [e["sequence"] for e in events] == list(range(80))
    assert sorted(e["payload"]["writer"] for e in events).count("w1") == wins["w1"] == 40
    assert ports.runs.get_run(rec.run_id).last_seq == 79


def test_same_sequence_exactly_one_wins(ports):
    rec = _run(ports)
    results: list[str] = []
    barrier = threading.Barrier(2)

    def go(name: str) -> None:
        barrier.wait()
        try:
            ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0, who=name)])
            results.append("won")
        except ConflictError:
            results.append("lost")

    ts = [threading.Thread(target=go, args=(n,)) for n in ("a", "b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(results) == ["lost", "won"]
    assert len(ports.events.read_events(rec.run_id)) == 1


def test_a_batch_is_all_or_nothing(ports):
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0)])
    with pytest.raises(ConflictError):  # expected head is wrong: nothing of the batch lands
        ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0), _ev(ports, rec.run_id, 1)])
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == [0]


def test_appends_require_the_run_to_be_writable(ports):
    rec = _run(ports)
    ports.runs.update_status(rec.run_id, "cancelling", allowed_from=("running",))
    with pytest.raises(ConflictError):
        ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0)], require_status=("running",))
    assert ports.events.read_events(rec.run_id) == []


def test_more_than_one_transaction_of_events_stays_contiguous(ports):
    rec = _run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, i) for i in range(250)])
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == list(range(250))


def test_large_payloads_go_to_s3_and_read_back(ports):
    rec = _run(ports)
    big = "x" * 400_000
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0, blob=big)])
    got = ports.events.read_events(rec.run_id)
    assert got[0]["payload"]["blob"] == big
    assert ports.blobs.list_keys(f"runs/{rec.run_id}/events/") == [f"runs/{rec.run_id}/events/000000000000.json"]


def test_a_late_write_for_an_erased_run_is_refused(ports):
    rec = _run(ports)
    ports.runs.write_tombstone(rec.run_id, rec.tenant, ports.clock.iso(), ports.clock.now_ms() // 1000 + 60)
    ports.runs.delete_run_item(rec.run_id)
    with pytest.raises(RunGoneError):
        ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0)])
    call = ToolCallRecord(
        run_id=rec.run_id,
        call_key="x#00000",
        agent_id="a",
        invocation_id="i",
        delegate=False,
        tool_name="t",
        call_id="i#0",
        args={},
        status="ok",
    )
    with pytest.raises(RunGoneError):
        ports.tool_calls.put_call(call, 0)
    assert ports.events.read_events(rec.run_id) == [] and ports.tool_calls.list_calls(rec.run_id) == []


def test_a_fork_and_its_lineage_link_are_written_together_only_while_the_parent_is_not_erased(ports):
    from shared.keys import CHILD_PREFIX

    def fork_of(parent: RunRecord) -> RunRecord:
        return RunRecord(
            run_id=f"{parent.tenant}/{unique('r-contract')}",
            tenant=parent.tenant,
            status="running",
            last_seq=-1,
            created_at=ports.clock.iso(),
            started_at=ports.clock.iso(),
            data={"kind": "workflow", "owner": {"tenant": parent.tenant}},
            expires_at=parent.expires_at,
        )

    # Given a parent, a fork of it is created with its link under the parent and its start time listed
    parent = _run(ports)
    child = fork_of(parent)
    ports.runs.create_run(child, parent=parent.run_id)
    assert ports.runs.query_aux(parent.run_id, CHILD_PREFIX) == [
        (f"{CHILD_PREFIX}{child.run_id}", {"runId": child.run_id})
    ]
    got = ports.runs.get_run(child.run_id)
    assert got is not None and got.started_at == child.started_at and got.status == "running"
    # When the parent is erased (its tombstone written), a second fork is refused and writes nothing: no run, no link
    ports.runs.write_tombstone(parent.run_id, parent.tenant, ports.clock.iso(), ports.clock.now_ms() // 1000 + 60)
    late = fork_of(parent)
    with pytest.raises(RunGoneError):
        ports.runs.create_run(late, parent=parent.run_id)
    assert ports.runs.get_run(late.run_id) is None
    assert [sk for sk, _ in ports.runs.query_aux(parent.run_id, CHILD_PREFIX)] == [f"{CHILD_PREFIX}{child.run_id}"]


def test_an_expired_run_reads_as_gone_before_ttl_deletes_it(ports):
    rec = _run(ports, expires_at=ports.clock.now_ms() // 1000 - 1)
    assert ports.runs.get_run(rec.run_id) is None
    listed = ports.runs.list_runs(rec.tenant, 100, None, {}).runs
    assert rec.run_id not in [r.run_id for r in listed]


def test_a_create_takes_its_tenant_s_slot_in_its_transaction_or_writes_nothing(ports):
    # Given a tenant with a cap of one slot (decision 0182)
    from shared.errors import StagedRefusedError
    from tests.helpers import requests_sent

    tenant = unique("tenant-create-slot")
    first, second = _record(ports, tenant, status="pending"), _record(ports, tenant, status="pending")
    # When a run is created with its slot's take staged
    with requests_sent(ports.runs._c, "TransactWriteItems") as sent:
        ports.runs.create_run(first, fresh=True, staged=ports.slots.stage_take(tenant, first.run_id, 1))
    # Then one transaction wrote the run and took the slot
    assert len(sent) == 1 and ports.runs.get_run(first.run_id) is not None
    assert ports.slots.holders(tenant) == [first.run_id] and ports.slots.in_flight(tenant) == 1
    # When another is created while none is free, the create is refused whole: no run item, no slot, the counter kept
    with pytest.raises(StagedRefusedError):
        ports.runs.create_run(second, fresh=True, staged=ports.slots.stage_take(tenant, second.run_id, 1))
    assert ports.runs.get_run(second.run_id) is None and ports.runs.get_status(second.run_id) is None
    assert ports.slots.holders(tenant) == [first.run_id] and ports.slots.in_flight(tenant) == 1
    # And once the first gives its slot back, the second's create takes it
    assert ports.slots.release(tenant, first.run_id) == "free"
    ports.runs.create_run(second, fresh=True, staged=ports.slots.stage_take(tenant, second.run_id, 1))
    assert ports.slots.holders(tenant) == [second.run_id] and ports.slots.in_flight(tenant) == 1


def test_tool_calls_are_write_once_and_ordered(ports):
    rec = _run(ports)
    for key in ("000000000003#00001", "000000000003#00000", "000000000009#00000"):
        assert ports.tool_calls.put_call(
            ToolCallRecord(
                run_id=rec.run_id,
                call_key=key,
                agent_id="a",
                invocation_id="i",
                delegate=False,
                tool_name="t",
                call_id=key,
                args={"k": key},
                status="ok",
                result=1,
            ),
            0,
        )
    again = ToolCallRecord(
        run_id=rec.run_id,
        call_key="000000000003#00000",
        agent_id="a",
        invocation_id="i",
        delegate=False,
        tool_name="t",
        call_id="x",
        args={},
        status="error",
    )
    assert ports.tool_calls.put_call(again, 0) is False
    calls = ports.tool_calls.list_calls(rec.run_id)
    assert [c.call_key for c in calls] == ["000000000003#00000", "000000000003#00001", "000000000009#00000"]
    assert calls[0].status == "ok"


def test_calls_a_settled_log_names_are_read_eventually_consistently_and_again_when_one_is_not_shown(ports):
    # Given a run with three call records, one of them large (its document in S3)
    from tests.helpers import lagging_queries, requests_sent

    rec = _run(ports)
    keys = ("000000000001#00000", "000000000001#00001", "000000000002#00000")
    for key in keys:
        big = "x" * 500_000 if key == keys[1] else ""
        call = _counted(rec, key)
        call.args = {"k": key, "big": big}
        assert ports.tool_calls.put_call(call, 0)
    hidden: set[str] = set()  # call keys an eventually consistent read does not show yet
    client = ports.tool_calls._c
    with lagging_queries(client, lambda i: "callKey" in i and i["callKey"]["S"] in hidden):
        # When every call the log names shows, one eventually consistent Query reads them
        with requests_sent(client, "Query", ports.tool_calls._t) as sent:
            got = ports.tool_calls.list_calls(rec.run_id, named=list(keys[:2]))
        assert [c.call_key for c in got] == list(keys) and got[1].args["big"] == "x" * 500_000
        assert [q["ConsistentRead"] for q in sent] == [False]
        # When a call it names is not shown yet, they are read again consistently, each once, in key order
        hidden.add(keys[1])
        with requests_sent(client, "Query", ports.tool_calls._t) as sent:
            got = ports.tool_calls.list_calls(rec.run_id, named=list(keys))
        assert [c.call_key for c in got] == list(keys) and got[1].args["big"] == "x" * 500_000
        assert [q["ConsistentRead"] for q in sent] == [False, True]
        # And one it does not name is not waited for: what shows is the answer; without names, a consistent read
        assert [c.call_key for c in ports.tool_calls.list_calls(rec.run_id, named=[keys[0]])] == [keys[0], keys[2]]
        with requests_sent(client, "Query", ports.tool_calls._t) as sent:
            assert len(ports.tool_calls.list_calls(rec.run_id)) == 3
        assert [q["ConsistentRead"] for q in sent] == [True]


def _counted(rec: RunRecord, call_key: str) -> ToolCallRecord:
    return ToolCallRecord(
        run_id=rec.run_id,
        call_key=call_key,
        agent_id="a",
        invocation_id="i",
        delegate=False,
        tool_name="conformance.eval:counter",
        call_id=call_key,
        args={"op": "inc"},
        status="ok",
    )


def test_a_counter_moves_once_per_call_record_in_one_write(ports):
    rec = _run(ports)
    counter = ("COUNTER#tenant-c", unique("k"))
    # The first increment from a known count writes the record and moves the count
    assert ports.tool_calls.put_counted_call(_counted(rec, "c#00000"), 0, counter, 0) == ("written", 1)
    # A retried call finds its record: nothing moves
    assert ports.tool_calls.put_counted_call(_counted(rec, "c#00000"), 0, counter, 1) == ("recorded", None)
    # A stale guess writes nothing and is told the current count
    assert ports.tool_calls.put_counted_call(_counted(rec, "c#00001"), 0, counter, 0) == ("stale", 1)
    assert ports.tool_calls.get_call(rec.run_id, "c#00001") is None
    assert ports.tool_calls.put_counted_call(_counted(rec, "c#00001"), 0, counter, 1) == ("written", 2)
    assert ports.host.counter_read(*counter) == 2
    assert [c.call_key for c in ports.tool_calls.list_calls(rec.run_id)] == ["c#00000", "c#00001"]


def test_a_tombstone_keeps_no_run_id_and_still_refuses_the_erased_id(ports, local_aws):
    from shared.storage.ddb import Tombstones

    # Given an id erased before its run exists (a fork whose source is being erased) and an erased run
    early = RunRecord(
        run_id=f"tenant-c/{unique('r-early')}",
        tenant="tenant-c",
        status="running",
        last_seq=-1,
        created_at=ports.clock.iso(),
        data={"kind": "workflow", "owner": {"tenant": "tenant-c"}},
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.write_tombstone(early.run_id, early.tenant, ports.clock.iso(), ports.clock.now_ms() // 1000 + 60)
    rec = _run(ports)
    ports.runs.write_tombstone(rec.run_id, rec.tenant, ports.clock.iso(), ports.clock.now_ms() // 1000 + 60)
    ports.runs.delete_run_item(rec.run_id)
    ports.runs.delete_aux_all(rec.run_id)  # what the erasure hook does next (here, not raced by it)
    # When the run is created, and a late write for the erased run comes
    with pytest.raises(RunGoneError):
        ports.runs.create_run(early)
    with pytest.raises(RunGoneError):
        ports.runs.put_aux(rec.run_id, "LATE#1", {"x": 1}, 0)
    # Then both are refused and both read as tombstoned
    assert ports.runs.is_tombstoned(early.run_id) and ports.runs.is_tombstoned(rec.run_id)
    # and no item of the runs table holds either id: each tombstone sits under a keyed hash of it, with its tenant
    # and time only
    ddb = local_aws.client("dynamodb")
    items = [
        i for page in ddb.get_paginator("scan").paginate(TableName=ports.settings.runs_table) for i in page["Items"]
    ]
    assert not [i for i in items if early.run_id in json.dumps(i) or rec.run_id in json.dumps(i)]
    tombstones = [
        i
        for i in items
        if i["sk"]["S"] == "TOMBSTONE"
        and i["pk"]
        in (
            Tombstones(lambda: ports.secrets.get_secret(ports.settings.tombstone_secret_id)).key(r)["pk"]
            for r in (early.run_id, rec.run_id)
        )
    ]
    assert len(tombstones) == 2
    assert all(set(t) == {"pk", "sk", "tenant", "erasedAt", "expiresAt"} for t in tombstones)
    # and under another key the hash names another item: the stored key says nothing without the secret
    assert Tombstones(lambda: "another secret").key(rec.run_id) not in [
        {"pk": t["pk"], "sk": t["sk"]} for t in tombstones
    ]


@pytest.mark.parametrize("stop", ["cancelling", "cancelled", "completed", "erased"])
def test_effects_are_written_only_while_the_run_is_writable(ports, stop):
    # Given a run that stopped being writable (cancel requested, terminal, or erased)
    rec = _run(ports)
    if stop == "erased":
        ports.runs.write_tombstone(rec.run_id, "tenant-c", ports.clock.iso(), 0)
        ports.runs.delete_run_item(rec.run_id)
    else:
        assert ports.runs.update_status(rec.run_id, stop, allowed_from=("running",))
    pk, key = "COUNTER#tenant-c", unique("k")
    # When any effect is attempted for it
    with pytest.raises(ConflictError):
        ports.tool_calls.put_counted_call(_counted(rec, "c#00000"), 0, (pk, key), 0)
    with pytest.raises(ConflictError):
        ports.host.put_effect("LEDGER#tenant-c", f"{rec.run_id}#n#000001", {"x": 1}, run_id=rec.run_id, expires_at=0)
    with pytest.raises(ConflictError):
        ports.runs.claim_effect(rec.run_id, "n#000001", {"x": 1}, 0)
    # Then nothing was written
    assert ports.host.counter_read(pk, key) == 0 and ports.tool_calls.list_calls(rec.run_id) == []
    assert ports.host.query("LEDGER#tenant-c", rec.run_id) == []
    assert ports.runs.query_aux(rec.run_id, "EFFECT#") == []


def test_an_effect_row_is_written_once_per_key_while_writable(ports):
    rec = _run(ports)
    args = {"run_id": rec.run_id, "expires_at": rec.expires_at}
    assert ports.host.put_effect("LEDGER#tenant-c", f"{rec.run_id}#n#000001", {"x": 1}, **args) is True
    assert ports.host.put_effect("LEDGER#tenant-c", f"{rec.run_id}#n#000001", {"x": 2}, **args) is False
    assert [v for _, v in ports.host.query("LEDGER#tenant-c", rec.run_id)] == [{"x": 1}]
    assert ports.runs.claim_effect(rec.run_id, "n#000001", {"x": 1}, rec.expires_at) is True
    assert ports.runs.claim_effect(rec.run_id, "n#000001", {"x": 1}, rec.expires_at) is False
    assert ports.host.delete_prefix("LEDGER#tenant-c", rec.run_id + "#") == 1
    assert ports.host.query("LEDGER#tenant-c", rec.run_id) == []


def test_an_effect_claim_is_taken_over_only_once_it_is_stale(ports):
    rec = _run(ports)

    def claim(at: str, stale: str) -> bool:
        return ports.runs.claim_effect(
            rec.run_id, "n#000001", {"seam": "http.fetch", "at": at}, rec.expires_at, stale_before=stale
        )

    # Given an effect claimed at 10:00
    assert claim("2026-01-01T10:00:00.000Z", "2026-01-01T09:55:00.000Z") is True
    # When another delivery tries while that claim is live (claims before 09:56 are stale), it is refused
    assert claim("2026-01-01T10:01:00.000Z", "2026-01-01T09:56:00.000Z") is False
    assert ports.runs.get_aux(rec.run_id, "EFFECT#n#000001")["at"] == "2026-01-01T10:00:00.000Z"
    # Then once the claim is older than the lease it is taken over, by one taker only
    assert claim("2026-01-01T10:06:00.000Z", "2026-01-01T10:01:00.000Z") is True
    assert claim("2026-01-01T10:06:00.001Z", "2026-01-01T10:01:00.001Z") is False
    assert ports.runs.get_aux(rec.run_id, "EFFECT#n#000001")["at"] == "2026-01-01T10:06:00.000Z"
    # and a claim that names no time (written before claims had one) counts as stale
    assert ports.runs.claim_effect(rec.run_id, "n#000002", {"x": 1}, rec.expires_at) is True
    assert (
        ports.runs.claim_effect(
            rec.run_id,
            "n#000002",
            {"at": "2026-01-01T10:00:00.000Z"},
            rec.expires_at,
            stale_before="2026-01-01T09:55:00.000Z",
        )
        is True
    )


def test_an_era_2_log_is_stored_verbatim_and_every_read_translates_it(ports):
    from shared.protocol.codemap import legacy_owner

    # Given a log in v1 vocabulary seeded through the store, one row large enough for S3
    rec = _run(ports)
    owner = legacy_owner(rec.tenant, "key-1")
    big = "x" * 400_000
    rows = [
        {
            "eventId": ports.ids.event_id(rec.run_id, 0),
            "runId": rec.run_id,
            "type": "run.started",
            "sequence": 0,
            "payload": {"workflowId": "w"},
            "timestamp": ports.clock.iso(),
        },
        {
            "eventId": ports.ids.event_id(rec.run_id, 1),
            "runId": rec.run_id,
            "type": "agent.toolCalled",
            "sequence": 1,
            "payload": {"big": big},
            "timestamp": ports.clock.iso(),
        },
    ]
    assert ports.events.seed_log(rec.run_id, rows, rec.expires_at, owner) == 2
    # Then the stored items keep the v1 types, marked era 2
    items = ports.events._c.query(
        TableName=ports.settings.events_table,
        KeyConditionExpression="runId = :r",
        ExpressionAttributeValues={":r": {"S": rec.run_id}},
    )["Items"]
    assert [i["era"]["N"] for i in items] == ["2", "2"] and "docRef" in items[1]
    assert json.loads(items[0]["doc"]["S"])["type"] == "run.started" and "owner" in items[0]
    assert ports.blobs.get_json(items[1]["docRef"]["S"])["type"] == "agent.toolCalled"
    # And every read (whole log, one page, a range) translates, S3-held rows included, run.started stamped
    for got in (
        ports.events.read_events(rec.run_id),
        ports.events.read_page(rec.run_id, -1),
        [e for page in ports.events.iter_events(rec.run_id, -1, 1) for e in page],
    ):
        assert [e["type"] for e in got] == ["run.started", "agent.tool-called"]
        assert got[0]["payload"] == {"workflowId": "w", "owner": owner} and got[1]["payload"] == {"big": big}
    # And a stream image of such a row is not decoded (readers go through the log)
    assert [event for _, event in ports.events.events_from_image(items[0])] == [None]


def test_get_runs_reads_many_runs_at_once_and_leaves_out_absent_and_expired_ones(ports):
    # Given 120 runs (more than one BatchGetItem of 100), one expired, and an id that names no run
    live = [_run(ports) for _ in range(119)]
    expired = _run(ports, expires_at=ports.clock.now_ms() // 1000 - 10)
    ids = [r.run_id for r in live] + [expired.run_id, "tenant-c/" + "z" * 26]
    # When they are read together (an id repeated once)
    found = ports.runs.get_runs(ids + [live[0].run_id])
    with_expired = ports.runs.get_runs(ids, include_expired=True)
    # Then every live run comes back as get_run reads it, the expired one only when asked, the unknown one never
    assert set(found) == {r.run_id for r in live}
    assert found[live[7].run_id] == ports.runs.get_run(live[7].run_id)
    assert set(with_expired) == {r.run_id for r in live} | {expired.run_id}


def test_get_facts_reads_creation_facts_eventually_consistent_and_again_what_that_did_not_show(ports):
    # Given a run, one whose facts are in S3 (too large for the item), one of the older layout (facts on its run item,
    # no facts item) and an id that names no run
    from shared.storage import schema
    from tests.helpers import requests_sent

    small, large, older = _run(ports), _run(ports), _run(ports)
    big = {
        "kind": "workflow",
        "owner": {"tenant": "tenant-c"},
        "inputs": {"x": "y" * (schema.MAX_INLINE_RUN_DATA_BYTES + 1)},
    }
    ports.runs.create_run(RunRecord(**{**large.__dict__, "run_id": large.run_id + "-big", "data": big}))
    large_id = large.run_id + "-big"
    table, client = ports.settings.runs_table, ports.runs._c
    facts_key = {"pk": {"S": older.run_id}, "sk": {"S": schema.RUN_FACTS_SK}}
    data = client.get_item(TableName=table, Key=facts_key)["Item"]["data"]
    client.delete_item(TableName=table, Key=facts_key)
    client.update_item(
        TableName=table,
        Key={"pk": {"S": older.run_id}, "sk": {"S": schema.RUN_SK}},
        UpdateExpression="SET #d = :d",
        ExpressionAttributeNames={"#d": "data"},
        ExpressionAttributeValues={":d": data},
    )
    unknown = "tenant-c/" + "z" * 26
    # When their facts are read together
    with requests_sent(client, "BatchGetItem") as gets:
        got = ports.runs.get_facts([small.run_id, large_id, older.run_id, unknown])
    # Then each run's facts are its creation facts as get_run reads them, the unknown id's are left out
    assert got == {r: ports.runs.get_run(r).data for r in (small.run_id, large_id, older.run_id)}
    assert got[large_id]["inputs"]["x"] == "y" * (schema.MAX_INLINE_RUN_DATA_BYTES + 1)
    # and the facts items were read eventually consistent, those not shown again strongly consistent, and the older
    # layout's run items after them
    sent = [
        (not g.get("RequestItems", {}).get(table, {}).get("ConsistentRead"), g["RequestItems"][table]["Keys"])
        for g in gets
    ]
    assert [eventual for eventual, _ in sent] == [True, False, False]
    assert [k["sk"]["S"] for k in sent[0][1]] == [schema.RUN_FACTS_SK] * 4
    assert sorted(k["pk"]["S"] for k in sent[1][1]) == sorted([older.run_id, unknown])


def test_many_aux_items_are_written_except_under_an_erased_run_and_many_runs_are_read_by_key(ports):
    # Given 60 runs (more than one transaction of 50) with a state, a short log and a call record each, one erased
    recs = [_run(ports) for _ in range(60)]
    for rec in recs:
        ports.events.append_events(
            rec.run_id, 0, [_ev(ports, rec.run_id, n, n=n) for n in range(3)], run_updates={"state": {"folded": True}}
        )
        call = ToolCallRecord(
            run_id=rec.run_id,
            call_key="000000000002#00000",
            agent_id="a",
            invocation_id="i",
            delegate=False,
            tool_name="t",
            call_id="i#0",
            args={"n": 1},
            status="ok",
            result=1,
        )
        assert ports.tool_calls.put_call(call, rec.expires_at)
    erased = recs[55].run_id
    ports.runs.write_tombstone(erased, "tenant-c", ports.clock.iso(), recs[55].expires_at)
    # When an aux item is written under each in one call
    refused = ports.runs.put_aux_many([(r.run_id, "LINK#x", {"n": i}, r.expires_at) for i, r in enumerate(recs)])
    # Then only the erased run refused it: every other run holds its item (its transaction was sent again without it)
    assert refused == {erased}
    assert [ports.runs.get_aux(r.run_id, "LINK#x") for r in recs] == [
        None if r.run_id == erased else {"n": i} for i, r in enumerate(recs)
    ]
    assert ports.runs.tombstoned([r.run_id for r in recs]) == {erased}
    # and the logs and the call records of many runs are read by key, whatever run they belong to
    logs = ports.events.read_logs({r.run_id: 2 for r in recs[:40]})
    assert all([e["payload"]["n"] for e in logs[r.run_id]] == [0, 1, 2] for r in recs[:40])
    got = ports.tool_calls.get_calls([(r.run_id, "000000000002#00000") for r in recs] + [(erased, "missing")])
    assert (
        len(got) == 60 and got[(recs[0].run_id, "000000000002#00000")] == ports.tool_calls.list_calls(recs[0].run_id)[0]
    )
    # and runs read without their state (what a source check needs) come back without it
    ids = [r.run_id for r in recs[:3]]
    assert [ports.runs.get_runs(ids)[i].state for i in ids] == [{"folded": True}] * 3
    assert [
        (ports.runs.get_runs(ids, state=False)[i].state, ports.runs.get_runs(ids, state=False)[i].last_seq) for i in ids
    ] == [(None, 2)] * 3
