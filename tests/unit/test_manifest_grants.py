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


def test_the_events_streams_consumer_may_delete_an_erased_runs_late_pages_and_objects():
    # The fan-out deletes the pages a task put plainly after its run's erasure, and the run's objects
    consumer = dict(manifest.STREAM_CONSUMERS)[EVENTS]
    spec = next(f for f in manifest.FUNCTIONS if f.name == consumer)
    assert dict(spec.tables)[EVENTS] == "readwrite" and spec.bucket == "readwrite"
