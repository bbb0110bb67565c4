"""The node kinds of a workflow run that act outside the run: the conformance side effect (an effect-ledger row), a
tool call, an HTTP request (``core.http``) and an MCP client call. Each goes through the ``Guard`` (deny-by-default in
replay) and, for an outside call, claims its effect while the run is writable (``kernel.claim_once``), so a retried or
twice-delivered task never fires it twice. ``execute_once`` runs one execution of such a node and returns its outputs
or raises ``NodeFailure``.
"""

from __future__ import annotations

import json
from typing import Any

from shared.engine.dispatch import decode_body
from shared.engine.kernel import claim_once, fail_obj
from shared.engine.registry import MCP_CLIENT_NODE, AgentSpec
from shared.engine.tools import Guard
from shared.engine.workflowcontext import RunContext
from shared.ports import EgressRefusedError, TransportError
from shared.protocol import codes as c


class NodeFailure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def execute_once(
    ctx: RunContext,
    guard: Guard,
    nid: str,
    node: dict[str, Any],
    inputs: dict[str, Any],
    ordinal: int,
    negotiated: list[dict[str, Any]],
) -> dict[str, Any]:
    type_id = node["typeId"]
    cfg = node.get("config") or {}
    if type_id == "core.noop":
        return {}
    if type_id == "core.conformance.side-effect":
        guard.check("storage.effect-ledger")
        rec = ctx.record
        effect_id = f"{rec.run_id}#{nid}#{ordinal}"
        # The effect: one ledger row, written only while the run is writable (ConflictError otherwise).
        ctx.ports.ledger.put_effect(
            rec.tenant,
            rec.run_id,
            nid,
            ordinal,
            {"runId": rec.run_id, "nodeId": nid, "ordinal": ordinal, "at": ctx.ports.clock.iso()},
            expires_at=rec.expires_at,
        )
        return {"effectId": effect_id, "ordinal": ordinal}
    if type_id == "core.tool":
        tool = str(cfg.get("tool", ""))
        agent = AgentSpec(f"node:{nid}", tool_allowlist=None)
        out = ctx.tools().call(
            agent=agent,
            invocation_id=f"{nid}:{ordinal}",
            order_key=f"N{nid}:{ordinal:06d}",
            index=0,
            tool=tool,
            args=inputs,
            calls_so_far=0,
        )
        if out.negotiation is not None:
            negotiated.append(out.negotiation)
        if out.status != "ok":
            err = out.error or fail_obj(c.EXTERNAL_CALL_FAILED, "tool call failed")
            raise NodeFailure(str(err.get("code", c.EXTERNAL_CALL_FAILED)), str(err.get("message", "tool failed")))
        return {"result": out.result}
    if type_id == "core.http":
        return _http(ctx, guard, cfg, inputs, f"{nid}#{ordinal:06d}")
    if type_id == MCP_CLIENT_NODE:
        return _mcp_client(ctx, guard, nid, ordinal, negotiated)
    raise NodeFailure(c.NODE_EXECUTION_FAILED, "node type cannot run here")


def _mcp_client(
    ctx: RunContext, guard: Guard, nid: str, ordinal: int, negotiated: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``conformance-mcp-client`` fixture's node: ``ctx.mcp.<method>`` with the run's inputs, its resolved value
    verbatim as ``outputs.result`` (``shared.engine.mcpclient``)."""
    from shared.engine import mcpclient
    from shared.engine.dispatch import idempotency_key

    guard.check("tool.mcp")
    rec = ctx.record
    effect_key = f"{nid}#{ordinal:06d}"

    def claim() -> None:  # a tools/call goes out only while the run is writable, from the delivery holding it
        claim_once(ctx.ports, ctx.run_id, effect_key, {"seam": "tool.mcp", "nodeId": nid}, rec.expires_at)

    try:
        result = mcpclient.invoke(
            ctx.ports,
            rec.tenant,
            dict(rec.data.get("inputs") or {}),
            idempotency_key=idempotency_key(ctx.run_id, effect_key),
            claim=claim,
            negotiated=negotiated,
        )
    except mcpclient.Rejected as exc:
        raise NodeFailure(exc.code, exc.message) from exc
    return {"result": result}


def _http(
    ctx: RunContext, guard: Guard, cfg: dict[str, Any], inputs: dict[str, Any], effect_key: str
) -> dict[str, Any]:
    from urllib.parse import urlsplit

    url = str(cfg.get("url") or inputs.get("url") or "")
    method = str(cfg.get("method") or inputs.get("method") or "GET").upper()
    parts = urlsplit(url)
    # The operator's allowlist, and a destination a seams-profile exercise named for this run (seams.py)
    allow = (*ctx.ports.settings.http_allowlist, *(ctx.record.data.get("httpAllow") or ()))
    host = (parts.hostname or "").lower()
    port = parts.port
    target = f"{host}:{port}" if port else host
    if parts.scheme not in ("http", "https") or not host or (target not in allow and host not in allow):
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, "the URL's host is not on the host's HTTP allowlist")
    guard.check("http.fetch")
    # The request goes out only if the run is writable at this instant (ConflictError otherwise), and only from the
    # one delivery holding its claim (EffectInFlightError in another: the same work delivered twice fires it once).
    claim_once(
        ctx.ports, ctx.run_id, effect_key, {"seam": "http.fetch", "method": method, "url": url}, ctx.record.expires_at
    )
    body = inputs.get("body")
    try:
        reply = ctx.ports.http.send(
            method,
            url,
            {"Content-Type": "application/json", "Accept": "application/json"},
            None if body is None else json.dumps(body).encode("utf-8"),
            timeout_s=float(cfg.get("timeoutSeconds", 10)),
            max_bytes=int(ctx.ports.settings.tool_response_max_bytes),
        )
    except (EgressRefusedError, TransportError) as exc:
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, f"the HTTP request failed: {exc.reason}") from exc
    if reply.status >= 400:
        raise NodeFailure(c.EXTERNAL_CALL_FAILED, f"the HTTP request answered {reply.status}")
    return {"status": reply.status, "body": decode_body(reply.body)}
