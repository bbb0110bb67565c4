"""The official major-2 conformance rules this host implements, one test per rule, through openwop-client where
it has the call (plain HTTP through ``tests.wire.raw`` otherwise)."""

from __future__ import annotations

import time

from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.helpers import unique
from tests.integration.test_chained_executions import all_ended
from tests.wire import all_events, types_of, wait_for_events, wait_terminal


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


_wait_for = wait_for_events


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
        assert [(e.sequence, e.type) for e in forked if e.sequence < from_seq] == [
            (e.sequence, e.type) for e in source if e.sequence < from_seq
        ]
        at = next(e for e in forked if e.sequence == from_seq)
        assert (at.type, at.nodeId) == ("node.started", source[from_seq].nodeId)
        # one event longer than the source (the node's completion is re-executed), and no divergence reported
        assert len(forked) == 9
        assert "replay.diverged" not in [e.type for e in forked]
        assert types_of(forked)[from_seq + 1] == ("node.completed", source[from_seq].nodeId)


def test_fork_of_an_agent_between_node_started_and_invocation_started_runs_the_agent(host):
    from tests.workflows import register_scripted_agent

    client = host.client(host.key_a)
    wid = register_scripted_agent("tenant-a", "prefix-agent")
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
            assert [e.payload["outcome"] for e in forked if e.type == "agent.tool-returned"] == [
                e.payload["outcome"] for e in source if e.type == "agent.tool-returned"
            ]
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
    assert effect.payload["outputs"] == next(
        e.payload["outputs"] for e in source if e.type == "node.completed" and e.nodeId == "effect"
    )
    assert "replay.diverged" not in [e.type for e in forked]


# --------------------------------------------------------------------------- fixtures (conformance/fixtures.md)


def test_standard_fixtures_are_advertised_and_behave_as_their_contracts_say(host):
    client = host.client(host.key_b)
    caps = client.discovery_capabilities()
    assert {"conformance-delay", "conformance-cancellable", "conformance-failure"} <= set(caps.raw["fixtures"])
    for fid in ("conformance-delay", "conformance-cancellable", "conformance-failure"):
        assert client.workflows_get(fid)["id"] == fid
    # delay: running while the delay is in flight, completed after (5 s: the node's start is seen by polling, and on
    # a loaded machine 1.5 s passed between the start and the read of the run)
    delay = client.runs_create(CreateRunRequest(workflowId="conformance-delay", inputs={"delayMs": 5000}))
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
    a, b, f = (
        client.runs_create(CreateRunRequest(workflowId=w)).runId
        for w in ("conformance-noop", "conformance-noop", "conformance-failure")
    )
    for r in (a, b, f):
        wait_terminal(client, r)
    same = raw(host.base_url, "GET", f"/runs/{_wire(a)}:diff?against={_wire(b)}", key=host.key_a)
    assert same.status == 200
    assert _errors(_schema_validator("run-diff-response.schema.json"), same.json) == []
    assert (same.json["a"], same.json["b"], same.json["divergedAtSeq"], same.json["eventDiffs"]) == (a, b, None, [])
    other = raw(host.base_url, "GET", f"/runs/{_wire(a)}:diff?against={_wire(f)}", key=host.key_a)
    assert other.status == 200 and isinstance(other.json["divergedAtSeq"], int) and other.json["eventDiffs"]
    assert _errors(_schema_validator("run-diff-response.schema.json"), other.json) == []


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
            first = pool.submit(
                raw, host.base_url, "POST", "/runs", body, key=host.key_a, headers={"Idempotency-Key": key}
            )
            deadline = time.monotonic() + 60
            while not held:
                assert time.monotonic() < deadline and not first.done(), (
                    f"the winner never reached StartExecution: {first.result() if first.done() else None}"
                )
                time.sleep(0.01)
            losers = [
                pool.submit(raw, host.base_url, "POST", "/runs", body, key=host.key_a, headers={"Idempotency-Key": key})
                for _ in range(4)
            ]
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


# --------------------------------------------------------------------------- v2-run-pause-resume (0170)


def _execution_state(run_id: str) -> tuple[str, str | None]:
    """The run's execution status and the state it is in now (from its Step Functions history)."""
    sfn = _ports().orchestrator._c
    arn = _ports().runs.get_run(run_id).execution_arn
    status = sfn.describe_execution(executionArn=arn)["status"]
    entered = [
        e["stateEnteredEventDetails"]["name"]
        for e in sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        if "stateEnteredEventDetails" in e
    ]
    return status, entered[-1] if entered else None


def test_pause_and_resume_on_a_terminal_run_are_409_run_terminal(host):
    from openwop_client.errors import WopError

    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-noop"))
    wait_terminal(client, run.runId)
    for call in (client.runs_pause, client.runs_resume):
        try:
            call(run.runId)
        except WopError as err:
            assert (err.status, err.envelope.error) == (409, "run_terminal")
        else:
            raise AssertionError("a lifecycle verb on a terminal run must be refused")


def test_pause_parks_the_run_on_a_task_token_and_resume_lets_it_finish(host):
    from openwop_client.errors import WopError
    from openwop_client.types import PauseRunRequest, ResumeRunRequest

    from tests.wire import raw

    client = host.client(host.key_a)
    # (a hold long enough that a loaded machine still pauses it before it ends)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-delay", inputs={"delayMs": 6000}))
    _wait_for(client, run.runId, lambda ev: "node.started" in [e.type for e in ev])
    paused = client.runs_pause(run.runId, PauseRunRequest(reason="conformance", drainPolicy="immediate"))
    assert (paused.runId, paused.status) == (run.runId, "paused") and paused.pausedAt
    assert client.runs_get(run.runId).status == "paused"
    try:
        client.runs_pause(run.runId)
    except WopError as err:
        assert (err.status, err.envelope.error, err.envelope.details) == (
            409,
            "run_state_conflict",
            {"runStatus": "paused"},
        )
    else:
        raise AssertionError("a second pause must be refused")
    # the hold's Wait ends, then the execution parks on its task token (no Lambda runs while it waits)
    deadline = time.monotonic() + 60
    while _execution_state(run.runId) != ("RUNNING", "ParkOnce") or not _ports().runs.get_aux(run.runId, "PARK"):
        assert time.monotonic() < deadline, "the paused run never parked"
        time.sleep(0.1)
    time.sleep(0.5)
    assert client.runs_get(run.runId).status == "paused"  # still waiting: nothing advanced it
    assert "node.completed" not in [e.type for e in all_events(client, run.runId)]
    resumed = client.runs_resume(run.runId, ResumeRunRequest(reason="conformance"))
    assert (resumed.runId, resumed.status) == (run.runId, "running") and resumed.resumedAt
    assert wait_terminal(client, run.runId).status == "completed"
    types = [e.type for e in all_events(client, run.runId)]
    assert types.index("run.paused") < types.index("run.resumed") < types.index("run.completed")
    paused_ev = next(e for e in all_events(client, run.runId) if e.type == "run.paused")
    assert paused_ev.payload == {"drainPolicy": "interrupt", "reason": "conformance"}
    # resume of a run that is not paused: 409 run_terminal now that it completed
    late = raw(host.base_url, "POST", f"/runs/{_wire(run.runId)}:resume", {}, key=host.key_a)
    assert (late.status, late.json["error"]) == (409, "run_terminal")


def test_resume_before_the_run_parks_and_cancel_of_a_paused_run(host):
    from openwop_client.errors import WopError

    from tests.wire import raw

    client = host.client(host.key_a)
    # paused and resumed while its hold still waits: the Park task finds it running and goes on by itself (a hold
    # long enough to outlast three requests on a loaded machine: at 2.5 s the run had completed by the second resume)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-delay", inputs={"delayMs": 10000}))
    _wait_for(client, run.runId, lambda ev: "node.started" in [e.type for e in ev])
    client.runs_pause(run.runId)
    client.runs_resume(run.runId)
    try:
        client.runs_resume(run.runId)
    except WopError as err:
        assert (err.status, err.envelope.error, err.envelope.details) == (
            409,
            "run_state_conflict",
            {"runStatus": "running"},
        )
    else:
        raise AssertionError("resuming a running run must be refused")
    assert wait_terminal(client, run.runId, timeout=90).status == "completed"
    # a paused run can be cancelled; its parked execution is stopped
    other = client.runs_create(CreateRunRequest(workflowId="conformance-cancellable", inputs={"delayMs": 60000}))
    _wait_for(client, other.runId, lambda ev: "node.started" in [e.type for e in ev])
    client.runs_pause(other.runId)
    assert client.runs_cancel(other.runId).status == "cancelled"
    assert all_events(client, other.runId)[-1].type == "run.cancelled"
    assert all_ended(host, other.runId)  # its hold's execution stopped, by the cancel or by its task (0191)
    # another tenant's run: the path rule, never a pause
    foreign = raw(host.base_url, "POST", f"/runs/{_wire(run.runId)}:pause", {}, key=host.key_b)
    assert (foreign.status, foreign.json["error"]) == (403, "id_tenant_mismatch")
    bad = raw(host.base_url, "POST", f"/runs/{_wire(run.runId)}:pause", {"drainPolicy": "later"}, key=host.key_a)
    assert (bad.status, bad.json["error"]) == (400, "validation_error")


def test_a_resume_landing_while_the_park_task_stores_its_token_never_strands_the_run(host):
    import json

    from tests.wire import raw

    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-delay", inputs={"delayMs": 6000}))
    _wait_for(client, run.runId, lambda ev: "node.started" in [e.type for e in ev])
    ddb = _ports().runs._c
    resumed = []

    def resume_first(params=None, **_kwargs):  # the Park task is about to store its token: the resume lands first
        text = json.dumps(params, default=str)
        if not resumed and '"PARK"' in text and run.runId in text:
            resumed.append(raw(host.base_url, "POST", f"/runs/{_wire(run.runId)}:resume", {}, key=host.key_a))

    client.runs_pause(run.runId)
    ddb.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", resume_first)
    try:
        # the resume found no token; the task then sees the run running, fails RunNotParked, and Advance goes on
        assert wait_terminal(client, run.runId).status == "completed"
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.TransactWriteItems", resume_first)
    assert [(r.status, r.json["status"]) for r in resumed] == [(202, "running")]
    arn = _ports().runs.get_run(run.runId).execution_arn
    history = _ports().orchestrator._c.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    failed = [e["taskFailedEventDetails"]["error"] for e in history if "taskFailedEventDetails" in e]
    assert failed == ["RunNotParked"]


def test_a_parked_run_whose_park_task_failed_for_good_fails_never_stays_parked(host):
    from shared.engine.kernel import fail_run

    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-cancellable", inputs={"delayMs": 60000}))
    _wait_for(client, run.runId, lambda ev: "node.started" in [e.type for e in ev])
    client.runs_pause(run.runId)
    # what the state machine's Catch runs after Park's retries are spent
    assert fail_run(_ports(), run.runId, {"Error": "States.TaskFailed"}) == {"runId": run.runId, "failed": True}
    snap = client.runs_get(run.runId)
    assert (snap.status, snap.error.code) == ("failed", "node_execution_failed")
    assert all_events(client, run.runId)[-1].type == "run.failed"


# --------------------------------------------------------------------------- v2-run-bulk-cancel (0170)


def test_bulk_cancel_over_the_cap_is_400_with_max_run_ids(host):
    from tests.wire import raw

    ids = [f"openwop-conformance-bulk-cap/opaque{i:03d}0123456789abcdef" for i in range(101)]
    res = raw(host.base_url, "POST", "/runs:bulk-cancel", {"runIds": ids}, key=host.key_a)
    assert (res.status, res.json["error"], res.json["details"]) == (400, "validation_error", {"maxRunIds": 100})


def test_bulk_cancel_answers_each_id_in_request_order_and_refuses_a_foreign_id_in_its_entry(host):
    from openwop_client.types import BulkCancelRunsRequest

    client = host.client(host.key_a)
    done = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, done)
    live = client.runs_create(CreateRunRequest(workflowId="conformance-cancellable", inputs={"delayMs": 60000})).runId
    foreign = "openwop-conformance-foreign-tenant/foreignopaque0123456789abcdef"
    other_tenant = host.client(host.key_b).runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    ids = [done, foreign, live, other_tenant, "not-a-run-id"]
    out = client.runs_bulk_cancel(BulkCancelRunsRequest(runIds=ids, reason="conformance"))
    assert [r.runId for r in out.results] == ids
    assert (out.results[0].ok, out.results[0].error["code"]) == (False, "run_terminal")
    assert (out.results[1].ok, out.results[1].error["code"]) == (False, "id_tenant_mismatch")
    assert (out.results[2].ok, out.results[2].status) == (True, "cancelled")
    assert (out.results[3].ok, out.results[3].error["code"]) == (False, "id_tenant_mismatch")
    assert (out.results[4].ok, out.results[4].error["code"]) == (False, "validation_error")
    assert client.runs_get(live).status == "cancelled"
    # the other tenant's run was never touched: it runs on to completion, not cancelled
    assert wait_terminal(host.client(host.key_b), other_tenant).status == "completed"


# --------------------------------------------------------------------------- discovery validates (capabilities)

# RFC 0244/0245/0251/0252 members the vendored schema (older) does not know yet: the one documented overlay.
EVAL_SUITE_OVERLAY = ("baselineSelection", "recordedFixtures", "fixtureMatching", "fixtureErrors", "regressionVerdict")


def _vendored():
    import json
    from pathlib import Path

    from referencing import Registry, Resource

    folder = Path(__file__).resolve().parents[2] / "shared" / "protocol" / "schemas" / "openwop-v2"
    registry = Registry()
    docs = {}
    for f in sorted(folder.glob("*.schema.json")):
        doc = json.loads(f.read_text("utf-8"))
        docs[f.name] = doc
        registry = registry.with_resource(doc["$id"], Resource.from_contents(doc))
    return docs, registry


def _schema_validator(name: str):
    from jsonschema import Draft202012Validator

    docs, registry = _vendored()
    return Draft202012Validator(docs[name], registry=registry)


def _capabilities_validator(overlay: bool):
    import copy

    from jsonschema import Draft202012Validator

    docs, registry = _vendored()
    schema = copy.deepcopy(docs["capabilities.schema.json"])
    if overlay:
        facet = schema["properties"]["agents"]["properties"]["evalSuite"]["properties"]
        for name in EVAL_SUITE_OVERLAY:
            assert name not in facet  # the day the official schema has them, drop the overlay
            facet[name] = {"type": "boolean"}
    return Draft202012Validator(schema, registry=registry)


def _errors(validator, doc) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_discovery_validates_against_the_official_capabilities_schema(host):
    import copy

    from tests.wire import raw

    doc = raw(host.base_url, "GET", "/.well-known/openwop").json
    assert _errors(_capabilities_validator(overlay=True), doc) == []
    stripped = copy.deepcopy(doc)
    for name in EVAL_SUITE_OVERLAY:
        assert stripped["agents"]["evalSuite"].pop(name) is True
    assert _errors(_capabilities_validator(overlay=False), stripped) == []
    assert (
        doc["limits"]["clarificationRounds"] == doc["limits"]["schemaRounds"] == doc["limits"]["envelopesPerTurn"] == 0
    )
    assert doc["idempotency"]["crossRegion"] == "single-region"
    assert doc["eventLog"]["crossEngineOrdering"] == {"orderingModel": "global-sequencer"}
    # the validator is not vacuous: the document as it was before (limits without its required bounds) fails
    broken = copy.deepcopy(doc)
    del broken["limits"]["schemaRounds"]
    assert any("schemaRounds" in e for e in _errors(_capabilities_validator(overlay=True), broken))


# --------------------------------------------------------------------------- interrupts and approvals


def _suspended(client, workflow_id="conformance-approval"):
    run = client.runs_create(CreateRunRequest(workflowId=workflow_id))
    deadline = time.monotonic() + 60
    while (snap := client.runs_get(run.runId)).status != "waiting-approval":
        assert snap.status not in ("completed", "failed", "cancelled") and time.monotonic() < deadline, snap.status
        time.sleep(0.05)
    assert snap.currentNodeId == "gate"
    return run.runId


def _resolve(host, run_id, value, key=None, node="gate"):
    from tests.wire import raw

    return raw(
        host.base_url, "POST", f"/runs/{_wire(run_id)}/interrupts/{node}", {"resumeValue": value}, key=key or host.key_a
    )


def test_an_approval_waits_parked_and_an_accept_completes_the_run(host):
    from openwop_client.types import ResolveInterruptRequest

    client = host.client(host.key_a)
    run_id = _suspended(client)
    requested = [e for e in all_events(client, run_id) if e.type == "interrupt.requested"]
    assert len(requested) == 1 and requested[0].nodeId == "gate"
    p = requested[0].payload
    assert p["kind"] == "approval" and p["key"] == "gate#1" and p["data"]["actions"] == ["accept", "reject"]
    assert p["interruptId"].startswith("tenant-a/i-")
    deadline = time.monotonic() + 60  # the execution waits in Park on its task token: no Lambda runs
    while _execution_state(run_id) != ("RUNNING", "ParkOnce") or not _ports().runs.get_aux(run_id, "PARK"):
        assert time.monotonic() < deadline, "the waiting run never parked"
        time.sleep(0.1)
    out = client.interrupts_resolve_by_run(run_id, "gate", ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert (out.runId, out.nodeId, out.status) == (run_id, "gate", "running")
    assert wait_terminal(client, run_id).status == "completed"
    events = all_events(client, run_id)
    assert [e.type for e in events] == [
        "run.started",
        "node.started",
        "interrupt.requested",
        "interrupt.resolved",
        "node.completed",
        "run.completed",
    ]
    resolved = events[3].payload
    assert (resolved["action"], resolved["decision"], resolved["kind"]) == ("accept", "granted", "approval")
    assert resolved["interruptId"] == p["interruptId"] and resolved["resolvedBy"]["subjectId"] == "key-tenant-a"
    assert resolved["resumeValue"]["decidedBy"] == "key-tenant-a" and resolved["resumeValue"]["decidedAt"]
    # a second resolve after the run completed: one code per state
    again = _resolve(host, run_id, {"action": "accept"})
    assert (again.status, again.json["error"]) == (409, "interrupt_already_resolved")


def test_a_reject_fails_the_gate_and_the_run_with_approval_rejected(host):
    client = host.client(host.key_a)
    run_id = _suspended(client)
    assert _resolve(host, run_id, {"action": "reject", "feedback": "no"}).status == 200
    snap = wait_terminal(client, run_id)
    assert (snap.status, snap.error.code) == ("failed", "approval_rejected")
    events = all_events(client, run_id)
    resolved = next(e.payload for e in events if e.type == "interrupt.resolved")
    assert (resolved["action"], resolved["decision"]) == ("reject", "rejected")
    node_failed = next(e for e in events if e.type == "node.failed")
    assert node_failed.nodeId == "gate"
    assert (node_failed.payload["error"]["code"], node_failed.payload["error"]["retryable"]) == (
        "approval_rejected",
        False,
    )
    run_failed = next(e for e in events if e.type == "run.failed")
    assert (run_failed.payload["error"]["code"], run_failed.payload["failedNodeId"]) == ("approval_rejected", "gate")


def test_resolve_refusals_cancelled_unknown_bad_action_foreign_and_racing(host):
    from concurrent.futures import ThreadPoolExecutor

    client = host.client(host.key_a)
    run_id = _suspended(client)
    bad = _resolve(host, run_id, {"action": "refine"})
    assert (bad.status, bad.json["error"]) == (400, "validation_error")
    assert _resolve(host, run_id, "accept").status == 400
    assert _resolve(host, run_id, {"action": "accept"}, node="nope").status == 404
    foreign = _resolve(host, run_id, {"action": "accept"}, key=host.key_b)
    assert (foreign.status, foreign.json["error"]) == (403, "id_tenant_mismatch")
    unknown = _resolve(host, "tenant-a/openwopconformanceunknown0000", {"action": "accept"})
    assert (unknown.status, unknown.json["error"]) == (404, "not_found")
    assert client.runs_get(run_id).status == "waiting-approval"  # nothing above moved it
    # two racing resolves: exactly one wins
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: _resolve(host, run_id, {"action": "accept"}), range(4)))
    assert sorted(a.status for a in answers) == [200, 409, 409, 409]
    assert {a.json["error"] for a in answers if a.status == 409} == {"interrupt_already_resolved"}
    assert wait_terminal(client, run_id).status == "completed"
    assert [e.type for e in all_events(client, run_id)].count("interrupt.resolved") == 1
    # a resolve after the run was cancelled
    other = _suspended(client)
    assert client.runs_cancel(other).status == "cancelled"
    assert all_ended(host, other)  # its hold's execution stopped, by the cancel or by its task (0191)
    late = _resolve(host, other, {"action": "accept"})
    assert (late.status, late.json["error"]) == (409, "interrupt_already_resolved")


def test_a_resolver_outside_approvers_list_is_refused_and_the_gate_stays_pending(host):
    from shared.services.auth import put_api_key

    client = host.client(host.key_a)
    caps = client.discovery_capabilities().raw
    assert caps["interrupt"]["refKinds"] == ["principal"] and caps["interrupt"]["tokenAlgs"] == ["hs256"]
    assert {"conformance-approval", "conformance-approval-approvers"} <= set(caps["fixtures"])
    run_id = _suspended(client, "conformance-approval-approvers")
    refused = _resolve(host, run_id, {"action": "accept"})
    assert (refused.status, refused.json["error"]) == (403, "forbidden")
    assert client.runs_get(run_id).status == "waiting-approval"
    assert "interrupt.resolved" not in [e.type for e in all_events(client, run_id)]
    approver_key = unique("listed-approver-key")
    put_api_key(_ports(), approver_key, "tenant-a", "urn:conformance:listed-approver")
    assert _resolve(host, run_id, {"action": "accept"}, key=approver_key).status == 200
    assert wait_terminal(client, run_id).status == "completed"
    resolved = next(e.payload for e in all_events(client, run_id) if e.type == "interrupt.resolved")
    assert resolved["resolvedBy"]["subjectId"] == "urn:conformance:listed-approver"


def test_interrupt_token_scheme(host):
    from openwop_client.errors import WopError
    from openwop_client.types import ResolveInterruptRequest

    from tests.wire import raw

    for token in (
        "b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef",
        "ow2.hs256.nokid.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef",
        "ow2.rs256.h1.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef",
    ):
        res = raw(host.base_url, "GET", f"/interrupts/{token}")
        assert (res.status, res.json["error"]) == (401, "interrupt_token_invalid"), token
    client = host.client(host.key_a)
    run_id = _suspended(client)
    minted = raw(
        host.base_url, "POST", f"/host/openwop-serverless/runs/{_wire(run_id)}/interrupts/gate/token", key=host.key_a
    )
    assert minted.status == 201 and minted.json["token"].startswith("ow2.hs256.h1.")
    token = minted.json["token"]
    seen = client.interrupts_inspect_by_token(token)
    assert (seen.kind, seen.key, seen.data["actions"]) == ("approval", "gate#1", ["accept", "reject"])
    head, mac = token.rsplit(".", 1)
    forged = raw(host.base_url, "GET", f"/interrupts/{head}.{'A' * len(mac)}")
    assert (forged.status, forged.json["error"]) == (401, "interrupt_token_invalid")
    out = client.interrupts_resolve_by_token(token, ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert out["status"] == "running"
    assert wait_terminal(client, run_id).status == "completed"
    resolved = next(e.payload for e in all_events(client, run_id) if e.type == "interrupt.resolved")
    assert resolved["resolvedBy"]["subjectId"] == "key-tenant-a"  # the approver who minted the token
    try:  # the token died with its interrupt
        client.interrupts_inspect_by_token(token)
    except WopError as err:
        assert (err.status, err.envelope.error) == (409, "interrupt_already_resolved")
    else:
        raise AssertionError("a spent token must be refused")
    # only an eligible approver may mint a token
    gated = _suspended(client, "conformance-approval-approvers")
    refused = raw(
        host.base_url, "POST", f"/host/openwop-serverless/runs/{_wire(gated)}/interrupts/gate/token", key=host.key_a
    )
    assert (refused.status, refused.json["error"]) == (403, "forbidden")
    client.runs_cancel(gated)


def test_replay_takes_the_recorded_resolution_and_never_asks_again(host):
    client = host.client(host.key_a)
    run_id = _suspended(client)
    assert _resolve(host, run_id, {"action": "accept"}).status == 200
    assert wait_terminal(client, run_id).status == "completed"
    source = all_events(client, run_id)
    for from_seq in (0, 3):  # from the start, and from inside the gate (after interrupt.requested)
        fork = client.runs_fork(run_id, ForkRunRequest(fromSeq=from_seq, mode="replay"))
        assert wait_terminal(client, fork.runId).status == "completed"  # nobody resolved it: the record did
        forked = all_events(client, fork.runId)
        assert "replay.diverged" not in [e.type for e in forked]
        assert [e.payload for e in forked if e.type == "interrupt.resolved"][-1] == next(
            e.payload for e in source if e.type == "interrupt.resolved"
        )
    # a branch asks again: it waits for a new decision
    branch = client.runs_fork(run_id, ForkRunRequest(fromSeq=0, mode="branch"))
    deadline = time.monotonic() + 60
    while client.runs_get(branch.runId).status != "waiting-approval":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.runs_cancel(branch.runId)
