"""MCP version negotiation as a protocol (interop.md §Negotiation is a protocol): one pinned revision, its floor,
the decision and its content-free audit payload (``negotiation.decided``).

The host speaks exactly one MCP revision, ``2026-07-28`` (``revisions``, ``preferredVersion`` and
``minimumRevision`` of the ``mcp`` facet are all it). Every exchange asks for it: one ``server/discover`` at that
revision (``McpTransport.discover``), then the exchange itself pinned to it. A server that does not speak it is
refused (``interop_version_unsupported``): reason ``below-floor`` when every revision it names is older than the
floor, else ``unsupported``. Nothing is ever downgraded, so no unauthenticated exchange can lower anything either.

Each outcome, accepted or refused, is one ``negotiation.decided`` payload
(``run-event-payloads.schema.json#/$defs/negotiationDecided``): ``{protocol: "mcp", outcome, version?, floor,
peerDigest, reason, at}``, the peer as the SHA-256 of its origin, never in clear. A server that gave no MCP answer
(no connection, a timeout, an answer that is not MCP) negotiated nothing: no payload, a ``TransportError``.

``REFRESHED_AT`` is the day the advertised revisions were last checked against the MCP specification's revisions
(interop.md §The refresh SLA: at most 90 days); ``facet`` answers None once that is older than the window, so
discovery stops advertising a claim nobody has re-checked.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from shared.ports import EgressRefusedError, McpDiscovery, McpOp, Ports, TransportError

PROTOCOL = "mcp"
REVISION = "2026-07-28"
REVISIONS = (REVISION,)
PREFERRED = REVISION
FLOOR = REVISION
REFRESHED_AT = "2026-12-04"  # checked: 2026-07-28 is the latest MCP revision (mcp SDK 2.3.0's only modern one)
REFRESH_WINDOW_DAYS = 90

ACCEPTED = "accepted"
REFUSED = "refused"
OK = "ok"
BELOW_FLOOR = "below-floor"
UNSUPPORTED = "unsupported"

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def facet(today: str) -> dict[str, Any] | None:
    """The ``mcp`` facet's protocol members, or None when ``REFRESHED_AT`` is more than the window before ``today``
    (an ISO date or date-time)."""
    reviewed = datetime.date.fromisoformat(REFRESHED_AT)
    if (datetime.date.fromisoformat(today[:10]) - reviewed).days > REFRESH_WINDOW_DAYS:
        return None
    return {
        "revisions": list(REVISIONS),
        "preferredVersion": PREFERRED,
        "minimumRevision": FLOOR,
        "refreshedAt": REFRESHED_AT,
        "client": True,
    }


@dataclass(frozen=True)
class Decision:
    outcome: str  # accepted | refused
    reason: str  # ok | below-floor | unsupported
    version: str | None = None


def _below(revision: str) -> bool:
    return bool(_DATE.match(revision)) and revision < FLOOR


def decide(requested: str, speaks: bool, offered: Sequence[str]) -> Decision:
    """The outcome of asking for ``requested`` from a server that ``speaks`` it (or not) and names ``offered``."""
    if _below(requested):
        return Decision(REFUSED, BELOW_FLOOR)
    if requested not in REVISIONS:
        return Decision(REFUSED, UNSUPPORTED)
    if speaks:
        return Decision(ACCEPTED, OK, requested)
    if offered and all(_below(v) for v in offered):
        return Decision(REFUSED, BELOW_FLOOR)
    return Decision(REFUSED, UNSUPPORTED)


def origin(url: str) -> str:
    """The URL's origin as a browser spells it: ``scheme://host[:port]``, the scheme's default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        host = host.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else "")


def peer_digest(url: str) -> str:
    return hashlib.sha256(origin(url).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Negotiation:
    """One exchange's negotiation: its decision, the ``negotiation.decided`` payload, and what the server answered
    (None when nothing was asked: a requested revision refused before any request); with a request (``negotiate``'s
    ``op``), once accepted, its ``result`` or ``error``."""

    decision: Decision
    payload: dict[str, Any]
    requested: str
    discovery: McpDiscovery | None = None
    result: dict[str, Any] | None = None
    error: TransportError | EgressRefusedError | None = None

    @property
    def accepted(self) -> bool:
        return self.decision.outcome == ACCEPTED

    def refusal_details(self, run_id: str | None) -> dict[str, Any]:
        """``details`` of the ``interop_version_unsupported`` refusal (the audit run, when there is one)."""
        details: dict[str, Any] = {
            "protocol": PROTOCOL,
            "requested": self.requested,
            "supported": list(REVISIONS),
            "reason": self.decision.reason,
            "retriable": False,
        }
        if self.discovery is not None and self.discovery.supported:
            details["serverSupported"] = list(self.discovery.supported)
        if run_id is not None:
            details["runId"] = run_id
        return details

    @property
    def message(self) -> str:
        if self.decision.reason == BELOW_FLOOR:
            return f"MCP negotiation refused: below the floor {FLOOR} (this host speaks only MCP {REVISION})."
        return f"MCP negotiation refused: the revision is not one this host speaks (only MCP {REVISION})."


def payload(decision: Decision, url: str, at: str) -> dict[str, Any]:
    """The content-free ``negotiation.decided`` payload (the peer's origin digested, never in clear)."""
    p: dict[str, Any] = {"protocol": PROTOCOL, "outcome": decision.outcome}
    if decision.version is not None:
        p["version"] = decision.version
    p.update({"floor": FLOOR, "peerDigest": peer_digest(url), "reason": decision.reason, "at": at})
    return p


def negotiate(
    ports: Ports,
    url: str,
    headers: dict[str, str],
    *,
    timeout_s: float,
    requested: str = REVISION,
    op: McpOp | None = None,
) -> Negotiation:
    """Ask the server at ``url`` for ``requested`` (the pin unless a caller names another) and decide; with ``op``,
    send that request too once the server accepts the revision, in the same exchange (one name lookup, one
    connection pool, one ``timeout_s``: ``McpTransport.exchange``).

    A revision this host does not speak, or one below the floor, is refused before any request (a below-floor
    revision is never put on the wire). ``EgressRefusedError`` / ``TransportError`` when the server gave no MCP
    answer: nothing was negotiated. The server accepts exactly when the decision is ``accepted`` (a revision this
    host speaks is never below its floor), so the request goes out only under an accepted negotiation."""
    discovery: McpDiscovery | None = None
    result: dict[str, Any] | None = None
    error: TransportError | EgressRefusedError | None = None
    if requested in REVISIONS:
        if op is None:
            discovery = ports.mcp.discover(url, headers, revision=requested, timeout_s=timeout_s)
        else:
            got = ports.mcp.exchange(url, headers, op, revision=requested, timeout_s=timeout_s)
            discovery, result, error = got.discovery, got.result, got.error
        decision = decide(requested, discovery.accepted, discovery.supported)
    else:
        decision = decide(requested, False, ())
    return Negotiation(decision, payload(decision, url, ports.clock.iso()), requested, discovery, result, error)
