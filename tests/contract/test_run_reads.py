"""Issue 38 §3 on moto: a strongly consistent read of a run is one consistent Query of its items' key range (the
price of a plain read of their bytes together, not a transaction's twice nor each item's 4 KB: decisions 0161, 0171),
and a write that lands between the Query's item reads (a torn read: a new status beside the old state) is caught by
the state stamps and read again, never answered; a listing reads its runs with BatchGetItems, the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shared.ports import RunRecord
from shared.storage import runitems, runs, schema
from shared.storage.ddb import dump
from tests.helpers import requests_sent, unique

OLD_STATE = {"variables": {"step": 1}, "seq": 0}
NEW_STATE = {"variables": {"step": 2}, "seq": 1}


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _run(ports: Any) -> RunRecord:
    rec = RunRecord(
        run_id=f"tenant-r/{unique('r-read')}",
        tenant="tenant-r",
        status="running",
        last_seq=0,
        created_at=ports.clock.iso(),
        data={"kind": "workflow", "workflowId": "wf-read", "owner": {"tenant": "tenant-r"}, "inputs": {}},
        state=OLD_STATE,
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.create_run(rec)
    return rec


def _set(ports: Any, run_id: str, sk: str, fields: dict[str, dict[str, Any]]) -> None:
    """A raw write of some attributes of one of the run's items (half of an append's transaction)."""
    names = {f"#a{i}": k for i, k in enumerate(fields)}
    values = {f":a{i}": v for i, v in enumerate(fields.values())}
    ports.runs._c.update_item(
        TableName=ports.settings.runs_table,
        Key={"pk": {"S": run_id}, "sk": {"S": sk}},
        UpdateExpression="SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(fields))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
    )


def _run_half(ports: Any, run_id: str) -> None:
    """The run item's half of an append that completes the run and stores NEW_STATE."""
    stamp = runitems.stamp(dump(NEW_STATE))
    _set(
        ports, run_id, schema.RUN_SK, {"status": {"S": "completed"}, "lastSeq": {"N": "1"}, "stateStamp": {"S": stamp}}
    )


def _state_half(ports: Any, run_id: str) -> None:
    """The state item's half of the same append."""
    stamp = runitems.stamp(dump(NEW_STATE))
    _set(ports, run_id, schema.RUN_STATE_SK, {"state": {"S": dump(NEW_STATE)}, "stateStamp": {"S": stamp}})


def _of(run_id: str, params: dict[str, Any]) -> bool:
    """Whether a Query's, a BatchGetItem's or a TransactGetItems' parameters read ``run_id``'s items (the client is
    shared: the local stream's fan-out reads from its own thread meanwhile)."""
    keys = [k for r in params.get("RequestItems", {}).values() for k in r["Keys"]]
    keys += [i["Get"]["Key"] for i in params.get("TransactItems", [])]
    if "BETWEEN" in params.get("KeyConditionExpression", ""):
        keys.append({"pk": params["ExpressionAttributeValues"][":p"]})
    return any(k["pk"]["S"] == run_id for k in keys)


READS = ("Query", "BatchGetItem")  # a run's reads by its key range, a listing's by key


@contextmanager
def _between_reads(ports: Any, run_id: str, steps: dict[int, Callable[[], None]]) -> Iterator[None]:
    """Run ``steps[n]`` right after the n-th read (a Query or a BatchGetItem, 1-based) of ``run_id`` has read the
    run's items: a write landing between that read and the next, as an append's transaction lands between a read's
    item reads."""
    seen = [0]
    mark = f"run-read-{run_id}"

    def before(params: Any = None, context: Any = None, **_: Any) -> None:
        if _of(run_id, params or {}):
            context[mark] = True

    def after(context: Any = None, **_: Any) -> None:
        if not (context or {}).get(mark):
            return
        seen[0] += 1
        step = steps.get(seen[0])
        if step is not None:
            step()

    hooks = [(f"before-parameter-build.dynamodb.{op}", before) for op in READS]
    hooks += [(f"after-call.dynamodb.{op}", after) for op in READS]
    for event, hook in hooks:
        ports.runs._c.meta.events.register(event, hook)
    try:
        yield
    finally:
        for event, hook in hooks:
            ports.runs._c.meta.events.unregister(event, hook)


@contextmanager
def _reads(ports: Any, run_id: str) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """The Query, BatchGetItem and TransactGetItems requests of ``run_id``'s items the run store sends while inside."""
    c = ports.runs._c
    got: dict[str, list[dict[str, Any]]] = {"query": [], "batch": [], "transact": []}
    with (
        requests_sent(c, "Query") as query,
        requests_sent(c, "BatchGetItem") as batch,
        requests_sent(c, "TransactGetItems") as transact,
    ):
        yield got
    got["query"] += [p for p in query if _of(run_id, p)]
    got["batch"] += [p for p in batch if _of(run_id, p)]
    got["transact"] += [p for p in transact if _of(run_id, p)]


def test_a_consistent_read_of_a_run_is_one_consistent_query_of_its_items_and_no_transaction(ports):
    # Given a run whose state was written (its create, then an append that stores a new state)
    rec = _run(ports)
    ev = {"eventId": ports.ids.event_id(rec.run_id, 1), "runId": rec.run_id, "type": "node.started"}
    ev |= {"nodeId": "n", "payload": {"nodeId": "n"}, "timestamp": ports.clock.iso(), "sequence": 1}
    ports.events.append_events(rec.run_id, 1, [ev | {"schemaVersion": 1}], run_updates={"state": NEW_STATE})
    # When it is read strongly consistently
    with _reads(ports, rec.run_id) as sent:
        got = ports.runs.get_run(rec.run_id)
    # Then one Query, strongly consistent, of its items' key range answered it, and no other read
    assert len(sent["query"]) == 1 and sent["batch"] == sent["transact"] == []
    (query,) = sent["query"]
    assert query["ConsistentRead"] is True
    assert (query["ExpressionAttributeValues"][":a"], query["ExpressionAttributeValues"][":b"]) == (
        {"S": schema.RUN_SK},
        {"S": schema.RUN_STATE_SK},
    )
    assert got is not None and got.state == NEW_STATE and got.last_seq == 1 and got.status == "running"


def test_an_eventually_consistent_read_is_one_eventually_consistent_query(ports):
    rec = _run(ports)
    with _reads(ports, rec.run_id) as sent:
        got = ports.runs.get_run(rec.run_id, consistent=False)
    assert len(sent["query"]) == 1 and sent["batch"] == sent["transact"] == []
    assert sent["query"][0]["ConsistentRead"] is False
    assert got is not None and got.state == OLD_STATE


@pytest.mark.parametrize("first", ["run", "state"])
def test_a_write_between_the_item_reads_is_read_again_never_answered_torn(ports, first):
    # Given a run with its old state, and an append (new status, new state) whose first half has landed
    rec = _run(ports)
    halves = {"run": _run_half, "state": _state_half}
    halves[first](ports, rec.run_id)
    rest = halves["state" if first == "run" else "run"]
    # When it is read while the append's other half lands right after the first Query read the items
    with _reads(ports, rec.run_id) as sent, _between_reads(ports, rec.run_id, {1: lambda: rest(ports, rec.run_id)}):
        got = ports.runs.get_run(rec.run_id)
    # Then the torn pair (a new status beside the old state, or the reverse) was not answered: the read was asked
    # again and answered the whole append, still without a transaction
    assert len(sent["query"]) == 2 and sent["transact"] == []
    assert got is not None and (got.status, got.last_seq, got.state) == ("completed", 1, NEW_STATE)


def test_items_still_torn_after_the_batch_reads_are_read_in_a_transaction(ports):
    # Given a run item that moved to a new state whose state item has not landed yet
    rec = _run(ports)
    _run_half(ports, rec.run_id)
    # When it is read, and the state item lands only after the last Query
    with (
        _reads(ports, rec.run_id) as sent,
        _between_reads(ports, rec.run_id, {runs.CONSISTENT_BATCH_READS: lambda: _state_half(ports, rec.run_id)}),
    ):
        got = ports.runs.get_run(rec.run_id)
    # Then each Query read a torn pair and none was answered: one TransactGetItems read the whole append
    assert len(sent["query"]) == runs.CONSISTENT_BATCH_READS and len(sent["transact"]) == 1
    assert got is not None and (got.status, got.last_seq, got.state) == ("completed", 1, NEW_STATE)


def test_a_run_without_stamps_is_read_in_one_query(ports):
    # Given a run written before stamps (neither its run item nor its state item carries one)
    rec = _run(ports)
    for sk in (schema.RUN_SK, schema.RUN_STATE_SK):
        ports.runs._c.update_item(
            TableName=ports.settings.runs_table,
            Key={"pk": {"S": rec.run_id}, "sk": {"S": sk}},
            UpdateExpression="REMOVE stateStamp",
        )
    # When it is read, it is one Query with its state
    with _reads(ports, rec.run_id) as sent:
        got = ports.runs.get_run(rec.run_id)
    assert len(sent["query"]) == 1 and sent["transact"] == []
    assert got is not None and got.state == OLD_STATE
    # and a state item stamped beside an unstamped run item (a stamping append's half) is read again
    _state_half(ports, rec.run_id)
    with (
        _reads(ports, rec.run_id) as sent,
        _between_reads(ports, rec.run_id, {1: lambda: _run_half(ports, rec.run_id)}),
    ):
        got = ports.runs.get_run(rec.run_id)
    assert len(sent["query"]) == 2 and sent["transact"] == []
    assert got is not None and (got.status, got.state) == ("completed", NEW_STATE)


def test_every_state_write_stamps_both_items_with_the_state_it_stores(ports):
    rec = _run(ports)

    def stamps() -> tuple[str, str]:
        raw = {
            sk: ports.runs._c.get_item(
                TableName=ports.settings.runs_table,
                Key={"pk": {"S": rec.run_id}, "sk": {"S": sk}},
                ConsistentRead=True,
            )["Item"]
            for sk in (schema.RUN_SK, schema.RUN_STATE_SK)
        }
        return raw[schema.RUN_SK]["stateStamp"]["S"], raw[schema.RUN_STATE_SK]["stateStamp"]["S"]

    # at create
    assert stamps() == (runitems.stamp(dump(OLD_STATE)),) * 2
    # a fork's prefix copy (set_progress) moving the state
    ports.runs.set_progress(rec.run_id, 0, 0, {"state": NEW_STATE})
    assert stamps() == (runitems.stamp(dump(NEW_STATE)),) * 2
    # a status change alone leaves both as they were
    assert ports.runs.update_status(rec.run_id, "cancelled", allowed_from=("running",))
    assert stamps() == (runitems.stamp(dump(NEW_STATE)),) * 2


def test_a_torn_eventually_consistent_read_is_read_again_consistently(ports):
    # Given a run item that moved to a new state whose state item lands right after the first read
    rec = _run(ports)
    _run_half(ports, rec.run_id)
    with (
        _reads(ports, rec.run_id) as sent,
        _between_reads(ports, rec.run_id, {1: lambda: _state_half(ports, rec.run_id)}),
    ):
        got = ports.runs.get_run(rec.run_id, consistent=False)
    # Then the eventually consistent read's torn pair was not answered: a consistent read answered the whole append
    assert [p["ConsistentRead"] for p in sent["query"]] == [False, True]
    assert sent["transact"] == []
    assert got is not None and (got.status, got.last_seq, got.state) == ("completed", 1, NEW_STATE)


def test_a_listing_reads_a_torn_run_again(ports):
    # Given two runs, one of them halfway through an append whose other half lands right after the listing's read
    rec, other = _run(ports), _run(ports)
    _run_half(ports, rec.run_id)
    with (
        _reads(ports, rec.run_id) as sent,
        _between_reads(ports, rec.run_id, {1: lambda: _state_half(ports, rec.run_id)}),
    ):
        got = ports.runs.get_runs([rec.run_id, other.run_id])
    # Then the torn run was read again on its own (one Query) and answered whole; the other one as it was read
    assert len(sent["batch"]) == 1 and len(sent["query"]) == 1 and sent["transact"] == []
    assert (got[rec.run_id].status, got[rec.run_id].state) == ("completed", NEW_STATE)
    assert (got[other.run_id].status, got[other.run_id].state) == ("running", OLD_STATE)


def test_only_the_runs_own_items_sort_in_the_key_range_its_reads_query():
    # Every family of items under a run's key in the runs table (the erasure inventory, decision 0158): only the run,
    # facts, index and state items may sort between RUN and RUN#STATE, or each read of a run would read more
    from shared.manifest import RUNS
    from shared.storage.lineage import FAMILIES

    inside = sorted(f.key for f in FAMILIES if f.table == RUNS and schema.RUN_SK <= f.key <= schema.RUN_STATE_SK)
    assert inside == sorted([schema.RUN_SK, schema.RUN_FACTS_SK, schema.RUN_INDEX_SK, schema.RUN_STATE_SK])
