"""Decision 0187 on moto: a batch's trials are written together. What ``TrialWrites`` holds is written once it
fills a transaction (98 items beside the run's check) or its oldest trial has waited ``HOLD_MS``, and by ``flush``;
each transaction checks once that the run is writable, and a run that is not keeps nothing held."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shared.clock import SystemClock
from shared.engine import evaltrial
from shared.engine.evaltrial import TrialResult, TrialWrites, store_trial
from shared.errors import ConflictError
from shared.ports import RunRecord, ToolCallRecord
from tests.helpers import requests_sent, stored_run


class _MovedClock(SystemClock):
    """A clock stopped at its creation and moved by the test: a hold's life passes when the test says so, however
    long the machine takes between two trials."""

    def __init__(self) -> None:
        self.at_ms = super().now_ms()
        self.offset_ms = 0

    def now_ms(self) -> int:
        return self.at_ms + self.offset_ms


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return dataclasses.replace(get_ports(), clock=_MovedClock())


def _eval_run(ports: Any) -> RunRecord:
    rec: RunRecord = stored_run(ports, "r-trials", tenant="tenant-trials", data={"kind": "eval"})
    return rec


def _trial(ports: Any, rec: RunRecord, held: TrialWrites, task: int, calls: int = 2) -> None:
    records = [
        ToolCallRecord(
            run_id=rec.run_id,
            call_key=f"T{task:05d}-001#{i}",
            agent_id="agent",
            invocation_id=f"task-{task}:1",
            delegate=False,
            tool_name="conformance.eval:echo",
            call_id=f"c{i}",
            args={"i": i},
            status="ok",
            result={"echo": i},
        )
        for i in range(calls)
    ]
    store_trial(ports, rec, TrialResult(task, 1, f"task-{task}", score=1.0, passed=True), records, held)


def _stored(ports: Any, rec: RunRecord) -> list[int]:
    return sorted(task for task, _trial in evaltrial.load_trials(ports, rec.run_id))


def test_held_trials_are_written_when_they_fill_a_transaction_or_by_flush(ports) -> None:
    # Given a batch's held writes and trials of three items each (two call records and the TRIAL# item)
    rec = _eval_run(ports)
    held = TrialWrites(ports, rec)
    with requests_sent(ports.tool_calls._c, "TransactWriteItems") as sent:
        # When 32 trials are held (96 items), nothing is written; the 33rd fills a transaction (99 items)
        for task in range(32):
            _trial(ports, rec, held, task)
        assert _stored(ports, rec) == []
        _trial(ports, rec, held, 32)
        # Then they are written: 98 items with the run's check, then the last item with its own
        assert _stored(ports, rec) == list(range(33))
        assert [len(p["TransactItems"]) for p in sent] == [99, 2]
        assert all(sum(1 for i in p["TransactItems"] if "ConditionCheck" in i) == 1 for p in sent)
        # and one more trial waits for the flush
        _trial(ports, rec, held, 33)
        assert _stored(ports, rec) == list(range(33))
        held.flush()
    assert _stored(ports, rec) == list(range(34))
    assert len(ports.tool_calls.list_calls(rec.run_id)) == 68  # every call record, once


def test_a_held_trial_is_written_once_the_oldest_has_waited_its_hold(ports) -> None:
    # Given a trial held
    rec = _eval_run(ports)
    held = TrialWrites(ports, rec)
    _trial(ports, rec, held, 0)
    ports.clock.offset_ms = evaltrial.HOLD_MS - 1
    _trial(ports, rec, held, 1)
    assert _stored(ports, rec) == []
    # When the next trial ends once the first has waited HOLD_MS
    ports.clock.offset_ms = evaltrial.HOLD_MS
    _trial(ports, rec, held, 2)
    # Then the three are written
    assert _stored(ports, rec) == [0, 1, 2]


def test_a_run_no_longer_writable_keeps_nothing_held(ports) -> None:
    # Given two trials held, then the run cancelled
    rec = _eval_run(ports)
    held = TrialWrites(ports, rec)
    _trial(ports, rec, held, 0)
    _trial(ports, rec, held, 1)
    assert ports.runs.update_status(rec.run_id, "cancelled", allowed_from=("running",))
    # When they are flushed: refused, nothing written, and nothing left held
    with pytest.raises(ConflictError):
        held.flush()
    assert _stored(ports, rec) == [] and ports.tool_calls.list_calls(rec.run_id) == []
    held.flush()  # nothing held: no request
