"""The agent gateway (decision 0143): ``/host/openwop-serverless/gateway/{gatewayId}/{rest+}``, authenticated by the
session's bearer token (``shared.services.gateway.session``), never by an API key. On AWS it is served by its own
function URL (``GATEWAY_URL``) and by the HTTP API's route; the events differ only in how the path arrives.

``POST G/mcp`` is the MCP tool gateway (``functions.agent_gateway.mcp``); ``GET``/``DELETE G/mcp`` are ``405`` (a
stateless server: no stream to open, no session to end). ``POST G/v1/chat/completions`` is the model gateway
(``shared.services.gateway.models``); ``G/v1/responses`` is ``404`` naming chat completions. ``POST G/complete`` ends
the session (``shared.services.gateway.complete``). Anything else under ``G`` is ``404 not_found``.

The one handler outside the Powertools resolver (style.md §5, decision 0143): the MCP SDK's ASGI server answers its
route, so each part answers a ``GatewayRequest`` with a ``GatewayResponse``. The ``Authorization`` header is taken out
of the event before anything else sees it, so no log line, span or error can carry the token.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from functions._common.init import prepare_at_init
from functions._common.observability import logger, observed
from shared.errors import (
    InternalError,
    ItemTooLargeError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    ProtocolError,
    invalid_at,
)
from shared.ports import Ports
from shared.protocol.body import MAX_REQUEST_BODY_BYTES
from shared.services.gateway import GatewayRequest, GatewayResponse, GatewaySession
from shared.services.gateway.wire import refusal
from shared.wiring import get_ports

Part = Callable[[Ports, GatewaySession, GatewayRequest], GatewayResponse]
_authorization: contextvars.ContextVar[str | None] = contextvars.ContextVar("gateway_authorization", default=None)
GATEWAY_PREFIX = "/host/openwop-serverless/gateway/"  # G without its gateway id (a function URL serves every path)
RESPONSES_API = (
    "This gateway serves the OpenAI Chat Completions API (POST {openaiBaseUrl}/chat/completions), not the Responses "
    "API: switch the client to chat completions."
)


def _mcp(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    from functions.agent_gateway import mcp

    return mcp.handle(ports, session, request)


def _chat(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    from shared.services.gateway import models

    return models.handle_chat(ports, session, request)


def _complete(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    from shared.services.gateway import complete

    return complete.handle(ports, session, request)


# path under G -> its part (each served with POST only)
PARTS: dict[str, Part] = {"/mcp": _mcp, "/v1/chat/completions": _chat, "/complete": _complete}


def dispatch(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    path = request.path.rstrip("/") or "/"
    part = PARTS.get(path)
    if part is None:
        if path == "/v1/responses" or path.startswith("/v1/responses/"):
            raise NotFoundError(RESPONSES_API)
        raise NotFoundError("No such resource.")
    if request.method != "POST":
        answer = refusal(MethodNotAllowedError())
        answer.headers["Allow"] = "POST"
        return answer
    return part(ports, session, request)


def _body(event: dict[str, Any]) -> bytes:
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(raw, validate=True)
        except binascii.Error as exc:
            raise invalid_at("", "json", "The request body is not valid base64.") from exc
    return str(raw).encode("utf-8", "surrogatepass")


def _path_parameters(event: dict[str, Any]) -> dict[str, str]:
    """``gatewayId`` and ``rest``: the HTTP API route's path parameters, or, from a function URL (whose payload-v2
    event has no ``pathParameters``, decision 0143 "On AWS"), parsed from ``rawPath``. A path outside ``G`` is 404."""
    params = event.get("pathParameters")
    if params:
        return {str(k): str(v) for k, v in params.items()}
    raw = str(event.get("rawPath") or "")
    if not raw.startswith(GATEWAY_PREFIX):
        raise NotFoundError("No such resource.")
    gateway_id, _, rest = raw[len(GATEWAY_PREFIX) :].partition("/")
    return {"gatewayId": unquote(gateway_id), "rest": unquote(rest)}


def _request(event: dict[str, Any]) -> tuple[str, GatewayRequest]:
    params = _path_parameters(event)
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method") or "GET").upper()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    body = _body(event)
    if len(body) > MAX_REQUEST_BODY_BYTES:
        raise PayloadTooLargeError()
    rest = str(params.get("rest") or "")
    path = "/" + rest.lstrip("/")
    return str(params.get("gatewayId") or ""), GatewayRequest(
        method, path, headers, body, str(event.get("rawQueryString") or "")
    )


def _answer(response: GatewayResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"statusCode": response.status, "headers": dict(response.headers)}
    try:
        out["body"] = response.body.decode("utf-8")
        out["isBase64Encoded"] = False
    except UnicodeDecodeError:
        out["body"] = base64.b64encode(response.body).decode("ascii")
        out["isBase64Encoded"] = True
    return out


def serve(ports: Ports, event: dict[str, Any], authorization: str | None) -> GatewayResponse:
    from shared.services.gateway.session import authenticate

    try:
        gateway_id, request = _request(event)
        session = authenticate(ports, gateway_id, authorization)
        return dispatch(ports, session, request)
    except ProtocolError as err:
        if err.status >= 500:
            logger().exception("gateway request failed", extra={"code": err.code})
        return refusal(err)
    except ItemTooLargeError:
        return refusal(PayloadTooLargeError("The request is larger than this host can store."))
    except Exception:
        logger().exception("unexpected gateway error")
        return refusal(InternalError())


prepare_at_init(api_key=False)  # a session's token, not an API key: the DynamoDB client only


@observed("requestContext.requestId")
def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _answer(serve(get_ports(), event, _authorization.get()))


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    headers = dict(event.get("headers") or {})
    authorization = None
    for name in [k for k in headers if str(k).lower() == "authorization"]:
        authorization = str(headers.pop(name))
    token = _authorization.set(authorization)
    try:
        return _handle({**event, "headers": headers}, context)
    finally:
        _authorization.reset(token)
