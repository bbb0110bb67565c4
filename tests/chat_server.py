"""A loopback OpenAI-compatible chat-completions server for tests: answers from a script, records every request.

``ScriptedChatServer(answers)`` serves ``answers[i]`` (``(status, body, headers)``) to the i-th request it
receives; past the end it answers 500. ``requests`` holds each request's headers and JSON body, so a test can
count model calls and read exactly what the host sent.
"""

from __future__ import annotations

import http.server
import json
import threading
from dataclasses import dataclass, field
from typing import Any


def completion(
    text: str | None = None,
    tool_calls: list[tuple[str, str, Any]] | None = None,
    *,
    usage: tuple[int, int] = (12, 3),
    model: str = "gpt-test-1",
) -> dict[str, Any]:
    """A chat.completion body: a final ``text`` or ``tool_calls`` [(id, wire name, arguments)]."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in tool_calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


@dataclass
class ScriptedChatServer:
    answers: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    _server: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        state = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's spelling
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with state._lock:
                    i = len(state.requests)
                    state.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": json.loads(raw or b"null"),
                        }
                    )
                    status, body, headers = state.answers[i] if i < len(state.answers) else (500, {}, {})
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
