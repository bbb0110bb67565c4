"""Eval suites as a tenant's resource (issue 24): listing, reading and deleting versions, isolation; tasks that
carry their source run (served from its record, checked at registration, tombstoned when it is erased); suites
built from recorded runs with ``:from-runs``. A real loopback tool server counts every live hit."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest

from shared.protocol.ids import project_id
from tests.helpers import ports as _ports
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import register_scripted_agent

BASE = "/host/openwop-serverless"
SUITES = f"{BASE}/eval-suites"
AGENT = "conformance-eval-agent"


def _suite_id() -> str:
    return f"tests.local.evals.s{uuid.uuid4().hex[:10]}"


def _lookup_tool(host: Any, url: str) -> str:
    tool_id = f"t{uuid.uuid4().hex[:8]}.crm:lookup"
    body = {"toolId": tool_id, "description": "Look a customer up", "source": {"kind": "http", "url": url + "/crm/lookup"},
            "inputSchema": {"type": "object", "properties": {"customerId": {"type": "string"}},
                            "required": ["customerId"], "additionalProperties": False}}
    assert raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_a).status == 201
    return tool_id


def _recorded_runs(client: Any, workflow_id: str, tool_id: str, n: int, *, metadata: dict[str, Any] | None = None
                   ) -> list[str]:
    """``n`` completed runs of the scripted agent, each looking one customer up and answering with its id."""
    out = []
    for i in range(n):
        script = {"calls": [{"tool": tool_id, "args": {"customerId": f"c-{i}"}}], "answer": f"answer-{i}"}
        run = client.runs_create(CreateRunRequest(workflowId=workflow_id, inputs={"script": script},
                                                  metadata=metadata))
        out.append(run.runId)
    for run_id in out:
        assert wait_terminal(client, run_id, timeout=120).status == "completed"
    return out


def _from_runs(host: Any, key: str, suite_id: str, body: dict[str, Any]) -> Any:
    return raw(host.base_url, "POST", f"{SUITES}/{suite_id}:from-runs", body, key=key)


def _eval(client: Any, ref: str, **kw: Any) -> str:
    run = client.runs_create(CreateRunRequest(mode="eval", evalSuiteRef=ref, agentId=AGENT, **kw))
    assert wait_terminal(client, run.runId, timeout=180).status == "completed"
    return run.runId


def _summary(host: Any, run_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/eval-summary", key=host.key_a)
    assert r.status == 200, r.text
    return r.json


@pytest.fixture(scope="module")
def recorded(host, server):
    """Tenant A's recorded runs of one workflow calling a loopback tool, and the tool server."""
    tools, url = server
    tool_id = _lookup_tool(host, url)
    workflow_id = register_scripted_agent("tenant-a", "recorded")
    client = host.client(host.key_a)
    runs = _recorded_runs(client, workflow_id, tool_id, 50, metadata={"batch": "b1"})
    return {"tools": tools, "tool": tool_id, "workflowId": workflow_id, "runs": runs}


def test_a_from_runs_suite_evaluates_with_no_fixture_runs_and_no_live_hit(host, recorded):
    client = host.client(host.key_a)
    suite_id = _suite_id()
    # Given a suite built from 50 recorded runs selected by a filter
    r = _from_runs(host, host.key_a, suite_id, {"agentId": AGENT, "workflowId": recorded["workflowId"],
                                                "limit": 50})
    assert r.status == 201, r.text
    assert r.json == {"suiteId": suite_id, "version": "1.0.0", "evalSuiteRef": f"{suite_id}@1.0.0",
                      "taskCount": 50, "addedCount": 50}
    doc = raw(host.base_url, "GET", f"{SUITES}/{suite_id}/versions/1.0.0", key=host.key_a).json
    by_source = {t["sourceRunId"]: t for t in doc["tasks"]}
    assert set(by_source) == set(recorded["runs"]) and doc["targetAgentId"] == AGENT
    first = by_source[recorded["runs"][0]]
    assert first["taskId"] == recorded["runs"][0].partition("/")[2].lower()
    assert first["input"] == {"calls": [{"tool": recorded["tool"], "args": {"customerId": "c-0"}}],
                              "answer": "answer-0"}
    assert first["expected"] == {"kind": "golden", "match": {"strategy": "exact", "value": "answer-0"}}
    before = recorded["tools"].count()
    # When it is evaluated with no fixtureRuns
    run = _eval(client, f"{suite_id}@1.0.0")
    # Then every task passes from its own source's record, and the tool server saw no request
    assert recorded["tools"].count() == before
    summary = _summary(host, run)
    assert len(summary["tasks"]) == 50
    assert all((t["passed"], t["fixtureMissCount"]) == (True, 0) for t in summary["tasks"])
    started = [e.payload for e in all_events(client, run) if e.type == "eval.started"][0]
    assert "fixtureRuns" not in started and started["taskCount"] == 50
    assert {c.source for c in _ports().tool_calls.list_calls(run)} == {"fixture"}
    # and the report names each task's source
    report = raw(host.base_url, "GET", f"{BASE}/runs/{project_id(run)}/eval-report?limit=1000", key=host.key_a).json
    assert {t["servedFrom"] for t in report["tasks"]} == set(recorded["runs"])
