"""A small OpenAI-compatible model server on loopback, for the examples: deterministic, no key, no network.

It stands in for a hosted model so the examples run anywhere. It serves ``POST /v1/chat/completions`` (no
streaming: the host's model gateway calls its upstream with ``stream: false``) and plays a support agent:

1. no tool answer yet: call the tool whose name contains ``lookup`` with the input's ``customerId``;
2. one tool answer (the customer): call the tool whose name contains ``ticket`` with the title
   ``"<name>: <issue>"``, prefixed ``URGENT`` when the system prompt asks for urgency;
3. two tool answers: the final answer, ``{"ticketId", "customer"}`` as JSON text.

``GET /hits`` answers ``{"count": n}``: how many completions it has served, so an example can show that a replay
called no model.

    python examples/support_model.py [--port 8799]
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TICKET_ID = re.compile(r"T-\d+")


def _text(content: Any) -> str:
    """A message's content as text (a string, or the parts' text)."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _field(text: str, name: str) -> str:
    """A string field out of a tool answer, however the framework wrapped it (JSON, JSON in text, repr)."""
    found = re.search(rf'\\?"{name}\\?"\s*:\s*\\?"([^"\\]*)', text)
    return found.group(1) if found else ""


def _tool(tools: list[dict[str, Any]], part: str) -> str:
    for t in tools:
        name = str((t.get("function") or {}).get("name", ""))
        if part in name:
            return name
    raise LookupError(f"no offered tool's name contains {part!r}")


def answer(body: dict[str, Any], turn: int) -> dict[str, Any]:
    """The ``chat.completion`` for one request."""
    messages = body.get("messages") or []
    system = " ".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    asked = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "{}")
    try:
        task = json.loads(asked)
    except ValueError:
        task = {"customerId": asked.strip(), "issue": "help"}
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if len(results) == 0:
        call = (_tool(tools, "lookup"), {"customerId": task.get("customerId")})
    elif len(results) == 1:
        urgent = "urgent" in system.lower()
        title = f"{_field(results[0], 'name')}: {task.get('issue', 'help')}"
        call = (_tool(tools, "ticket"), {"title": ("URGENT " if urgent else "") + title})
    else:
        ticket = TICKET_ID.search(results[1])
        message["content"] = json.dumps(
            {"ticketId": ticket.group(0) if ticket else None, "customer": _field(results[0], "name")}
        )
        call = None
    if call is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": call[0], "arguments": json.dumps(call[1])},
            }
        ]
    prompt_tokens = sum(len(_text(m.get("content"))) for m in messages) // 4 + 1
    return {
        "id": f"support-{turn}",
        "object": "chat.completion",
        "created": 0,
        "model": str(body.get("model") or "support-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 12, "total_tokens": prompt_tokens + 12},
    }


class SupportModel:
    """The server; ``hits`` counts the completions served."""

    def __init__(self) -> None:
        self.hits = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, doc: Any) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                if self.path == "/hits":
                    self._send(200, {"count": owner.hits})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    with owner._lock:
                        turn = owner.hits
                        owner.hits += 1
                    self._send(200, answer(body, turn))
                except (ValueError, LookupError) as exc:
                    self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})

        self._server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://{host}:{self._server.server_address[1]}/v1"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    model = SupportModel()
    print(f"support model on {model.start(port=args.port)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        model.stop()
