"""Which tool a name designates for one tenant: a built-in, a registered HTTP tool, or an MCP server's tool.

The engine resolves a tool only when it is about to run it live (recorded and fixture-served calls need no
registry), reads each distinct registration once per task, and keeps the input-schema validators it builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.engine.registry import COUNTER_TOOL, TOOLS
from shared.ports import Ports
from shared.protocol.toolids import split_mcp_tool_id

BUILTIN_TIERS = {COUNTER_TOOL: "write"}  # the other built-ins (echo, fail) are pure


def http_tier(doc: dict[str, Any]) -> str:
    """A registered HTTP tool's safety tier: as registered, else ``read`` for a GET and ``write`` otherwise."""
    return str(doc.get("safetyTier") or ("read" if (doc.get("source") or {}).get("method") == "GET" else "write"))


def mcp_tier(server: dict[str, Any], name: str) -> str:
    """An MCP tool's safety tier: as the server's registration classes it, else ``write``."""
    return str(((server.get("classes") or {}).get(name) or {}).get("safetyTier", "write"))


@dataclass(frozen=True)
class ResolvedTool:
    tool_id: str
    transport: str  # native | http | mcp
    spec: dict[str, Any] = field(default_factory=dict)  # http: the registration; mcp: {"server": ..., "tool": ...}

    @property
    def input_schema(self) -> dict[str, Any] | None:
        schema = (
            self.spec.get("inputSchema")
            if self.transport == "http"
            else (self.spec.get("tool") or {}).get("inputSchema")
        )
        return schema if isinstance(schema, dict) else None

    @property
    def description(self) -> str | None:
        """What the tool does, as its registration (http) or its MCP server's listing (mcp) says."""
        text = (
            (self.spec.get("tool") or {}).get("description")
            if self.transport == "mcp"
            else self.spec.get("description")
        )
        return text if isinstance(text, str) and text else None

    @property
    def safety_tier(self) -> str:
        """The tool descriptor's ``safetyTier`` (``shared.services.tools`` serves the same)."""
        if self.transport == "http":
            return http_tier(self.spec)
        if self.transport == "mcp":
            return mcp_tier(self.spec.get("server") or {}, str((self.spec.get("tool") or {}).get("name", "")))
        return BUILTIN_TIERS.get(self.tool_id, "pure")

    @property
    def credential_ref(self) -> str | None:
        ref = (
            self.spec.get("credentialRef")
            if self.transport == "http"
            else (self.spec.get("server") or {}).get("credentialRef")
        )
        return str(ref) if ref else None


@dataclass
class Catalog:
    ports: Ports
    tenant: str
    _cache: dict[str, ResolvedTool | None] = field(default_factory=dict)
    _validators: dict[str, Any] = field(default_factory=dict)

    def resolve(self, tool_id: str) -> ResolvedTool | None:
        if tool_id in TOOLS:
            return ResolvedTool(tool_id, "native")
        if tool_id not in self._cache:
            self._cache[tool_id] = self._load(tool_id)
        return self._cache[tool_id]

    def _load(self, tool_id: str) -> ResolvedTool | None:
        mcp = split_mcp_tool_id(tool_id)
        if mcp is not None:
            server = self.ports.mcp_servers.get_server(self.tenant, mcp[0])
            tool = next((t for t in (server or {}).get("tools", []) if t.get("name") == mcp[1]), None)
            return ResolvedTool(tool_id, "mcp", {"server": server, "tool": tool}) if server and tool else None
        doc = self.ports.tools.get_tool(self.tenant, tool_id)
        return ResolvedTool(tool_id, "http", doc) if doc else None

    def argument_errors(self, tool: ResolvedTool, args: Any) -> bool:
        """True when ``args`` do not satisfy the tool's input schema (the call is then never sent)."""
        schema = tool.input_schema
        if schema is None:
            return False
        if tool.tool_id not in self._validators:
            from jsonschema import Draft202012Validator

            self._validators[tool.tool_id] = Draft202012Validator(schema)
        return not self._validators[tool.tool_id].is_valid(args)
