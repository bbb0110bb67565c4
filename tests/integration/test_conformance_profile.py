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


# --------------------------------------------------------------------------- fixtures (conformance/fixtures.md)


def test_standard_fixtures_are_advertised_and_behave_as_their_contracts_say(host):
    client = host.client(host.key_b)
    caps = client.discovery_capabilities()
    assert {"conformance-delay", "conformance-cancellable", "conformance-failure"} <= set(caps.raw["fixtures"])
    for fid in ("conformance-delay", "conformance-cancellable", "conformance-failure"):
        assert client.workflows_get(fid)["id"] == fid
    # delay: running while the delay is in flight, completed after
    delay = client.runs_create(CreateRunRequest(workflowId="conformance-delay", inputs={"delayMs": 1500}))
    _wait_for(client, delay.runId, lambda ev: "node.started" in [e.type for e in ev])
    assert client.runs_get(delay.runId).status == "running"
    assert wait_terminal(client, delay.runId).status == "completed"
    # cancellable: cancelled mid-run, run.cancelled in the log
    canc = client.runs_create(CreateRunRequest(workflowId="conformance-cancellable", inputs={"delayMs": 60000}))
    _wait_for(client, canc.runId, lambda ev: "node.started" in [e.type for e in ev])
    client.runs_cancel(canc.runId)
    assert client.runs_get(canc.runId).status == "cancelled"
    assert all_events(client, canc.runId)[-1].type == "run.cancelled"
    # failure: run.started, node.failed, run.failed; the error is {code, message}
    fail = client.runs_create(CreateRunRequest(workflowId="conformance-failure"))
    snap = wait_terminal(client, fail.runId)
    assert snap.status == "failed"
    assert isinstance(snap.error.code, str) and snap.error.code and isinstance(snap.error.message, str)
    updates = [e.type for e in all_events(client, fail.runId) if e.type != "node.started"]
    assert updates == ["run.started", "node.failed", "run.failed"]


def test_diff_of_identical_logs_is_empty_and_a_noop_against_a_failure_diverges(host):
    from tests.wire import raw

    client = host.client(host.key_a)
    a, b, f = (client.runs_create(CreateRunRequest(workflowId=w)).runId
               for w in ("conformance-noop", "conformance-noop", "conformance-failure"))
    for r in (a, b, f):
        wait_terminal(client, r)
    same = raw(host.base_url, "GET", f"/runs/{_wire(a)}:diff?against={_wire(b)}", key=host.key_a)
    assert same.status == 200
    assert (same.json["a"], same.json["b"], same.json["divergedAtSeq"], same.json["eventDiffs"]) == (a, b, None, [])
    other = raw(host.base_url, "GET", f"/runs/{_wire(a)}:diff?against={_wire(f)}", key=host.key_a)
    assert other.status == 200 and isinstance(other.json["divergedAtSeq"], int) and other.json["eventDiffs"]


# --------------------------------------------------------------------------- v2-idempotency-in-flight (0213 §B)


def test_same_key_creates_in_flight_one_run_losers_409_with_retry_after(host):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.wire import raw

    sfn = _ports().orchestrator._c  # the Step Functions client the in-process handlers share
    losers_done = threading.Event()
    held = []

    def hold_the_winner(**_kwargs):  # the winner's create stays in flight until the losers have answered
        held.append(1)
        losers_done.wait(20)

    key = unique("openwopconf-inflight-key")
    body = {"workflowId": "conformance-delay", "inputs": {"delayMs": 1500}}
    sfn.meta.events.register("before-call.sfn.StartExecution", hold_the_winner)
    try:
        with ThreadPoolExecutor(5) as pool:
            first = pool.submit(raw, host.base_url, "POST", "/runs", body, key=host.key_a,
                                headers={"Idempotency-Key": key})
            deadline = time.monotonic() + 20
            while not held:
                assert time.monotonic() < deadline and not first.done(), \
                    f"the winner never reached StartExecution: {first.result() if first.done() else None}"
                time.sleep(0.01)
            losers = [pool.submit(raw, host.base_url, "POST", "/runs", body, key=host.key_a,
                                  headers={"Idempotency-Key": key}) for _ in range(4)]
            refused = [f.result() for f in losers]
            losers_done.set()
            winner = first.result()
    finally:
        losers_done.set()
        sfn.meta.events.unregister("before-call.sfn.StartExecution", hold_the_winner)
    assert winner.status == 201 and "openwop-idempotent-replay" not in winner.headers
    for r in refused:
        assert (r.status, r.json["error"]) == (409, "idempotency_in_flight")
        assert not [k for k in (r.json.get("details") or {}) if k.lower().startswith("retryafter")]
        assert r.headers["retry-after"].isdigit()
    # once the winner is done, the same key replays its answer: one run only
    again = raw(host.base_url, "POST", "/runs", body, key=host.key_a, headers={"Idempotency-Key": key})
    assert again.status == 201 and again.headers["openwop-idempotent-replay"] == "true"
    assert again.json["runId"] == winner.json["runId"]
