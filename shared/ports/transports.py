"""Outbound HTTP and MCP through the egress guard: the transports, their records and errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class EgressRefusedError(Exception):
    """The egress guard refused an outbound call's destination before connecting; ``reason`` is safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransportError(Exception):
    """An outbound call failed without a result (timeout, connection, protocol, oversized answer).

    ``reason`` is safe to show: it names no address, header or credential.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


class HttpTransport(Protocol):
    """Outbound HTTP through the egress guard: resolve once, refuse guarded addresses, connect to what was checked."""

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *, timeout_s: float, max_bytes: int
    ) -> HttpReply: ...
    def check(self, url: str) -> bool:
        """Resolve ``url``'s host through the guard without connecting: ``EgressRefusedError`` when refused,
        ``TransportError`` when malformed; True when the destination passes only because the operator allowlisted
        it (a private or loopback address in ``EGRESS_ALLOW``), False for a public one."""
        ...


@dataclass(frozen=True)
class McpDiscovery:
    """What one ``server/discover`` probe at ``revision`` got back from an MCP server that answered it.

    ``result``: the ``DiscoverResult`` as the server sent it (None when the server refused the request);
    ``supported``: the revisions the server named (its ``supportedVersions``, or the ``supported`` list of its
    ``-32022`` refusal; empty when it named none); ``refusal``: the server's error when it refused (safe text, its
    JSON-RPC code and message). The server speaks ``revision`` only when ``accepted``.
    """

    revision: str
    result: dict[str, Any] | None
    supported: tuple[str, ...] = ()
    refusal: str | None = None

    @property
    def accepted(self) -> bool:
        return self.result is not None and self.revision in self.supported


@dataclass(frozen=True)
class McpOp:
    """One request of an exchange after the probe: ``tools/call`` (``name``, ``arguments``, ``meta`` sent as
    ``_meta``), one ``tools/list`` page (``cursor``) or ``resources/read`` (``uri``)."""

    method: str
    name: str = ""
    arguments: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    cursor: str | None = None
    uri: str = ""


@dataclass(frozen=True)
class McpExchange:
    """What one exchange got: the probe's answer, then (only when the server accepted the revision) the request's
    result as the server sent it, or why it has none (``error``: the request failed after the probe)."""

    discovery: McpDiscovery
    result: dict[str, Any] | None = None
    error: TransportError | EgressRefusedError | None = None


class McpTransport(Protocol):
    """An MCP client (streamable HTTP) through the same egress guard, pinned to one revision.

    ``discover`` probes the server at a revision and reports what it answered (``TransportError`` only when no MCP
    answer came: no connection, a timeout, an answer that is not MCP). Every other method takes an accepted
    probe (``discovered``) and speaks exactly its revision, with no second probe and no handshake. ``exchange``
    is the probe and one request together: one name lookup, one connection pool, one ``timeout_s`` for both; the
    request is sent only when the server accepted the revision. Results are the server's JSON, unaltered."""

    def discover(self, url: str, headers: dict[str, str], *, revision: str, timeout_s: float) -> McpDiscovery: ...
    def exchange(
        self, url: str, headers: dict[str, str], op: McpOp, *, revision: str, timeout_s: float
    ) -> McpExchange: ...
    def list_tools(
        self, url: str, headers: dict[str, str], *, discovered: McpDiscovery, timeout_s: float
    ) -> list[dict[str, Any]]: ...
    def call_tool(
        self,
        url: str,
        headers: dict[str, str],
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any],
        discovered: McpDiscovery,
        timeout_s: float,
    ) -> dict[str, Any]: ...
