"""A run's pinned definition (decision 0178), on moto: a small one stays in the run's creation facts, written in the
create's facts item and read with the run's items (no item and no read of its own); a larger one is the run's
``DEFINITION`` item, as decision 0082 made it. Every reader of a run's stored definition finds either."""

from __future__ import annotations

from typing import Any

import pytest

from shared.engine import kernel
from shared.ports import RunRecord
from shared.storage import schema
from tests.helpers import requests_sent, stored_run
from tests.workflows import noop_loop

SMALL = noop_loop("wf-small", 2)  # 625 bytes of JSON
LARGE = {**noop_loop("wf-large", 2), "description": "d" * (schema.INLINE_DEFINITION_BYTES + 1)}


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _create(ports: Any, definition: dict[str, Any]) -> tuple[RunRecord, list[dict[str, Any]]]:
    """A run created with ``definition`` pinned: its record as read back, and the create's transaction's items."""
    with requests_sent(ports.runs._c, "TransactWriteItems") as sent:
        rec = stored_run(
            ports, "r-inline-def", "pending", data={"workflowId": definition["id"], "definition": definition}
        )
    (tx,) = [p for p in sent if any(rec.run_id in str(i) for i in p["TransactItems"])]
    got = ports.runs.get_run(rec.run_id)
    assert got is not None
    return got, tx["TransactItems"]


def _sks(items: list[dict[str, Any]]) -> list[str]:
    return sorted(next(iter(i.values()))["Item"]["sk"]["S"] for i in items if "Put" in i)


def test_a_small_definition_is_kept_in_the_creation_facts_and_read_with_the_run(ports):
    # When a run is created with a small definition
    rec, items = _create(ports, SMALL)
    # Then the create wrote no item of its own for it: it is in the creation facts, read back with the run
    assert schema.DEFINITION_SK not in _sks(items)
    assert rec.data["definition"] == SMALL and "definitionPinned" not in rec.data
    assert ports.runs.get_definition(rec.run_id) is None
    # And the engine and the stored-definition readers find it without a read
    kernel._pinned.clear()
    with requests_sent(ports.runs._c, "GetItem") as gets:
        assert kernel.stored_definition(ports, rec) == SMALL
        assert kernel.run_workflow(ports, rec).id == "wf-small"
    assert [g for g in gets if g["Key"]["pk"]["S"] == rec.run_id] == []


def test_a_large_definition_is_the_runs_definition_item(ports):
    # When a run is created with a definition larger than the facts keep
    rec, items = _create(ports, LARGE)
    # Then it is the run's DEFINITION item, written in the create's transaction, and the facts say it is pinned
    assert schema.DEFINITION_SK in _sks(items)
    assert "definition" not in rec.data and rec.data["definitionPinned"] is True
    assert ports.runs.get_definition(rec.run_id) == LARGE
    # And every reader finds it there
    kernel._pinned.clear()
    assert kernel.stored_definition(ports, rec) == LARGE
    assert kernel.run_workflow(ports, rec).id == "wf-large"
