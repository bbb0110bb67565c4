"""RFC 0252 end to end through openwop-client: fixtures derived from a recorded run, uniform refusals, the
content-free lane, failed source calls, and erasure of a source reaching every copy derived from it and every
eval run served from it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from tests.helpers import eventually, unique
from tests.integration.test_eval_runs import (
    AGENT,
    counter,
    eval_request,
    golden,
    put_suite,
    refused,
    refused_alike,
    run_eval,
    script,
    summary_json,
)
from tests.wire import all_events, raw, wait_terminal

SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
DRIFT = "conformance-eval-recorded-drift"
CONTENT_FREE = "conformance-eval-agent-content-free"


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def returned(client: Any, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in all_events(client, run_id) if e.type == "agent.tool-returned"]


@pytest.fixture(scope="module")
def sources(host):
    a, b = host.client(host.key_a), host.client(host.key_b)
    return {"a": run_eval(a, SOURCE), "b": run_eval(b, SOURCE)}


def test_replay_serves_the_recorded_answers_without_a_live_call(host, sources):
    client = host.client(host.key_a)
    source = sources["a"]
    src_returned = returned(client, source)
    assert [r["status"] for r in src_returned] == ["ok", "ok"]
    count = src_returned[0]["outcome"]["count"]
    assert src_returned[1]["outcome"] == {"key": "k1", "count": count}
    assert [r.source for r in _ports().tool_calls.list_calls(source)] == ["live", "live"]

    before = counter("tenant-a", "k1")
    created = client.runs_create(eval_request(REPLAY, fixtureRuns={"record": source}))
    assert wait_terminal(client, created.runId).status == "completed"
    assert counter("tenant-a", "k1") == before
    events = all_events(client, created.runId)
    started = [e.payload for e in events if e.type == "eval.started"][0]
    assert started["fixtureRuns"] == {"record": source}
    replay_returned = [e.payload for e in events if e.type == "agent.tool-returned"]
    assert [r["outcome"] for r in replay_returned] == [r["outcome"] for r in src_returned]
    summary = summary_json(host, host.key_a, created.runId)
    assert [(t["taskId"], t["fixtureMissCount"], t["passed"]) for t in summary["tasks"]] == [("record", 0, True)]
    assert [r.source for r in _ports().tool_calls.list_calls(created.runId)] == ["fixture", "fixture"]
    # the derived copy is stored once under the source, referenced from the eval run, never on the wire
    from shared import keys

    copies = _ports().blobs.list_keys(keys.derived_prefix(source))
    assert copies == [keys.derived_key(source, created.runId, "record")]
    wire = json.dumps([e.payload for e in events]) + json.dumps(summary)
    assert "argsMatch" not in wire and keys.derived_prefix(source) not in wire


def test_drift_misses_once_and_fails_closed(host, sources):
    client = host.client(host.key_a)
    before = (counter("tenant-a", "k1"), counter("tenant-a", "k2"))
    run = run_eval(client, DRIFT, fixtureRuns={"record": sources["a"]})
    assert (counter("tenant-a", "k1"), counter("tenant-a", "k2")) == before
    task = summary_json(host, host.key_a, run)["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"], task["score"]) == (1, False, 0.0)
    statuses = [(r["status"], r.get("outcome")) for r in returned(client, run)]
    assert statuses[0][0] == "error" and statuses[1][0] == "ok"
    assert statuses[1][1]["key"] == "k1"
    scored = [e.payload for e in all_events(client, run) if e.type == "eval.scored"]
    assert scored == [{"taskId": "record", "score": 0.0, "passed": False, "fixtureMissCount": 1}]
    assert wait_terminal(client, run).status == "completed"  # a failing task does not fail the run


def test_unusable_sources_are_refused_with_identical_bytes(host, sources):
    client = host.client(host.key_a)
    noop = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, noop)
    content_free = run_eval(client, SOURCE, agentId=CONTENT_FREE)  # invoked another agent, not this eval's
    # a source whose agent ran and whose calls are recorded, but which is still running: it holds after the agent
    running = client.runs_create(
        CreateRunRequest(workflowId=_agent_then_hold(), inputs={"script": script(("conformance.eval:echo", {"i": 1}))})
    ).runId
    eventually(lambda: [e for e in all_events(client, running) if e.type == "agent.invocation-completed"], timeout=30)
    # a source whose calls the host no longer holds
    dropped = run_eval(client, SOURCE)
    _ports().tool_calls.delete_all(dropped)

    def body(source: str) -> CreateRunRequest:
        return eval_request(REPLAY, fixtureRuns={"record": source})

    unknown = "tenant-a/r-0000000000000000000000000000"
    reference = refused(client, body(unknown))
    cases = {
        "undecodable": "not a run id",
        "tenant B's source": sources["b"],
        "a workflow run that never invoked the agent": noop,
        "a run of another agent": content_free,
        "not terminal": running,
        "calls no longer held": dropped,
    }
    refused_alike(client, body, reference, cases)
    assert client.runs_get(running).status == "running"
    # the same bytes as an unusable baseline: one answer for every unusable reference
    base_body = eval_request(
        "conformance-eval-regression-candidate", evalModes=["golden", "regression"], baselineRunId=unknown
    )
    assert refused(client, base_body) == reference
    client.runs_cancel(running)


def _agent_then_hold() -> str:
    """The scripted conformance agent, then a 60 s hold: a source that stays running after its agent finished."""
    from shared.services.workflows import register_workflow
    from tests.workflows import SCRIPT_VARIABLE, definition, edge, node, static, variable

    doc = definition(
        unique("agent-hold"),
        [
            node("agent", "core.agent", config={"agentId": AGENT}, inputs={"input": variable("script")}),
            node("hold", "core.conformance.hold", inputs={"delayMs": static(60_000)}),
        ],
        [edge("agent", "hold")],
        variables=[SCRIPT_VARIABLE],
    )
    return register_workflow(_ports(), "tenant-a", doc)


def test_fixture_runs_field_refusals(host, sources):
    client = host.client(host.key_a)
    source = sources["a"]
    marker = unique("refused")
    cases: list[dict[str, Any]] = [
        {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": AGENT, "fixtureRuns": {"no-such-task": source}},
        {"mode": "eval", "evalSuiteRef": SOURCE, "agentId": AGENT, "fixtureRuns": {"record": source}},
        {"workflowId": "conformance-noop", "fixtureRuns": {"record": source}},
        {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": AGENT, "fixtureRuns": {}},
        {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": AGENT, "fixtureRuns": ["record", source]},
        {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": AGENT, "fixtureRuns": {"record": 7}},
        {
            "mode": "eval",
            "evalSuiteRef": REPLAY,
            "agentId": AGENT,
            "fixtureRuns": {"record": source},
            "evalModes": ["golden", "live-shadow"],
        },
    ]
    for body in cases:
        refused(client, {**body, "tags": [marker]}, host, host.key_a)
    # more sources than one create request checks and copies (refused before any is read)
    many = {"record": source, **{f"t{i}": source for i in range(200)}}
    text = refused(
        client,
        {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": AGENT, "fixtureRuns": many, "tags": [marker]},
        host,
        host.key_a,
    )
    assert "more than 200" in text
    # a task whose fixtures carry only onMiss is refused as a target too
    suite = {
        "suiteId": "tests.local.evals.onmiss",
        "version": f"1.0.{int(time.time() * 1000) % 1000000}",
        "modes": ["golden"],
        "tasks": [{"taskId": "record", "input": script(), "expected": golden("done"), "fixtures": {"onMiss": "fail"}}],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    refused(
        client,
        {
            "mode": "eval",
            "evalSuiteRef": f"{suite['suiteId']}@{suite['version']}",
            "agentId": AGENT,
            "fixtureRuns": {"record": source},
            "tags": [marker],
        },
        host,
        host.key_a,
    )
    listed = raw(host.base_url, "GET", "/runs?limit=100", key=host.key_a).json["runs"]
    assert not [r for r in listed if marker in (r.get("tags") or [])]


def test_a_content_free_source_is_usable(host):
    client = host.client(host.key_a)
    source = run_eval(client, SOURCE, agentId=CONTENT_FREE)
    called = [e.payload for e in all_events(client, source) if e.type == "agent.tool-called"]
    assert called and all("argsHash" in p and "inputs" not in p for p in called)
    assert all("outcome" not in p for p in returned(client, source))
    before = counter("tenant-a", "k1")
    run = run_eval(client, REPLAY, agentId=CONTENT_FREE, fixtureRuns={"record": source})
    assert counter("tenant-a", "k1") == before
    task = summary_json(host, host.key_a, run)["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)
    recorded = [r.result for r in _ports().tool_calls.list_calls(source)]
    served = [r.result for r in _ports().tool_calls.list_calls(run)]
    assert served == recorded and recorded[0]["key"] == "k1"


def test_a_source_with_a_failed_call_is_usable_and_its_entry_is_an_error(host):
    from tests.helpers import derived_copies

    client = host.client(host.key_a)
    calls = script(("conformance.eval:fail", {"why": "boom"}), ("conformance.eval:echo", {"x": 1}))
    version = f"1.0.{int(time.time() * 1000) % 1000000}"
    src_suite = {
        "suiteId": "tests.local.evals.failing-source",
        "version": version,
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": "t",
                "input": calls,
                "expected": golden("done"),
                "fixtures": {"toolResponses": [], "onMiss": "live"},
            }
        ],
    }
    replay_suite = {
        "suiteId": "tests.local.evals.failing-replay",
        "version": version,
        "modes": ["golden"],
        "tasks": [{"taskId": "t", "input": calls, "expected": golden("done")}],
    }
    assert put_suite(host, host.key_a, src_suite).status == 201
    assert put_suite(host, host.key_a, replay_suite).status == 201
    source = run_eval(client, f"tests.local.evals.failing-source@{version}")
    assert [r["status"] for r in returned(client, source)] == ["error", "ok"]
    run = run_eval(client, f"tests.local.evals.failing-replay@{version}", fixtureRuns={"t": source})
    out = returned(client, run)
    assert out[0]["status"] == "error" and out[0]["error"] == returned(client, source)[0]["error"]
    assert out[1]["outcome"] == {"x": 1}
    assert summary_json(host, host.key_a, run)["tasks"][0]["fixtureMissCount"] == 0
    entries = derived_copies(_ports(), run)["t"]
    assert entries[0]["isError"] is True and entries[0]["response"]["code"] == "external_call_failed"
    assert entries[0]["args"] == {"why": "boom"} and entries[0]["argsMatch"] == "exact"
    assert "isError" not in entries[1] and entries[1]["response"] == {"x": 1}


def test_erasing_a_source_erases_its_derived_copies_and_refuses_late_writes(host):
    from shared import keys
    from shared.errors import RunGoneError
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.ports import ToolCallRecord
    from tests.helpers import derived_copies

    client = host.client(host.key_a)
    ports = _ports()
    source = run_eval(client, SOURCE)
    used = run_eval(client, REPLAY, fixtureRuns={"record": source})
    assert derived_copies(ports, used)["record"]
    assert ports.blobs.list_keys(keys.derived_prefix(source))

    # another tenant cannot erase it
    r = raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_b)
    assert (r.status, r.json["error"]) == (403, "id_tenant_mismatch")
    r = raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a)
    assert r.status == 204
    assert wait_for_stream_idle(20)
    assert raw(host.base_url, "DELETE", f"/runs/{project_id(source)}", key=host.key_a).status == 204  # idempotent

    assert ports.runs.get_run(source) is None
    assert ports.events.read_events(source) == []
    assert ports.tool_calls.list_calls(source) == []
    assert ports.blobs.list_keys(keys.derived_prefix(source)) == []
    assert raw(host.base_url, "GET", f"/runs/{project_id(source)}", key=host.key_a).status == 404
    # the eval run served from it is derived from it: erased with it (its plan, log and summary), 404 like any run
    assert ports.runs.get_run(used) is None and derived_copies(ports, used) == {}
    assert ports.events.read_events(used) == [] and ports.tool_calls.list_calls(used) == []
    fork = raw(host.base_url, "POST", f"/runs/{project_id(used)}:fork", {"mode": "replay"}, key=host.key_a)
    assert (fork.status, fork.json["error"]) == (404, "not_found")
    # late writes for the erased source fail
    late = ToolCallRecord(
        run_id=source,
        call_key="Z#00000",
        agent_id=AGENT,
        invocation_id="late:1",
        delegate=False,
        tool_name="conformance.eval:echo",
        call_id="late:1#0",
        args={},
        status="ok",
        result={},
    )
    with pytest.raises(RunGoneError):
        ports.tool_calls.put_call(late, 0)
    with pytest.raises(RunGoneError):
        ports.runs.put_aux(source, keys.TRIAL_PREFIX + "late", {"late": True}, 0)
    with pytest.raises(RunGoneError):
        ports.events.append_events(source, 100, [{"sequence": 100, "type": "run.completed", "payload": {}}])
    assert ports.tool_calls.list_calls(source) == [] and ports.runs.query_aux(source, keys.TRIAL_PREFIX) == []
    # and the erased run is no longer usable as a source
    refused(client, eval_request(REPLAY, fixtureRuns={"record": source}))


def test_the_cli_erases_a_run_of_the_named_tenant(host, capsys):
    from shared.local.commands import main
    from shared.local.ddb_streams import wait_for_stream_idle

    client = host.client(host.key_a)
    run = run_eval(client, SOURCE)
    with pytest.raises(SystemExit) as err:
        main(["runs", "delete", run, "--tenant", "tenant-b"])
    assert "id_tenant_mismatch" in str(err.value)
    assert _ports().runs.get_run(run) is not None
    assert main(["runs", "delete", run, "--tenant", "tenant-a"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"runId": run, "erased": True}
    assert wait_for_stream_idle(20)
    assert _ports().runs.get_run(run) is None and _ports().tool_calls.list_calls(run) == []


def test_a_ttl_removal_of_a_source_reaches_its_derived_copies(host):
    """Retention: an expired source reads as gone at once, and the TTL service's removal erases its copies."""
    from shared import keys
    from shared.local.ddb_streams import wait_for_stream_idle
    from shared.local.ttl import ttl_sweep
    from shared.settings import get_settings
    from tests.helpers import derived_copies

    client = host.client(host.key_a)
    ports = _ports()
    source = run_eval(client, SOURCE)
    used = run_eval(client, REPLAY, fixtureRuns={"record": source})
    assert ports.blobs.list_keys(keys.derived_prefix(source))
    past = int(time.time()) - 60
    ddb = host.aws.client("dynamodb")
    ddb.update_item(
        TableName=get_settings().runs_table,
        Key={"pk": {"S": source}, "sk": {"S": "RUN"}},
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues={":t": {"N": str(past)}},
    )
    # TTL deletion can lag for days: an expired run already reads as gone, and is no longer a usable source
    assert raw(host.base_url, "GET", f"/runs/{project_id(source)}", key=host.key_a).status == 404
    unknown = refused(client, eval_request(REPLAY, fixtureRuns={"record": "tenant-a/r-2222222222222222222222"}))
    assert refused(client, eval_request(REPLAY, fixtureRuns={"record": source})) == unknown
    assert ttl_sweep(past, tables=[get_settings().runs_table]) >= 1
    assert wait_for_stream_idle(20)
    assert ports.blobs.list_keys(keys.derived_prefix(source)) == []
    assert ports.tool_calls.list_calls(source) == [] and ports.events.read_events(source) == []
    # the eval run served from it goes with it
    assert ports.runs.get_run(used, include_expired=True) is None and derived_copies(ports, used) == {}
    assert ports.events.read_events(used) == []
