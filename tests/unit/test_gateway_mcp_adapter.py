"""The tool gateway's MCP wire (decision 0143): the ASGI adapter and the revision refusal, with the official SDK's
server answering, no AWS. ``tools/list`` of built-in tools needs no store (only a clock: a session's catalog is kept a
minute, decision 0194), so the whole SDK path runs here."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from functions.agent_gateway import asgi, mcp
from shared.clock import SystemClock
from shared.engine.registry import COUNTER_TOOL, ECHO_TOOL, AgentSpec
from shared.providers.names import wire_name
from shared.services.gateway import PRODUCTION, GatewayRequest, GatewaySession

ALLOW = (ECHO_TOOL, COUNTER_TOOL)
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SESSION = GatewaySession(
    gateway_id="r-1",
    tenant="tenant-a",
    run_id="r-1",
    mode=PRODUCTION,
    agent=AgentSpec("ext", tool_allowlist=ALLOW, version="1"),
    invocation_id="s:0",
    order_key="000000000002",
    expires_at_ms=0,
)
NO_STORE = SimpleNamespace(clock=SystemClock())  # the ports of a request that reads no store: its clock only
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _post(message: Any, version: str | None = None, method: str = "POST", extra: dict[str, str] | None = None) -> Any:
    headers = {**ACCEPT, **(extra or {})}
    if version is not None:
        headers["mcp-protocol-version"] = version
    req = GatewayRequest(method, "/mcp", headers, json.dumps(message).encode())
    return mcp.handle(NO_STORE, SESSION, req)  # type: ignore[arg-type]


def test_the_adapter_builds_the_scope_and_collects_the_answer() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["scope"] = scope
        seen["first"] = await receive()
        seen["second"] = await receive()
        await send({"type": "http.response.start", "status": 201, "headers": [(b"X-A", b"1"), (b"x-a", b"2")]})
        await send({"type": "http.response.body", "body": b"ab", "more_body": True})
        await send({"type": "http.response.body", "body": b"c"})

    req = GatewayRequest("post", "/mcp", {"Authorization": "Bearer t", "mcp-protocol-version": "x"}, b"{}", "a=1")
    out = asyncio.run(asgi.serve(app, req))
    scope = seen["scope"]
    assert (scope["method"], scope["path"], scope["raw_path"], scope["query_string"]) == (
        "POST",
        "/mcp",
        b"/mcp",
        b"a=1",
    )
    assert (b"authorization", b"Bearer t") in scope["headers"] and (b"mcp-protocol-version", b"x") in scope["headers"]
    assert seen["first"] == {"type": "http.request", "body": b"{}", "more_body": False}
    assert seen["second"]["type"] == "http.disconnect"
    assert (out.status, out.body, out.headers) == (201, b"abc", {"x-a": "1, 2"})


def test_initialize_negotiates_the_handshake_revision_and_lists_exactly_the_allowlist() -> None:
    init = _post(INIT)
    assert init.status == 200 and init.headers["content-type"].startswith("application/json")
    result = json.loads(init.body)["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "openwop-serverless-gateway"
    assert _post({"jsonrpc": "2.0", "method": "notifications/initialized"}, "2025-11-25").status == 202
    listed = _post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "2025-11-25")
    tools = json.loads(listed.body)["result"]["tools"]
    assert [t["name"] for t in tools] == [wire_name(a) for a in ALLOW]  # the providers' tool-name grammar
    assert all(t["inputSchema"] == {"type": "object"} for t in tools)
    assert "nextCursor" not in json.loads(listed.body)["result"]


def test_the_modern_revision_is_served_without_a_handshake() -> None:
    listed = _post(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
        "2026-07-28",
        extra={"mcp-method": "tools/list"},
    )
    assert listed.status == 200, listed.body
    assert [t["name"] for t in json.loads(listed.body)["result"]["tools"]] == [wire_name(a) for a in ALLOW]


def _refused(out: Any, requested: str | None, ident: Any) -> None:
    assert out.status == 400 and out.headers["content-type"] == "application/json"
    assert json.loads(out.body) == {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2025-11-25", "2026-07-28"], "requested": requested},
        },
    }


def test_other_revisions_are_refused_before_the_sdk() -> None:
    for old in ("2025-06-18", "2024-11-05", "2025-03-26"):
        _refused(_post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, old), old, 3)
        offered = {**INIT, "params": {**INIT["params"], "protocolVersion": old}}  # type: ignore[dict-item]
        _refused(_post(offered), old, 1)
    _refused(_post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, "2099-01-01"), "2099-01-01", 4)
    # no header after the handshake: the transport's default, 2025-03-26, which the gateway does not speak
    _refused(_post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}), "2025-03-26", 5)


def test_get_and_delete_are_405_before_the_sdk() -> None:
    for method in ("GET", "DELETE"):
        out = _post(None, "2025-11-25", method=method)
        assert out.status == 405 and out.headers["allow"] == "POST"
