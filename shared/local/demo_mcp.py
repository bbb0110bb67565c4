"""A demo MCP server (streamable HTTP, the ``mcp`` SDK's low-level server) on loopback, in a background thread.

Tests and demos start it, point the host's MCP client at ``start()``'s URL, and read back what the server saw:
how many times each tool ran (``calls``), the ``_meta`` each call carried (``metas``) and the ``Host`` header of
each HTTP request (``hosts``). Tools are deterministic:

- ``lookup_customer({id})`` -> structuredContent ``{"id", "name", "tier"}`` (annotated read-only)
- ``create_ticket({title, body})`` -> structuredContent ``{"ticketId"}``, a hash of the two fields (a write)
- ``fail_always({})`` -> a result with ``isError: true``

A name the server does not have is a JSON-RPC error (-32602). ``tools/list`` answers in pages of ``page_size``
tools, so a client has to follow ``nextCursor``. ``extra_tools`` adds tools of a test's own: (the tool's
definition, a function from its arguments to its ``structuredContent``), listed after the demo's.

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


def ticket_id(title: str, body: str) -> str:
    digest = hashlib.sha256(json.dumps([title, body]).encode()).hexdigest()
    return f"T-{digest[:8]}"


class DemoMcpServer:
    """The demo server. ``start()`` returns its URL; ``stop()`` ends it (both bounded)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, page_size: int = 2,
                 allowed_hosts: tuple[str, ...] = (),
                 extra_tools: Sequence[tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]] = ()
                 ) -> None:
        self.host = host
        self.extra_tools = list(extra_tools)
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
            cursor = params.cursor if params is not None else None
            try:
                start = int(cursor) if cursor else 0
            except ValueError as exc:
                raise MCPError(types.INVALID_PARAMS, "invalid cursor") from exc
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
                out: dict[str, Any] = extra[name](dict(args))
            elif name == "lookup_customer":
                cid = str(args.get("id", ""))
                out = {"id": cid, "name": f"Customer {cid}", "tier": "gold"}
            elif name == "create_ticket":
                out = {"ticketId": ticket_id(str(args.get("title", "")), str(args.get("body", "")))}
            else:
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text="the demo tool always fails")], is_error=True)
            return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out))],
                                        structured_content=out, is_error=False)

        return Server("openwop-demo-mcp", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)

    def _app(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *(f"{h}:*" for h in self.allowed_hosts)]
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                             allowed_origins=[f"http://{h}" for h in hosts])
        app = self._build().streamable_http_app(stateless_http=True, json_response=True,
                                                transport_security=security, host=self.host)

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
                with self._lock:
                    self.hosts.append(host)
            await app(scope, receive, send)

        return recording

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
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="on", timeout_graceful_shutdown=1,
                                timeout_keep_alive=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="demo-mcp", daemon=True)
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
        """Forget the recorded calls, metas and hosts."""
        with self._lock:
            self.calls.clear()
            self.metas.clear()
            self.hosts.clear()
            self.list_pages = 0

    def __enter__(self) -> DemoMcpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
