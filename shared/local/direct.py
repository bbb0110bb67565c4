"""Calls from this process to its own embedded AWS, without the loopback socket (patch 16 in
``shared.local.patches``).

The embedded AWS is a WSGI application served over HTTP on loopback, so other processes (the operator CLI, a
restarted host's tools) reach it as they would reach AWS. A client in the same process used to go the same way:
botocore's HTTP session, a socket, the server's request thread, and back, about three times the CPU of the call
itself (measured: 4.4 ms against 1.3 ms per ``GetItem``), which every handler, task and test in the process paid on
every request. Here a request whose endpoint is this process's server is handed to the same WSGI application (the
endpoint's guard, the journal of kept state, moto) on the calling thread, from the request botocore signed, and its
answer comes back as botocore's response: what is refused, kept or answered is decided by the same code.

Only ``URLLib3Session.send`` is replaced, so every botocore hook (a test's ``before-send`` throttle, the bench's
meter) runs as before; an endpoint that is not served here (another process's, a stopped one) goes over HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

_apps: dict[str, Callable[..., Any]] = {}  # "host:port" -> the WSGI application served there
_lock = threading.Lock()
_original_send: Callable[..., Any] | None = None


def serve_in_process(netloc: str, app: Callable[..., Any]) -> None:
    """Hand this process's requests to ``http://<netloc>`` to ``app`` directly from now on."""
    global _original_send
    from botocore.httpsession import URLLib3Session

    with _lock:
        _apps[netloc] = app
        if _original_send is None:
            _original_send = URLLib3Session.send
            URLLib3Session.send = _send  # type: ignore[method-assign]


def stop_serving(netloc: str) -> None:
    """Requests to ``netloc`` go over HTTP again (the server stopped: they are refused as a closed port refuses)."""
    with _lock:
        _apps.pop(netloc, None)


def _send(session: Any, request: Any) -> Any:
    app = _apps.get(urlsplit(request.url).netloc)
    if app is None:
        assert _original_send is not None
        return _original_send(session, request)
    return call(app, request)


def _body(request: Any) -> bytes:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(body)


def environ_of(request: Any) -> dict[str, Any]:
    """The WSGI environment the HTTP server would have built for botocore's prepared ``request``."""
    from shared.local.persistence import wsgi_keys  # the journal's (lazy: an ephemeral stack keeps no journal)

    parts = urlsplit(request.url)
    body = _body(request)
    host, _, port = parts.netloc.partition(":")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(parts.path).encode("utf-8").decode("latin-1"),
        "QUERY_STRING": parts.query,
        "REQUEST_URI": target,
        "RAW_URI": target,
        "SERVER_NAME": host,
        "SERVER_PORT": port or "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.url_scheme": parts.scheme or "http",
        **wsgi_keys(body),
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        text = value if isinstance(value, str) else value.decode("latin-1")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ.setdefault(key, text)  # the body's own length stands
        else:
            environ[f"HTTP_{key}"] = text
    environ.setdefault("HTTP_HOST", parts.netloc)
    return environ


def call(app: Callable[..., Any], request: Any) -> Any:
    """``request`` answered by ``app`` on this thread, as botocore's ``AWSResponse``. An application that raises is
    answered ``500``, as the HTTP server answers it (botocore retries it as any server error)."""
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse

    from shared.local.persistence import call_capturing

    try:
        status, body, headers = call_capturing(app, environ_of(request))
    except Exception:  # noqa: BLE001 - what the server would have answered for an application error
        status, body, headers = "500 Internal Server Error", b"", []
    return AWSResponse(request.url, int(status.split(" ", 1)[0]), dict(headers), MockRawResponse(body))
