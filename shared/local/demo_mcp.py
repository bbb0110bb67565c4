"""A demo MCP server (streamable HTTP, the ``mcp`` SDK's low-level server) on loopback, in a background thread.

Tests and demos start it, point the host's MCP client at ``start()``'s URL, and read back what the server saw:
how many times each tool ran (``calls``), the ``_meta`` each call carried (``metas``) and the ``Host`` header of
each HTTP request (``hosts``). Tools are deterministic:

- ``lookup_customer({id})`` -> structuredContent ``{"id", "name", "tier"}`` (annotated read-only)
- ``create_ticket({title, body})`` -> structuredContent ``{"ticketId"}``, a hash of the two fields (a write)
- ``fail_always({})`` -> a result with ``isError: true``

and one resource, ``demo://greeting`` (``RESOURCES``).

A name the server does not have is a JSON-RPC error (-32602). ``tools/list`` answers in pages of ``page_size``
tools, so a client has to follow ``nextCursor``. ``extra_tools`` adds tools of a test's own: (the tool's
definition, a function from its arguments to its ``structuredContent``, or to a whole ``CallToolResult``), listed
after the demo's. ``exchanges`` holds every JSON-RPC request the server answered, with the result (or error) it
sent, as JSON: what a client must hand back unaltered.

The server speaks MCP 2026-07-28 (and the older handshake, as the SDK does). ``revisions`` makes it a server of
other revisions only: a request whose ``MCP-Protocol-Version`` names a revision outside them is refused as the
2026-07-28 text says, ``400`` with JSON-RPC error ``-32022`` and ``data: {supported, requested}``; ``server/discover``
lists exactly ``revisions`` (a server that answers the probe but does not speak the client's revision).

    server = DemoMcpServer()
    url = server.start()          # http://127.0.0.1:<port>/mcp
    ...
    server.calls["create_ticket"], server.metas[-1]
    server.stop()
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

TOOLS: list[dict[str, Any]] = [
    {
        "name": "lookup_customer",
        "title": "Look up a customer",
        "description": "A customer's name and tier by id.",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string", "minLength": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "tier": {"type": "string"}},
            "required": ["id", "name", "tier"],
        },
        "annotations": {"title": "Customer lookup", "readOnlyHint": True, "openWorldHint": False},
        "_meta": {"demo/area": "crm"},
    },
    {
        "name": "create_ticket",
        "title": "Create a ticket",
        "description": "Opens a support ticket; the same title and body give the same ticket id.",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title", "body"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"ticketId": {"type": "string"}},
            "required": ["ticketId"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    },
    {
        "name": "fail_always",
        "description": "Always answers with a tool error (isError: true).",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
]


RESOURCES = {"demo://greeting": "hello from the demo MCP server"}
"""``resources/read``: each URI's text (any other URI is a JSON-RPC error -32602)."""


def _demo_tool_output(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """A built-in demo tool's structured output; None for the one that always fails."""
    if name == "lookup_customer":
        cid = str(args.get("id", ""))
        return {"id": cid, "name": f"Customer {cid}", "tier": "gold"}
    if name == "create_ticket":
        return {"ticketId": ticket_id(str(args.get("title", "")), str(args.get("body", "")))}
    return None


def _add_discover(server: Any, listed: list[str]) -> None:
    """Answer ``server/discover`` with ``listed`` as the supported versions."""
    import mcp_types as types

    async def discover(ctx: Any, params: Any) -> types.DiscoverResult:
        return types.DiscoverResult(supported_versions=listed, capabilities=types.ServerCapabilities())

    server.add_request_handler("server/discover", types.RequestParams, discover)


def _page_start(cursor: str | None) -> int:
    """The index a ``tools/list`` cursor points at (the first page without one)."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    try:
        return int(cursor) if cursor else 0
    except ValueError as exc:
        raise MCPError(types.INVALID_PARAMS, "invalid cursor") from exc


def ticket_id(title: str, body: str) -> str:
    digest = hashlib.sha256(json.dumps([title, body]).encode()).hexdigest()
    return f"T-{digest[:8]}"


class DemoMcpServer:
    """The demo server. ``start()`` returns its URL; ``stop()`` ends it (both bounded)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        page_size: int = 2,
        allowed_hosts: tuple[str, ...] = (),
        extra_tools: Sequence[tuple[dict[str, Any], Callable[[dict[str, Any]], Any]]] = (),
        revisions: tuple[str, ...] | None = None,
        discover_lists: tuple[str, ...] | None = None,
    ) -> None:
        self.host = host
        self.extra_tools = list(extra_tools)
        self.revisions = revisions
        """None: the SDK's own (2026-07-28 and the handshake); else only these (``-32022`` for any other)."""
        self.discover_lists = discover_lists
        """When set, ``server/discover`` answers under 2026-07-28 naming only these revisions."""
        self.exchanges: list[dict[str, Any]] = []
        """``{method, params, protocolVersion, result | error}`` per JSON-RPC request answered, in order."""
        self.port = port
        self.page_size = page_size
        self.allowed_hosts = allowed_hosts
        self.calls: Counter[str] = Counter()
        """Tool name -> number of ``tools/call`` requests that ran it (unknown names are not counted)."""
        self.metas: list[tuple[str, dict[str, Any]]] = []
        """(tool name, the request's ``_meta`` as sent, ``{}`` if none) per ``tools/call``, in arrival order."""
        self.list_pages = 0
        """``tools/list`` requests answered."""
        self.hosts: list[str] = []
        """The ``Host`` header of every HTTP request, in arrival order."""
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # ---- the MCP handlers -------------------------------------------------------------------------------

    def _build(self) -> Any:
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.shared.exceptions import MCPError

        tools = [types.Tool.model_validate(t) for t in TOOLS + [d for d, _ in self.extra_tools]]
        extra = {str(d["name"]): handle for d, handle in self.extra_tools}

        async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            start = _page_start(params.cursor if params is not None else None)
            with self._lock:
                self.list_pages += 1
            end = start + self.page_size
            page = tools[start:end]
            return types.ListToolsResult(tools=page, next_cursor=str(end) if end < len(tools) else None)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            name = params.name
            if name not in {t.name for t in tools}:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
            args = params.arguments or {}
            meta = json.loads(json.dumps(dict(params.meta))) if params.meta else {}
            with self._lock:
                self.calls[name] += 1
                self.metas.append((name, meta))
            if name in extra:
                got = extra[name](dict(args))
                if isinstance(got, types.CallToolResult):
                    return got
                out: dict[str, Any] | None = got
            elif (out := _demo_tool_output(name, args)) is None:
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text="the demo tool always fails")], is_error=True
                )
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out, is_error=False
            )

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            if params.uri not in RESOURCES:
                raise MCPError(types.INVALID_PARAMS, "Unknown resource")
            return types.ReadResourceResult(
                contents=[
                    types.TextResourceContents(uri=params.uri, mime_type="text/plain", text=RESOURCES[params.uri])
                ]
            )

        server = Server(
            "openwop-demo-mcp",
            version="1.0.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_read_resource=read_resource,
        )
        if self.discover_lists is not None:
            _add_discover(server, list(self.discover_lists))
        return server

    def _app(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *(f"{h}:*" for h in self.allowed_hosts)]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts]
        )
        app = self._build().streamable_http_app(
            stateless_http=True, json_response=True, transport_security=security, host=self.host
        )

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = dict(scope.get("headers") or [])
            with self._lock:
                self.hosts.append(headers.get(b"host", b"").decode("latin-1"))
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1") or None
            body = await _read_body(receive)
            request = _json(body)
            if version is not None and self.revisions is not None and version not in self.revisions:
                await self._refuse(request, version, send)
                return
            held: list[Any] = []
            given = False

            async def replay() -> Any:
                nonlocal given
                if given:
                    return await receive()  # after the body: the client's disconnect, when it comes
                given = True
                return {"type": "http.request", "body": body, "more_body": False}

            async def capture(message: Any) -> None:
                # The answer is held whole and recorded before any of it leaves: a client may act on the status
                # line alone (a 404), so it must not see even that before the exchange is in ``exchanges``.
                if not message["type"].startswith("http.response."):
                    await send(message)
                    return
                held.append(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    sent = b"".join(m.get("body", b"") for m in held if m["type"] == "http.response.body")
                    self._record(request, version, _json(sent))
                    for m in held:
                        await send(m)

            await app(scope, replay, capture)

        return recording

    async def _refuse(self, request: Any, version: str, send: Any) -> None:
        """The 2026-07-28 refusal of a revision this server does not speak (``-32022``, what it speaks)."""
        error = {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": list(self.revisions or ()), "requested": version},
        }
        answer = {"jsonrpc": "2.0", "id": request.get("id") if isinstance(request, dict) else None, "error": error}
        payload = json.dumps(answer).encode()
        self._record(request, version, answer)  # before the status line leaves, as every answer
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    def _record(self, request: Any, version: str | None, answer: Any) -> None:
        if not isinstance(request, dict) or "method" not in request or "id" not in request:
            return
        entry: dict[str, Any] = {
            "method": request["method"],
            "params": request.get("params"),
            "protocolVersion": version,
        }
        if isinstance(answer, dict) and "result" in answer:
            entry["result"] = answer["result"]
        elif isinstance(answer, dict) and "error" in answer:
            entry["error"] = answer["error"]
        with self._lock:
            self.exchanges.append(entry)

    # ---- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on ``host:port`` (0: an ephemeral port) and return ``http://host:port/mcp`` once it accepts."""
        import uvicorn

        if self._thread is not None:
            return self.url
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(), log_level="warning", lifespan="on", timeout_graceful_shutdown=1, timeout_keep_alive=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="demo-mcp", daemon=True
        )
        self._thread.start()
        ready = threading.Event()
        waited = 0.0
        while not self._server.started and waited < START_TIMEOUT_S and self._thread.is_alive():
            ready.wait(0.02)
            waited += 0.02
        if not self._server.started:
            self.stop()
            sock.close()
            raise RuntimeError("the demo MCP server did not start")
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{netloc}:{self.port}/mcp"
        return self.url

    def stop(self) -> None:
        """Stop serving (at most a few seconds); safe to call twice."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(STOP_TIMEOUT_S)
        self._server = None
        self._thread = None

    def reset(self) -> None:
        """Forget the recorded calls, metas, hosts and exchanges."""
        with self._lock:
            self.calls.clear()
            self.metas.clear()
            self.hosts.clear()
            self.exchanges.clear()
            self.list_pages = 0

    def __enter__(self) -> DemoMcpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _read_body(receive: Any) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
