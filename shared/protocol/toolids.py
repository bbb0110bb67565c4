"""Tool id forms (RFC 0078 ``<scope>:<tool-id>``) and the constants registrations are checked against: what the
engine needs of tools without the registration bodies' models (``shared.protocol.tools``, pydantic).

- a registered HTTP tool: ``<org>.<pack>:<tool>`` (lower-case org and pack, digits and inner hyphens allowed);
- an MCP server's tool: ``mcp:<serverId>.<tool name>`` (the server id has no dot, so the first dot splits);
- the conformance tools: ``conformance.eval:<tool>`` (built in; the ``conformance`` and ``openwop`` orgs are
  reserved).
"""

from __future__ import annotations

import re
from typing import Literal

TOOL_ID_RE = re.compile(
    r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*\.[a-z][a-z0-9]*(?:-[a-z0-9]+)*:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
)
SERVER_ID_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
# What an agent's toolAllowlist may name: a registered (or built-in) tool id, or an MCP server's tool (a listed name
# is 1-128 characters without whitespace or control characters). The served OpenAPI document carries it.
ALLOWLIST_ID_RE = re.compile(
    "^(?:" + TOOL_ID_RE.pattern[1:-1] + r"|mcp:[a-z][a-z0-9]*(?:-[a-z0-9]+)*\.[^\s\x00-\x1f]{1,128})$"
)
MAX_ALLOWLIST = 256  # tools one agent version may name (each is checked against the tenant's catalog)
CREDENTIAL_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MCP_PREFIX = "mcp:"
RESERVED_ORGS = frozenset({"conformance", "openwop", "core", "mcp"})
# Headers a registration may not set itself: credentials come only from a credentialRef; the rest are hop-by-hop
# or set by the host per call.
FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "expect",
        "idempotency-key",
    }
)
SafetyTier = Literal["pure", "read", "write"]
ReplayPolicy = Literal["deterministic", "idempotent", "non-deterministic"]


def mcp_tool_id(server_id: str, name: str) -> str:
    return f"{MCP_PREFIX}{server_id}.{name}"


def split_mcp_tool_id(tool_id: str) -> tuple[str, str] | None:
    """``mcp:<serverId>.<name>`` -> (serverId, name); None for any other form."""
    if not tool_id.startswith(MCP_PREFIX) or "." not in tool_id:
        return None
    server_id, name = tool_id[len(MCP_PREFIX) :].split(".", 1)
    if not SERVER_ID_RE.match(server_id) or not name:
        return None
    return server_id, name


def transport_of(tool_id: str, builtin: bool) -> str:
    """How a tool is reached, from its id alone (so a replay reproduces ``agent.tool-called.transport``)."""
    if builtin:
        return "native"
    return "mcp" if tool_id.startswith(MCP_PREFIX) else "http"
