"""The local HTTP front: API Gateway HTTP API (payload v2.0) semantics over a stdlib ``ThreadingHTTPServer``.

Routes come from ``shared.manifest.routes.ROUTES`` (the table CDK deploys), so local and deployed routing agree:
``{x}`` matches exactly one whole, non-empty path segment, ``{x+}`` the rest of the path, literal segments beat
variables, and the most specific route wins. Matching runs on the RAW path (``/runs/acme%2Fabc/events`` keeps
``acme%2Fabc`` as one segment); ``pathParameters`` are then percent-decoded as API Gateway does.

Each request becomes a payload v2.0 event for the route's function, called in-process; the function's answer
is mapped back (``statusCode``/``headers``/``cookies``/``body``/``isBase64Encoded``; any other JSON value is an
inferred ``200 application/json``). Routes marked ``streaming`` are served as Server-Sent Events: the handler
is called repeatedly with ``last-event-id`` set to the last ``id:`` it sent, until it answers
``x-openwop-stream: end`` or the client goes away.

The route table and the invoker are injectable, so tests can drive the front with fake handlers.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import re
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from shared import manifest
from shared.errors import MethodNotAllowedError, PayloadTooLargeError, ProtocolError, ValidationError
from shared.local.context import DEFAULT_ACCOUNT, context_for, load_handler
from shared.manifest.matching import allowed_methods
from shared.manifest.routes import DEFAULT_ROUTE, ROUTES, Route
from shared.protocol.body import MAX_REQUEST_BODY_BYTES

log = logging.getLogger("shared.local.front")

Invoker = Callable[[str, dict[str, Any]], Any]
"""Calls the Lambda function of that manifest name with an API Gateway event and returns its raw result."""

STREAM_CONTROL_HEADER = "x-openwop-stream"
NOT_FOUND_BODY = json.dumps({"error": "not_found", "message": "No route for this path."}).encode()
INTERNAL_ERROR_BODY = json.dumps({"message": "Internal Server Error"}).encode()
_EMPTY_POLL_PAUSE_S = 0.1
SERVED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
LISTEN_BACKLOG = 128
_CONTENT_LENGTH_RE = re.compile(r"^[0-9]{1,18}$")
_CHUNK_SIZE_RE = re.compile(rb"^[0-9a-fA-F]{1,8}$")
_MAX_TRAILER_LINES = 64
_DRAIN_BYTES = 16 * 1024 * 1024  # after a 413, unread body bytes discarded (not kept) so the client sees the answer
_DRAIN_SECONDS = 2.0


def invoke_in_process(function_name: str, event: dict[str, Any]) -> Any:
    """The default invoker: import the manifest function's module and call ``lambda_handler``."""
    fn = manifest.function(function_name)
    return load_handler(fn)(event, context_for(fn))


# -- routing ----------------------------------------------------------------------------------------------------------


def _segments(path: str) -> list[str]:
    return path.split("/")[1:] if path.startswith("/") else path.split("/")


@dataclass(frozen=True)
class _CompiledRoute:
    route: Route
    segments: tuple[str, ...]

    @property
    def rank(self) -> tuple[int, ...]:
        """Per segment: literal 2, ``{x}`` 1, ``{x+}`` 0; compared lexicographically, higher is more specific."""
        return tuple(0 if s.endswith("+}") else 1 if s.startswith("{") else 2 for s in self.segments)

    def match(self, raw_segments: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for i, pattern in enumerate(self.segments):
            if pattern.startswith("{") and pattern.endswith("+}"):
                rest = raw_segments[i:]
                if not rest or not rest[0]:
                    return None
                params[pattern[1:-2]] = unquote("/".join(rest))
                return params
            if i >= len(raw_segments):
                return None
            segment = raw_segments[i]
            if pattern.startswith("{") and pattern.endswith("}"):
                if not segment:
                    return None
                params[pattern[1:-1]] = unquote(segment)
            elif pattern != segment:
                return None
        return params if len(raw_segments) == len(self.segments) else None


class Router:
    """API Gateway HTTP API route selection over a route table."""

    def __init__(self, routes: Iterable[Route]) -> None:
        routes = list(routes)
        self.routes = tuple(routes)
        self._routes = [_CompiledRoute(r, tuple(_segments(r.path))) for r in routes if r.path != DEFAULT_ROUTE]
        self.default = next((r for r in routes if r.path == DEFAULT_ROUTE), None)

    def match(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]] | None:
        """The most specific route for this method and raw (still percent-encoded) path, or None."""
        raw_segments = _segments(raw_path)
        best: tuple[tuple[tuple[int, ...], int], Route, dict[str, str]] | None = None
        for compiled in self._routes:
            route_method = compiled.route.method.upper()
            if route_method not in (method, "ANY"):
                continue
            params = compiled.match(raw_segments)
            if params is None:
                continue
            score = (compiled.rank, 1 if route_method == method else 0)
            if best is None or score > best[0]:
                best = (score, compiled.route, params)
        return None if best is None else (best[1], best[2])


# -- event and response mapping ---------------------------------------------------------------------------------------


def build_event(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Sequence[tuple[str, str]],
    body: bytes | None,
    route: Route,
    path_parameters: dict[str, str],
    source_ip: str,
    protocol: str = "HTTP/1.1",
) -> dict[str, Any]:
    """An API Gateway HTTP API payload v2.0 event."""
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    now = datetime.datetime.now(datetime.UTC)
    request_id = str(uuid.uuid4())
    route_key = f"{route.method.upper()} {route.path}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": joined,
        "requestContext": {
            "accountId": DEFAULT_ACCOUNT,
            "apiId": "local",
            "domainName": joined.get("host", "localhost"),
            "domainPrefix": joined.get("host", "localhost").split(".")[0],
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": protocol,
                "sourceIp": source_ip,
                "userAgent": joined.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


def to_http(result: Any) -> HttpResponse:
    """Map a handler result to HTTP as API Gateway payload v2.0 does (a plain JSON value is an inferred 200)."""
    if not (isinstance(result, dict) and "statusCode" in result):
        return HttpResponse(200, [("Content-Type", "application/json")], json.dumps(result).encode())
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    headers.extend(("Set-Cookie", str(c)) for c in result.get("cookies") or ())
    raw = result.get("body")
    if raw is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(raw)
    else:
        body = (raw if isinstance(raw, str) else json.dumps(raw)).encode("utf-8")
    if not any(k.lower() == "content-type" for k, _ in headers) and body:
        headers.append(("Content-Type", "application/json"))
    return HttpResponse(int(result["statusCode"]), headers, body)


def refusal(err: ProtocolError, extra: Sequence[tuple[str, str]] = ()) -> HttpResponse:
    """The front's own answers (framing, size, method) carry the protocol envelope, as the Lambdas' do."""
    headers = [("Content-Type", "application/json"), ("OpenWOP-Version", "2.0"), *extra]
    return HttpResponse(err.status, headers, json.dumps(err.envelope(), separators=(",", ":")).encode())


class _Refused(Exception):
    def __init__(self, err: ProtocolError, unread: int = 0) -> None:
        super().__init__(err.code)
        self.err = err
        self.unread = unread


def _bad_framing() -> _Refused:
    return _Refused(ValidationError("The request is not valid HTTP/1.1 framing."))


def last_event_id(chunk: bytes) -> str | None:
    """The value of the last ``id:`` field in an SSE chunk, if any."""
    found: str | None = None
    for line in chunk.decode("utf-8", errors="replace").splitlines():
        if line == "id" or line.startswith("id:"):
            value = line[3:]
            found = value[1:] if value.startswith(" ") else value
    return found


# -- server -----------------------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "openwop-local"
    front: LocalFront  # set on the per-front subclass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    # -- refusals before any function runs: always the protocol envelope, never the stdlib's HTML ---------------

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (bad request line or headers, URI or headers too long): a 400 envelope."""
        self.log_error("refused: %d %s", code, message)
        if self.request_version == "HTTP/0.9":  # an unparsable request line: answer with a status line anyway
            self.request_version = self.protocol_version
        err: ProtocolError = (
            PayloadTooLargeError() if code == 413 else ValidationError("The request is not valid HTTP/1.1.")
        )
        self._refuse(err)

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.command not in SERVED_METHODS:
            self._refuse(MethodNotAllowedError(), [("Allow", ", ".join(self._allowed_methods()))])
            return False
        return True

    def handle_expect_100(self) -> bool:
        length = (self.headers.get("Content-Length") or "").strip()
        if _CONTENT_LENGTH_RE.match(length) and int(length) > MAX_REQUEST_BODY_BYTES:
            self._refuse(PayloadTooLargeError())  # answered instead of "100 Continue": the body is never sent
            return False
        return super().handle_expect_100()

    def _allowed_methods(self) -> list[str]:
        raw_path = urlsplit(self.path).path if self.path.startswith(("http://", "https://")) else self.path
        raw_path = raw_path.partition("?")[0]
        found = allowed_methods(raw_path, self.front.router.routes)
        return (
            list(found)
            if found
            else sorted({r.method.upper() for r in self.front.router.routes if r.method.upper() != "ANY"})
        )

    # -- CORS: what API Gateway's CorsConfiguration does in front of the routes --------------------------------

    def _granted_origin(self) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for this request's ``Origin``, or None when not granted."""
        headers = getattr(self, "headers", None)  # absent when the request line itself was refused
        origin = ((headers.get("Origin") if headers is not None else None) or "").strip()
        origins = self.front.cors_origins
        if not origin or not origins:
            return None
        if manifest.CORS_ANY_ORIGIN in origins:
            return manifest.CORS_ANY_ORIGIN
        return origin if origin in origins else None

    def _cors_headers(self) -> list[tuple[str, str]]:
        granted = self._granted_origin()
        if granted is None:
            return []
        headers = [
            ("Access-Control-Allow-Origin", granted),
            ("Access-Control-Expose-Headers", ",".join(manifest.CORS.expose_headers)),
        ]
        return headers if granted == manifest.CORS_ANY_ORIGIN else [*headers, ("Vary", "Origin")]

    def _preflight(self) -> HttpResponse:
        """A CORS preflight, answered before any route (and any credential) as API Gateway does."""
        headers = self._cors_headers()[:1]
        if headers:
            headers += [
                ("Access-Control-Allow-Methods", ",".join(manifest.CORS.allow_methods)),
                ("Access-Control-Allow-Headers", ",".join(h.lower() for h in manifest.CORS.allow_headers)),
                ("Access-Control-Max-Age", str(manifest.CORS.max_age_s)),
            ]
            if headers[0][1] != manifest.CORS_ANY_ORIGIN:
                headers.append(("Vary", "Origin"))
        return HttpResponse(204, headers, b"")

    def _refuse(self, err: ProtocolError, extra: Sequence[tuple[str, str]] = (), unread: int = 0) -> None:
        self.close_connection = True
        self._send(refusal(err, [*extra, ("Connection", "close")]))
        if unread:
            self._discard(unread)

    def _discard(self, unread: int) -> None:
        """Read and drop (bounded in bytes and time) a refused body, so closing does not reset the answer away."""
        try:
            self.wfile.flush()
            self.connection.settimeout(0.2)
            deadline = time.monotonic() + _DRAIN_SECONDS
            left = min(unread, _DRAIN_BYTES)
            while left > 0 and time.monotonic() < deadline:
                got = self.rfile.read1(min(left, 65536)) if hasattr(self.rfile, "read1") else b""
                if not got:
                    return
                left -= len(got)
        except OSError:
            return

    # -- the body ------------------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        coding = self.headers.get("Transfer-Encoding")
        if coding is not None:
            if coding.split(",")[-1].strip().lower() != "chunked":
                raise _bad_framing()
            return self._read_chunked()
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            return b""
        if len({v.strip() for v in lengths}) != 1 or not _CONTENT_LENGTH_RE.match(lengths[0].strip()):
            raise _bad_framing()
        length = int(lengths[0].strip())
        if length > MAX_REQUEST_BODY_BYTES:
            raise _Refused(PayloadTooLargeError(), unread=length)
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            raise _bad_framing()
        return body

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            size_text = line.split(b";", 1)[0].strip()
            if not line.endswith(b"\n") or not _CHUNK_SIZE_RE.match(size_text):
                raise _bad_framing()
            size = int(size_text, 16)
            if size == 0:
                for _ in range(_MAX_TRAILER_LINES):
                    trailer = self.rfile.readline(8192)
                    if trailer in (b"\r\n", b"\n"):
                        return b"".join(chunks)
                    if not trailer.endswith(b"\n"):
                        raise _bad_framing()
                raise _bad_framing()
            total += size
            if total > MAX_REQUEST_BODY_BYTES:
                raise _Refused(PayloadTooLargeError())
            data = self.rfile.read(size)
            if len(data) != size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise _bad_framing()
            chunks.append(data)

    def _handle(self) -> None:
        target = self.path
        if target.startswith(("http://", "https://")):
            parts = urlsplit(target)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
        raw_path, _, raw_query = target.partition("?")
        raw_query = raw_query.partition("#")[0]
        try:
            body = self._read_body()
        except _Refused as refused:
            self._refuse(refused.err, unread=refused.unread)
            return
        if (
            self.command == "OPTIONS"
            and self.headers.get("Origin")
            and self.headers.get("Access-Control-Request-Method")
        ):
            self._send(self._preflight(), preflight=True)
            return
        matched = self.front.router.match(self.command, raw_path)
        if matched is None and self.front.router.default is not None:
            matched = (self.front.router.default, {})
        if matched is None:
            self._send(
                HttpResponse(404, [("Content-Type", "application/json"), ("OpenWOP-Version", "2.0")], NOT_FOUND_BODY)
            )
            return
        route, params = matched
        event = build_event(
            method=self.command,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=list(self.headers.items()),
            body=body,
            route=route,
            path_parameters=params,
            source_ip=self.client_address[0],
            protocol=self.request_version,
        )
        if route.streaming:
            self._stream(route, event)
        else:
            self._send(self._call(route, event))

    def _call(self, route: Route, event: dict[str, Any]) -> HttpResponse:
        try:
            return to_http(self.front.invoke(route.function, event))
        except Exception:
            log.exception("handler %s failed for %s", route.function, event["routeKey"])
            return HttpResponse(500, [("Content-Type", "application/json")], INTERNAL_ERROR_BODY)

    def _send(self, response: HttpResponse, preflight: bool = False) -> None:
        """Send ``response``; unless it is a preflight's, its CORS headers are the front's own (API Gateway ignores
        the ones an integration returns)."""
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() not in ("content-length", "transfer-encoding", STREAM_CONTROL_HEADER) and (
                preflight or not name.lower().startswith("access-control-")
            ):
                self.send_header(name, value)
        for name, value in [] if preflight else self._cors_headers():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _stream(self, route: Route, event: dict[str, Any]) -> None:
        response = self._call(route, event)
        if response.status != 200:
            self._send(response)
            return
        self._send_stream_head(response)
        last_id = event["headers"].get("last-event-id")
        while True:
            if response.body:
                if not self._write_chunk(response.body):
                    return
                last_id = last_event_id(response.body) or last_id
            if (response.header(STREAM_CONTROL_HEADER) or "").lower() == "end" or self._client_gone():
                return
            if not response.body:
                time.sleep(_EMPTY_POLL_PAUSE_S)
            event = _next_poll(event, last_id)
            response = self._call(route, event)
            if response.status != 200:
                return

    def _send_stream_head(self, response: HttpResponse) -> None:
        """The status line and headers of an event stream: the handler's own, less framing and CORS, then ours."""
        self.close_connection = True
        self.send_response(200)
        skip = ("content-length", "content-type", "transfer-encoding", "connection", STREAM_CONTROL_HEADER)
        for name, value in response.headers:
            if name.lower() not in skip and not name.lower().startswith("access-control-"):
                self.send_header(name, value)
        self.send_header("Content-Type", "text/event-stream")
        if response.header("Cache-Control") is None:
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in self._cors_headers():
            self.send_header(name, value)
        self.end_headers()

    def _write_chunk(self, body: bytes) -> bool:
        """Write one poll's frames; False when the client has gone."""
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


def _next_poll(event: dict[str, Any], last_id: str | None) -> dict[str, Any]:
    """The next poll of a stream: the same request, resuming after ``last_id``, under a new request id."""
    headers = dict(event["headers"])
    if last_id is not None:
        headers["last-event-id"] = last_id
    event = {**event, "headers": headers}
    event["requestContext"] = {**event["requestContext"], "requestId": str(uuid.uuid4())}
    return event


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG  # the stdlib's 5 made 20-50 simultaneous connects wait 1-4 s


class LocalFront:
    """The HTTP front. ``routes`` defaults to ``ROUTES``; ``invoke`` to the in-process manifest handlers;
    ``cors_origins`` are the origins its CORS configuration grants (``manifest.Cors``)."""

    def __init__(
        self,
        routes: Iterable[Route] | None = None,
        invoke: Invoker | None = None,
        cors_origins: tuple[str, ...] = (manifest.CORS_ANY_ORIGIN,),
    ) -> None:
        self.router = Router(ROUTES if routes is None else routes)
        self.invoke: Invoker = invoke or invoke_in_process
        self.cors_origins = cors_origins  # as manifest.cors_origins reads the setting; () grants none
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("LocalFront is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 = a free port) from a daemon thread. Returns the base URL."""
        if self._server is not None:
            return self.base_url
        handler = type("FrontHandler", (_Handler,), {"front": self})
        server = _Server((host, port), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="openwop-front", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None
