"""Grants the storage's reads and writes need beyond a function's own subject (decision 0170), checked on the
manifest every IAM policy is built from: locally nothing enforces IAM, so a missing grant would show only on AWS."""

from __future__ import annotations

from shared import manifest
from shared.manifest import EVENTS, RUNS


def test_every_function_that_reads_runs_may_read_the_events_table():
    # A read of a run whose log's tail is open reads the last page past its head (``tail_after``), whatever the
    # function reads the run for
    missing = [
        f.name
        for f in manifest.FUNCTIONS
        if any(t == RUNS for t, _ in f.tables) and not any(t == EVENTS for t, _ in f.tables)
    ]
    assert missing == []


def test_the_late_writes_task_may_delete_an_erased_runs_log_and_objects_and_the_fan_out_may_not():
    # An erased run's late writes go by the timer state machine's Act task (decisions 0179, 0189), which invokes
    # fail_run (it reads the tombstone, deletes the log and the objects); the fan-out, which did that before, only
    # reads both now
    late = manifest.function("fail_run")
    assert dict(late.tables)[RUNS] and dict(late.tables)[EVENTS] == "readwrite" and late.bucket == "readwrite"
    assert manifest.TOMBSTONE in manifest.secrets_of(late)
    machine = next(m for m in manifest.STATE_MACHINES if m.key == "timer")
    assert machine.invokes == ("fail_run",)
    consumer = manifest.function(dict(manifest.STREAM_CONSUMERS)[EVENTS])
    assert dict(consumer.tables)[EVENTS] == "read" and consumer.bucket == "read"
