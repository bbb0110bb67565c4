"""The embedded AWS's stream mapping (``shared.local.ddb_streams``): idle lanes sleep.

Every local stack (each test worker, each ``serve``) runs a consumer's stream lanes on threads of its own; a lane
that woke another each time it found its queue empty kept them all waking each other for as long as the process
lived, holding the GIL from every handler beside them."""

from __future__ import annotations

import threading
import time
from typing import Any

from shared.local.context import LambdaContext
from shared.local.ddb_streams import STREAM_LANES, _lane_of, _StreamWorker
from shared.local.lambda_registry import Target


class _CountingCondition(threading.Condition):
    """A condition that counts how often a waiter was woken (or timed out) and went on."""

    def __init__(self) -> None:
        super().__init__()
        self.wakes = 0

    def wait(self, timeout: float | None = None) -> bool:
        woken = super().wait(timeout)
        self.wakes += 1
        return woken


def _records_in_every_lane() -> list[dict[str, Any]]:
    """Stream records whose partition keys fall in each of the lanes, one or more per lane."""
    records, lanes = [], set()
    for i in range(200):
        record = {"eventID": f"e-{i}", "eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": f"RUN#{i}"}}}}
        records.append(record)
        lanes.add(_lane_of(record, STREAM_LANES))
        if len(lanes) == STREAM_LANES:
            return records
    raise AssertionError("no key reached every lane")


def test_idle_lanes_sleep_until_a_record_arrives() -> None:
    # Given a consumer whose every lane has delivered a batch and gone idle
    delivered: list[int] = []
    target = Target(
        "lanes", lambda: lambda event, _ctx: delivered.append(len(event["Records"])), lambda: LambdaContext("lanes")
    )
    cond = _CountingCondition()
    worker = _StreamWorker("lanes", _cond=cond)
    records = _records_in_every_lane()
    worker.submit(target, {"Records": records})
    assert worker.wait_idle(10.0)
    assert sum(delivered) == len(records)

    # When nothing arrives for a quiet window of 0.5 s (a spinning lane wakes thousands of times in it), counted
    # from 0.2 s after the last delivery (the lanes woken by the last one's going idle have gone back to sleep)
    time.sleep(0.2)
    with cond:
        before = cond.wakes
    time.sleep(0.5)
    with cond:
        wakes = cond.wakes - before

    # Then no lane woke; and a new record still wakes its lane and is delivered
    assert wakes == 0, f"{wakes} wakes"
    worker.submit(target, {"Records": [{**records[0], "eventID": "late"}]})
    assert worker.wait_idle(10.0)
    assert sum(delivered) == len(records) + 1
