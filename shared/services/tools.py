"""Tools a tenant registers (HTTP tools, MCP servers), the catalog it reads, and the credentials they use.

Everything is tenant-scoped by key (``TOOL#<tenant>``, ``MCPSERVER#<tenant>``, ``CRED#<tenant>`` in the host
table; credentials' secret material in Secrets Manager under ``<prefix>/<tenant>/<ref>``): another tenant's id
is simply not found, with the same bytes as an unknown one.

The catalog (RFC 0078, RFC 0204 ``tool-catalog.md``) projects every tool the caller may invoke as a
``ToolDescriptor`` sorted by ``toolId``. ``safetyTier``, ``replayPolicy`` and ``egress`` are assigned here,
never copied from an MCP server's annotations; an MCP tool the registration does not classify is ``write`` /
``non-deterministic``; ``annotations`` are computed from those three fields by the RFC 0204 table.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from shared.engine.canonical import same_json
from shared.engine.catalog import BUILTIN_TIERS, http_tier, mcp_tier
from shared.engine.registry import COUNTER_TOOL, TOOLS
from shared.errors import (
    InteropVersionUnsupportedError,
    NotFoundError,
    VersionConflictError,
    fault,
    invalid,
    invalid_parameter,
    pointer,
)
from shared.ports import EgressRefusedError, Ports, TransportError
from shared.protocol.toolids import mcp_tool_id, split_mcp_tool_id
from shared.services.common import Caller

if TYPE_CHECKING:  # pydantic: only the routes that validate a body load it
    from shared.protocol.tools import CredentialPut, McpServerRegistration, ToolRegistration

MAX_MCP_TOOLS = 200
_BUILTIN_CLASS = {COUNTER_TOOL: (BUILTIN_TIERS[COUNTER_TOOL], "idempotent")}  # echo and fail: pure and deterministic


def _not_found(what: str) -> NotFoundError:
    return NotFoundError(f"No such {what}.")


def _annotations(tier: str, replay: str | None, egress: str | None) -> dict[str, bool]:
    """RFC 0204 §D.12: the four MCP hints from host-assigned fields, never from MCP defaults."""
    return {
        "readOnlyHint": tier in ("pure", "read"),
        "destructiveHint": tier in ("write", "exec"),
        "idempotentHint": replay in ("deterministic", "idempotent"),
        "openWorldHint": egress != "none",
    }


def _descriptor(
    tool_id: str,
    source: str,
    tier: str,
    replay: str,
    egress: str,
    *,
    description: str | None,
    title: str | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    credential: bool = False,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "toolId": tool_id,
        "source": source,
        "safetyTier": tier,
        "replayPolicy": replay,
        "egress": egress,
        "annotations": _annotations(tier, replay, egress),
    }
    if title:
        d["title"] = title
    if description:
        d["description"] = description
    if isinstance(input_schema, dict):
        d["inputSchema"] = input_schema
    if isinstance(output_schema, dict):
        d["outputSchema"] = output_schema
    if credential:
        d["auth"] = {"credentialRef": True}
    return d


def _builtin(name: str) -> dict[str, Any]:
    tier, replay = _BUILTIN_CLASS.get(name, ("pure", "deterministic"))
    return _descriptor(name, "node-pack", tier, replay, "none", description=TOOLS[name].description)


def _http(doc: dict[str, Any]) -> dict[str, Any]:
    tier = http_tier(doc)
    return _descriptor(
        doc["toolId"],
        "connector",
        tier,
        doc.get("replayPolicy") or "non-deterministic",
        "safe-fetch",
        description=doc.get("description"),
        title=doc.get("title"),
        input_schema=doc.get("inputSchema"),
        output_schema=doc.get("outputSchema"),
        credential=bool(doc.get("credentialRef")),
    )


def _mcp(server: dict[str, Any], tool: dict[str, Any]) -> dict[str, Any]:
    cls = (server.get("classes") or {}).get(tool["name"]) or {}
    return _descriptor(
        mcp_tool_id(server["serverId"], tool["name"]),
        "mcp",
        mcp_tier(server, tool["name"]),
        cls.get("replayPolicy", "non-deterministic"),
        "safe-fetch",
        description=tool.get("description"),
        title=tool.get("title"),
        input_schema=tool.get("inputSchema"),
        output_schema=tool.get("outputSchema"),
        credential=bool(server.get("credentialRef")),
    )


# --------------------------------------------------------------------------- the catalog


def list_tools(ports: Ports, caller: Caller) -> dict[str, Any]:
    tools = [_builtin(name) for name in TOOLS] if ports.settings.conformance_enabled else []
    tools += [_http(doc) for doc in ports.tools.list_tools(caller.tenant)]
    for server in ports.mcp_servers.list_servers(caller.tenant):
        tools += [_mcp(server, t) for t in server.get("tools", [])]
    return {"tools": sorted(tools, key=lambda d: d["toolId"])}


def get_tool(ports: Ports, caller: Caller, tool_id: str) -> dict[str, Any]:
    if tool_id in TOOLS and ports.settings.conformance_enabled:
        return _builtin(tool_id)
    mcp = split_mcp_tool_id(tool_id)
    if mcp is not None:
        server = ports.mcp_servers.get_server(caller.tenant, mcp[0])
        tool = next((t for t in (server or {}).get("tools", []) if t.get("name") == mcp[1]), None)
        if server is None or tool is None:
            raise _not_found("tool")
        return _mcp(server, tool)
    doc = ports.tools.get_tool(caller.tenant, tool_id)
    if doc is None:
        raise _not_found("tool")
    return _http(doc)


# --------------------------------------------------------------------------- HTTP tools


def _check_schema(schema: Any, field: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise invalid(f"{field} is not a valid JSON Schema.", [fault(f"/{field}", "schema")]) from exc


def _check_credential(ports: Ports, caller: Caller, ref: str | None) -> None:
    if ref is not None and ports.credentials.get_credential(caller.tenant, ref) is None:
        raise invalid("credentialRef names no credential of this tenant.", [fault("/credentialRef", "credentialRef")])


def register_tool(ports: Ports, caller: Caller, body: ToolRegistration) -> tuple[int, dict[str, Any]]:
    """201 new (or a new ``version``), 200 the identical document, 409 another document under the same version."""
    _check_schema(body.inputSchema, "inputSchema")
    if body.outputSchema is not None:
        _check_schema(body.outputSchema, "outputSchema")
    _check_credential(ports, caller, body.credentialRef)
    doc = body.model_dump(mode="json", exclude_none=True)
    for _ in range(3):
        current = ports.tools.get_tool(caller.tenant, body.toolId)
        if current is None:
            if ports.tools.put_tool(caller.tenant, body.toolId, doc, if_absent=True):
                return 201, _http(doc)
            continue
        if same_json(current, doc):
            return 200, _http(doc)
        if current.get("version") == doc.get("version"):
            raise VersionConflictError("Another tool is registered under this toolId and version.")
        if ports.tools.put_tool(caller.tenant, body.toolId, doc, if_equals=current):
            return 201, _http(doc)
    raise VersionConflictError("The tool changed while it was being registered.")


def delete_tool(ports: Ports, caller: Caller, tool_id: str) -> None:
    if not ports.tools.delete_tool(caller.tenant, tool_id):
        raise _not_found("tool")


# --------------------------------------------------------------------------- MCP servers


def _listed(tool: Any) -> dict[str, Any] | None:
    """What the host keeps of a listed MCP tool: its name, text and schemas (annotations are untrusted: dropped)."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not 0 < len(tool["name"]) <= 128:
        return None
    if any(ch.isspace() or ord(ch) < 32 for ch in tool["name"]):
        return None
    kept = {
        k: tool[k]
        for k in ("name", "title", "description", "inputSchema", "outputSchema")
        if k in tool and tool[k] is not None
    }
    return kept


def register_mcp_server(ports: Ports, caller: Caller, body: McpServerRegistration) -> tuple[int, dict[str, Any]]:
    """Connect as an MCP client, list the server's tools, keep them: 201 new, 200 re-registered (re-listed).

    The listing is one exchange at the host's one MCP revision, negotiated first: its ``negotiation.decided`` lands
    on an audit run (``shared.services.negotiations``) named in the answer (``negotiation``); a server that does not
    speak the revision is refused ``400 interop_version_unsupported`` naming the reason and that run."""
    from shared.engine.dispatch import credential_headers
    from shared.services import negotiations

    _check_credential(ports, caller, body.credentialRef)
    timeout_s = body.timeoutMs / 1000
    try:
        headers = credential_headers(ports, caller.tenant, body.credentialRef)
        deal, audit = negotiations.negotiate(ports, caller, body.url, headers, timeout_s=timeout_s)
        if not deal.accepted:
            raise InteropVersionUnsupportedError(deal.message, deal.refusal_details(audit))
        assert deal.discovery is not None
        listed = ports.mcp.list_tools(body.url, headers, discovered=deal.discovery, timeout_s=timeout_s)
    except EgressRefusedError as exc:
        raise invalid(f"The MCP server's URL is refused: {exc.reason}.", [fault("/url", "egress")]) from exc
    except TransportError as exc:
        raise invalid(f"The MCP server could not be listed: {exc.reason}.", [fault("/url", "reachable")]) from exc
    tools = [t for t in (_listed(x) for x in listed[:MAX_MCP_TOOLS]) if t is not None]
    names = {t["name"] for t in tools}
    classes = {name: c.model_dump() for name, c in (body.tools or {}).items()}
    if set(classes) - names:
        raise invalid(
            "tools names a tool the MCP server does not list.",
            [fault("/tools" + pointer([sorted(set(classes) - names)[0]]), "listed")],
        )
    doc = {**body.model_dump(mode="json", exclude_none=True, exclude={"tools"}), "tools": tools, "classes": classes}
    existed = ports.mcp_servers.get_server(caller.tenant, body.serverId) is not None
    ports.mcp_servers.put_server(caller.tenant, body.serverId, doc)
    view = _server_view(doc)
    view["negotiation"] = {"runId": audit, "version": deal.decision.version}
    return (200 if existed else 201), view


def _server_view(doc: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {k: doc[k] for k in ("serverId", "url", "description", "timeoutMs") if k in doc}
    if doc.get("credentialRef"):
        view["credentialRef"] = doc["credentialRef"]
    view["toolIds"] = sorted(mcp_tool_id(doc["serverId"], t["name"]) for t in doc.get("tools", []))
    return view


def list_mcp_servers(ports: Ports, caller: Caller) -> dict[str, Any]:
    servers = [_server_view(doc) for doc in ports.mcp_servers.list_servers(caller.tenant)]
    return {"servers": sorted(servers, key=lambda s: s["serverId"])}


def delete_mcp_server(ports: Ports, caller: Caller, server_id: str) -> None:
    if not ports.mcp_servers.delete_server(caller.tenant, server_id):
        raise _not_found("MCP server")


# --------------------------------------------------------------------------- credentials (write-only)


def _credential_view(ref: str, meta: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "credentialRef": ref,
        "type": meta["type"],
        "createdAt": meta["createdAt"],
        "updatedAt": meta["updatedAt"],
    }
    if meta.get("description"):
        view["description"] = meta["description"]
    return view


def put_credential(ports: Ports, caller: Caller, ref: str, body: CredentialPut) -> tuple[int, dict[str, Any]]:
    """Store the secret material in Secrets Manager; keep only metadata here. 201 new, 200 replaced."""
    from shared.protocol.toolids import CREDENTIAL_REF_RE

    if not CREDENTIAL_REF_RE.match(ref):
        raise invalid_parameter("credentialRef", "The credentialRef is malformed.")
    name = ports.credentials.secret_name(caller.tenant, ref)
    created = ports.secrets.put_secret(
        name,
        json.dumps(body.credential.model_dump(), separators=(",", ":")),
        description="openwop-serverless tool credential",
    )
    now = ports.clock.iso()
    before = ports.credentials.get_credential(caller.tenant, ref)
    meta = {
        "type": body.credential.type,
        "createdAt": (before or {}).get("createdAt", now),
        "updatedAt": now,
        **({"description": body.description} if body.description else {}),
    }
    ports.credentials.put_credential(caller.tenant, ref, meta)
    return (201 if created and before is None else 200), _credential_view(ref, meta)


def get_credential(ports: Ports, caller: Caller, ref: str) -> dict[str, Any]:
    meta = ports.credentials.get_credential(caller.tenant, ref)
    if meta is None:
        raise _not_found("credential")
    return _credential_view(ref, meta)


def list_credentials(ports: Ports, caller: Caller) -> dict[str, Any]:
    items = ports.credentials.list_credentials(caller.tenant)
    return {"credentials": [_credential_view(ref, meta) for ref, meta in sorted(items, key=lambda x: x[0])]}


def delete_credential(ports: Ports, caller: Caller, ref: str) -> None:
    if ports.credentials.get_credential(caller.tenant, ref) is None:
        raise _not_found("credential")
    ports.secrets.delete_secret(ports.credentials.secret_name(caller.tenant, ref))
    ports.credentials.delete_credential(caller.tenant, ref)
