"""Real HTTP tools a tenant registers: registration, the catalog, credentials, dispatch through the egress guard,
idempotent and recorded calls, replay and RFC 0252 fixtures with zero hits, tenant isolation.

The tool server is a real HTTP server on loopback (``shared.local.demo_tools``), counting every hit.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from shared.protocol.ids import project_id
from tests.helpers import ports as _ports
from tests.helpers import unique
from tests.wire import all_events, raw, wait_terminal
from tests.workflows import definition, node, run_script, tool_returned, variable

BASE = "/host/openwop-serverless"


def _org() -> str:
    return "t" + uuid.uuid4().hex[:8]


def _register(host: Any, key: str, url: str, tool_id: str, path: str = "/crm/lookup", **extra: Any) -> Any:
    body = {
        "toolId": tool_id,
        "description": "Look a customer up",
        "source": {"kind": "http", "url": url + path},
        "inputSchema": {
            "type": "object",
            "properties": {"customerId": {"type": "string"}},
            "required": ["customerId"],
            "additionalProperties": False,
        },
        **extra,
    }
    return raw(host.base_url, "POST", f"{BASE}/tools", body, key=key)


_run_agent = run_script
_returned = tool_returned


def test_registration_statuses_and_the_catalog(host, server):
    from jsonschema import Draft202012Validator

    from shared.protocol.schemas import load_schema

    _, url = server
    tool_id = f"{_org()}.crm:lookup"
    # Given a new HTTP tool: 201, the identical document 200, another document under the same version 409
    first = _register(host, host.key_a, url, tool_id)
    assert first.status == 201, first.text
    assert _register(host, host.key_a, url, tool_id).status == 200
    changed = _register(host, host.key_a, url, tool_id, description="Changed")
    assert (changed.status, changed.json["error"]) == (409, "version_conflict")
    assert _register(host, host.key_a, url, tool_id, description="Changed", version="2").status == 201
    # Then the catalog lists it (through the official client), schema-valid, sorted, host-classified
    client = host.client(host.key_a)
    tools = client.tools_list()
    ids = [t.toolId for t in tools]
    assert tool_id in ids and ids == sorted(ids)
    listed = raw(host.base_url, "GET", "/tools", key=host.key_a).json["tools"]
    validator = Draft202012Validator(load_schema("tool-descriptor.schema.json"))
    for d in listed:
        assert list(validator.iter_errors(d)) == [], d
    mine = next(d for d in listed if d["toolId"] == tool_id)
    assert (mine["source"], mine["safetyTier"], mine["egress"]) == ("connector", "write", "safe-fetch")
    assert mine["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert client.tools_get(tool_id).description == "Changed"
    # And unauthenticated reads are 401
    assert raw(host.base_url, "GET", "/tools").status == 401


@pytest.mark.parametrize(
    "bad",
    [
        {"toolId": "Acme.crm:x"},
        {"toolId": "conformance.eval:x"},
        {"toolId": "acme.crm"},
        {"inputSchema": {"type": "nonsense"}},
        {"source": {"kind": "http", "url": "ftp://x/y"}},
        {"source": {"kind": "http", "url": "http://x/y", "headers": {"Authorization": "Bearer leaked"}}},
        {"unknownKey": 1},
        {"credentialRef": "no-such-credential"},
    ],
)
def test_bad_registrations_are_400(host, server, bad):
    _, url = server
    body = {
        "toolId": f"{_org()}.crm:lookup",
        "description": "d",
        "source": {"kind": "http", "url": url + "/x"},
        "inputSchema": {"type": "object"},
        **bad,
    }
    r = raw(host.base_url, "POST", f"{BASE}/tools", body, key=host.key_a)
    assert (r.status, r.json["error"]) == (400, "validation_error"), r.text
    assert "leaked" not in r.text


def test_a_run_records_real_calls_and_a_replay_fork_serves_them_with_zero_hits(host, server):
    tools, url = server
    org = _org()
    lookup, ticket = f"{org}.crm:lookup", f"{org}.desk:ticket"
    assert _register(host, host.key_a, url, lookup).status == 201
    assert (
        raw(
            host.base_url,
            "POST",
            f"{BASE}/tools",
            {
                "toolId": ticket,
                "description": "Open a ticket",
                "source": {"kind": "http", "url": url + "/tickets"},
                "inputSchema": {"type": "object", "required": ["title"]},
                "replayPolicy": "idempotent",
            },
            key=host.key_a,
        ).status
        == 201
    )
    client = host.client(host.key_a)
    before = tools.count()
    # Given a run whose agent calls both tools for real
    run_id = _run_agent(client, [(lookup, {"customerId": "c-1"}), (ticket, {"title": "refund"})])
    assert client.runs_get(run_id).status == "completed"
    assert tools.count() - before == 2
    returned = _returned(client, run_id)
    assert returned[0]["outcome"] == {"customerId": "c-1", "name": "Ada Lovelace", "tier": "gold"}
    assert returned[1]["outcome"]["ticketId"].startswith("T-")
    called = [e.payload for e in all_events(client, run_id) if e.type == "agent.tool-called"]
    assert [c["transport"] for c in called] == ["http", "http"]
    records = _ports().tool_calls.list_calls(run_id)
    assert [(r.tool_name, r.status, r.source) for r in records] == [(lookup, "ok", "live"), (ticket, "ok", "live")]
    # and each request carried a stable idempotency key
    keys = [h.headers["idempotency-key"] for h in tools.hits[-2:]]
    assert all(k.startswith("owop-") for k in keys) and keys[0] != keys[1]

    # When it is forked in replay mode from sequence 0
    fork = client.runs_fork(run_id, ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId).status == "completed"
    # Then no request reached the tool server, every answer was served, and nothing diverged
    assert tools.count() - before == 2
    assert _returned(client, fork.runId) == returned
    assert not [e for e in all_events(client, fork.runId) if e.type == "replay.diverged"]


def test_fixture_runs_serve_recorded_http_calls_fail_closed(host, server):
    from tests.integration.test_eval_runs import golden, put_suite

    tools, url = server
    lookup = f"{_org()}.crm:lookup"
    assert _register(host, host.key_a, url, lookup).status == 201
    client = host.client(host.key_a)
    source = _run_agent(client, [(lookup, {"customerId": "c-2"})])
    suite_id = f"tests.local.evals.{uuid.uuid4().hex[:10]}"

    def task(task_id: str, customer: str) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "input": {"calls": [{"tool": lookup, "args": {"customerId": customer}}], "answer": "done"},
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
                "tasks": [task("same", "c-2"), task("changed", "c-1")],
            },
        ).status
        == 201
    )
    before = tools.count()
    # When an eval run serves both tasks from the recorded run
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
    # Then the unchanged call is served, the changed argument misses and fails closed, and no request went out
    assert tools.count() == before
    assert by_task["same"]["fixtureMissCount"] == 0
    assert by_task["changed"]["fixtureMissCount"] == 1
    served = [r for r in _ports().tool_calls.list_calls(run.runId)]
    assert {r.source for r in served} == {"fixture"}


def test_credentials_are_write_only_and_applied_at_egress(host, server):
    tools, url = server
    ref, token = f"crm-{uuid.uuid4().hex[:6]}", f"secret-{uuid.uuid4().hex}"
    # Given a credential stored for tenant A
    put = raw(
        host.base_url,
        "PUT",
        f"{BASE}/credentials/{ref}",
        {"credential": {"type": "bearer", "token": token}},
        key=host.key_a,
    )
    assert put.status == 201, put.text
    assert token not in put.text
    got = raw(host.base_url, "GET", f"{BASE}/credentials/{ref}", key=host.key_a)
    assert got.status == 200 and got.json["type"] == "bearer" and token not in got.text
    assert token not in raw(host.base_url, "GET", f"{BASE}/credentials", key=host.key_a).text
    # and a tool that uses it
    lookup = f"{_org()}.crm:lookup"
    assert _register(host, host.key_a, url, lookup, credentialRef=ref).status == 201
    assert raw(host.base_url, "GET", f"/tools/{lookup}", key=host.key_a).json["auth"] == {"credentialRef": True}
    client = host.client(host.key_a)
    run_id = _run_agent(client, [(lookup, {"customerId": "c-1"})])
    # Then the tool server received it, and no event, record or catalog entry carries it
    assert tools.hits[-1].headers["authorization"] == f"Bearer {token}"
    assert token not in json.dumps([e.payload for e in all_events(client, run_id)])
    assert token not in json.dumps([r.__dict__ for r in _ports().tool_calls.list_calls(run_id)])
    assert token not in raw(host.base_url, "GET", "/tools", key=host.key_a).text
    # Tenant B cannot read or delete it; A's delete removes the secret itself
    other = raw(host.base_url, "GET", f"{BASE}/credentials/{ref}", key=host.key_b)
    unknown = raw(host.base_url, "GET", f"{BASE}/credentials/nope-{ref}", key=host.key_b)
    assert (other.status, other.text) == (404, unknown.text)
    assert raw(host.base_url, "DELETE", f"{BASE}/credentials/{ref}", key=host.key_b).status == 404
    assert raw(host.base_url, "DELETE", f"{BASE}/credentials/{ref}", key=host.key_a).status == 204
    sm = host.aws.client("secretsmanager")
    names = [s["Name"] for page in sm.get_paginator("list_secrets").paginate() for s in page["SecretList"]]
    assert not [n for n in names if n.endswith(f"/tenant-a/{ref}")]


def test_invalid_arguments_are_a_tool_error_never_a_request(host, server):
    tools, url = server
    lookup = f"{_org()}.crm:lookup"
    assert _register(host, host.key_a, url, lookup).status == 201
    before = tools.count()
    client = host.client(host.key_a)
    run_id = _run_agent(client, [(lookup, {"customerId": 7, "extra": True})])
    assert tools.count() == before
    assert _returned(client, run_id)[0]["error"]["code"] == "validation_error"


def test_tenant_b_cannot_see_call_or_delete_tenant_a_tools(host, server):
    tools, url = server
    lookup = f"{_org()}.crm:lookup"
    assert _register(host, host.key_a, url, lookup).status == 201
    unknown = f"{_org()}.crm:lookup"
    # reads and deletes: identical 404 bytes for A's id and an unknown one
    seen = raw(host.base_url, "GET", f"/tools/{lookup}", key=host.key_b)
    none = raw(host.base_url, "GET", f"/tools/{unknown}", key=host.key_b)
    assert (seen.status, seen.text) == (404, none.text)
    gone = raw(host.base_url, "DELETE", f"{BASE}/tools/{lookup}", key=host.key_b)
    assert (gone.status, gone.text) == (
        404,
        raw(host.base_url, "DELETE", f"{BASE}/tools/{unknown}", key=host.key_b).text,
    )
    assert lookup not in raw(host.base_url, "GET", "/tools", key=host.key_b).text
    # and B's agent calling A's tool id is refused without a request
    before = tools.count()
    client_b = host.client(host.key_b)
    run_id = _run_agent(client_b, [(lookup, {"customerId": "c-1"})], tenant="tenant-b")
    assert tools.count() == before
    assert _returned(client_b, run_id)[0]["status"] == "forbidden"
    # A's own delete works
    assert raw(host.base_url, "DELETE", f"{BASE}/tools/{lookup}", key=host.key_a).status == 204
    assert raw(host.base_url, "GET", f"/tools/{lookup}", key=host.key_a).status == 404


def test_a_core_tool_node_calls_a_registered_http_tool(host, server):
    from shared.services.workflows import register_workflow

    tools, url = server
    weather = f"{_org()}.meteo:weather"
    assert (
        raw(
            host.base_url,
            "POST",
            f"{BASE}/tools",
            {
                "toolId": weather,
                "description": "Forecast",
                "source": {"kind": "http", "url": url + "/weather", "method": "GET"},
                "inputSchema": {"type": "object", "required": ["city"]},
            },
            key=host.key_a,
        ).status
        == 201
    )
    wid = unique("tool-node")
    register_workflow(
        _ports(),
        "tenant-a",
        definition(
            wid,
            [node("w", "core.tool", config={"tool": weather}, inputs={"city": variable("city")})],
            variables=[{"name": "city", "type": "string", "required": True}],
        ),
    )
    client = host.client(host.key_a)
    run = client.runs_create(CreateRunRequest(workflowId=wid, inputs={"city": "Oslo"}))
    snap = wait_terminal(client, run.runId)
    assert snap.status == "completed"
    assert tools.hits[-1].method == "GET" and tools.hits[-1].path == "/weather"
    done = next(e for e in all_events(client, run.runId) if e.type == "node.completed")
    assert done.payload["outputs"] == {"result": {"city": "Oslo", "forecast": "rain"}}
    assert raw(host.base_url, "GET", f"/tools/{weather}", key=host.key_a).json["safetyTier"] == "read"


@pytest.mark.parametrize("crash", ["before-record", "after-record"])
def test_a_call_retried_after_a_crash_is_sent_at_most_once_more_with_the_same_key(host, server, crash):
    from shared.settings import get_settings
    from tests.faults import crash_before_write, kill_after_write

    tools, url = server
    ticket = f"{_org()}.desk:ticket"
    assert (
        raw(
            host.base_url,
            "POST",
            f"{BASE}/tools",
            {
                "toolId": ticket,
                "description": "Open a ticket",
                "source": {"kind": "http", "url": url + "/tickets"},
                "inputSchema": {"type": "object"},
            },
            key=host.key_a,
        ).status
        == 201
    )
    title = f"title-{uuid.uuid4().hex}"
    client = host.client(host.key_a)
    before = tools.count("/tickets")
    ddb = _ports().runs._c
    # Given the task dies right before (or right after) recording the call it just sent
    if crash == "before-record":
        injected = crash_before_write(ddb, get_settings().tool_calls_table, title)
    else:
        injected = kill_after_write(ddb, {title: 2})  # 1: the claim, 2: the record
    with injected as got:
        run_id = _run_agent(client, [(ticket, {"title": title})])
    # Then Step Functions retried it: before the record, the call went out once more with the same key;
    # after the record, never again; either way one record and one answer
    assert got.crashed == 1 and client.runs_get(run_id).status == "completed"
    hits = [h for h in tools.hits if h.path == "/tickets" and (h.body or {}).get("title") == title]
    assert len(hits) == (2 if crash == "before-record" else 1)
    assert len({h.headers["idempotency-key"] for h in hits}) == 1
    assert tools.count("/tickets") - before == len(hits)
    assert len(_ports().tool_calls.list_calls(run_id)) == 1
    assert len({r["outcome"]["ticketId"] for r in _returned(client, run_id)}) == 1


def test_a_redirect_is_a_failed_call_with_its_status_and_is_not_followed(host, server):
    tools, url = server
    moved = f"{_org()}.crm:lookup"
    # Given a tool whose server answers 302 (to an endpoint that would answer 200)
    assert _register(host, host.key_a, url, moved, path="/redirect").status == 201
    before_redirect, before_target = tools.count("/redirect"), tools.count("/crm/lookup")
    client = host.client(host.key_a)
    # When an agent calls it
    run_id = _run_agent(client, [(moved, {"customerId": "c-1"})])
    # Then the call failed with the status it got, the redirect was not followed, and the record says so
    returned = _returned(client, run_id)
    assert returned[0]["status"] == "error", returned
    assert returned[0]["error"] == {"code": "external_call_failed", "message": "the tool answered HTTP 302"}
    assert "outcome" not in returned[0] or returned[0]["outcome"] is None
    assert (tools.count("/redirect") - before_redirect, tools.count("/crm/lookup") - before_target) == (1, 0)
    records = _ports().tool_calls.list_calls(run_id)
    assert [(r.tool_name, r.status, r.source) for r in records] == [(moved, "error", "live")]
