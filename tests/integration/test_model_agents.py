"""Model-backed agents in versions: registration, the live runtime on the mock provider with real loopback tools,
the model-call log, replay with zero model and tool calls, version pins, overrides and refusals."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from shared.protocol.ids import project_id
from tests.helpers import ports as _ports
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import definition, node, static

BASE = "/host/openwop-serverless"


def _org() -> str:
    return "m" + uuid.uuid4().hex[:8]


def register_tool(host: Any, url: str, org: str) -> str:
    tool_id = f"{org}.crm:lookup"
    body = {
        "toolId": tool_id,
        "description": "Look a customer up",
        "source": {"kind": "http", "url": url + "/crm/lookup"},
        "inputSchema": {
            "type": "object",
            "properties": {"customerId": {"type": "string"}},
            "required": ["customerId"],
            "additionalProperties": False,
        },
    }
    r = raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_a)
    assert r.status == 201, r.text
    return tool_id


def agent_body(
    agent_id: str,
    version: str,
    tool_id: str,
    script: list[dict[str, Any]],
    *,
    prompt: str = "You resolve support tickets.",
    max_turns: int = 6,
) -> dict[str, Any]:
    return {
        "version": version,
        "manifest": {
            "agentId": agent_id,
            "persona": "Support resolver",
            "modelClass": "general",
            "systemPrompt": prompt,
            "toolAllowlist": [tool_id],
        },
        "model": {"provider": "mock", "model": "mock-model", "mockProvider": {"script": script}},
        "maxTurns": max_turns,
    }


def lookup_then_answer(tool_id: str, customer: str, answer: str = "resolved") -> list[dict[str, Any]]:
    return [{"toolCalls": [{"name": tool_id, "arguments": {"customerId": customer}}]}, {"text": answer}]


def agent_workflow(host: Any, agent_id: str, version: str | None = None) -> str:
    ref: dict[str, Any] = {"agentId": agent_id}
    if version is not None:
        ref["version"] = version
    n = node("agent", "core.agent", inputs={"input": static("Customer c-1 cannot log in.")})
    n["agent"] = ref
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    r = raw(host.base_url, "POST", f"{BASE}/workflows", definition(wid, [n]), key=host.key_a)
    assert r.status == 201, r.text
    return wid


TICKETS = {"login": "Customer c-1 cannot log in.", "billing": "Customer c-2 was billed twice."}


def record_production(host: Any, agent_id: str, version: str = "1.0.0") -> dict[str, str]:
    """A workflow running ``agent_id@version`` on its ``ticket`` input, run once per ticket of ``TICKETS``: the
    "production" runs (taskId -> runId), each completed."""
    n = node("agent", "core.agent", inputs={"input": {"type": "variable", "variableName": "ticket"}})
    n["agent"] = {"agentId": agent_id, "version": version}
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    doc = definition(wid, [n], variables=[{"name": "ticket", "type": "string", "required": True}])
    assert raw(host.base_url, "POST", f"{BASE}/workflows", doc, key=host.key_a).status == 201
    client = host.client(host.key_a)
    runs = {}
    for task, ticket in TICKETS.items():
        run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"ticket": ticket}))
        assert wait_terminal(client, run.runId).status == "completed"
        runs[task] = str(run.runId)
    return runs


def test_register_versions_and_the_inventory(host, server):
    _, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.support"
    v1 = agent_body(agent_id, "1.0.0", tool_id, lookup_then_answer(tool_id, "c-1"))
    r = raw(host.base_url, "POST", f"{BASE}/agents", v1, key=host.key_a)
    assert r.status == 201, r.text
    assert raw(host.base_url, "POST", f"{BASE}/agents", v1, key=host.key_a).status == 200
    changed = {**v1, "manifest": {**v1["manifest"], "systemPrompt": "another"}}
    conflict = raw(host.base_url, "POST", f"{BASE}/agents", changed, key=host.key_a)
    assert conflict.status == 409 and conflict.json["error"] == "version_conflict"
    v2 = agent_body(agent_id, "1.10.0", tool_id, lookup_then_answer(tool_id, "c-1"), prompt="v2")
    assert raw(host.base_url, "POST", f"{BASE}/agents", v2, key=host.key_a).status == 201
    pre = agent_body(agent_id, "2.0.0-rc.1", tool_id, lookup_then_answer(tool_id, "c-1"))
    assert raw(host.base_url, "POST", f"{BASE}/agents", pre, key=host.key_a).status == 201

    client = host.client(host.key_a)
    entry = client.agents_get(agent_id)
    assert entry is not None and entry.agentId == agent_id and entry.toolAllowlist == [tool_id]
    assert entry.modelClass == "general" and entry.persona == "Support resolver"
    got = raw(host.base_url, "GET", f"/agents/{agent_id}", key=host.key_a).json
    assert got["versions"] == ["1.0.0", "1.10.0", "2.0.0-rc.1"] and got["version"] == "1.10.0"
    assert "systemPrompt" not in got and "mockProvider" not in str(got)
    listed = [a.agentId for a in client.agents_list() or []]
    assert agent_id in listed
    # Tenant B sees nothing, with the bytes of an unknown id.
    foreign = raw(host.base_url, "GET", f"/agents/{agent_id}", key=host.key_b)
    unknown = raw(host.base_url, "GET", f"/agents/{org}.nobody", key=host.key_b)
    assert foreign.status == unknown.status == 404 and foreign.text == unknown.text
    assert agent_id not in [a.agentId for a in host.client(host.key_b).agents_list() or []]


@pytest.mark.parametrize(
    "mutate,status,code",
    [
        (lambda b: b.update(version="1.0"), 400, "validation_error"),
        (lambda b: b["manifest"].update(modelClass="poetry"), 400, "validation_error"),
        (lambda b: b["manifest"].update(unknown=1), 400, "validation_error"),
        (lambda b: b["manifest"].pop("systemPrompt"), 400, "validation_error"),
        (lambda b: b["model"].update(provider="nosuch"), 400, "validation_error"),
        (lambda b: b["model"].update(credentialRef="not-mine"), 403, "credential_forbidden"),
        (lambda b: b["model"].update(mockProvider={"id": "nosuch"}), 400, "validation_error"),
        (lambda b: b.update(maxTurns=0), 400, "validation_error"),
        (lambda b: b.update(extra=True), 400, "validation_error"),
    ],
)
def test_bad_registrations_are_refused(host, mutate, status, code):
    body = agent_body(f"{_org()}.bad", "1.0.0", "x.y:z", [{"text": "hi"}])
    mutate(body)
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == status, r.text
    assert r.json["error"] == code


def test_an_allowlist_naming_a_tool_the_tenant_cannot_call_is_refused_with_pointers(host, server):
    _, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.strict"
    # Given an allowlist with the tenant's tool, an unregistered one, a malformed id and tenant B's tool
    foreign = f"{_org()}.crm:lookup"
    body = {
        "toolId": foreign,
        "description": "B's",
        "source": {"kind": "http", "url": url + "/crm/lookup"},
        "inputSchema": {"type": "object"},
    }
    assert raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_b).status == 201
    agent = agent_body(agent_id, "1.0.0", tool_id, [{"text": "hi"}])
    agent["manifest"]["toolAllowlist"] = [tool_id, f"{org}.crm:missing", "not a tool id", foreign]
    # When it is registered
    r = raw(host.base_url, "POST", f"{BASE}/agents", agent, key=host.key_a)
    # Then a 400 points at each tool it may not name, and nothing was stored
    assert r.status == 400 and r.json["error"] == "validation_error", r.text
    errors = r.json["details"]["errors"]
    assert [(e["pointer"], e["keyword"]) for e in errors] == [
        ("/manifest/toolAllowlist/1", "toolId"),
        ("/manifest/toolAllowlist/2", "pattern"),
        ("/manifest/toolAllowlist/3", "toolId"),
    ]
    assert all(e["message"] for e in errors) and "not a tool id" not in r.text and foreign not in r.text
    assert raw(host.base_url, "GET", f"/agents/{agent_id}", key=host.key_a).status == 404
    # And with only the tenant's own tool it is registered
    agent["manifest"]["toolAllowlist"] = [tool_id]
    assert raw(host.base_url, "POST", f"{BASE}/agents", agent, key=host.key_a).status == 201


@pytest.mark.parametrize(
    ("route", "body", "expected"),
    [
        (
            "/tools",
            {
                "toolId": "Not-A-Tool",
                "source": {"kind": "http", "url": "http://127.0.0.1:1/x"},
                "inputSchema": {"type": "object"},
            },
            ("/toolId", "format"),
        ),
        (
            "/agents",
            {"version": "1.0.0.0", "manifest": {}, "model": {"provider": "mock", "model": "m"}},
            ("/version", "format"),
        ),
        (
            "/agents",
            {"version": "1.0.0", "manifest": {}, "model": {"provider": "mock", "model": "m"}, "extra": 1},
            ("/extra", "additionalProperties"),
        ),
        (
            "/eval-suites",
            {"suiteId": "tests.x.evals.y", "version": "1.0.0", "modes": ["golden"], "tasks": "no"},
            ("/tasks", "type"),
        ),
        ("/workflows", [1], ("", "type")),
    ],
)
def test_every_registration_refusal_points_at_the_member(host, route, body, expected):
    # When a registration route gets a body that breaks its schema
    r = raw(host.base_url, "POST", f"{BASE}{route}", body, key=host.key_a)
    # Then the 400 names the member with an RFC 6901 pointer, the rule and a message
    assert r.status == 400 and r.json["error"] == "validation_error", r.text
    errors = r.json["details"]["errors"]
    assert expected in [(e["pointer"], e["keyword"]) for e in errors], errors
    assert all(isinstance(e["message"], str) and e["message"] for e in errors)


def _payloads(client: Any, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in all_events(client, run_id) if e.type == type_]


def test_live_run_then_replay_with_zero_model_and_tool_calls(host, server):
    srv, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.support"
    body = agent_body(agent_id, "1.0.0", tool_id, lookup_then_answer(tool_id, "c-1", "reset the password"))
    assert raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a).status == 201
    client = host.client(host.key_a)
    before = srv.count("/crm/lookup")
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    snap = wait_terminal(client, run.runId)
    assert snap.status == "completed", snap
    assert srv.count("/crm/lookup") == before + 1
    events = all_events(client, run.runId)
    types = [e.type for e in events]
    assert types == [
        "run.started",
        "node.started",
        "agent.invocation-started",
        "provider.usage",
        "agent.tool-called",
        "agent.tool-returned",
        "provider.usage",
        "agent.decided",
        "agent.invocation-completed",
        "node.completed",
        "run.completed",
    ]
    started = events[2].payload
    assert started["resolvedAgentVersion"] == "1.0.0" and started["resolvedProvider"] == "mock"
    assert started["resolvedModel"] == "mock-model" and started["source"] == "workflow-node"
    usage = [e.payload for e in events if e.type == "provider.usage"]
    assert all(u["provider"] == "mock" and u["inputTokens"] > 0 for u in usage)
    assert "systemPrompt" not in str(usage) and "Customer c-1" not in str(usage)
    assert events[5].payload["status"] == "ok" and events[5].payload["outcome"]["customerId"] == "c-1"
    assert events[7].payload["decision"] == "reset the password"
    ports = _ports()
    log = ports.runs.query_aux(run.runId, "MCALL#")
    assert len(log) == 2 and all(doc["source"] == "live" and doc["key"].startswith("sha256:") for _, doc in log)

    # A replay from sequence 0: no model call (nothing claimed), no tool hit, the same log and outcome.
    child = client.runs_fork(run.runId, ForkRunRequest(mode="replay", fromSeq=0)).runId
    assert wait_terminal(client, child).status == "completed"
    assert srv.count("/crm/lookup") == before + 1
    assert [d["source"] for _, d in ports.runs.query_aux(child, "MCALL#")] == ["recorded", "recorded"]
    assert ports.runs.query_aux(child, "EFFECT#model") == []
    replayed = all_events(client, child)
    assert [(e.type, e.payload) for e in replayed] == [(e.type, e.payload) for e in events]

    # A newer version does not move what the recorded run replays: the pin is re-read, never re-resolved.
    v2 = agent_body(agent_id, "2.0.0", tool_id, lookup_then_answer(tool_id, "c-9"), prompt="changed")
    assert raw(host.base_url, "POST", f"{BASE}/agents", v2, key=host.key_a).status == 201
    again = client.runs_fork(run.runId, ForkRunRequest(mode="replay", fromSeq=0)).runId
    assert wait_terminal(client, again).status == "completed"
    assert _payloads(client, again, "agent.invocation-started")[0]["resolvedAgentVersion"] == "1.0.0"
    assert srv.count("/crm/lookup") == before + 1
    # A new run without a pin takes the latest version.
    latest = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    wait_terminal(client, latest.runId)
    assert _payloads(client, latest.runId, "agent.invocation-started")[0]["resolvedAgentVersion"] == "2.0.0"


def test_replay_of_a_changed_request_fails_closed(host, server):
    """Replay proves the current definition: a changed prompt is a request the log never saw."""
    srv, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.support"
    assert (
        raw(
            host.base_url,
            "POST",
            f"{BASE}/agents",
            agent_body(agent_id, "1.0.0", tool_id, [{"text": "done"}]),
            key=host.key_a,
        ).status
        == 201
    )
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id, "1.0.0")))
    assert wait_terminal(client, run.runId).status == "completed"
    ports = _ports()
    # Tamper with the source's log key (as a changed request would): the replay must not call the model.
    ((sk, doc),) = ports.runs.query_aux(run.runId, "MCALL#")
    ports.runs.put_aux(run.runId, sk, {**doc, "key": "sha256:" + "0" * 64}, 2**31)
    child = client.runs_fork(run.runId, ForkRunRequest(mode="replay", fromSeq=0)).runId
    snap = wait_terminal(client, child)
    assert snap.status == "failed"
    failed = _payloads(client, child, "node.failed")
    assert failed and failed[0]["error"]["code"] == "replay_source_missing"
    assert _payloads(client, child, "agent.invocation-completed")[0]["outcome"] == "failed"
    assert _payloads(client, child, "replay.diverged")
    assert ports.runs.query_aux(child, "EFFECT#model") == []


def test_max_turns_and_run_overrides(host, server):
    _, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.looper"
    loop = [{"toolCalls": [{"name": tool_id, "arguments": {"customerId": f"c-{i}"}}]} for i in range(5)]
    assert (
        raw(
            host.base_url,
            "POST",
            f"{BASE}/agents",
            agent_body(agent_id, "1.0.0", tool_id, loop, max_turns=2),
            key=host.key_a,
        ).status
        == 201
    )
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=agent_workflow(host, agent_id)))
    assert wait_terminal(client, run.runId).status == "failed"
    assert len(_payloads(client, run.runId, "provider.usage")) == 2
    assert _payloads(client, run.runId, "node.failed")[0]["error"]["code"] == "loop_limit_exceeded"
    # configurable.ai.mockProvider overrides the script for this run only.
    wid = agent_workflow(host, agent_id)
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        {
            "workflowId": wid,
            "configurable": {"version": 1, "ai": {"mockProvider": {"script": [{"text": "overridden"}]}}},
        },
        key=host.key_a,
    )
    assert r.status == 201, r.text
    run_id = r.json["runId"]
    assert wait_terminal(client, run_id).status == "completed"
    assert _payloads(client, run_id, "agent.decided")[0]["decision"] == "overridden"
    bad = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": wid, "configurable": {"version": 1, "ai": {"provider": "nosuch"}}},
        key=host.key_a,
    )
    assert bad.status == 400 and bad.json["error"] == "validation_error"
    forbidden = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": wid, "configurable": {"version": 1, "ai": {"credentialRef": "someone-elses"}}},
        key=host.key_a,
    )
    assert forbidden.status == 403 and forbidden.json["error"] == "credential_forbidden"
    missing = raw(
        host.base_url, "POST", "/runs", {"workflowId": agent_workflow(host, agent_id, "9.9.9")}, key=host.key_a
    )
    assert missing.status == 400 and missing.json["error"] == "validation_error"


def test_v2_evaluated_against_v1_production_runs_and_a_v1_baseline(host, server):
    """The loop the product exists for, through openwop-client: v1 records production runs that call a real
    loopback tool; v2 (changed prompt, one call changed) is evaluated against v1's recorded tool answers and paired
    against a v1 eval: the unchanged task is served with zero tool hits, the changed call misses and fails closed,
    and the verdict says a task regressed."""
    from tests.integration.test_eval_runs import eval_request, golden, put_suite, summary_json

    srv, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.support"

    def cases(args_for: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {
            "script": [{"text": "unknown customer"}],
            "cases": [
                {
                    "whenInput": who,
                    "script": [{"toolCalls": [{"name": tool_id, "arguments": args}]}, {"text": "resolved"}],
                }
                for who, args in args_for.items()
            ],
        }

    v1 = agent_body(agent_id, "1.0.0", tool_id, [])
    v1["model"]["mockProvider"] = cases({"c-1": {"customerId": "c-1"}, "c-2": {"customerId": "c-2"}})
    v2 = agent_body(agent_id, "2.0.0", tool_id, [], prompt="You resolve tickets; normalise ids to upper case.")
    v2["model"]["mockProvider"] = cases({"c-1": {"customerId": "c-1"}, "c-2": {"customerId": "C-2"}})
    for body in (v1, v2):
        assert raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a).status == 201

    client = host.client(host.key_a)
    tickets = TICKETS
    production = record_production(host, agent_id)
    hits = srv.count("/crm/lookup")

    suite_id = f"tests.{org}.evals.support"
    suite = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden", "regression"],
        "targetAgentId": agent_id,
        "tasks": [
            {"taskId": task, "input": ticket, "expected": golden("resolved")} for task, ticket in tickets.items()
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201

    def evaluate(version: str, **kw: Any) -> str:
        req = eval_request(
            f"{suite_id}@1.0.0",
            agentId=agent_id,
            fixtureRuns=production,
            configurable={"version": 1, "extensions": {"openwop-serverless": {"agentVersion": version}}},
            **kw,
        )
        run = client.runs_create(req)
        assert wait_terminal(client, run.runId).status == "completed"
        return str(run.runId)

    baseline = evaluate("1.0.0", evalModes=["golden"])
    base = summary_json(host, host.key_a, baseline)
    assert [(t["taskId"], t["passed"], t["fixtureMissCount"]) for t in base["tasks"]] == [
        ("login", True, 0),
        ("billing", True, 0),
    ]
    candidate = evaluate("2.0.0", evalModes=["golden", "regression"], baselineRunId=baseline)
    assert srv.count("/crm/lookup") == hits  # every tool answer was served from v1's production runs
    summ = summary_json(host, host.key_a, candidate)
    rows = {t["taskId"]: t for t in summ["tasks"]}
    assert rows["login"]["passed"] and rows["login"]["fixtureMissCount"] == 0
    assert not rows["billing"]["passed"] and rows["billing"]["fixtureMissCount"] == 1
    assert all(isinstance(t.get("latencyMs"), int) and t.get("costUsd") == 0 for t in summ["tasks"])
    assert summ["regression"]["verdict"] == "regressed" and summ["regression"]["pairedTaskCount"] == 2
    assert summ["regression"]["scoreDelta"] == pytest.approx(-0.5)
    started = [e.payload for e in all_events(client, candidate) if e.type == "agent.invocation-started"]
    assert {p["resolvedAgentVersion"] for p in started} == {"2.0.0"}
    calls = _ports().tool_calls.list_calls(candidate)
    assert sorted((r.source, r.status) for r in calls) == [("fixture", "error"), ("fixture", "ok")]
    # the eval report says what changed: the model's turns read the same, the tool call's argument does not
    rep = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(candidate)}/eval-report", key=host.key_a).json
    div = {t["taskId"]: t["divergence"] for t in rep["tasks"]}
    assert div["login"] is None
    assert (div["billing"]["step"], div["billing"]["kind"], div["billing"]["pointers"]) == (
        1,
        "tool-arguments",
        ["/customerId"],
    )
    assert div["billing"]["baseline"] == {"type": "tool-call", "tool": tool_id, "args": {"customerId": "c-2"}}
    steps = next(t for t in rep["tasks"] if t["taskId"] == "billing")["trialResults"][0]["trajectory"]
    assert steps[0]["type"] == "model-output" and steps[0]["turn"] == 0


def test_rubric_tasks_are_graded_by_a_judge_model_and_replayed_without_judging_again(host, server):
    from tests.integration.test_eval_runs import eval_request, put_suite, summary_json

    _, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.writer"
    body = agent_body(agent_id, "1.0.0", tool_id, [{"text": "Sorry for the trouble; a refund is on its way."}])
    assert raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a).status == 201
    suite_id = f"tests.{org}.evals.tone"
    rubric = [{"criterion": "apologises", "weight": 0.25}, {"criterion": "names the refund amount", "weight": 0.75}]
    suite = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["rubric"],
        "targetAgentId": agent_id,
        "tasks": [
            {
                "taskId": "refund",
                "input": "Customer c-1 wants a refund.",
                "expected": {"kind": "rubric", "rubric": rubric},
            }
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    client = host.client(host.key_a)
    no_judge = raw(
        host.base_url,
        "POST",
        "/runs",
        {"mode": "eval", "evalSuiteRef": f"{suite_id}@1.0.0", "agentId": agent_id},
        key=host.key_a,
    )
    assert no_judge.status == 400 and no_judge.json["error"] == "validation_error"
    judge = {
        "provider": "mock",
        "model": "judge-1",
        "mockProvider": {
            "script": [{"text": "not json"}],
            "cases": [{"whenInput": "a refund is on its way", "script": [{"text": '{"met": [true, false]}'}]}],
        },
    }
    run = client.runs_create(
        eval_request(
            f"{suite_id}@1.0.0",
            agentId=agent_id,
            evalModes=["rubric"],
            configurable={"version": 1, "extensions": {"openwop-serverless": {"judge": judge}}},
        )
    )
    assert wait_terminal(client, run.runId).status == "completed"
    summ = summary_json(host, host.key_a, run.runId)
    assert summ["tasks"][0]["score"] == pytest.approx(0.25) and summ["tasks"][0]["passed"] is False
    usage = [e.payload for e in all_events(client, run.runId) if e.type == "provider.usage"]
    assert [u["model"] for u in usage] == ["mock-model", "judge-1"]
    log = _ports().runs.query_aux(run.runId, "MCALL#")
    assert [d["invocationId"] for _, d in log] == ["refund:1", "judge:refund:1"]
    # A replay of the eval re-reads the judgement: no model and no judge call, the same score.
    child = client.runs_fork(run.runId, ForkRunRequest(mode="replay", fromSeq=0)).runId
    assert wait_terminal(client, child).status == "completed"
    assert [d["source"] for _, d in _ports().runs.query_aux(child, "MCALL#")] == ["recorded", "recorded"]
    assert _ports().runs.query_aux(child, "EFFECT#model") == []
    assert summary_json(host, host.key_a, child)["tasks"] == summ["tasks"]
    # An unreadable judgement makes the trial unverifiable, never a guess.
    bad = {**judge, "mockProvider": {"script": [{"text": "not json"}]}}
    run2 = client.runs_create(
        eval_request(
            f"{suite_id}@1.0.0",
            agentId=agent_id,
            evalModes=["rubric"],
            configurable={"version": 1, "extensions": {"openwop-serverless": {"judge": bad}}},
        )
    )
    assert wait_terminal(client, run2.runId).status == "completed"
    row = summary_json(host, host.key_a, run2.runId)["tasks"][0]
    assert row["score"] == 0 and row["passed"] is False


def test_the_eval_cli_gates_a_model_agent_version_and_the_gate_refuses_its_promotion(host, server, tmp_path, capsys):
    """``openwop-serverless eval run --agent ID@VERSION``: v2 against v1's production tool answers regresses and
    misses a fixture: exit 1 (a regression outranks the miss, decision 0145), the miss listed and its differing
    pointer named; the deployment gate refuses that eval."""
    import xml.etree.ElementTree as ET

    from shared.local.commands import main
    from tests.integration.test_eval_runs import golden, put_suite

    _, url = server
    org = _org()
    tool_id = register_tool(host, url, org)
    agent_id = f"{org}.support"

    def cases(customer_arg: str) -> dict[str, Any]:
        return {
            "script": [{"text": "?"}],
            "cases": [
                {"whenInput": "c-1", "script": lookup_then_answer(tool_id, "c-1")},
                {"whenInput": "c-2", "script": lookup_then_answer(tool_id, customer_arg)},
            ],
        }

    for version, arg in (("1.0.0", "c-2"), ("2.0.0", "C-2")):
        body = agent_body(agent_id, version, tool_id, [])
        body["model"]["mockProvider"] = cases(arg)
        assert raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a).status == 201
    tickets = TICKETS
    prod = record_production(host, agent_id)
    suite_id = f"tests.{org}.evals.cli"
    assert (
        put_suite(
            host,
            host.key_a,
            {
                "suiteId": suite_id,
                "version": "1.0.0",
                "modes": ["golden", "regression"],
                "targetAgentId": agent_id,
                "tasks": [
                    {"taskId": t, "input": ticket, "expected": golden("resolved")} for t, ticket in tickets.items()
                ],
            },
        ).status
        == 201
    )

    def cli(*args: str) -> int:
        return main(["eval", *args, "--endpoint", host.base_url, "--api-key", host.key_a])

    fixtures = [a for task, run_id in prod.items() for a in ("--fixtures-from", f"{task}={run_id}")]
    assert (
        cli(
            "run",
            "--suite",
            f"{suite_id}@1.0.0",
            "--agent",
            f"{agent_id}@1.0.0",
            *fixtures,
            "--modes",
            "golden",
            "--wait",
            "--json",
        )
        == 0
    )
    baseline = json.loads(capsys.readouterr().out)["runId"]
    junit = tmp_path / "eval.xml"
    code = cli(
        "run",
        "--suite",
        f"{suite_id}@1.0.0",
        "--agent",
        f"{agent_id}@2.0.0",
        *fixtures,
        "--baseline",
        baseline,
        "--wait",
        "--json",
        "--junit",
        str(junit),
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    # both conditions are reported, in precedence order: the regression decides, the miss is listed after it
    assert json.loads(out)["conditions"][:2] == ["regression", "unverifiable"]
    assert "/customerId" in out  # the miss names the argument that differs from v1's recorded call
    candidate = json.loads(out)["runId"]
    cases_ = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases_["login"].find("failure") is None and cases_["billing"].find("failure") is not None
    # The gate: the unverifiable v2 eval cannot promote v2; v1's clean eval promotes v1
    refused = raw(
        host.base_url,
        "POST",
        f"/agents/{agent_id}/deployments",
        {"version": "2.0.0", "transition": "promote", "toState": "active", "evalRunId": candidate},
        key=host.key_a,
    )
    assert refused.status == 422 and refused.json["error"] == "eval_gate_unmet"
    r = raw(
        host.base_url,
        "POST",
        f"/agents/{agent_id}/deployments",
        {"version": "1.0.0", "transition": "promote", "toState": "active", "evalRunId": baseline},
        key=host.key_a,
    )
    assert r.status == 200 and r.json["state"] == "active", r.text
    # Without a version the CLI pins what stable serves (1.0.0, not the newer 2.0.0) and says so
    assert (
        cli(
            "run",
            "--suite",
            f"{suite_id}@1.0.0",
            "--agent",
            agent_id,
            *fixtures,
            "--modes",
            "golden",
            "--wait",
            "--json",
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert f"agent {agent_id}: no version named; running 1.0.0 (what its stable channel serves)" in err
    assert json.loads(out)["agentVersion"] == "1.0.0"
