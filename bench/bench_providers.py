"""Model providers: the adapters' own cost per model call.

- OpenAI-compatible: a loopback server that speaks chat completions answers a fixed completion; the adapter's time
  per call (request building, the egress guard, the HTTP exchange through ``GuardedHttpTransport``, parsing) is set
  against a bare ``urllib`` POST of the same body to the same server.
- Mock: time per scripted answer (no I/O).
- Bedrock: the real ``bedrock-runtime`` client with botocore's ``Stubber`` answering (no network): AWS requests per
  model call, and the adapter + botocore time per call without the service's latency.

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_providers``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections import Counter
from typing import Any

from bench.common import line

CALLS = 200
MOCK_CALLS = 5000
COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"customerId":"c-1"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138},
    }
).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's spelling
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(COMPLETION)))
        self.end_headers()
        self.wfile.write(COMPLETION)

    def log_message(self, *args: Any) -> None:
        pass


def _request(**kw: Any) -> Any:
    from shared.ports import ModelMessage, ModelRequest, ModelToolSpec

    return ModelRequest(
        system="You are a support agent.",
        messages=(ModelMessage("user", "Look up c-1."),),
        tools=(ModelToolSpec("lookup", "Find a customer", {"type": "object"}),),
        **kw,
    )


def _openai() -> None:
    from shared.providers.openai import OpenAiChatProvider, chat_request
    from shared.transports.egress import EgressPolicy
    from shared.transports.http import GuardedHttpTransport

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        adapter = OpenAiChatProvider(GuardedHttpTransport(EgressPolicy.from_entries(["127.0.0.0/8"])))
        request = _request(provider="openai", model="gpt-4o-mini", base_url=base, credential="sk-bench")
        body = json.dumps(chat_request(request)[0]).encode()
        adapter.complete(request)  # warm

        def direct() -> None:
            req = urllib.request.Request(
                base + "/chat/completions",
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", "Authorization": "Bearer sk-bench"},
            )
            with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - loopback bench server
                json.loads(resp.read())

        adapter_s = direct_s = 0.0
        for _ in range(CALLS):  # interleaved, so a busy machine weighs on both alike
            started = time.perf_counter()
            adapter.complete(request)
            adapter_s += time.perf_counter() - started
            started = time.perf_counter()
            direct()
            direct_s += time.perf_counter() - started
        adapter_ms, direct_ms = adapter_s * 1000 / CALLS, direct_s * 1000 / CALLS
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    print(f"OpenAI-compatible adapter ({CALLS} calls to a loopback chat-completions server)")
    line("adapter call (build, egress guard, HTTP, parse)", f"{adapter_ms:.2f}", "ms per call")
    line("bare urllib POST of the same body", f"{direct_ms:.2f}", "ms per call")
    line("adapter overhead over the bare POST", f"{adapter_ms - direct_ms:+.2f}", "ms per call")


def _mock() -> None:
    from shared.providers.mock import MockProvider

    script = {"script": [{"toolCalls": [{"name": "lookup", "arguments": {"customerId": "c-1"}}]}, {"text": "done"}]}
    mock = MockProvider()
    requests = [_request(provider="mock", model="mock", mock=script, turn=k % 2) for k in range(MOCK_CALLS)]
    started = time.perf_counter()
    for r in requests:
        mock.complete(r)
    per_call_us = (time.perf_counter() - started) * 1_000_000 / MOCK_CALLS
    print(f"Mock provider ({MOCK_CALLS} scripted answers)")
    line("time per answer (validate config, count tokens, answer)", f"{per_call_us:.1f}", "us")


def _bedrock() -> None:
    import boto3
    from botocore.stub import Stubber

    from shared.providers.bedrock import BedrockConverseProvider

    client = boto3.session.Session(
        aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    ).client("bedrock-runtime")
    seen: Counter[str] = Counter()
    client.meta.events.register_first("before-call.*.*", lambda model, **_: seen.update([model.name]))
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "tu-1", "name": "lookup", "input": {"customerId": "c-1"}}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 120, "outputTokens": 18, "totalTokens": 138},
        "metrics": {"latencyMs": 1},
    }
    adapter = BedrockConverseProvider(lambda: client)
    request = _request(provider="bedrock", model="anthropic.claude-3-5-haiku-20241022-v1:0", max_tokens=512)
    with Stubber(client) as stub:
        for _ in range(CALLS + 1):
            stub.add_response("converse", answer)
        adapter.complete(request)  # warm: builds the client's handlers
        seen.clear()
        started = time.perf_counter()
        for _ in range(CALLS):
            adapter.complete(request)
        per_call_ms = (time.perf_counter() - started) * 1000 / CALLS
    print(f"Bedrock Converse adapter ({CALLS} calls, botocore Stubber answering, no network)")
    line("AWS requests per model call", f"{seen.total() / CALLS:.2f}", f"({dict(seen)})")
    line("adapter + botocore time per call (no service latency)", f"{per_call_ms:.2f}", "ms")


def main() -> None:
    _openai()
    _mock()
    _bedrock()


if __name__ == "__main__":
    main()
