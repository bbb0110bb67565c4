"""The one place requests become protocol answers: resolver factory, error envelope, headers, caller.

Every API handler does ``app = build_resolver()`` and ``lambda_handler = make_handler(app)``. Errors of
any kind leave here as the protocol envelope with the registered status: never a stack trace, never a 500
for bad input, never an echoed id.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger

from functions._common.init import prepare_at_init
from functions._common.observability import count, count_by, observed
from functions._common.resolver import APIGatewayHttpResolver, Response
from shared.errors import (
    ClientVersionUnsupportedError,
    IdempotencyKeyInvalidError,
    InternalError,
    ItemTooLargeError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    ProtocolError,
    ProtocolVersionUnsupportedError,
    UnsupportedMediaTypeError,
    ValidationError,
    fault,
    invalid,
    invalid_at,
    pointer,
)
from shared.manifest.matching import allowed_methods, is_seam_path
from shared.ports import Ports
from shared.protocol import body as wire_body
from shared.protocol import client_version
from shared.protocol.ids import IDEMPOTENCY_KEY_RE
from shared.services.auth import resolve_caller
from shared.services.common import Caller, decode_json, json_object_of
from shared.services.ratelimits import WRITE_METHODS, check_write
from shared.wiring import Discovery, get_discovery, get_ports

if TYPE_CHECKING:  # pydantic loads with the first body model a handler uses, not with every handler
    from pydantic import BaseModel

    from shared.protocol.models import Closed

logger = Logger(service="openwop-serverless")
VERSION = "2.0"
SUPPORTED_MAJORS = ("2",)
_VERSION_RE = re.compile(r"^(\d+)(\.\d+)?$")
# application/json or application/<anything>+json; the only charset parameter accepted is UTF-8.
_JSON_MEDIA_RE = re.compile(r"^application/(json|[!#$%&'*.^_`|~0-9a-z-]+\+json)$")
M = TypeVar("M", bound="BaseModel")
B = TypeVar("B", bound="Closed")


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    h = {"OpenWOP-Version": VERSION, **(headers or {})}
    return Response(
        status_code=status, content_type="application/json", body=json.dumps(body, separators=(",", ":")), headers=h
    )


def error_response(err: ProtocolError) -> Response[str]:
    count("ServerErrors" if err.status >= 500 else "Refusals")
    if err.status < 500:
        count_by("RefusalsByCode", {"code": err.code})
    headers: dict[str, str] = {}
    if err.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if err.status in (429, 503) or err.code in ("run_already_active", "idempotency_in_flight"):
        headers["Retry-After"] = str(getattr(err, "retry_after_s", 1))
    return _json(err.status, err.envelope(), headers)


def build_resolver() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver()

    @app.exception_handler(ProtocolError)
    def _protocol(err: ProtocolError) -> Response[str]:
        if err.status >= 500:
            logger.exception("request failed", extra={"code": err.code})
        return error_response(err)

    @app.exception_handler(ItemTooLargeError)
    def _too_large(_err: ItemTooLargeError) -> Response[str]:
        return error_response(PayloadTooLargeError("The request is larger than this host can store."))

    @app.not_found
    def _nf(_err: Exception) -> Response[str]:
        return error_response(NotFoundError("No such resource."))

    @app.exception_handler(Exception)
    def _unexpected(err: Exception) -> Response[str]:
        if _is_pydantic_error(err):
            found = err.errors(include_input=False, include_url=False)  # type: ignore[attr-defined]
            logger.info("request body invalid", extra={"errors": found})
            return error_response(invalid("The request body is not valid.", [_fault(e) for e in found]))
        logger.exception("unexpected error")
        return error_response(InternalError())

    return app


# pydantic's error types as the JSON Schema keyword a client knows them by (anything else keeps pydantic's name).
_KEYWORDS = {
    "missing": "required",
    "extra_forbidden": "additionalProperties",
    "string_pattern_mismatch": "pattern",
    "literal_error": "enum",
    "enum": "enum",
    "string_too_short": "minLength",
    "string_too_long": "maxLength",
    "too_short": "minItems",
    "too_long": "maxItems",
    "greater_than_equal": "minimum",
    "less_than_equal": "maximum",
    "greater_than": "exclusiveMinimum",
    "less_than": "exclusiveMaximum",
    "value_error": "format",
}  # our validators check an id's or a URL's form


def _fault(e: dict[str, Any]) -> dict[str, str]:
    """One pydantic error as a ``details.errors`` entry: its location as a JSON Pointer, its rule, pydantic's
    message (it names the rule, never the input: errors are read with ``include_input=False``)."""
    kind = str(e.get("type", ""))
    keyword = _KEYWORDS.get(kind, "type" if kind.endswith("_type") or kind.endswith("_parsing") else kind)
    message = str(e.get("msg") or "").removeprefix("Value error, ")
    return fault(pointer(e.get("loc") or ()), keyword, message[:300] or None)


def _is_pydantic_error(err: Exception) -> bool:
    """A pydantic ``ValidationError`` (a request body that fails its model), checked without importing pydantic:
    if pydantic was never loaded, nothing could have raised one."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(err, core.ValidationError)


def negotiate(headers: dict[str, str]) -> ProtocolError | None:
    """The protocol version asked for (``OpenWOP-Version``), then the client's own (``OpenWOP-Client-Version``,
    refused ``426`` below ``minClientVersion``)."""
    raw = headers.get("openwop-version")
    if raw is not None:  # absent: the preferred version; present but empty names no version, so it is refused
        m = _VERSION_RE.match(raw.strip())
        if m is None or m.group(1) not in SUPPORTED_MAJORS:
            return ProtocolVersionUnsupportedError(details={"protocolVersions": [VERSION]})
    if client_version.below_floor(headers.get(client_version.HEADER)):
        return ClientVersionUnsupportedError(details={"minClientVersion": client_version.MIN_CLIENT_VERSION})
    return None


def body_size(event: dict[str, Any]) -> int:
    """The request body's size in bytes, computed without decoding a body that is plainly too large."""
    raw = event.get("body")
    if not isinstance(raw, str) or raw == "":
        return 0
    if event.get("isBase64Encoded"):
        return len(raw) * 3 // 4 - raw[-2:].count("=")
    if len(raw) > wire_body.MAX_REQUEST_BODY_BYTES:  # every character is at least one byte
        return len(raw)
    return len(raw.encode("utf-8", "surrogatepass"))


def _event_answer(err: ProtocolError) -> dict[str, Any]:
    resp = error_response(err)
    return {"statusCode": resp.status_code, "headers": resp.headers, "body": resp.body, "isBase64Encoded": False}


def method_answer(event: dict[str, Any]) -> dict[str, Any] | None:
    """A method the request's path is not served with: ``405`` with ``Allow`` (RFC 9110 §15.5.6), or, for a plain
    ``OPTIONS`` (a CORS preflight never gets here: API Gateway, or the local front, answers it), ``204`` with
    ``Allow``. ``None`` when the method is served there or no operation has that path (the route's own ``404``)."""
    raw_path = str(event.get("rawPath") or "")
    allowed = allowed_methods(raw_path)
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method") or "").upper()
    if allowed is None or method in allowed:
        return None
    if is_seam_path(raw_path) and not get_ports().settings.conformance_seams:
        return None  # the seams profile off: its paths are not served at all (404), whatever the method
    allow = {"Allow": ", ".join(allowed)}
    if method == "OPTIONS":
        return {
            "statusCode": 204,
            "headers": {"OpenWOP-Version": VERSION, **allow},
            "body": "",
            "isBase64Encoded": False,
        }
    answer = _event_answer(MethodNotAllowedError())
    answer["headers"].update(allow)
    return answer


def make_handler(
    app: APIGatewayHttpResolver, *, authenticated: bool = True
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The function's Lambda entry point around ``app``. ``authenticated``: its routes take an API key, so its init
    prepares the key lookup's clients and the pepper (``functions._common.init``); a public function's does not."""
    if authenticated:
        prepare_at_init(api_key=True)

    @observed("requestContext.requestId")
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        refused = method_answer(event)
        if refused is not None:
            return refused
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        problem = negotiate(headers)
        if problem is not None:
            return _event_answer(problem)
        if body_size(event) > wire_body.MAX_REQUEST_BODY_BYTES:  # refused before anything reads it
            return _event_answer(PayloadTooLargeError())
        try:
            result: dict[str, Any] = app.resolve(event, context)
        except Exception:  # the resolver itself failed before any route ran
            logger.exception("resolver failed")
            return _event_answer(InternalError())
        result.setdefault("headers", {})["OpenWOP-Version"] = VERSION
        return result

    return lambda_handler


# --------------------------------------------------------------------------- request helpers


def ports() -> Ports:
    return get_ports()


def discovery_ports() -> Ports | Discovery:
    """What the discovery document reads (``wiring.get_discovery``): no store."""
    return get_discovery()


def header(app: APIGatewayHttpResolver, name: str) -> str | None:
    h = app.current_event.headers or {}
    for k, v in h.items():
        if k.lower() == name.lower():
            return str(v)
    return None


def caller(app: APIGatewayHttpResolver) -> Caller:
    """The authenticated caller. A write (POST, PUT, PATCH, DELETE) also takes a token of the caller's tenant's
    write bucket here, before the route reads its body: past the tenant's rate it is ``429 rate_limited``."""
    c = resolve_caller(ports(), header(app, "authorization"))
    logger.append_keys(tenant=c.tenant)
    if app.current_event.http_method.upper() in WRITE_METHODS:
        check_write(ports(), c.tenant)
    return c


def origin(app: APIGatewayHttpResolver) -> str:
    """The scheme and host this request reached (``https://<domain>``; plain ``http`` on loopback), for URLs a
    response hands out that are not relative to the API (an agent session's gateway, decision 0143)."""
    host = header(app, "host") or str(app.current_event.request_context.domain_name or "localhost")
    proto = header(app, "x-forwarded-proto")
    if proto not in ("http", "https"):
        loopback = host.split(":")[0] in ("localhost", "127.0.0.1", "[::1]")
        proto = "http" if loopback else "https"
    return f"{proto}://{host}"


def segment(raw: str) -> str:
    """A path segment as the client meant it: the raw path keeps percent-escapes (``acme.crm%3Alookup``)."""
    from urllib.parse import unquote

    return unquote(raw)


def query(app: APIGatewayHttpResolver) -> dict[str, str]:
    return {k: str(v) for k, v in (app.current_event.query_string_parameters or {}).items()}


def _require_json_media_type(content_type: str | None) -> None:
    media, _, params = (content_type or "").partition(";")
    if not _JSON_MEDIA_RE.match(media.strip().lower()):
        raise UnsupportedMediaTypeError()
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise UnsupportedMediaTypeError("The request body must be UTF-8 application/json.")


def _body_text(app: APIGatewayHttpResolver) -> str:
    event = app.current_event
    raw = event.body or ""
    try:
        if event.is_base64_encoded:
            return base64.b64decode(raw, validate=True).decode("utf-8")
        raw.encode("utf-8")  # a lone surrogate cannot be stored
        return raw
    except (binascii.Error, UnicodeError) as exc:
        raise invalid_at("", "json", "The request body is not UTF-8 JSON.") from exc


def json_body(app: APIGatewayHttpResolver) -> Any:
    """The request body as JSON: ``{}`` when empty; 415 unless JSON-typed; 400 unless strict, bounded JSON."""
    if not app.current_event.body:
        return {}
    _require_json_media_type(header(app, "content-type"))
    text = _body_text(app)
    if text.strip() == "":
        return {}
    return decode_json(text)


def _object(app: APIGatewayHttpResolver) -> dict[str, Any]:
    return json_object_of(json_body(app))


def parse(app: APIGatewayHttpResolver, model: type[M]) -> M:
    """A host registration body (pydantic; a body that fails its model is answered by the resolver's handler)."""
    return model.model_validate(_object(app))


def parse_run_body(
    app: APIGatewayHttpResolver, body: type[B], first: Callable[[dict[str, Any]], None] | None = None
) -> B:
    """A run-lifecycle body (``shared.protocol.models``); one that does not fit is ``400 validation_error``.
    ``first`` sees the JSON object before the model does (a refusal that must come before any other)."""
    import msgspec

    from shared.protocol.models import parse as convert

    data = _object(app)
    if first is not None:
        first(data)
    try:
        return convert(data, body)
    except msgspec.ValidationError as exc:
        logger.info("request body invalid", extra={"errors": str(exc)})
        raise ValidationError("The request body is not valid.") from exc


def idempotency_key(app: APIGatewayHttpResolver) -> str | None:
    key = header(app, "idempotency-key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY_RE.match(key):
        raise IdempotencyKeyInvalidError()
    return key


def reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return _json(status, body, headers)


def empty(status: int, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(status_code=status, body="", headers={"OpenWOP-Version": VERSION, **(headers or {})})
