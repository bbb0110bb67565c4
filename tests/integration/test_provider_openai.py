"""The OpenAI-compatible adapter against a real loopback server that speaks the chat-completions wire.

The server (a thread on 127.0.0.1, an ephemeral port) records every request it receives and answers from a queue
the test fills, so each test asserts the exact bytes our adapter sent and the reply it made of the answer.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.ports import ModelMessage, ModelProviderError, ModelRequest, ModelToolCall, ModelToolSpec
from shared.providers.openai import OpenAiChatProvider
from shared.providers.prices import PriceTable
from shared.transports.egress import EgressPolicy
from shared.transports.http import GuardedHttpTransport

SECRET = "sk-test-SENTINEL-4711"


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ChatServer:
    """A loopback chat-completions server: answers ``(status, headers, body)`` from ``answers`` in order."""

    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.answers.append((status, {"Content-Type": "application/json", **(headers or {})}, raw))


@pytest.fixture(scope="module")
def _chat_server() -> Iterator[ChatServer]:
    state = ChatServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's spelling
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            state.received.append(
                Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
            )
            status, headers, body = state.answers.pop(0)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    try:
        yield state
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def server(_chat_server: ChatServer) -> Iterator[ChatServer]:
    """The module's server with nothing received and nothing queued; every queued answer must be used."""
    _chat_server.received.clear()
    _chat_server.answers.clear()
    yield _chat_server
    assert _chat_server.answers == [], "an answer the test queued was never asked for"


def _provider(allow: tuple[str, ...] = ("127.0.0.0/8",)) -> OpenAiChatProvider:
    return OpenAiChatProvider(GuardedHttpTransport(EgressPolicy.from_entries(list(allow))), PriceTable())


def _request(server: ChatServer, **kw: Any) -> ModelRequest:
    base: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "system": "You are terse.",
        "messages": (ModelMessage("user", "Look up customer c-1."),),
        "base_url": server.url,
        "timeout_s": 5.0,
    }
    base.update(kw)
    return ModelRequest(**base)


def _completion(
    message: dict[str, Any], finish: str, usage: dict[str, int] | None = None, model: str = "gpt-4o-mini-2024-07-18"
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


TOOLS = (
    ModelToolSpec(
        "acme.crm:lookup",
        "Find a customer",
        {"type": "object", "required": ["customerId"], "properties": {"customerId": {"type": "string"}}},
    ),
)


def test_a_text_answer_with_usage_and_the_exact_request_sent(server):
    # Given a server that answers plain text with usage
    server.answer(
        200,
        _completion({"content": "Done."}, "stop", {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24}),
    )
    # When the adapter sends a request with a credential, temperature and max tokens
    reply = _provider().complete(_request(server, credential=SECRET, temperature=0.2, max_tokens=64))
    # Then the reply carries the text, the mapped stop reason, the usage, the model and a cost from the rate table
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ("Done.", (), "end_turn")
    assert (reply.input_tokens, reply.output_tokens, reply.model) == (21, 3, "gpt-4o-mini-2024-07-18")
    assert reply.cost_usd == pytest.approx((21 * 0.15 + 3 * 0.60) / 1_000_000)
    # and the server got exactly one POST to {base}/chat/completions, bearer auth, this body
    [got] = server.received
    assert (got.method, got.path) == ("POST", "/v1/chat/completions")
    assert got.headers["authorization"] == f"Bearer {SECRET}"
    assert got.headers["content-type"] == "application/json"
    assert got.body == {
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "max_tokens": 64,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Look up customer c-1."},
        ],
    }


def test_tool_calls_out_and_the_tool_round_trip_in(server):
    # Given a server that answers two tool calls (arguments as JSON text, as the wire has them)
    server.answer(
        200,
        _completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {
                            "name": "acme_crm_lookup_" + _digest("acme.crm:lookup"),
                            "arguments": '{"customerId":"c-1"}',
                        },
                    },
                    {"id": "call_b", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}},
                ],
            },
            "tool_calls",
            {"prompt_tokens": 40, "completion_tokens": 12},
        ),
    )
    # When the adapter sends a conversation holding an earlier tool round and the tool list, without a credential
    history = (
        ModelMessage("user", "Look up c-0 then c-1."),
        ModelMessage("assistant", None, (ModelToolCall("call_0", "acme.crm:lookup", {"customerId": "c-0"}),)),
        ModelMessage("tool", '{"name":"Ada"}', tool_call_id="call_0"),
    )
    reply = _provider().complete(_request(server, messages=history, tools=TOOLS))
    # Then the calls come back with catalog names (an unknown name as the model spelled it) and parsed arguments
    assert reply.stop_reason == "tool_use" and reply.text is None
    assert [(c.call_id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "acme.crm:lookup", {"customerId": "c-1"}),
        ("call_b", "unknown_tool", {}),
    ]
    # and the request carried wire-safe tool names, the assistant's tool_calls and the tool answer, no Authorization
    [got] = server.received
    assert "authorization" not in got.headers
    wire = "acme_crm_lookup_" + _digest("acme.crm:lookup")
    assert got.body["tools"] == [
        {
            "type": "function",
            "function": {"name": wire, "description": "Find a customer", "parameters": TOOLS[0].input_schema},
        }
    ]
    assert got.body["messages"][1:] == [
        {"role": "user", "content": "Look up c-0 then c-1."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": wire, "arguments": '{"customerId":"c-0"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": '{"name":"Ada"}'},
    ]
    assert "temperature" not in got.body and "max_tokens" not in got.body


def _digest(name: str) -> str:
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()[:8]


@pytest.mark.parametrize(("finish", "stop"), [("length", "max_tokens"), ("content_filter", "refused")])
def test_finish_reasons_map(server, finish, stop):
    server.answer(200, _completion({"content": "partial"}, finish))
    reply = _provider().complete(_request(server))
    # no usage in the answer: zero tokens, and the price is still known for the model
    assert (reply.stop_reason, reply.input_tokens, reply.output_tokens, reply.cost_usd) == (stop, 0, 0, 0.0)


def test_429_is_rate_limited_with_retry_after(server):
    server.answer(
        429, {"error": {"message": "Rate limit reached for prompt 'Look up customer c-1.'"}}, {"Retry-After": "7"}
    )
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server, credential=SECRET))
    assert (err.value.code, err.value.retryable, err.value.retry_after_s) == ("rate_limited", True, 7.0)
    # the reason quotes neither the provider's text (which echoes the prompt) nor the credential
    assert "Look up" not in err.value.reason and SECRET not in err.value.reason and SECRET not in str(err.value)


def test_429_with_an_http_date_is_read_against_the_answers_date(server):
    server.answer(429, {}, {"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"})
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server))
    assert err.value.retry_after_s == 30.0


def test_500_is_service_unavailable_and_retryable(server):
    server.answer(500, {"error": {"message": "upstream exploded"}})
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server))
    assert (err.value.code, err.value.retryable, err.value.retry_after_s) == ("service_unavailable", True, None)
    assert "exploded" not in err.value.reason


def test_401_is_credential_forbidden_and_never_shows_the_key(server):
    server.answer(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server, credential=SECRET))
    assert (err.value.code, err.value.retryable) == ("credential_forbidden", False)
    assert SECRET not in err.value.reason and SECRET not in repr(err.value.args)
    assert err.value.__cause__ is None and err.value.__context__ is None  # no chained exception holds the body


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_are_validation_errors(server, status):
    server.answer(status, {"error": {"message": "bad"}})
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server))
    assert (err.value.code, err.value.retryable) == ("validation_error", False)
    assert str(status) in err.value.reason


def test_malformed_tool_call_arguments_are_refused_clearly(server):
    server.answer(
        200,
        _completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "acme_tool", "arguments": "{customerId: c-1"},
                    }
                ],
            },
            "tool_calls",
        ),
    )
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server))
    assert err.value.code == "external_call_failed"
    assert err.value.reason == "the model's tool-call arguments are not a JSON object"


def test_an_answer_that_is_not_a_chat_completion_is_refused(server):
    server.answer(200, b"<html>gateway</html>")
    server.answer(200, {"object": "list", "data": []})
    for _ in range(2):
        with pytest.raises(ModelProviderError) as err:
            _provider().complete(_request(server))
        assert err.value.code == "external_call_failed"
    assert len(server.received) == 2


def test_the_egress_guard_applies_to_the_base_url(server):
    # Given a transport whose egress policy does not allow loopback
    with pytest.raises(ModelProviderError) as err:
        _provider(allow=()).complete(_request(server, credential=SECRET))
    # Then the call is refused before any connection, with the guard's safe reason
    assert err.value.code == "external_call_failed" and not err.value.retryable
    assert "loopback" in err.value.reason and "model provider" in err.value.reason
    assert server.received == []


def test_a_server_that_is_gone_is_service_unavailable(server):
    # Given a base URL on a loopback port where nothing listens (bound, then released)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server, base_url=f"http://127.0.0.1:{port}/v1"))
    assert (err.value.code, err.value.retryable) == ("service_unavailable", True)


def test_a_base_url_that_is_not_http_is_a_validation_error(server):
    with pytest.raises(ModelProviderError) as err:
        _provider().complete(_request(server, base_url="file:///etc/passwd"))
    assert err.value.code == "validation_error"
    assert server.received == []


def test_complete_chat_passes_the_body_through_and_the_answer_back(server):
    # Given a server that answers a tool call whose arguments are not JSON (the passthrough does not judge them)
    answer = _completion(
        {
            "content": None,
            "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}],
        },
        "tool_calls",
        {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24},
    )
    server.answer(200, answer)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "seed": 7, "stream": False}
    # When the gateway's passthrough sends a chat body with a credential
    got = _provider().complete_chat(body, base_url=server.url, credential=SECRET, timeout_s=5.0)
    # Then the server got exactly that body, with bearer auth, and the answer comes back unaltered
    [sent] = server.received
    assert (sent.path, sent.headers["authorization"], sent.body) == ("/v1/chat/completions", f"Bearer {SECRET}", body)
    assert got.body == answer
    assert (got.model, got.input_tokens, got.output_tokens) == ("gpt-4o-mini-2024-07-18", 21, 3)
    assert got.cost_usd == pytest.approx((21 * 0.15 + 3 * 0.60) / 1_000_000)


def test_complete_chat_keeps_the_error_rules(server):
    # Given a server that rate-limits, then one that answers something that is not a chat completion
    server.answer(429, {"error": {"message": f"slow down, {SECRET}"}}, {"Retry-After": "3"})
    server.answer(200, {"choices": []})
    body = {"model": "m", "messages": [{"role": "user", "content": "a secret prompt"}]}
    with pytest.raises(ModelProviderError) as limited:
        _provider().complete_chat(body, base_url=server.url, credential=SECRET)
    with pytest.raises(ModelProviderError) as bad:
        _provider().complete_chat(body, base_url=server.url, credential=SECRET)
    # Then the codes are the adapter's, and no reason carries the credential, the prompt or the URL
    assert (limited.value.code, limited.value.retryable, limited.value.retry_after_s) == ("rate_limited", True, 3.0)
    assert bad.value.code == "external_call_failed"
    for reason in (limited.value.reason, bad.value.reason):
        assert SECRET not in reason and "secret prompt" not in reason and "127.0.0.1" not in reason
