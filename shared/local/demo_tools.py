"""A small real HTTP tool server on loopback, for the local demo and the tests: it counts every hit.

Endpoints (JSON in, JSON out; deterministic):
- ``POST /crm/lookup`` ``{"customerId": "c-1"}`` -> ``{"customerId", "name", "tier"}`` (404 for an unknown id);
- ``POST /tickets`` ``{"title", "body"?}`` -> ``{"ticketId": "T-<n>", "title"}`` (a write: n counts tickets made
  under distinct ``Idempotency-Key`` values; a repeated key answers the first ticket again);
- ``GET /weather?city=...`` -> ``{"city", "forecast"}``;
- ``POST /fail`` -> 500;
- ``GET|POST /redirect`` -> 302 to ``/crm/lookup`` (a tool that answers a redirect: the host follows none);
- ``GET /hits`` -> ``{"count": n}``: how many tool requests it has served (this request not counted).

``DemoToolServer.hits`` lists ``(method, path, headers, body)`` per request, headers lower-cased, so tests can
assert zero hits after a replay, the ``Idempotency-Key`` a retried call carried, and the credential applied.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CUSTOMERS = {
    "c-1": {"customerId": "c-1", "name": "Ada Lovelace", "tier": "gold"},
    "c-2": {"customerId": "c-2", "name": "Alan Turing", "tier": "silver"},
}


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class DemoToolServer:
    hits: list[Hit] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _tickets: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if 300 <= status < 400:
                    self.send_header("Location", body["location"])
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                parts = urlsplit(self.path)
                if parts.path == "/hits":
                    self._answer(200, {"count": owner.count()})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner._lock:
                    owner.hits.append(Hit(self.command, parts.path, headers, body))
                status, answer = owner._route(self.command, parts.path, parse_qs(parts.query), headers, body)
                self._answer(status, answer)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="demo-tools", daemon=True).start()
        return f"http://{host}:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for h in self.hits if path is None or h.path == path)

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        if path == "/crm/lookup" and method == "POST":
            customer = CUSTOMERS.get(str((body or {}).get("customerId")))
            return (200, customer) if customer else (404, {"error": "no such customer"})
        if path == "/tickets" and method == "POST":
            key = headers.get("idempotency-key") or f"anonymous-{len(self.hits)}"
            with self._lock:
                if key not in self._tickets:
                    self._tickets[key] = {"ticketId": f"T-{len(self._tickets) + 1}", "title": (body or {}).get("title")}
                return 201, self._tickets[key]
        if path == "/weather" and method == "GET":
            city = (query.get("city") or ["?"])[0]
            return 200, {"city": city, "forecast": "sunny" if len(city) % 2 else "rain"}
        if path == "/fail":
            return 500, {"error": "the demo tool failed"}
        if path == "/redirect":
            return 302, {"location": "/crm/lookup"}
        return 404, {"error": "no such endpoint"}
