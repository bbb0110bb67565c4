"""``ctx.mcp`` (host-services.md §mcp, RFC 0204) as the node ``core.conformance.mcp-client`` runs it.

The node of the ``conformance-mcp-client`` fixture calls one method against a ``serverId``, with the run's inputs
(``method``, ``serverId``, ``name`` / ``arguments`` for ``callTool``, ``cursor`` for ``listTools``, ``uri`` for
``readResource``), and completes with ``outputs.result`` the resolved value, verbatim:

- ``callTool``: the server's ``CallToolResult`` unaltered (``isError: true`` is a result, not a rejection);
- ``listTools``: one ``ListToolsResult`` page unaltered, the run's ``cursor`` forwarded;
- ``readResource``: the ``ReadResourceResult`` unaltered;
- ``serverHealth``: ``{state, discover?}`` from one ``server/discover`` probe at the pinned revision: ``reachable``
  (it speaks the revision), ``incompatible`` (it answered and does not), ``unreachable`` (no MCP answer); the
  ``DiscoverResult`` as received when one was. Never a connection or session word.

A ``serverId`` is an MCP server the run's tenant registered (``POST /host/openwop-serverless/mcp-servers``); any
other is a rejection ``not_found``. Every exchange is negotiated (``shared.engine.negotiation``): its
``negotiation.decided`` payload is handed to the caller, which emits it before the node's outcome; a refused one
rejects ``interop_version_unsupported`` with nothing else sent. An MCP error or a transport failure rejects
``external_call_failed`` with the server's code and message in its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.engine import negotiation
from shared.ports import EgressRefusedError, McpOp, Ports, SecretNotFoundError, TransportError
from shared.protocol import codes as c
from shared.protocol.toolids import SERVER_ID_RE

METHODS = ("callTool", "listTools", "readResource", "serverHealth")


class Rejected(Exception):
    """The method rejected: the node fails with ``code``; ``message`` is safe to show."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _text(inputs: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = inputs.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise Rejected(c.VALIDATION_ERROR, f"{name} must be a non-empty string")
    return value


def invoke(
    ports: Ports,
    tenant: str,
    inputs: dict[str, Any],
    *,
    idempotency_key: str,
    claim: Callable[[], None],
    negotiated: list[dict[str, Any]],
) -> Any:
    """Run ``inputs["method"]`` (default ``serverHealth``) against ``inputs["serverId"]`` (default
    ``conformance``); each negotiation's payload is appended to ``negotiated``. ``claim`` runs before ``callTool``
    sends anything (the run must be writable)."""
    from shared.engine.dispatch import credential_headers

    method = inputs.get("method", "serverHealth")
    if method not in METHODS:
        raise Rejected(c.VALIDATION_ERROR, f"method must be one of {', '.join(METHODS)}")
    server_id = _text(inputs, "serverId", required=False) or "conformance"
    server = ports.mcp_servers.get_server(tenant, server_id) if SERVER_ID_RE.match(server_id) else None
    if server is None:
        raise Rejected(c.NOT_FOUND, "no MCP server is configured under that serverId")
    url = str(server["url"])
    timeout_s = int(server.get("timeoutMs", 10_000)) / 1000
    try:
        headers = credential_headers(ports, tenant, server.get("credentialRef"))
    except (SecretNotFoundError, ValueError, KeyError, TypeError) as exc:
        raise Rejected(c.EXTERNAL_CALL_FAILED, "the MCP server's credential is not available") from exc
    if method == "serverHealth":
        return _health(ports, url, headers, timeout_s, negotiated)
    op = _op(method, inputs, idempotency_key)
    if method == "callTool":
        claim()
    try:  # the probe and the request in one exchange: the request only once the revision is accepted
        deal = negotiation.negotiate(ports, url, headers, timeout_s=timeout_s, op=op)
        negotiated.append(deal.payload)
        if not deal.accepted:
            raise Rejected(c.INTEROP_VERSION_UNSUPPORTED, deal.message)
        if deal.error is not None:
            raise deal.error
        assert deal.result is not None
        return deal.result
    except EgressRefusedError as exc:
        raise Rejected(c.EXTERNAL_CALL_FAILED, f"egress refused: {exc.reason}") from exc
    except TransportError as exc:
        raise Rejected(c.EXTERNAL_CALL_FAILED, exc.reason) from exc


def _op(method: str, inputs: dict[str, Any], idempotency_key: str) -> McpOp:
    """The request of ``callTool``, ``listTools`` or ``readResource`` from the run's inputs, which it validates."""
    from shared.engine.dispatch import META_KEY

    if method == "callTool":
        name = _text(inputs, "name", required=True)
        arguments = inputs.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise Rejected(c.VALIDATION_ERROR, "arguments must be an object")
        return McpOp("tools/call", name=name or "", arguments=arguments, meta={META_KEY: idempotency_key})
    if method == "listTools":
        return McpOp("tools/list", cursor=_text(inputs, "cursor", required=False))
    return McpOp("resources/read", uri=_text(inputs, "uri", required=True) or "")


def _health(
    ports: Ports, url: str, headers: dict[str, str], timeout_s: float, negotiated: list[dict[str, Any]]
) -> dict[str, Any]:
    try:
        deal = negotiation.negotiate(ports, url, headers, timeout_s=timeout_s)
    except (EgressRefusedError, TransportError):
        return {"state": "unreachable"}  # no MCP answer: nothing was negotiated
    negotiated.append(deal.payload)
    out: dict[str, Any] = {"state": "reachable" if deal.accepted else "incompatible"}
    if deal.discovery is not None and deal.discovery.result is not None:
        out["discover"] = deal.discovery.result
    return out
