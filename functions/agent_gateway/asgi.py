"""The smallest ASGI adapter that lets the ``mcp`` SDK answer one ``GatewayRequest`` (decision 0143, "The tool
gateway"): no Starlette app, no uvicorn, no Mangum. ``scope_of`` makes the HTTP scope (method, raw path,
lowercased header bytes, query string); ``serve`` runs an ASGI callable on it, its ``receive`` yielding the one
body, its ``send`` collecting the status, headers and body parts into a ``GatewayResponse``.

``refusal`` is the revision check our adapter makes before the SDK sees a request: the gateway speaks ``2025-11-25``
(the handshake the frameworks' clients negotiate) and ``2026-07-28``; any other ``MCP-Protocol-Version`` header, or
an ``initialize`` offering another revision, is ``400`` with JSON-RPC ``-32022`` and ``data: {supported,
requested}`` (as ``shared.local.demo_mcp`` refuses). A request other than ``initialize`` that names no revision
would be read as ``2025-03-26`` (the transport's default when the header is absent), so it is refused as that.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from shared.services.gateway import GatewayRequest, GatewayResponse

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
SUPPORTED = (HANDSHAKE, MODERN)
ABSENT = "2025-03-26"  # what a request without the header is taken to speak (Streamable HTTP, 2025-06-18 on)
UNSUPPORTED_VERSION = -32022

Message = MutableMapping[str, Any]
Asgi = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def scope_of(request: GatewayRequest) -> dict[str, Any]:
    """The ASGI HTTP scope of one request (loopback client and server: the SDK reads neither)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method.upper(),
        "scheme": "https",
        "path": request.path,
        "raw_path": request.path.encode("latin-1", "replace"),
        "root_path": "",
        "query_string": request.query.encode("latin-1", "replace"),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in request.headers.items()],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 443),
        "state": {},
    }


async def serve(app: Asgi, request: GatewayRequest) -> GatewayResponse:
    """Run ``app`` on ``request``; its answer, whole (the gateway's answers are JSON, never a held stream)."""
    given = False
    status = 500
    headers: dict[str, str] = {}
    parts: list[bytes] = []

    async def receive() -> Message:
        nonlocal given
        if given:
            return {"type": "http.disconnect"}  # asked again only once the answer is sent
        given = True
        return {"type": "http.request", "body": request.body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for k, v in message.get("headers") or []:
                name = k.decode("latin-1").lower()
                headers[name] = f"{headers[name]}, {v.decode('latin-1')}" if name in headers else v.decode("latin-1")
        elif message["type"] == "http.response.body":
            parts.append(bytes(message.get("body", b"")))

    await app(scope_of(request), receive, send)
    headers.pop("content-length", None)  # the function's integration sets it from the body it sends
    return GatewayResponse(status, b"".join(parts), headers)


def refusal(request: GatewayRequest) -> GatewayResponse | None:
    """The ``-32022`` answer for a revision the gateway does not speak, else None (the SDK answers)."""
    message = _json(request.body)
    header = request.headers.get("mcp-protocol-version")
    if isinstance(message, dict) and message.get("method") == "initialize":
        offered = (
            (message.get("params") or {}).get("protocolVersion") if isinstance(message.get("params"), dict) else None
        )
        requested = header if header is not None and header not in SUPPORTED else offered
    else:
        requested = header if header is not None else ABSENT
    if requested in SUPPORTED:
        return None
    error = {
        "code": UNSUPPORTED_VERSION,
        "message": "Unsupported protocol version",
        "data": {"supported": list(SUPPORTED), "requested": requested},
    }
    ident = message.get("id") if isinstance(message, dict) else None
    body = json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}, separators=(",", ":")).encode()
    return GatewayResponse(400, body, {"content-type": "application/json"})


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
