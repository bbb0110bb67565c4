"""The official major-2 conformance rules this host implements, one test per rule, through openwop-client where
it has the call (plain HTTP through ``tests.wire.raw`` otherwise)."""

from __future__ import annotations

import time

from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.helpers import unique
from tests.wire import all_events, types_of, wait_terminal


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _wait_for(client, run_id, pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = all_events(client, run_id)
        if pred(events):
            return events
        time.sleep(0.05)
    raise AssertionError("condition not reached")


# --------------------------------------------------------------------------- v2-run-fork-prefix (0170)


def test_fork_inside_a_node_restarts_it_the_event_at_from_seq_is_a_fresh_node_started(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-multi-node"))
    assert wait_terminal(client, src.runId).status == "completed"
    source = all_events(client, src.runId)
    assert len(source) == 8
    point = next(e for e in source if e.type == "node.completed" and 0 < e.sequence < source[-1].sequence)
    for from_seq in (point.sequence, 4):
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=from_seq, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"
        forked = all_events(client, fork.runId)
        assert [(e.sequence, e.type) for e in forked if e.sequence < from_seq] == \
            [(e.sequence, e.type) for e in source if e.sequence < from_seq]
        at = next(e for e in forked if e.sequence == from_seq)
        assert (at.type, at.nodeId) == ("node.started", source[from_seq].nodeId)
        # one event longer than the source (the node's completion is re-executed), and no divergence reported
        assert len(forked) == 9
        assert "replay.diverged" not in [e.type for e in forked]
        assert types_of(forked)[from_seq + 1] == ("node.completed", source[from_seq].nodeId)


def test_fork_of_an_agent_between_node_started_and_invocation_started_runs_the_agent(host):
    from shared.services.workflows import register_workflow

    client = host.client(host.key_a)
    wid = unique("prefix-agent")
    register_workflow(_ports(), "tenant-a", {
        "id": wid, "nodes": [{"id": "agent", "typeId": "core.agent", "config": {"agentId": "conformance-eval-agent"},
                              "inputs": {"input": {"type": "variable", "variableName": "script"}}}],
        "edges": [], "variables": [{"name": "script", "type": "object", "required": True}]})
    key = unique("ctr")
    script = {"calls": [{"tool": "conformance.eval:counter", "args": {"op": "inc", "key": key}}], "answer": "done"}
    src = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"script": script}))
    assert wait_terminal(client, src.runId).status == "completed"
    source = all_events(client, src.runId)
    inv = next(e for e in source if e.type == "agent.invocation-started")
    for mode in ("replay", "branch"):
        fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=inv.sequence, mode=mode))
        snap = wait_terminal(client, fork.runId)
        assert snap.status == "completed"
        forked = all_events(client, fork.runId)
        assert (forked[inv.sequence].type, forked[inv.sequence].nodeId) == ("node.started", "agent")
        done = [e for e in forked if e.type == "node.completed"]
        assert [e.payload["outputs"] for e in done] == [{"decision": "done"}]
        if mode == "replay":  # the recorded answer, no divergence, the counter untouched
            assert [e.payload["outcome"] for e in forked if e.type == "agent.tool-returned"] == \
                [e.payload["outcome"] for e in source if e.type == "agent.tool-returned"]
            assert "replay.diverged" not in [e.type for e in forked]
            assert _ports().host.counter_read("COUNTER#tenant-a", key) == 1
    assert _ports().host.counter_read("COUNTER#tenant-a", key) == 2  # the branch called it live


def test_fork_inside_a_hold_restarts_the_hold_and_completes(host):
    client = host.client(host.key_a)
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 1200}))
    assert wait_terminal(client, src.runId).status == "completed"
    source = all_events(client, src.runId)
    done = next(e for e in source if e.type == "node.completed" and e.nodeId == "wait")
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=done.sequence, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    forked = all_events(client, fork.runId)
    assert (forked[done.sequence].type, forked[done.sequence].nodeId) == ("node.started", "wait")
    effect = next(e for e in forked if e.type == "node.completed" and e.nodeId == "effect")
    assert effect.payload["outputs"] == next(e.payload["outputs"] for e in source
                                             if e.type == "node.completed" and e.nodeId == "effect")
    assert "replay.diverged" not in [e.type for e in forked]
