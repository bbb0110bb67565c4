"""Reads of what cannot change any more are eventually consistent (decision 0168), on moto: a fork's source once it
has ended, a run's pinned definition and a fork's index (written once); anything an eventually consistent read does
not show as final is read again consistently."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shared.keys import FORK_SOURCE_SK
from shared.ports import RunRecord
from tests.helpers import hooked, unique

READS = ("GetItem", "BatchGetItem", "Query")


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


# A definition too large to stay in the creation facts (decision 0178): stored as the run's DEFINITION item.
PINNED = {"id": "wf", "nodes": [], "description": "d" * 3000}


def _run(ports: Any, status: str) -> RunRecord:
    rec = RunRecord(
        run_id=f"tenant-c/{unique('r-settled')}",
        tenant="tenant-c",
        status=status,
        last_seq=4,
        created_at=ports.clock.iso(),
        data={"kind": "workflow", "owner": {"tenant": "tenant-c"}, "definition": PINNED},
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.create_run(rec)
    return rec


@contextmanager
def reads(ports: Any, run_id: str, hide: bool = False) -> Iterator[list[tuple[str, bool]]]:
    """The (operation, consistent) of each read of ``run_id``'s items on this thread; with ``hide``, an eventually
    consistent read shows none of them (a replica behind their write)."""
    client, me, seen = ports.runs._c, threading.get_ident(), []
    asked: dict[str, bool] = {}

    def mark(params: Any = None, model: Any = None, **_: Any) -> None:
        if threading.get_ident() != me:
            return
        tables = list((params.get("RequestItems") or {}).values()) or [params]
        if str(params).find(run_id) >= 0:
            asked["consistent"] = any(bool(t.get("ConsistentRead")) for t in tables)
            seen.append((model.name, asked["consistent"]))

    def lag(parsed: Any = None, model: Any = None, **_: Any) -> None:
        if threading.get_ident() != me or not hide or asked.pop("consistent", True):
            return
        parsed.pop("Item", None)
        if "Items" in parsed:
            parsed["Items"], parsed["Count"] = [], 0
        for table in (parsed.get("Responses") or {}).values():
            table.clear()

    handlers = {f"before-parameter-build.dynamodb.{op}": mark for op in READS}
    with hooked(client, {**handlers, **{f"after-call.dynamodb.{op}": lag for op in READS}}):
        yield seen


def test_an_ended_run_is_read_eventually_consistently_a_running_one_consistently_too(ports):
    # Given a completed run and a running one
    done, live = _run(ports, "completed"), _run(ports, "running")
    # When each is read as a fork's source
    with reads(ports, done.run_id) as seen:
        got = ports.runs.get_run(done.run_id, settled=True)
    # Then the ended one takes one eventually consistent Query of its items
    assert got is not None and got.status == "completed" and got.last_seq == 4
    assert seen == [("Query", False)]
    # And the running one (its record may still move) is read again consistently
    with reads(ports, live.run_id) as seen:
        got = ports.runs.get_run(live.run_id, settled=True)
    assert got is not None and got.status == "running"
    assert seen == [("Query", False), ("Query", True)]
    # And a run a replica does not show yet is read consistently, not answered as absent
    with reads(ports, done.run_id, hide=True) as seen:
        got = ports.runs.get_run(done.run_id, settled=True)
    assert got is not None and got.status == "completed"
    assert seen == [("Query", False), ("Query", True)]


def test_items_written_once_are_read_eventually_consistently_and_consistently_when_not_shown(ports):
    # Given a run with its pinned definition and a fork index
    rec = _run(ports, "running")
    ports.runs.put_aux(rec.run_id, FORK_SOURCE_SK, {"outcomes": {"n": 1}}, rec.expires_at)
    # When both are read
    with reads(ports, rec.run_id) as seen:
        definition = ports.runs.get_definition(rec.run_id)
        index = ports.runs.get_aux(rec.run_id, FORK_SOURCE_SK, settled=True)
    # Then each is one eventually consistent GetItem
    assert definition == PINNED and index == {"outcomes": {"n": 1}}
    assert seen == [("GetItem", False), ("GetItem", False)]
    # And when a replica does not show them yet, each is read again consistently and found
    with reads(ports, rec.run_id, hide=True) as seen:
        assert ports.runs.get_definition(rec.run_id) == PINNED
        assert ports.runs.get_aux(rec.run_id, FORK_SOURCE_SK, settled=True) == {"outcomes": {"n": 1}}
    assert seen == [("GetItem", False), ("GetItem", True)] * 2
    # And an aux item read without ``settled`` stays one consistent read
    with reads(ports, rec.run_id) as seen:
        ports.runs.get_aux(rec.run_id, FORK_SOURCE_SK)
    assert seen == [("GetItem", True)]
