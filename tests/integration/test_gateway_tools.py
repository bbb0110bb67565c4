"""The tool gateway (decision 0143, step 3), black box: the official ``mcp`` client, as the frameworks use it (the
``2025-11-25`` handshake, a bearer header), over real HTTP against the local front, and a counting MCP tool server
on loopback (``DemoMcpServer``, registered by the tenant). A production session's ``tools/list`` is exactly the
allowlist; a call goes live once and is recorded as a host agent's (the run's log and the tool-call store); a tool
outside the allowlist never runs; other revisions and a bad token are refused before the SDK."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from shared.engine.tools import key_of_call
from shared.local.demo_mcp import DemoMcpServer
from shared.protocol.ids import project_id
from shared.providers.names import wire_name
from tests.helpers import ports as _ports
from tests.wire import raw

BASE = "/host/openwop-serverless"
ORDER_KEY = f"{1:012d}"  # a session's agent.invocation-started is its second event
JSONRPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def tool_server():
    server = DemoMcpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def session(host, tool_server) -> dict[str, Any]:
    """A production session of an external agent allowed two tools of the registered MCP server."""
    server_id = "g" + uuid.uuid4().hex[:8]
    r = raw(
        host.base_url, "POST", f"{BASE}/mcp-servers", {"serverId": server_id, "url": tool_server.url}, key=host.key_a
    )
    assert r.status == 201, r.text
    allow = [f"mcp:{server_id}.lookup_customer", "conformance.eval:echo"]
    agent_id = "x" + uuid.uuid4().hex[:10]
    body = {
        "version": "1.0.0",
        "manifest": {
            "agentId": agent_id,
            "persona": "Support resolver",
            "modelClass": "general",
            "systemPrompt": "You resolve support tickets.",
            "toolAllowlist": allow,
        },
        "model": {"provider": "mock", "model": "mock-model"},
        "runtime": {"kind": "external"},
    }
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == 201, r.text
    r = raw(host.base_url, "POST", f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": "c-7"}}, key=host.key_a)
    assert r.status == 201, r.text
    return {**r.json, "allow": allow, "serverId": server_id}


def _mcp(url: str, token: str, steps: Any) -> Any:
    """Run ``steps(client session)`` through the official client: ``initialize`` then whatever the steps ask."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            init = await client.initialize()
            return init, await steps(client)

    return asyncio.run(go())


def _events(host: Any, run_id: str) -> list[dict[str, Any]]:
    r = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll", key=host.key_a)
    assert r.status == 200, r.text
    return list(r.json["events"])


def test_the_official_client_lists_exactly_the_allowlist(host, session):
    async def steps(client: Any) -> Any:
        return await client.list_tools()

    init, listed = _mcp(session["mcpUrl"], session["token"], steps)
    assert init.protocol_version == "2025-11-25"
    # listed under the providers' tool-name grammar (an agent hands them to its model), called back by either name
    assert [t.name for t in listed.tools] == [wire_name(a) for a in session["allow"]]
    lookup = listed.tools[0]
    assert lookup.input_schema["required"] == ["id"]  # the catalog's schema, as the MCP server listed it
    assert lookup.description == "A customer's name and tier by id."
    assert listed.tools[1].input_schema == {"type": "object"}  # a built-in has none


def test_a_production_call_goes_live_once_and_is_recorded_as_a_host_agents(host, session, tool_server):
    lookup = session["allow"][0]
    before = tool_server.calls["lookup_customer"]

    async def steps(client: Any) -> Any:
        return await client.call_tool(lookup, {"id": "c-7"})

    _, result = _mcp(session["mcpUrl"], session["token"], steps)
    # Then the tool ran exactly once, and its answer came back unaltered
    assert tool_server.calls["lookup_customer"] == before + 1
    answer = {"id": "c-7", "name": "Customer c-7", "tier": "gold"}
    assert (result.is_error, result.structured_content) == (False, answer)
    assert json.loads(result.content[0].text) == answer
    # And the session's log has the call as a host-run agent's, with its as-executed record in the store
    events = _events(host, session["runId"])
    called = [e for e in events if e["type"] == "agent.tool-called" and e["payload"]["toolName"] == lookup]
    returned = [e for e in events if e["type"] == "agent.tool-returned" and e["payload"]["toolName"] == lookup]
    assert len(called) == 1 and len(returned) == 1
    call_id = called[0]["payload"]["callId"]
    assert called[0]["payload"]["inputs"] == {"id": "c-7"} and called[0]["payload"]["transport"] == "mcp"
    assert returned[0]["payload"]["status"] == "ok" and returned[0]["payload"]["callId"] == call_id
    assert returned[0]["payload"]["outcome"]["structuredContent"] == answer
    index = int(call_id.rsplit("#", 1)[1])
    rec = _ports().tool_calls.get_call(session["runId"], key_of_call(ORDER_KEY, index))
    assert rec is not None
    assert (rec.tool_name, rec.args, rec.status, rec.source) == (lookup, {"id": "c-7"}, "ok", "live")
    assert rec.result["structuredContent"] == answer and rec.extra["transport"] == "mcp"


def test_a_tool_outside_the_allowlist_is_an_error_result_and_never_runs(host, session, tool_server):
    ticket = f"mcp:{session['serverId']}.create_ticket"  # registered for the tenant, not allowed to the agent

    async def steps(client: Any) -> Any:
        return await client.call_tool(ticket, {"title": "t", "body": "b"})

    _, result = _mcp(session["mcpUrl"], session["token"], steps)
    assert result.is_error is True
    assert result.structured_content["code"] == "forbidden"
    assert tool_server.calls["create_ticket"] == 0


def _post(host: Any, session: dict[str, Any], message: Any, version: str | None, token: str | None = None) -> Any:
    headers = dict(JSONRPC)
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    return raw(
        host.base_url,
        "POST",
        urlsplit(session["mcpUrl"]).path,
        None,
        key=token or session["token"],
        headers=headers,
        data=json.dumps(message).encode(),
    )


@pytest.mark.parametrize("old", ["2025-06-18", "2024-11-05"])
def test_other_revisions_are_refused_with_what_the_gateway_speaks(host, session, old):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": old, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    for message, header in ((init, None), (listing, old)):
        r = _post(host, session, message, header)
        assert r.status == 400, r.text
        error = r.json["error"]
        assert error["code"] == -32022
        assert error["data"] == {"supported": ["2025-11-25", "2026-07-28"], "requested": old}
        assert _declared_refusal_errors(host, 400, r.json) == []  # the served document declares this body


def _declared_refusal_errors(host: Any, status: int, body: Any) -> list[str]:
    """What is wrong with ``body`` as the served OpenAPI document's ``status`` answer of ``gatewayMcp``."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    doc = raw(host.base_url, "GET", "/openapi.json", None).json
    op = next(o for path in doc["paths"].values() for o in path.values() if o.get("operationId") == "gatewayMcp")
    schema = op["responses"][str(status)]["content"]["application/json"]["schema"]
    registry = Registry().with_resource("urn:openapi", Resource.from_contents({**doc, "$schema": DRAFT}))
    validator = Draft202012Validator({"$ref": "urn:openapi" + schema["$ref"]}, registry=registry)
    return [e.message for e in validator.iter_errors(body)]


DRAFT = "https://json-schema.org/draft/2020-12/schema"


def test_a_bad_token_is_401_before_the_sdk(host, session, tool_server):
    before = sum(tool_server.calls.values())
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": session["allow"][0], "arguments": {"id": "c"}},
    }
    for token in ("owg_" + "A" * 43, "not-a-gateway-token"):
        r = _post(host, session, call, "2025-11-25", token=token)
        assert r.status == 401, r.text
        assert r.json["error"] == "unauthenticated" and "jsonrpc" not in r.json
    assert sum(tool_server.calls.values()) == before


def test_a_replay_serves_the_recorded_calls_in_any_order_and_fails_closed_on_a_miss(host, session, tool_server):
    """Sessions are forked by a later step: the replay side is driven here through the service with a second
    session of the same agent, authenticated as its gateway would, replaying the first one's record."""
    from shared.services.gateway import REPLAY, tools
    from shared.services.gateway import session as sessions

    lookup, echo = session["allow"]

    async def record(client: Any) -> Any:
        await client.call_tool(lookup, {"id": "r-1"})
        await client.call_tool(echo, {"say": "hi"})
        return await client.call_tool(lookup, {"id": "r-2"})

    source = _second_session(host, session)
    _mcp(source["mcpUrl"], source["token"], record)
    fork = _second_session(host, session)
    ports = _ports()
    authed = sessions.authenticate(ports, project_id(fork["runId"]), f"Bearer {fork['token']}")
    replay = dataclasses.replace(authed, mode=REPLAY, source_run_id=source["runId"])
    hits = sum(tool_server.calls.values())
    # When the fork calls the recorded tools in another order
    second = tools.call_tool(ports, replay, lookup, {"id": "r-2"})
    echoed = tools.call_tool(ports, replay, echo, {"say": "hi"})
    first = tools.call_tool(ports, replay, lookup, {"id": "r-1"})
    # Then each gets its own recorded answer, and no tool ran
    assert second["structuredContent"]["id"] == "r-2" and first["structuredContent"]["id"] == "r-1"
    assert echoed == {
        "content": [{"type": "text", "text": '{"say":"hi"}'}],
        "isError": False,
        "structuredContent": {"say": "hi"},
    }
    assert sum(tool_server.calls.values()) == hits
    # And a call the source never made fails closed, naming the closest recorded call and where it differs
    missed = tools.call_tool(ports, replay, lookup, {"id": "r-3"})
    assert missed["isError"] is True
    detail = missed["structuredContent"]
    assert detail["code"] == "replay_source_missing" and detail["tool"] == lookup
    assert detail["closest"] == {"index": 0, "tool": lookup, "sameTool": True}
    assert detail["differingPointers"] == ["/id"]
    # A call already served once is not served again: the record is consumed
    again = tools.call_tool(ports, replay, lookup, {"id": "r-1"})
    assert again["isError"] is True and again["structuredContent"]["code"] == "replay_source_missing"
    assert sum(tool_server.calls.values()) == hits
    recs = {r.call_id: r for r in ports.tool_calls.list_calls(fork["runId"])}
    assert [recs[f"s:0#{i}"].source for i in range(5)] == ["recorded"] * 5
    assert [recs[f"s:0#{i}"].status for i in range(5)] == ["ok", "ok", "ok", "error", "error"]


def _second_session(host: Any, session: dict[str, Any]) -> dict[str, Any]:
    agent_id = _agent_of(host, session)
    r = raw(host.base_url, "POST", f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": "again"}}, key=host.key_a)
    assert r.status == 201, r.text
    return dict(r.json)


def _agent_of(host: Any, session: dict[str, Any]) -> str:
    rec = _ports().runs.get_run(session["runId"])
    return str(rec.data["agentId"])


def test_the_modern_revision_serves_the_sdks_own_client(host, session):
    """The ``mcp`` 2.x ``Client`` pinned to 2026-07-28: no handshake, each request stamped with the revision."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    lookup, echo = session["allow"]

    async def go() -> Any:
        headers = {"Authorization": f"Bearer {session['token']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(session["mcpUrl"], http_client=http), mode="2026-07-28") as client,
        ):
            return await client.list_tools(), await client.call_tool(echo, {"modern": True})

    listed, echoed = asyncio.run(go())
    assert [t.name for t in listed.tools] == [wire_name(lookup), wire_name(echo)]
    assert (echoed.is_error, echoed.structured_content) == (False, {"modern": True})
    returned = [
        e["payload"]
        for e in _events(host, session["runId"])
        if e["type"] == "agent.tool-returned" and e["payload"]["toolName"] == echo
    ]
    assert returned[-1]["status"] == "ok" and returned[-1]["outcome"] == {"modern": True}
