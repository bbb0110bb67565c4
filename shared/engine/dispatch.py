"""A live call to a registered tool (HTTP or MCP): claimed, keyed, sent at most once per outcome, recorded.

For one call (run ``R``, call key ``K``):
1. **Claim** ``EFFECT#call#K`` under the run, in one transaction with the run's writable check: a cancelled or
   erased run never sends (``ConflictError``). A claim that already exists means a retried step: if the call's
   outcome is recorded it is returned and nothing is sent again; if not (the task died between sending and
   recording), the call is sent again **with the same idempotency key**, so the tool can tell.
2. **Key** ``owop-<sha256(R#K)>``: an HTTP tool gets it as ``Idempotency-Key``, an MCP tool in
   ``_meta["openwop/idempotencyKey"]``.
3. **Credential** from the tenant's credential store, applied at egress (never in an event, a record or a log).
4. **Send** through the transport port (egress-guarded). Failures are outcomes, never exceptions: the caller
   records whatever happened. An MCP call is negotiated first (``shared.engine.negotiation``: one
   ``server/discover`` at the pinned revision): the ``negotiation.decided`` payload comes back with the outcome,
   accepted or refused, and a refused one is a failed call (``interop_version_unsupported``) with no
   ``tools/call`` sent.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit, urlunsplit

from shared.engine import negotiation
from shared.engine.catalog import ResolvedTool
from shared.ports import EgressRefusedError, McpOp, Ports, SecretNotFoundError, TransportError
from shared.protocol import codes as c

CREDENTIAL_MAX_AGE_S = 60  # a rotated or deleted credential is picked up within a minute
USER_AGENT = "openwop-serverless"
META_KEY = "openwop/idempotencyKey"


def idempotency_key(run_id: str, call_key: str) -> str:
    return "owop-" + hashlib.sha256(f"{run_id}#{call_key}".encode()).hexdigest()[:40]


def _error(message: str) -> dict[str, Any]:
    return {"code": c.EXTERNAL_CALL_FAILED, "message": message}


def _credential(ports: Ports, tenant: str, ref: str) -> dict[str, Any]:
    name = ports.credentials.secret_name(tenant, ref)
    cred: dict[str, Any] = json.loads(ports.secrets.get_secret(name, max_age_s=CREDENTIAL_MAX_AGE_S))
    return cred


def credential_headers(ports: Ports, tenant: str, ref: str | None) -> dict[str, str]:
    if not ref:
        return {}
    cred = _credential(ports, tenant, ref)
    if cred.get("type") == "bearer":
        return {"Authorization": f"Bearer {cred['token']}"}
    return {str(cred["name"]): str(cred["value"])}


def credential_value(ports: Ports, tenant: str, ref: str) -> str:
    """The secret a model provider is called with (an API key): a bearer token, or a header credential's value.
    ``LookupError`` when the tenant's credential cannot be read."""
    try:
        cred = _credential(ports, tenant, ref)
        return str(cred["token"] if cred.get("type") == "bearer" else cred["value"])
    except (SecretNotFoundError, KeyError, ValueError) as exc:
        raise LookupError("credential unavailable") from exc


class Sent(NamedTuple):
    """One call's outcome: ``status`` ``ok`` or ``error``, its result or error, and (an MCP call that negotiated)
    the ``negotiation.decided`` payload."""

    status: str
    result: Any
    error: Any
    negotiation: dict[str, Any] | None = None


def send(ports: Ports, tool: ResolvedTool, tenant: str, run_id: str, call_key: str, args: Any) -> Sent:
    """Send one call. Never raises for the tool."""
    key = idempotency_key(run_id, call_key)
    try:
        headers = credential_headers(ports, tenant, tool.credential_ref)
    except (SecretNotFoundError, ValueError, KeyError, TypeError):
        return Sent("error", None, _error("the tool's credential is not available"))
    if tool.transport == "mcp":
        return _send_mcp(ports, tool, headers, key, args)
    try:
        return Sent(*_send_http(ports, tool, headers, key, args))
    except EgressRefusedError as exc:
        return Sent("error", None, _error(f"egress refused: {exc.reason}"))
    except TransportError as exc:
        return Sent("error", None, _error(exc.reason))


def _send_http(ports: Ports, tool: ResolvedTool, headers: dict[str, str], key: str, args: Any) -> tuple[str, Any, Any]:
    source = tool.spec["source"]
    method = str(source.get("method", "POST"))
    url = str(source["url"])
    body: bytes | None = None
    if method == "GET":
        url = _with_query(url, args)
    else:
        body = json.dumps(args, separators=(",", ":")).encode("utf-8")
    sent = {
        **(source.get("headers") or {}),
        **headers,
        "Idempotency-Key": key,
        "Accept": "application/json",
        "User-Agent": USER_AGENT,
    }
    if body is not None:
        sent["Content-Type"] = "application/json"
    reply = ports.http.send(
        method,
        url,
        sent,
        body,
        timeout_s=int(source.get("timeoutMs", 10_000)) / 1000,
        max_bytes=int(ports.settings.tool_response_max_bytes),
    )
    result = decode_body(reply.body)
    if not 200 <= reply.status < 300:  # a 3xx too: redirects are never followed (egress), so it is no answer
        return "error", None, _error(f"the tool answered HTTP {reply.status}")
    return "ok", result, None


def _send_mcp(ports: Ports, tool: ResolvedTool, headers: dict[str, str], key: str, args: Any) -> Sent:
    server = tool.spec["server"]
    url = str(server["url"])
    arguments = args if isinstance(args, dict) else {}
    timeout_s = int(server.get("timeoutMs", 10_000)) / 1000
    op = McpOp("tools/call", name=str(tool.spec["tool"]["name"]), arguments=arguments, meta={META_KEY: key})
    try:  # the probe and the call in one exchange: the call only once the revision is accepted
        deal = negotiation.negotiate(ports, url, headers, timeout_s=timeout_s, op=op)
    except (EgressRefusedError, TransportError) as exc:
        return Sent("error", None, _transport_error(exc))  # no MCP answer: nothing was negotiated
    if not deal.accepted:  # fails closed: nothing is sent under another revision
        return Sent("error", None, {"code": c.INTEROP_VERSION_UNSUPPORTED, "message": deal.message}, deal.payload)
    if deal.error is not None:
        return Sent("error", None, _transport_error(deal.error), deal.payload)
    # RFC 0204: the CallToolResult comes back unaltered; a tool error (isError: true) is a result, not a failure.
    return Sent("ok", deal.result, None, deal.payload)


def _transport_error(exc: EgressRefusedError | TransportError) -> dict[str, Any]:
    return _error(f"egress refused: {exc.reason}" if isinstance(exc, EgressRefusedError) else exc.reason)


def _with_query(url: str, args: Any) -> str:
    if not isinstance(args, dict) or not args:
        return url
    parts = urlsplit(url)
    pairs = [(k, v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))) for k, v in args.items()]
    query = "&".join(x for x in (parts.query, urlencode(pairs)) if x)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def decode_body(raw: bytes) -> Any:
    """An answer body as JSON when it is JSON, else as text."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
