"""Eval runs end to end through openwop-client against the local host: RFC 0081 suites, RFC 0251 baselines,
fixtures and trials (RFC 0244 as this host implements it), the summary endpoint, suite registration."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from openwop_client import WopError
from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from tests.helpers import setting, unique
from tests.wire import all_events, raw, wait_terminal

AGENT = "conformance-eval-agent"
BASE = "conformance-eval-regression-base"
CANDIDATE = "conformance-eval-regression-candidate"
TRAJECTORY = "conformance-eval-trajectory"
REGRESSION_SUITE_ID = "conformance.openwop.evals.regression"
LEAK_KEYS = {
    "taskOutput",
    "output",
    "rubric",
    "completion",
    "prompt",
    "body",
    "secret",
    "credentials",
    "token",
    "apiKey",
}


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def eval_request(ref: str, **kw: Any) -> CreateRunRequest:
    return CreateRunRequest(mode="eval", evalSuiteRef=ref, agentId=kw.pop("agentId", AGENT), **kw)


def run_eval(client: Any, ref: str, **kw: Any) -> str:
    run = client.runs_create(eval_request(ref, **kw))
    snap = wait_terminal(client, run.runId, timeout=60)
    assert snap.status == "completed", snap
    return run.runId


def refused(client: Any, body: CreateRunRequest | dict[str, Any], host: Any = None, key: str | None = None) -> str:
    """The raw body of a refused create (status 400 validation_error asserted)."""
    if isinstance(body, dict):
        r = raw(host.base_url, "POST", "/runs", body, key=key)
        assert r.status == 400, (r.status, r.text)
        assert r.json["error"] == "validation_error"
        return r.text
    with pytest.raises(WopError) as err:
        client.runs_create(body)
    assert err.value.status == 400, err.value.raw_text
    assert err.value.envelope is not None and err.value.envelope.error == "validation_error"
    return err.value.raw_text


def refused_alike(client: Any, body: Any, reference: str, cases: dict[str, str]) -> None:
    """Each unusable reference (by reason) is refused with the bytes of ``reference`` and never echoed."""
    for reason, value in cases.items():
        text = refused(client, body(value))
        assert text == reference, reason
        assert value not in text, reason


def summary_json(host: Any, key: str, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/eval-summary", key=key)
    assert r.status == 200, r.text
    return r.json


def put_suite(host: Any, key: str, doc: dict[str, Any]) -> Any:
    return raw(host.base_url, "POST", "/host/openwop-serverless/eval-suites", doc, key=key)


def counter(tenant: str, key: str) -> int:
    return _ports().host.counter_read(f"COUNTER#{tenant}", key)


def script(*calls: tuple[str, Any], answer: Any = "done") -> dict[str, Any]:
    return {"calls": [{"tool": t, "args": a} for t, a in calls], "answer": answer}


def golden(value: Any) -> dict[str, Any]:
    return {"kind": "golden", "match": {"strategy": "exact", "value": value}}


@pytest.fixture(scope="module")
def runs(host):
    """Completed runs shared by this module: tenant A's base and trajectory runs, tenant B's base run."""
    a, b = host.client(host.key_a), host.client(host.key_b)
    return {"base_a": run_eval(a, BASE), "base_b": run_eval(b, BASE), "trajectory_a": run_eval(a, TRAJECTORY)}


# --------------------------------------------------------------------------- RFC 0251: the regression baseline


def test_base_then_candidate_reports_a_paired_unchanged_verdict(host, runs):
    client = host.client(host.key_a)
    base = runs["base_a"]
    base_summary = summary_json(host, host.key_a, base)
    assert base_summary["aggregateScore"] == pytest.approx(2 / 3)
    assert [(t["taskId"], t["passed"]) for t in base_summary["tasks"]] == [
        ("base-only", False),
        ("shared-a", True),
        ("shared-b", True),
    ]
    assert "regression" not in base_summary

    created = client.runs_create(eval_request(CANDIDATE, evalModes=["golden", "regression"], baselineRunId=base))
    assert created.runId.startswith("tenant-a/") and created.status == "pending"
    assert wait_terminal(client, created.runId).status == "completed"
    events = all_events(client, created.runId)
    started = [e for e in events if e.type == "eval.started"]
    assert len(started) == 1
    assert started[0].payload == {
        "suiteId": REGRESSION_SUITE_ID,
        "suiteVersion": "1.1.0",
        "taskCount": 3,
        "modes": ["golden", "regression"],
        "baselineRunId": base,
    }

    summary = summary_json(host, host.key_a, created.runId)  # raw JSON: the client drops verdict and pairing
    reg = summary["regression"]
    assert reg["baselineRunId"] == base
    assert abs(reg["scoreDelta"] - 1 / 3) < 1e-9
    assert reg["pairedTaskCount"] == 2
    assert reg["verdict"] not in ("improved", "regressed")
    assert reg["verdict"] == "unchanged"
    assert summary["aggregateScore"] == 1.0 and summary["passed"] is True
    assert [(t["taskId"], t["score"], t["passed"], t["fixtureMissCount"]) for t in summary["tasks"]] == [
        ("shared-a", 1.0, True, 0),
        ("shared-b", 1.0, True, 0),
        ("candidate-only", 1.0, True, 0),
    ]

    parsed = client.runs_eval_summary(created.runId)
    assert parsed is not None and parsed.regression is not None and parsed.regression.baselineRunId == base
    completed = [e for e in events if e.type == "eval.completed"][0].payload
    assert completed == {
        "aggregateScore": 1.0,
        "passed": True,
        "taskCount": 3,
        "passedCount": 3,
        "regressionVsBaseline": reg["scoreDelta"],
    }
    assert events[-1].type == "run.completed" and events[-1].payload == {"outputs": summary}


def test_eval_run_event_sequence_and_content_free_eval_payloads(host, runs):
    client = host.client(host.key_a)
    events = all_events(client, runs["base_a"])
    assert [e.sequence for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["run.started", "eval.started"] and types[-2:] == ["eval.completed", "run.completed"]
    assert types.count("eval.scored") == 3 == events[1].payload["taskCount"]
    # per task: invocation-started ... decided, invocation-completed, then its eval.scored
    scored_at = [i for i, t in enumerate(types) if t == "eval.scored"]
    for i in scored_at:
        assert types[i - 1] == "agent.invocation-completed" and types[i - 2] == "agent.decided"
    assert [events[i].payload["taskId"] for i in scored_at] == ["base-only", "shared-a", "shared-b"]
    assert events[0].payload["workflowId"] == BASE and events[0].payload["owner"]["tenant"] == "tenant-a"
    invocations = [e.payload["invocationId"] for e in events if e.type == "agent.invocation-started"]
    assert invocations == ["base-only:1", "shared-a:1", "shared-b:1"]
    for e in events:
        if e.type.startswith("eval."):
            assert not LEAK_KEYS & set(e.payload), e
        if e.type == "eval.scored":
            assert set(e.payload) == {"taskId", "score", "passed", "fixtureMissCount"}
    snap = client.runs_get(runs["base_a"])
    assert snap.workflowId == BASE and snap.status == "completed"


def test_unusable_baselines_are_refused_with_identical_bytes(host, runs):
    client = host.client(host.key_a)
    # a run of this suiteId still in flight: tenant A's own slower version of the suite
    slow = {
        "suiteId": REGRESSION_SUITE_ID,
        "version": f"9.{int(time.time() * 1000) % 100000}.0",
        "trials": 10,
        "modes": ["golden", "regression"],
        "tasks": [{"taskId": f"t{i}", "input": script(answer="x"), "expected": golden("x")} for i in range(12)],
    }
    assert put_suite(host, host.key_a, slow).status == 201
    with setting("EVAL_TRIALS_PER_BATCH", "1"):  # 120 child executions of one trial: it is still running below
        running = client.runs_create(eval_request(f"{REGRESSION_SUITE_ID}@{slow['version']}")).runId
        workflow_run = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId

        def body(baseline: str) -> CreateRunRequest:
            return eval_request(CANDIDATE, evalModes=["golden", "regression"], baselineRunId=baseline)

        unknown = "tenant-a/r-0000000000000000000000000000"
        reference = refused(client, body(unknown))
        cases = {
            "unknown other opaque": "tenant-a/r-zzzzzzzzzzzzzzzzzzzzzz",
            "undecodable": "not a run id",
            "undecodable escape": "tenant-a~zz",
            "unknown tenant": "tenant-zz/r-0000000000000000000000000000",
            "tenant B's completed base": runs["base_b"],
            "another suite": runs["trajectory_a"],
            "a workflow run": workflow_run,
            "not completed": running,
        }
        refused_alike(client, body, reference, cases)
        assert client.runs_get(running).status not in ("completed", "failed", "cancelled")  # it was in flight
    env = json.loads(reference)
    assert set(env) == {"error", "message"} and unknown not in reference
    assert wait_terminal(client, running, timeout=60).status == "completed"
    assert wait_terminal(client, workflow_run).status == "completed"


def test_refusal_rows_before_any_run_exists(host, runs):
    client = host.client(host.key_a)
    marker = unique("refused")
    base = runs["base_a"]
    cases: list[dict[str, Any]] = [
        # RFC 0251 §B
        {"mode": "eval", "evalSuiteRef": CANDIDATE, "agentId": AGENT, "evalModes": ["golden"], "baselineRunId": base},
        {"mode": "eval", "evalSuiteRef": CANDIDATE, "agentId": AGENT, "evalModes": ["golden", "regression"]},
        {"mode": "eval", "evalSuiteRef": TRAJECTORY, "agentId": AGENT, "evalModes": ["rubric"]},
        {"mode": "eval", "evalSuiteRef": CANDIDATE, "agentId": AGENT, "evalModes": ["golden", "live-shadow"]},
        {"workflowId": "conformance-noop", "baselineRunId": base},
        {"workflowId": "conformance-noop", "evalModes": ["golden"]},
        {"workflowId": "conformance-noop", "fixtureRuns": {"record": base}},
        # eval.md §3 rows 2, 3, 5, 17 and the suite / agent rows
        {"mode": "eval", "agentId": AGENT},
        {"mode": "eval", "evalSuiteRef": BASE},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "unknownKey": 1},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "evalModes": []},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "evalModes": ["golden", "golden"]},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "evalModes": ["gold"]},
        {
            "mode": "eval",
            "evalSuiteRef": BASE,
            "agentId": AGENT,
            "configurable": {"version": 1, "evalModes": ["golden"]},
        },
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "configurable": {"version": 1, "baselineRunId": base}},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": "no-such-agent"},
        {"mode": "eval", "evalSuiteRef": "no-such-suite", "agentId": AGENT},
        {"mode": "eval", "evalSuiteRef": "https://conformance.openwop.dev/eval-suites/no-such-suite", "agentId": AGENT},
        {"mode": "eval", "evalSuiteRef": BASE, "agentId": AGENT, "workflowId": "conformance-noop"},
    ]
    for body in cases:
        refused(client, {**body, "tags": [marker]}, host, host.key_a)
    listed = raw(host.base_url, "GET", "/runs?limit=100", key=host.key_a).json["runs"]
    assert not [r for r in listed if marker in (r.get("tags") or [])]
    # an eval fixture id is not a workflow
    r = raw(host.base_url, "POST", "/runs", {"workflowId": BASE}, key=host.key_a)
    assert r.status == 404 and r.json["error"] == "not_found"


# --------------------------------------------------------------------------- the summary endpoint


def test_eval_summary_answers(host, runs):
    client = host.client(host.key_a)
    workflow_run = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, workflow_run)
    assert client.runs_eval_summary(workflow_run) is None  # 404 for a non-eval run
    r = raw(host.base_url, "GET", f"/runs/{project_id(workflow_run)}/eval-summary", key=host.key_a)
    assert (r.status, r.json["error"]) == (404, "not_found")
    r = raw(host.base_url, "GET", f"/runs/{project_id(runs['base_b'])}/eval-summary", key=host.key_a)
    assert (r.status, r.json["error"]) == (403, "id_tenant_mismatch")
    r = raw(
        host.base_url,
        "GET",
        f"/runs/{project_id('tenant-a/r-0000000000000000000000000001')}/eval-summary",
        key=host.key_a,
    )
    assert r.status == 404
    # while running: 409 run_state_conflict with details.runStatus
    slow = {
        "suiteId": "tests.local.evals.slow",
        "version": "1.0.0",
        "modes": ["golden"],
        "trials": 10,
        "tasks": [{"taskId": f"t{i}", "input": script(answer="x"), "expected": golden("x")} for i in range(12)],
    }
    assert put_suite(host, host.key_a, slow).status in (200, 201)
    run = client.runs_create(eval_request("tests.local.evals.slow@1.0.0")).runId
    r = raw(host.base_url, "GET", f"/runs/{project_id(run)}/eval-summary", key=host.key_a)
    assert r.status == 409 and r.json["error"] == "run_state_conflict"
    assert r.json["details"]["runStatus"] in ("pending", "running")
    with pytest.raises(WopError) as err:
        client.runs_eval_summary(run)
    assert err.value.status == 409
    wait_terminal(client, run)
    summary = client.runs_eval_summary(run)
    assert summary is not None and summary.taskCount == 12 and summary.aggregateScore == 1.0
    # a cancelled eval run is terminal without a summary: 404
    cancelled = client.runs_create(eval_request("tests.local.evals.slow@1.0.0")).runId
    client.runs_cancel(cancelled)
    assert wait_terminal(client, cancelled).status == "cancelled"
    r = raw(host.base_url, "GET", f"/runs/{project_id(cancelled)}/eval-summary", key=host.key_a)
    assert (r.status, r.json["error"]) == (404, "not_found")
    types = [e.type for e in all_events(client, cancelled)]
    assert types[-1] == "run.cancelled" and "eval.completed" not in types


def _about(pk: str, reference: str) -> bool:
    """A read that a refusal of ``reference`` may make: the reference, its run id in either tenant, or the
    caller's partition."""
    return pk in (reference, "tenant-a/~") or pk.rsplit("/", 1)[-1] == reference.rsplit("/", 1)[-1]


def test_a_foreign_reference_is_never_read_and_costs_what_an_unknown_one_costs(host, runs):
    """The uniform refusal has no timing oracle: the same DynamoDB reads, never the foreign item."""
    import threading

    client = host.client(host.key_a)
    from shared.settings import get_settings

    runs_table = get_settings().runs_table
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def hook(params: dict[str, Any], **_: Any) -> None:
        # a GetItem's key, the partition of a Query, or the run of a BatchGetItem or a TransactGetItems (a run and
        # its items: one request)
        batch = (params.get("RequestItems") or {}).get(runs_table)
        gets = [t["Get"] for t in params.get("TransactItems") or [] if t["Get"]["TableName"] == runs_table]
        if params.get("TableName") == runs_table or batch or gets:
            if "KeyConditionExpression" in params:
                key = {"pk": params["ExpressionAttributeValues"][":p"]}
            else:
                key = params["Key"] if "Key" in params else batch["Keys"][0] if batch else gets[0]["Key"]
            pk = key["pk"]["S"]
            if pk.startswith(("tenant-a/", "tenant-b/")):
                with lock:
                    seen.append(("read", pk))

    ddb = _ports().runs._c  # the real client of the real store: observe, change nothing
    ddb.meta.events.register("before-parameter-build.dynamodb.GetItem", hook)
    ddb.meta.events.register("before-parameter-build.dynamodb.BatchGetItem", hook)
    ddb.meta.events.register("before-parameter-build.dynamodb.Query", hook)
    ddb.meta.events.register("before-parameter-build.dynamodb.TransactGetItems", hook)
    try:
        unknown = "tenant-a/r-1111111111111111111111111111"
        foreign = runs["base_b"]

        def reads(baseline: str, field: str) -> list[tuple[str, str]]:
            seen.clear()
            if field == "baselineRunId":
                body = eval_request(CANDIDATE, evalModes=["golden", "regression"], baselineRunId=baseline)
            else:
                body = eval_request("conformance-eval-recorded-replay", fixtureRuns={"record": baseline})
            refused(client, body)
            with lock:  # (not the reads of an earlier test's runs still finishing on the host's other threads)
                return [read for read in seen if _about(read[1], baseline)]

        for field in ("baselineRunId", "fixtureRuns"):
            assert reads(unknown, field) == [("read", unknown)]
            assert reads(foreign, field) == [("read", "tenant-a/~")]  # the caller's partition, never B's item
            assert reads("garbage id", field) == [("read", "tenant-a/~")]
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.GetItem", hook)
        ddb.meta.events.unregister("before-parameter-build.dynamodb.BatchGetItem", hook)
        ddb.meta.events.unregister("before-parameter-build.dynamodb.Query", hook)
        ddb.meta.events.unregister("before-parameter-build.dynamodb.TransactGetItems", hook)


def test_discovery_advertises_the_eval_facet_and_suite_fixtures(host):
    caps = raw(host.base_url, "GET", "/.well-known/openwop").json
    facet = caps["agents"]["evalSuite"]
    assert {"golden", "regression"} <= set(facet["modes"])
    for flag in ("baselineSelection", "recordedFixtures", "fixtureMatching", "fixtureErrors", "regressionVerdict"):
        assert facet[flag] is True, flag
    for fid in (
        BASE,
        CANDIDATE,
        TRAJECTORY,
        "conformance-eval-recorded-source",
        "conformance-eval-recorded-replay",
        "conformance-eval-recorded-drift",
    ):
        assert fid in caps["fixtures"]


# --------------------------------------------------------------------------- fixtures, misses, trials, trajectory


def test_a_fixture_miss_under_fail_makes_no_live_call(host):
    client = host.client(host.key_a)
    served, missed = unique("served"), unique("missed")
    suite = {
        "suiteId": "tests.local.evals.miss",
        "version": f"1.0.{int(time.time() * 1000) % 1000000}",
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": "miss",
                "input": script(
                    ("conformance.eval:counter", {"op": "inc", "key": missed}),
                    ("conformance.eval:counter", {"op": "inc", "key": served}),
                ),
                "expected": golden("done"),
                "fixtures": {
                    "toolResponses": [
                        {
                            "tool": "conformance.eval:counter",
                            "args": {"key": served, "op": "inc"},
                            "argsMatch": "exact",
                            "response": {"key": served, "count": 99},
                        }
                    ]
                },
            }
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    before = (counter("tenant-a", missed), counter("tenant-a", served))
    run = run_eval(client, f"tests.local.evals.miss@{suite['version']}")
    assert (counter("tenant-a", missed), counter("tenant-a", served)) == before == (0, 0)
    returned = [e.payload for e in all_events(client, run) if e.type == "agent.tool-returned"]
    assert returned[0]["status"] == "error" and returned[0]["error"]["code"] == "openwop-serverless.fixture_miss"
    assert "outcome" not in returned[0]
    assert returned[1]["status"] == "ok" and returned[1]["outcome"] == {"key": served, "count": 99}
    task = summary_json(host, host.key_a, run)["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"], task["score"]) == (1, False, 0.0)
    records = _ports().tool_calls.list_calls(run)
    assert [(r.source, r.status, r.extra.get("miss", False)) for r in records] == [
        ("fixture", "error", True),
        ("fixture", "ok", False),
    ]


def test_three_trials_run_three_independent_fixture_states(host):
    client = host.client(host.key_a)
    key = unique("trial")
    inc = ("conformance.eval:counter", {"op": "inc", "key": key})
    entry = {
        "tool": "conformance.eval:counter",
        "args": {"op": "inc", "key": key},
        "argsMatch": "exact",
        "response": {"key": key, "count": 7},
    }
    suite = {
        "suiteId": "tests.local.evals.trials",
        "version": f"1.0.{int(time.time() * 1000) % 1000000}",
        "modes": ["golden"],
        "trials": 3,
        "tasks": [
            # one entry, one call per trial: served in every trial only if each trial starts fresh
            {
                "taskId": "once",
                "input": script(inc),
                "expected": golden("done"),
                "fixtures": {"toolResponses": [entry], "onMiss": "fail"},
            },
            # one entry, two calls: the second misses in each trial
            {
                "taskId": "twice",
                "input": script(inc, inc),
                "expected": golden("done"),
                "fixtures": {"toolResponses": [entry]},
                "trials": 2,
            },
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    run = run_eval(client, f"tests.local.evals.trials@{suite['version']}")
    assert counter("tenant-a", key) == 0
    events = all_events(client, run)
    assert [e.payload["invocationId"] for e in events if e.type == "agent.invocation-started"] == [
        "once:1",
        "once:2",
        "once:3",
        "twice:1",
        "twice:2",
    ]
    statuses = [e.payload["status"] for e in events if e.type == "agent.tool-returned"]
    assert statuses == ["ok", "ok", "ok", "ok", "error", "ok", "error"]
    summary = summary_json(host, host.key_a, run)
    assert [(t["taskId"], t["score"], t["passed"], t["fixtureMissCount"]) for t in summary["tasks"]] == [
        ("once", 1.0, True, 0),
        ("twice", 0.0, False, 2),
    ]
    assert summary["aggregateScore"] == 0.5 and summary["passed"] is False
    scored = [e.payload for e in events if e.type == "eval.scored"]
    assert scored == [{k: t[k] for k in ("taskId", "score", "passed", "fixtureMissCount")} for t in summary["tasks"]]
    assert len(_ports().tool_calls.list_calls(run)) == 7


def test_trajectory_suite_with_default_modes(host, runs):
    client = host.client(host.key_a)
    run = runs["trajectory_a"]
    events = all_events(client, run)
    started = [e.payload for e in events if e.type == "eval.started"][0]
    assert started["modes"] == ["golden"] and "baselineRunId" not in started and "fixtureRuns" not in started
    summary = summary_json(host, host.key_a, run)
    assert [(t["taskId"], t["passed"]) for t in summary["tasks"]] == [("ordered-calls", True), ("served-counter", True)]
    served = [
        e.payload
        for e in events
        if e.type == "agent.tool-returned" and e.payload["toolName"] == "conformance.eval:counter"
    ]
    assert served == [
        {
            "agentId": AGENT,
            "toolName": "conformance.eval:counter",
            "callId": "served-counter:1#0",
            "status": "ok",
            "outcome": {"key": "trajectory", "count": 41},
            "durationMs": 0,
        }
    ] or served[0]["outcome"] == {"key": "trajectory", "count": 41}
    assert counter("tenant-a", "trajectory") == 0


def test_a_trajectory_that_differs_fails_the_task(host):
    client = host.client(host.key_a)
    suite = {
        "suiteId": "tests.local.evals.trajectory",
        "version": f"1.0.{int(time.time() * 1000) % 1000000}",
        "modes": ["golden"],
        "tasks": [
            {
                "taskId": "wrong-order",
                "input": script(("conformance.eval:echo", {"n": 2}), ("conformance.eval:echo", {"n": 1})),
                "expected": golden("done"),
                "trajectory": {
                    "calls": [
                        {"tool": "conformance.eval:echo", "args": {"n": 1}},
                        {"tool": "conformance.eval:echo", "args": {"n": 2}},
                    ]
                },
            }
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    run = run_eval(client, f"tests.local.evals.trajectory@{suite['version']}")
    task = summary_json(host, host.key_a, run)["tasks"][0]
    assert (task["passed"], task["score"], task["fixtureMissCount"]) == (False, 0.0, 0)


# --------------------------------------------------------------------------- suite registration and references


def test_suite_registration_versions_and_reference_forms(host, capsys):
    client_a, client_b = host.client(host.key_a), host.client(host.key_b)
    suite_id = f"tests.local.evals.{unique('reg')}"
    v1 = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": [{"taskId": "t", "input": script(answer="one"), "expected": golden("one")}],
    }
    r = put_suite(host, host.key_a, v1)
    assert (r.status, r.json) == (201, {"suiteId": suite_id, "version": "1.0.0", "evalSuiteRef": f"{suite_id}@1.0.0"})
    assert put_suite(host, host.key_a, json.loads(json.dumps(v1))).status == 200  # identical: idempotent
    changed = {**v1, "tasks": [{"taskId": "t", "input": script(answer="two"), "expected": golden("two")}]}
    r = put_suite(host, host.key_a, changed)
    assert (r.status, r.json["error"]) == (409, "version_conflict")
    r = put_suite(host, host.key_a, {**v1, "version": "2"})
    assert (r.status, r.json["error"]) == (400, "validation_error") and r.json["details"]["errors"]
    assert put_suite(host, host.key_a, {**changed, "version": "1.10.0"}).status == 201  # versions coexist
    assert put_suite(host, host.key_a, {**changed, "version": "1.9.0"}).status == 201

    def version_of(client: Any, ref: str) -> str:
        run = run_eval(client, ref)
        return [e.payload for e in all_events(client, run) if e.type == "eval.started"][0]["suiteVersion"]

    assert version_of(client_a, suite_id) == "1.10.0"  # the highest version (SemVer order)
    assert version_of(client_a, f"{suite_id}@1.0.0") == "1.0.0"
    assert version_of(client_a, f"{host.base_url}/eval-suites/{suite_id}@1.9.0") == "1.9.0"
    assert version_of(client_a, f"https://conformance.openwop.dev/eval-suites/{TRAJECTORY}") == "1.0.0"
    refused(client_a, eval_request(f"https://conformance.openwop.dev/eval-suites/{suite_id}"))
    refused(client_a, eval_request(f"{suite_id}@3.0.0"))
    # another tenant never resolves tenant A's suite
    refused(client_b, eval_request(suite_id))
    # an operator's host-wide suite (the CLI) is runnable by every tenant
    import tempfile

    from shared.local.commands import main

    wide = {**v1, "suiteId": f"tests.local.evals.{unique('wide')}"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(wide, f)
    assert main(["suites", "put", f.name]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == {
        "suiteId": wide["suiteId"],
        "version": "1.0.0",
        "evalSuiteRef": f"{wide['suiteId']}@1.0.0",
        "created": True,
    }
    assert main(["suites", "put", f.name]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["created"] is False
    assert version_of(client_b, wide["suiteId"]) == "1.0.0"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as bad:
        json.dump({**wide, "tasks": []}, bad)
    with pytest.raises(SystemExit) as err:
        main(["suites", "put", bad.name])
    assert "validation_error" in str(err.value)
