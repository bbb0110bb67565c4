"""The gateway's own wire helpers: JSON answers, the protocol envelope of a refusal, a request's JSON body.

The gateway's parts answer ``GatewayResponse`` values (``shared.services.gateway``), not API Gateway responses, so
they share these instead of ``functions/_common/api.py``'s.
"""

from __future__ import annotations

import json
from typing import Any

from shared.errors import ProtocolError, UnsupportedMediaTypeError, invalid_at
from shared.services.common import decode_json, json_object_of
from shared.services.gateway import GatewayRequest, GatewayResponse

VERSION_HEADER = {"OpenWOP-Version": "2.0"}


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> GatewayResponse:
    return GatewayResponse(
        status,
        json.dumps(body, separators=(",", ":")).encode("utf-8"),
        {"Content-Type": "application/json", **VERSION_HEADER, **(headers or {})},
    )


def refusal(err: ProtocolError) -> GatewayResponse:
    """The protocol envelope of ``err`` with its registered status (``WWW-Authenticate: Bearer`` on a 401)."""
    headers: dict[str, str] = {}
    if err.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if err.status in (429, 503):
        headers["Retry-After"] = str(getattr(err, "retry_after_s", 1))
    return json_response(err.status, err.envelope(), headers)


def json_body(request: GatewayRequest) -> Any:
    """The request body as strict, bounded JSON (415 unless JSON-typed, 400 unless it parses)."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise UnsupportedMediaTypeError()
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_at("", "json", "The request body is not UTF-8 JSON.") from exc
    return decode_json(text)


def json_object(request: GatewayRequest) -> dict[str, Any]:
    return json_object_of(json_body(request))
