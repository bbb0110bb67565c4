"""The pure run core (``shared.engine.runcore``): the recorded histories of tests/fixtures/runs replayed by current
code with no ports, no storage and no AWS, as tests/replay replays them through a fork on the local stack."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shared.engine import runcore
from shared.engine import state as st
from shared.engine.registry import NODE_TYPES
from shared.engine.workflow import load_workflow

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"


def _history(name: str) -> dict[str, Any]:
    return json.loads((RUNS / f"{name}.json").read_text())


def _same(a: dict, b: dict) -> bool:
    strip = ("eventId", "runId", "timestamp")
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


@pytest.mark.parametrize("name", ["side-effect-completed", "ordinal-loop-completed"])
def test_current_code_reproduces_a_recorded_history(name: str) -> None:
    doc = _history(name)
    recorded = doc["events"]
    for from_seq in (0, len(recorded) // 2):
        child = runcore.replay(doc["definition"], recorded, from_seq).events
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
        # and from the start, the replay is the recorded history itself, event for event
        if from_seq == 0:
            assert all(_same(a, b) for a, b in zip(child, recorded, strict=True))


def test_a_divergent_history_is_reported_and_the_replay_continues() -> None:
    doc = _history("side-effect-divergent")
    out = runcore.replay(doc["definition"], doc["events"], 0, source_run_id="recorded/r-source")
    child = out.events
    div = [e for e in child if e["type"] == "replay.diverged"]
    assert len(div) == 1 and out.divergences == [div[0]["payload"]]
    hold_done = next(e for e in child if e["type"] == "node.completed" and e["nodeId"] == "wait")
    assert div[0]["payload"]["atSequence"] == hold_done["sequence"]
    assert div[0]["payload"]["divergenceKind"] == "output" and div[0]["causationId"] == hold_done["eventId"]
    assert div[0]["payload"]["sourceRunId"] == "recorded/r-source"
    # it continued: the effect was served from the record and the run completed
    assert child[-1]["type"] == "run.completed"
    assert [e["type"] for e in child if e.get("nodeId") == "effect"] == ["node.started", "node.completed"]


def test_the_replay_tier_runs_in_milliseconds_without_storage_or_aws() -> None:
    began = time.perf_counter()
    for name in ("side-effect-completed", "ordinal-loop-completed", "side-effect-divergent"):
        doc = _history(name)
        for from_seq in range(len(doc["events"])):
            runcore.replay(doc["definition"], doc["events"], from_seq)
    assert time.perf_counter() - began < 2.0  # ~0.2 s on an idle machine
    # the core imports no storage, no local stack and no SDK (checked in a fresh interpreter's module list)
    import subprocess

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, shared.engine.runcore; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not [m for m in loaded if m.startswith(("shared.storage", "shared.local", "boto3", "botocore", "moto"))]


def test_a_side_effect_with_no_recorded_outcome_fails_closed() -> None:
    """A replay never performs an effect: an execution the source did not record fails replay_source_missing."""
    doc = _history("side-effect-completed")
    events = [e for e in doc["events"] if e.get("nodeId") != "effect" and e["type"] != "run.completed"]
    child = runcore.replay(doc["definition"], events, 0).events
    failed = next(e for e in child if e["type"] == "node.failed")
    assert failed["nodeId"] == "effect" and failed["payload"]["error"]["code"] == "replay_source_missing"
    assert child[-1]["type"] == "run.failed"


def test_run_step_is_the_run_level_step_and_leaves_nodes_to_the_caller() -> None:
    doc = _history("side-effect-completed")
    wf = load_workflow(doc["definition"], set(NODE_TYPES))
    data = {"inputs": doc["inputs"], "owner": doc["events"][0]["payload"]["owner"]}
    state = st.new_state()
    started = runcore.run_step(wf, data, state, 0)
    assert started is not None and [t for t, _, _ in started.events] == ["run.started"]
    assert started.events[0][1] == doc["events"][0]["payload"]
    st.apply(state, doc["events"][0], wf)
    assert runcore.run_step(wf, data, state, 0) is None  # the first ready node starts: the caller's step
    # a run past its settings.timeout fails, cancelling its active node
    st.apply(state, doc["events"][1], wf)
    late = runcore.run_step(wf, data, state, state["startedAtMs"] + wf.timeout_ms + 1)
    assert late is not None and late.done
    assert [(t, p.get("reason")) for t, p, _ in late.events] == [
        ("node.cancelled", "run-timeout"),
        ("run.failed", None),
    ]
