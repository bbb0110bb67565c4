"""A loopback webhook receiver: records every request, answers endpoint verification, verifies signatures.

Used by ``openwop-serverless webhooks listen`` (prints verified deliveries) and by the tests (a real receiver they
can stop for a while and start again on the same port). Paths choose behaviour:
``.../no-echo`` answers a verification request without the challenge; ``.../fail`` answers 500 to every delivery.
Anything else echoes a verification challenge and answers 200 to a delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Hit:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    at: float

    @property
    def verification(self) -> bool:
        try:
            doc = json.loads(self.body)
        except ValueError:
            return False
        return isinstance(doc, dict) and doc.get("type") == "openwop.webhook.verification"

    def json(self) -> Any:
        return json.loads(self.body)


def verify_v1(secret: str, hit: Hit, *, tolerance_s: int = 300) -> bool:
    """webhooks.md §Verification: algorithm v1, a fresh timestamp, HMAC-SHA256 over ``{timestamp}.{rawBody}``."""
    if hit.headers.get("openwop-signature-algorithm") != "v1":
        return False
    ts = hit.headers.get("openwop-timestamp", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > tolerance_s:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), f"{ts}.".encode() + hit.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, hit.headers.get("openwop-signature", ""))


def verify_standard(secret: str, hit: Hit) -> bool:
    """Standard Webhooks verification with the ``standardwebhooks`` library (any one signature entry matches)."""
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    try:
        Webhook(secret).verify(
            hit.body.decode("utf-8"), {k: v for k, v in hit.headers.items() if k.startswith("webhook-")}
        )
    except WebhookVerificationError:
        return False
    return True


class WebhookReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, on_hit: Any = None) -> None:
        self.host = host
        self.port = port
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._on_hit = on_hit

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                hit = Hit(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                with receiver._lock:
                    receiver.hits.append(hit)
                if receiver._on_hit is not None:
                    receiver._on_hit(hit)
                status, answer = receiver.answer(hit)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer((self.host, self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="openwop-webhook-receiver", daemon=True
        )
        self._thread.start()
        return self.url

    def answer(self, hit: Hit) -> tuple[int, Any]:
        if hit.verification:
            if hit.path.endswith("/no-echo"):
                return 200, {}
            return 200, {"challenge": hit.json()["challenge"]}
        if hit.path.endswith("/fail"):
            return 500, {"error": "failing on purpose"}
        return 200, {"ok": True}

    def stop(self) -> None:
        """Close the listening socket: connections are refused until ``start()`` binds the same port again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def deliveries(self, webhook_id: str | None = None, run_id: str | None = None) -> list[Hit]:
        with self._lock:
            hits = list(self.hits)
        out = []
        for h in hits:
            if h.verification or "openwop-event-type" not in h.headers:
                continue
            if webhook_id is not None and h.headers.get("openwop-webhook-id") != webhook_id:
                continue
            if run_id is not None and h.json().get("runId") != run_id:
                continue
            out.append(h)
        return out
