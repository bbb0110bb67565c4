"""MCP servers a tenant registers, end to end through the host: listing, the catalog's host-assigned classes,
calls recorded as executed (``transport: mcp``, results unaltered), replay and RFC 0252 fixtures with zero calls,
tenant isolation. The server is a real MCP server on loopback (``shared.local.demo_mcp``, the ``mcp`` SDK).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from shared.local.demo_mcp import DemoMcpServer
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import run_script, tool_returned

BASE = "/host/openwop-serverless"


def _ports():
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture(scope="module")
def mcp():
    server = DemoMcpServer()
    url = server.start()
    yield server, url
    server.stop()


def _register(host: Any, key: str, url: str, **extra: Any) -> tuple[str, Any]:
    server_id = "s" + uuid.uuid4().hex[:8]
    r = raw(host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": url, **extra}, key=key)
    return server_id, r


_run = run_script
_returned = tool_returned


def test_registration_lists_the_server_and_the_catalog_classifies_its_tools(host, mcp):
    _, url = mcp
    # Given an MCP server registered with one tool classified by the registrant
    server_id, r = _register(
        host, host.key_a, url, tools={"lookup_customer": {"safetyTier": "read", "replayPolicy": "deterministic"}}
    )
    assert r.status == 201, r.text
    assert r.json["toolIds"] == [
        f"mcp:{server_id}.create_ticket",
        f"mcp:{server_id}.fail_always",
        f"mcp:{server_id}.lookup_customer",
    ]
    # Then the catalog holds its tools with the host's classes, never the server's annotations
    tools = {t["toolId"]: t for t in raw(host.base_url, "GET", "/tools", key=host.key_a).json["tools"]}
    lookup, ticket, fail = (tools[f"mcp:{server_id}.{n}"] for n in ("lookup_customer", "create_ticket", "fail_always"))
    assert (lookup["source"], lookup["safetyTier"], lookup["replayPolicy"]) == ("mcp", "read", "deterministic")
    assert lookup["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }  # the server said openWorldHint false: ignored
    assert lookup["inputSchema"]["required"] == ["id"]
    assert (fail["safetyTier"], fail["replayPolicy"]) == ("write", "non-deterministic")  # annotated read-only upstream
    assert ticket["safetyTier"] == "write"
    client = host.client(host.key_a)
    assert client.tools_get(f"mcp:{server_id}.lookup_customer").safetyTier == "read"
    # Re-registering re-lists (200); a class for a tool the server does not list is refused
    assert _register(host, host.key_a, url)[1].status == 201
    again = raw(host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": url}, key=host.key_a)
    assert again.status == 200
    bad = raw(
        host.base_url,
        "POST",
        f"{BASE}/mcp-servers",
        {"serverId": server_id, "url": url, "tools": {"nope": {"safetyTier": "read"}}},
        key=host.key_a,
    )
    assert (bad.status, bad.json["error"]) == (400, "validation_error")


def test_unreachable_or_guarded_servers_are_refused_at_registration(host):
    # a closed loopback port, and a metadata address (refused by the egress guard before any connection)
    for url in ("http://127.0.0.1:9/mcp", "http://169.254.169.254/mcp"):
        _, r = _register(host, host.key_a, url)
        assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert "refused" in _register(host, host.key_a, "http://169.254.169.254/mcp")[1].json["message"]


def test_mcp_calls_are_recorded_and_a_replay_fork_calls_the_server_zero_times(host, mcp):
    server, url = mcp
    server_id, r = _register(host, host.key_a, url)
    assert r.status == 201
    client = host.client(host.key_a)
    before = dict(server.calls)
    # Given a run whose agent calls two MCP tools, one of which reports a tool error
    run_id = _run(
        client,
        [
            (f"mcp:{server_id}.create_ticket", {"title": "refund", "body": "broken"}),
            (f"mcp:{server_id}.fail_always", {}),
        ],
    )
    assert client.runs_get(run_id).status == "completed"
    assert server.calls["create_ticket"] - before.get("create_ticket", 0) == 1
    assert server.calls["fail_always"] - before.get("fail_always", 0) == 1
    returned = _returned(client, run_id)
    # Then results come back unaltered (isError included: a tool error is a result), recorded with transport mcp
    assert returned[0]["status"] == "ok" and returned[0]["outcome"]["structuredContent"]["ticketId"].startswith("T-")
    assert returned[1]["status"] == "ok" and returned[1]["outcome"]["isError"] is True
    called = [e.payload for e in all_events(client, run_id) if e.type == "agent.tool-called"]
    assert [c["transport"] for c in called] == ["mcp", "mcp"]
    meta = next(m for tool, m in reversed(server.metas) if tool == "create_ticket")
    assert meta["openwop/idempotencyKey"].startswith("owop-")
    assert [r.source for r in _ports().tool_calls.list_calls(run_id)] == ["live", "live"]
    calls = dict(server.calls)
    # When the run is forked in replay mode from 0, Then the server is called zero times and nothing diverges
    fork = client.runs_fork(run_id, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    assert dict(server.calls) == calls
    assert _returned(client, fork.runId) == returned
    assert not [e for e in all_events(client, fork.runId) if e.type == "replay.diverged"]


def test_fixture_runs_serve_recorded_mcp_calls_and_a_changed_argument_misses(host, mcp):
    from shared.protocol.ids import project_id
    from tests.integration.test_eval_runs import golden, put_suite

    server, url = mcp
    server_id, _ = _register(host, host.key_a, url)
    tool = f"mcp:{server_id}.lookup_customer"
    client = host.client(host.key_a)
    source = _run(client, [(tool, {"id": "c-7"})])
    suite_id = f"tests.local.evals.{uuid.uuid4().hex[:10]}"

    def task(task_id: str, customer: str) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "input": {"calls": [{"tool": tool, "args": {"id": customer}}], "answer": "done"},
            "expected": golden("done"),
        }

    assert (
        put_suite(
            host,
            host.key_a,
            {
                "suiteId": suite_id,
                "version": "1.0.0",
                "modes": ["golden"],
                "tasks": [task("same", "c-7"), task("changed", "c-8")],
            },
        ).status
        == 201
    )
    calls = dict(server.calls)
    run = client.runs_create(
        CreateRunRequest(
            mode="eval",
            evalSuiteRef=f"{suite_id}@1.0.0",
            agentId="conformance-eval-agent",
            fixtureRuns={"same": source, "changed": source},
        )
    )
    wait_terminal(client, run.runId)
    summary = raw(host.base_url, "GET", f"/runs/{project_id(run.runId)}/eval-summary", key=host.key_a).json
    by_task = {t["taskId"]: t for t in summary["tasks"]}
    assert dict(server.calls) == calls  # zero calls to the server
    assert (by_task["same"]["fixtureMissCount"], by_task["changed"]["fixtureMissCount"]) == (0, 1)


def test_tenant_b_cannot_see_call_or_delete_tenant_a_servers(host, mcp):
    server, url = mcp
    server_id, _ = _register(host, host.key_a, url)
    tool = f"mcp:{server_id}.create_ticket"
    unknown = f"mcp:{server_id}x.create_ticket"
    seen = raw(host.base_url, "GET", f"/tools/{tool}", key=host.key_b)
    assert (seen.status, seen.text) == (404, raw(host.base_url, "GET", f"/tools/{unknown}", key=host.key_b).text)
    assert server_id not in raw(host.base_url, "GET", f"{BASE}/mcp-servers", key=host.key_b).text
    gone = raw(host.base_url, "DELETE", f"{BASE}/mcp-servers/{server_id}", key=host.key_b)
    assert (gone.status, gone.text) == (
        404,
        raw(host.base_url, "DELETE", f"{BASE}/mcp-servers/{server_id}x", key=host.key_b).text,
    )
    calls = dict(server.calls)
    client_b = host.client(host.key_b)
    run_id = _run(client_b, [(tool, {"title": "x", "body": "y"})], tenant="tenant-b")
    assert dict(server.calls) == calls
    assert _returned(client_b, run_id)[0]["status"] == "forbidden"
    assert raw(host.base_url, "DELETE", f"{BASE}/mcp-servers/{server_id}", key=host.key_a).status == 204
    assert raw(host.base_url, "GET", f"/tools/{tool}", key=host.key_a).status == 404
