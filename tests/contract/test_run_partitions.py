"""Issue 27 §3 on moto: what one append writes. The run item each append rewrites is small and bounded whatever
the run's inputs and state; the tenant-index entry is written only when a listed field (status, times) changes;
a run stored in the older layout (everything on the run item) is still read, listed and moved on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest

from shared.ports import RunRecord
from shared.storage import schema
from tests.helpers import requests_sent, unique

# The most the run item may weigh (DynamoDB's item size: names plus values), at any point of a run: one write unit.
RUN_ITEM_BOUND = 1024


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _item_bytes(raw: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it: UTF-8 names plus values (numbers ~ digits / 2 + 1)."""

    def size(v: dict[str, Any]) -> int:
        ((kind, value),) = v.items()
        if kind == "S":
            return len(value.encode("utf-8"))
        if kind == "N":
            return len(str(Decimal(value)).replace("-", "").replace(".", "")) // 2 + 1
        if kind == "B":
            return len(value)
        return len(json.dumps(value))

    return sum(len(k.encode("utf-8")) + size(v) for k, v in raw.items())


def _raw(ports: Any, run_id: str, sk: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = ports.runs._c.get_item(
        TableName=ports.settings.runs_table, Key={"pk": {"S": run_id}, "sk": {"S": sk}}, ConsistentRead=True
    ).get("Item")
    return item


@contextmanager
def _writes(ports: Any) -> Iterator[list[dict[str, Any]]]:
    """Every TransactWriteItems item the stores send while inside (filled in when the block ends)."""
    items: list[dict[str, Any]] = []
    with requests_sent(ports.runs._c, "TransactWriteItems") as sent:
        yield items
    items.extend(i for params in sent for i in params.get("TransactItems", []))


def _sk(item: dict[str, Any]) -> str:
    (op,) = item.values()
    key = op.get("Key") or op.get("Item")
    return str(key["sk"]["S"]) if "sk" in key else f"seq {key['seq']['N']}"


def _large_run(ports: Any, tenant: str = "tenant-p") -> RunRecord:
    rec = RunRecord(
        run_id=f"{tenant}/{unique('r-part')}",
        tenant=tenant,
        status="pending",
        last_seq=-1,
        created_at=ports.clock.iso(),
        data={
            "kind": "workflow",
            "workflowId": "wf-part",
            "owner": {"tenant": tenant},
            "inputs": {"blob": "x" * 60_000},
        },  # 60 KB of creation facts, kept inline
        state={"variables": {"pad": "s" * 30_000}},  # a 30 KB inline state
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.create_run(rec)
    return rec


def _ev(ports: Any, run_id: str, seq: int) -> dict[str, Any]:
    return {
        "eventId": ports.ids.event_id(run_id, seq),
        "runId": run_id,
        "type": "node.started",
        "nodeId": "n",
        "payload": {"nodeId": "n"},
        "timestamp": ports.clock.iso(),
        "sequence": seq,
        "schemaVersion": 1,
    }


def test_an_append_that_changes_no_listed_field_writes_neither_the_index_entry_nor_the_facts(ports):
    # Given a running run with 60 KB of creation facts and a 30 KB state
    rec = _large_run(ports)
    ports.events.append_events(
        rec.run_id, 0, [_ev(ports, rec.run_id, 0)], run_updates={"status": "running", "startedAt": ports.clock.iso()}
    )
    index_before = _raw(ports, rec.run_id, schema.RUN_INDEX_SK)
    # When it appends events with a new state (what every engine task does) and a cursor
    state = {"variables": {"pad": "t" * 30_000}, "seq": 2}
    with _writes(ports) as sent:
        ports.events.append_events(
            rec.run_id,
            1,
            [_ev(ports, rec.run_id, 1), _ev(ports, rec.run_id, 2)],
            run_updates={"state": state, "cursor": {"next": 3}},
        )
    # Then the transaction writes the two events (one page, keyed by its first), the run item and the state item,
    # and nothing else
    assert sorted(map(_sk, sent)) == sorted([schema.RUN_SK, schema.RUN_STATE_SK, "seq 1"])
    run_update = next(i["Update"] for i in sent if _sk(i) == schema.RUN_SK)
    written = set(run_update["ExpressionAttributeNames"].values()) | {"lastSeq"}
    # ``state``: its REMOVE (a run of the older layout); ``stateStamp``: the state's stamp, also on the state item;
    # ``openTail``: its REMOVE (the append closes the log's tail, decision 0170)
    assert written == {"lastSeq", "cursor", "state", schema.STATE_STAMP, schema.OPEN_TAIL}
    assert "REMOVE" in run_update["UpdateExpression"] and "state" not in run_update["ExpressionAttributeValues"]
    # and the index entry is the item it was, byte for byte; the run item stays within one write unit
    assert _raw(ports, rec.run_id, schema.RUN_INDEX_SK) == index_before
    run_item = _raw(ports, rec.run_id, schema.RUN_SK)
    assert run_item is not None and _item_bytes(run_item) <= RUN_ITEM_BOUND, _item_bytes(run_item)
    assert "state" not in run_item and "data" not in run_item and "gsi1pk" not in run_item
    # and the state is the state item's (read back with the run, one Query)
    got = ports.runs.get_run(rec.run_id)
    assert got.state == state and got.last_seq == 2 and got.data["inputs"]["blob"] == "x" * 60_000


def test_an_append_that_changes_a_listed_field_moves_the_index_entry_with_it(ports):
    # Given a running run
    rec = _large_run(ports)
    ports.events.append_events(rec.run_id, 0, [_ev(ports, rec.run_id, 0)], run_updates={"status": "running"})
    # When its last append completes it
    done_at = ports.clock.iso()
    with _writes(ports) as sent:
        ports.events.append_events(
            rec.run_id, 1, [_ev(ports, rec.run_id, 1)], run_updates={"status": "completed", "completedAt": done_at}
        )
    # Then the index entry is written in the same transaction, with the listed fields only
    index_update = next(i["Update"] for i in sent if _sk(i) == schema.RUN_INDEX_SK)
    names = set(index_update["ExpressionAttributeNames"].values()) - {schema.TTL_ATTRIBUTE}  # (if_not_exists)
    assert names == {"status", "completedAt"}
    index = _raw(ports, rec.run_id, schema.RUN_INDEX_SK)
    assert index is not None and index["status"] == {"S": "completed"} and index["completedAt"] == {"S": done_at}
    assert _item_bytes(index) < 400  # keys, tenant, times, status, workflow: no facts, no state
    # and the tenant's listing (the index) finds it completed, filtered by status
    page = ports.runs.list_runs(rec.tenant, 100, None, {"status": "completed"})
    assert rec.run_id in [r.run_id for r in page.runs]
    listed = next(r for r in page.runs if r.run_id == rec.run_id)
    assert listed.status == "completed" and listed.data["inputs"]["blob"] == "x" * 60_000


def test_the_run_item_stays_bounded_through_a_run_whatever_its_facts_and_state(ports):
    # Given a run with 60 KB of facts and a 30 KB state
    rec = _large_run(ports)
    sizes = [_item_bytes(_raw(ports, rec.run_id, schema.RUN_SK) or {})]
    # When it runs 200 appends, each with a larger state, then fails with an error
    seq = 0
    for i in range(200):
        ports.events.append_events(
            rec.run_id,
            seq,
            [_ev(ports, rec.run_id, seq)],
            run_updates={
                "state": {"variables": {"pad": "s" * (30_000 + i * 10)}},
                **({"status": "running"} if i == 0 else {}),
            },
        )
        seq += 1
        if i % 50 == 0:
            sizes.append(_item_bytes(_raw(ports, rec.run_id, schema.RUN_SK) or {}))
    ports.events.append_events(
        rec.run_id,
        seq,
        [_ev(ports, rec.run_id, seq)],
        run_updates={
            "status": "failed",
            "completedAt": ports.clock.iso(),
            "error": {"code": "node_failed", "message": "m" * 200, "details": {"nodeId": "n"}},
        },
    )
    sizes.append(_item_bytes(_raw(ports, rec.run_id, schema.RUN_SK) or {}))
    # Then the run item never weighed more than one write unit (it holds no facts and no state)
    assert max(sizes) <= RUN_ITEM_BOUND, sizes
    assert ports.runs.get_run(rec.run_id).status == "failed"


def test_a_run_of_the_older_layout_is_read_listed_and_its_state_moves_out_at_its_next_append(ports):
    # Given a run stored as before: facts, state and index keys on its run item
    tenant = "tenant-legacy"
    run_id = f"{tenant}/{unique('r-old')}"
    created = ports.clock.iso()
    expires = ports.clock.now_ms() // 1000 + 3600
    ports.runs._c.put_item(
        TableName=ports.settings.runs_table,
        Item={
            "pk": {"S": run_id},
            "sk": {"S": schema.RUN_SK},
            "tenant": {"S": tenant},
            "gsi1pk": {"S": tenant},
            "gsi1sk": {"S": f"{created}#{run_id}"},
            "status": {"S": "running"},
            "lastSeq": {"N": "-1"},
            "createdAt": {"S": created},
            "workflowId": {"S": "wf-old"},
            "data": {"S": json.dumps({"kind": "workflow", "workflowId": "wf-old", "inputs": {"a": 1}})},
            "state": {"S": json.dumps({"variables": {"a": 1}})},
            "expiresAt": {"N": str(expires)},
        },
    )
    # Then it reads and lists as it did
    got = ports.runs.get_run(run_id)
    assert got.state == {"variables": {"a": 1}} and got.data["inputs"] == {"a": 1}
    assert [r.run_id for r in ports.runs.list_runs(tenant, 10, None, {}).runs] == [run_id]
    # When it appends with a new state
    ports.events.append_events(run_id, 0, [_ev(ports, run_id, 0)], run_updates={"state": {"variables": {"a": 2}}})
    # Then the state lives in its state item and no longer on the run item, and the run reads and lists the same
    run_item = _raw(ports, run_id, schema.RUN_SK)
    assert run_item is not None and "state" not in run_item
    assert json.loads((_raw(ports, run_id, schema.RUN_STATE_SK) or {})["state"]["S"]) == {"variables": {"a": 2}}
    assert ports.runs.get_run(run_id).state == {"variables": {"a": 2}}
    (listed,) = ports.runs.list_runs(tenant, 10, None, {}).runs
    assert listed.run_id == run_id and listed.state == {"variables": {"a": 2}} and listed.last_seq == 0
