"""``POST G/mcp``: the tool gateway's MCP server (decision 0143, "The tool gateway"), on the official ``mcp`` SDK's
low-level server, Streamable HTTP, stateless, JSON answers.

One ``Server`` is built per cold start. Per request, the token already checked by the function, ``handle``:
refuses what the SDK must not see (``GET``/``DELETE``: no stream, no session to end, ``405``; a revision the gateway
does not speak, ``-32022``: ``asgi.refusal``); puts the caller's session in a ``ContextVar`` (the stateless
server task is started inside ``handle_request``, so it inherits the context); and runs a fresh
``StreamableHTTPSessionManager(server, stateless=True, json_response=True)`` (its ``run()`` may be entered once)
under ``asyncio.run`` through the ASGI adapter. The handlers do their blocking work (the store, a live tool, whose
MCP client runs an event loop of its own) in a worker thread. What the tools list and answer is
``shared.services.gateway.tools``; this module only puts it on the wire.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

from functions.agent_gateway import asgi
from shared.errors import ProtocolError, StorageError
from shared.ports import Ports
from shared.protocol import codes as c
from shared.services.gateway import GatewayRequest, GatewayResponse, GatewaySession
from shared.services.gateway import tools as gateway_tools

SERVER_NAME = "openwop-serverless-gateway"
RUN_ENDED = "the run no longer accepts calls"

_caller: contextvars.ContextVar[tuple[Ports, GatewaySession]] = contextvars.ContextVar("gateway_caller")
_server: Any = None


def server() -> Any:
    """The low-level MCP server, built once per container: its handlers read the caller from ``_caller``."""
    global _server
    if _server is None:
        _server = _build()
    return _server


def _build() -> Any:
    import mcp_types as types
    from anyio import to_thread
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        ports, session = _caller.get()
        listed = await to_thread.run_sync(gateway_tools.list_tools, ports, session)
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        ports, session = _caller.get()
        try:
            args = dict(params.arguments or {})
            result = await to_thread.run_sync(gateway_tools.call_tool, ports, session, params.name, args)
        except ProtocolError as exc:  # the session refused the call (the run ended or expired): the protocol code
            raise MCPError(types.INVALID_REQUEST, exc.message, {"error": exc.code}) from None
        except StorageError:  # the run stopped being writable meanwhile: nothing was sent or recorded
            raise MCPError(types.INVALID_REQUEST, RUN_ENDED, {"error": c.RUN_TERMINAL}) from None
        return types.CallToolResult.model_validate(result)

    return Server(SERVER_NAME, version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def handle(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    """One ``G/mcp`` request of an authenticated caller."""
    if request.method.upper() != "POST":
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Method Not Allowed"}})
        return GatewayResponse(405, body.encode(), {"content-type": "application/json", "allow": "POST"})
    refused = asgi.refusal(request)
    if refused is not None:
        return refused
    return asyncio.run(_serve(ports, session, request))


async def _serve(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    _caller.set((ports, session))  # this task's context: the server task the manager starts copies it
    manager = StreamableHTTPSessionManager(server(), stateless=True, json_response=True)
    async with manager.run():
        return await asgi.serve(manager.handle_request, request)
