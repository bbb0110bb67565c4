"""Recorded histories (tests/fixtures/runs/*.json) replayed by current code: prefixes byte-equal, the
outcome of every side-effecting execution served from the record, one deliberately divergent history reported."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import unique

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
TENANT = "tenant-replay"


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def import_history(name: str) -> str:
    """Load a recorded run into storage under a fresh id (as if this host had run it)."""
    from shared.ports import RunRecord
    from shared.services.common import Caller

    doc = json.loads((RUNS / f"{name}.json").read_text())
    ports = _ports()
    run_id = f"{TENANT}/{unique('r-recorded')}"
    owner = Caller(TENANT, "key-replay").owner
    events = []
    for ev in doc["events"]:
        ev = dict(ev, runId=run_id, eventId=ports.ids.event_id(run_id, ev["sequence"]))
        if ev["type"] == "run.started":
            ev["payload"] = dict(ev["payload"], owner=owner)
        events.append(ev)
    rec = RunRecord(
        run_id=run_id,
        tenant=TENANT,
        status=doc["status"],
        last_seq=len(events) - 1,
        created_at=events[0]["timestamp"],
        data={
            "kind": "workflow",
            "workflowId": doc["workflowId"],
            "inputs": doc["inputs"],
            "owner": owner,
            "definition": doc["definition"],
        },
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.create_run(rec)
    ports.events.copy_events(run_id, events, rec.expires_at)
    return run_id


def replay(run_id: str, from_seq: int = 0) -> list[dict]:
    from shared.protocol.models import ForkRunRequest
    from shared.services.common import Caller
    from shared.services.forks import fork_run

    ports = _ports()
    created = fork_run(
        ports, Caller(TENANT, "key-replay"), run_id.replace("/", "~2F"), ForkRunRequest(mode="replay", fromSeq=from_seq)
    )
    child = created.body["runId"]
    deadline = time.monotonic() + 30
    while not ports.runs.get_run(child).terminal:
        assert time.monotonic() < deadline, "replay did not finish"
        time.sleep(0.05)
    return ports.events.read_events(child)


def _same(a: dict, b: dict) -> bool:
    strip = ("eventId", "runId", "timestamp")
    pa = {k: v for k, v in a.items() if k not in strip}
    pb = {k: v for k, v in b.items() if k not in strip}
    return pa == pb


@pytest.mark.parametrize("name", ["side-effect-completed", "ordinal-loop-completed"])
def test_current_code_reproduces_recorded_history(local_aws, name):
    source = import_history(name)
    recorded = _ports().events.read_events(source)
    for from_seq in (0, len(recorded) // 2):
        child = replay(source, from_seq)
        # a node in flight at fromSeq restarts: its node.started comes again (0170.fork-prefix-boundary)
        restarted = [recorded[from_seq - 1]["type"]] if recorded[from_seq - 1]["type"] == "node.started" else []
        assert [e["type"] for e in child] == [e["type"] for e in recorded[:from_seq]] + restarted + [
            e["type"] for e in recorded[from_seq:]
        ]
        assert all(_same(a, b) for a, b in zip(child[:from_seq], recorded[:from_seq], strict=True))
        assert not [e for e in child if e["type"].startswith("replay.")]
        effects = [e["payload"]["outputs"] for e in child if e["type"] == "node.completed" and e["nodeId"] == "effect"]
        assert effects == [
            e["payload"]["outputs"] for e in recorded if e["type"] == "node.completed" and e["nodeId"] == "effect"
        ]


def test_a_divergent_history_is_reported_and_the_replay_continues(local_aws):
    source = import_history("side-effect-divergent")
    child = replay(source)
    div = [e for e in child if e["type"] == "replay.diverged"]
    assert len(div) == 1
    hold_done = next(e for e in child if e["type"] == "node.completed" and e["nodeId"] == "wait")
    assert div[0]["payload"]["atSequence"] == hold_done["sequence"]
    assert div[0]["payload"]["divergenceKind"] == "output" and div[0]["causationId"] == hold_done["eventId"]
    # it continued: the effect was served from the record and the run completed
    assert child[-1]["type"] == "run.completed"
    assert [e["type"] for e in child if e.get("nodeId") == "effect"] == ["node.started", "node.completed"]
