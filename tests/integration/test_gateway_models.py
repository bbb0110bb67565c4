"""The model gateway, black box (decision 0143 step 4): the official ``openai`` client pointed at a session's
``openaiBaseUrl`` with its token, the version's ``openai`` binding a counting loopback chat-completions server
with a tenant credential, or the mock provider.

Replay is tested at the service level: a session fork does not exist yet, so a second live session is driven as a
replay of the first through ``handle_chat`` with a ``GatewaySession`` in ``REPLAY`` mode."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import openai
import pytest
from openai import OpenAI

from shared.services.gateway import REPLAY, GatewayRequest
from tests.chat_server import ScriptedChatServer, completion
from tests.wire import raw

BASE = "/host/openwop-serverless"
SECRET = "sk-tenant-gw-" + uuid.uuid4().hex


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture
def chat():
    s = ScriptedChatServer()
    s.start()
    yield s
    s.stop()


def _credential(host: Any) -> str:
    ref = "llm-" + uuid.uuid4().hex[:6]
    body = {"credential": {"type": "bearer", "token": SECRET}}
    r = raw(host.base_url, "PUT", f"{BASE}/credentials/{ref}", body, key=host.key_a)
    assert r.status in (200, 201), r.text
    return ref


def _agent(host: Any, model: dict[str, Any]) -> str:
    agent_id = f"g{uuid.uuid4().hex[:8]}.ext"
    body = {
        "version": "1.0.0",
        "runtime": {"kind": "external"},
        "model": model,
        "manifest": {
            "agentId": agent_id,
            "persona": "External",
            "modelClass": "general",
            "systemPrompt": "unused by an external agent",
            "toolAllowlist": [],
        },
    }
    r = raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)
    assert r.status == 201, r.text
    return agent_id


def _session(host: Any, agent_id: str) -> dict[str, Any]:
    r = raw(host.base_url, "POST", f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": "hi"}}, key=host.key_a)
    assert r.status == 201, r.text
    out: dict[str, Any] = r.json
    return out


def _openai_session(host: Any, chat: ScriptedChatServer) -> tuple[dict[str, Any], OpenAI]:
    ref = _credential(host)
    agent_id = _agent(host, {"provider": "openai", "model": "gpt-bound", "baseUrl": chat.url, "credentialRef": ref})
    s = _session(host, agent_id)
    return s, OpenAI(base_url=s["openaiBaseUrl"], api_key=s["token"], max_retries=0)


def _events(host: Any, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = _ports().events.read_events(run_id)
    return events


def _usages(host: Any, run_id: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in _events(host, run_id) if e["type"] == "provider.usage"]


def _entries(run_id: str) -> list[dict[str, Any]]:
    return [doc for _sk, doc in _ports().runs.query_aux(run_id, "MCALL#")]


HELLO = [{"role": "user", "content": "hello"}]


def test_chat_forwards_to_the_binding_with_the_tenant_credential_and_records_it(host, chat):
    # Given an external agent bound to the loopback server with a tenant credential, and a session
    chat.answers = [(200, completion("hello there", usage=(21, 4)), {})]
    s, client = _openai_session(host, chat)
    # When the agent calls the gateway with the official client (its own model name, its token)
    got = client.chat.completions.create(model="agent-picks-this", messages=HELLO, temperature=0.3)
    # Then it parses as a chat completion with the deterministic id and the provider's answer and usage
    assert got.choices[0].message.content == "hello there" and got.choices[0].finish_reason == "stop"
    assert got.id == f"chatcmpl-{s['runId']}-0"
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (21, 4)
    # and the upstream got 1 call: the tenant's credential (not the token), the binding's model, not streamed
    [sent] = chat.requests
    assert sent["headers"]["authorization"] == f"Bearer {SECRET}"
    assert s["token"] not in json.dumps(sent)
    assert sent["body"] == {"model": "gpt-bound", "messages": HELLO, "temperature": 0.3, "stream": False}
    # and the session's log has one provider.usage, the model-call log one entry with the compared request
    assert _usages(host, s["runId"]) == [
        {"provider": "openai", "model": "gpt-test-1", "inputTokens": 21, "outputTokens": 4, "totalTokens": 25}
    ]
    [entry] = _entries(s["runId"])
    assert entry["request"] == {"model": "agent-picks-this", "messages": HELLO, "temperature": 0.3}
    assert entry["key"].startswith("sha256:") and entry["response"]["id"] == got.id
    assert (entry["turn"], entry["invocationId"], entry["source"]) == (0, "s:0", "live")
    stored = json.dumps(_events(host, s["runId"])) + json.dumps(entry)
    assert SECRET not in stored and s["token"] not in stored


def test_stream_true_is_buffered_sse_the_client_parses(host, chat):
    # Given a session whose upstream answers once
    chat.answers = [(200, completion("streamed answer", usage=(5, 2)), {})]
    s, client = _openai_session(host, chat)
    # When the agent asks for a stream with usage
    chunks = list(
        client.chat.completions.create(
            model="m", messages=HELLO, stream=True, stream_options={"include_usage": True}, user="agent-7"
        )
    )
    # Then the chunks carry the role, the content, the finish reason and, last, the usage
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "streamed answer"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 7
    # and the upstream call was one whole answer: not streamed, no stream_options
    [sent] = chat.requests
    assert sent["body"]["stream"] is False and "stream_options" not in sent["body"]
    assert sent["body"]["user"] == "agent-7"
    assert len(_usages(host, s["runId"])) == 1


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a customer.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
]


def test_a_tool_call_round_trips(host, chat):
    # Given an upstream that asks for a tool, then answers
    chat.answers = [
        (200, completion(None, [("call_1", "lookup", {"id": "c-1"})]), {}),
        (200, completion("Ada is fine."), {}),
    ]
    s, client = _openai_session(host, chat)
    # When the agent sends its tools, gets the call, runs it itself and sends the result back
    first = client.chat.completions.create(model="m", messages=HELLO, tools=TOOLS)
    [call] = first.choices[0].message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_1", "lookup", {"id": "c-1"})
    assert first.choices[0].finish_reason == "tool_calls"
    history = [
        *HELLO,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_1", "content": '{"name":"Ada"}'},
    ]
    second = client.chat.completions.create(model="m", messages=history, tools=TOOLS)
    # Then the answer comes back, the upstream saw the tools and the tool result as sent, 1 hit per call
    assert second.choices[0].message.content == "Ada is fine."
    assert len(chat.requests) == 2
    assert chat.requests[0]["body"]["tools"] == TOOLS
    assert chat.requests[1]["body"]["messages"][2] == history[2]
    assert chat.requests[1]["body"]["messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert len(_usages(host, s["runId"])) == 2
    assert [e["turn"] for e in _entries(s["runId"])] == [0, 1]


def test_the_mock_provider_answers_through_the_translation(host):
    # Given an external agent bound to the scripted mock: a tool call, then text
    script = [{"toolCalls": [{"id": "call_m", "name": "lookup", "arguments": {"id": "c-2"}}]}, {"text": "done"}]
    agent_id = _agent(host, {"provider": "mock", "model": "mock-model", "mockProvider": {"script": script}})
    s = _session(host, agent_id)
    client = OpenAI(base_url=s["openaiBaseUrl"], api_key=s["token"], max_retries=0)
    # When the agent calls twice, the second time streaming
    first = client.chat.completions.create(
        model="m", messages=[{"role": "system", "content": "Be brief."}, *HELLO], tools=TOOLS
    )
    chunks = list(client.chat.completions.create(model="m", messages=HELLO, stream=True))
    # Then the mock's tool call and text come back as chat completions
    [call] = first.choices[0].message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_m", "lookup", {"id": "c-2"})
    assert first.id == f"chatcmpl-{s['runId']}-0" and first.model == "mock-model"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "done"
    assert [u["provider"] for u in _usages(host, s["runId"])] == ["mock", "mock"]


def test_a_mock_failure_is_upstream_unavailable_and_logged(host):
    # Given an external agent bound to a mock whose first answer fails, then answers
    script = [{"error": {"code": "external_call_failed", "message": "mock broke"}}, {"text": "recovered"}]
    agent_id = _agent(host, {"provider": "mock", "model": "mock-model", "mockProvider": {"script": script}})
    s = _session(host, agent_id)
    client = OpenAI(base_url=s["openaiBaseUrl"], api_key=s["token"], max_retries=0)
    # When the agent calls, fails, and calls again (as its client's retry would)
    with pytest.raises(openai.InternalServerError) as exc:
        client.chat.completions.create(model="m", messages=HELLO)
    again = client.chat.completions.create(model="m", messages=HELLO)
    # Then the failure is 502 upstream_unavailable, logged at its ordinal without usage, and the retry is the next
    assert exc.value.status_code == 502 and exc.value.response.json()["error"] == "upstream_unavailable"
    assert again.choices[0].message.content == "recovered" and again.id == f"chatcmpl-{s['runId']}-1"
    entries = {e["turn"]: e for e in _entries(s["runId"])}
    assert entries[0]["error"]["code"] == "external_call_failed" and "response" not in entries[0]
    assert entries[1]["text"] == "recovered" and len(_usages(host, s["runId"])) == 1


def test_an_unknown_member_is_refused_at_its_pointer_and_nothing_is_sent(host, chat):
    s, client = _openai_session(host, chat)
    # When the agent sends a member outside the allowlist
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="m", messages=HELLO, extra_body={"n": 2})
    # Then it is 400 validation_error naming /n, nothing reached the upstream and nothing was recorded
    body = exc.value.response.json()
    assert exc.value.status_code == 400 and body["error"] == "validation_error"
    assert [e["pointer"] for e in body["details"]["errors"]] == ["/n"]
    assert chat.requests == [] and _entries(s["runId"]) == [] and _usages(host, s["runId"]) == []


def test_a_provider_failure_maps_to_the_envelope(host, chat):
    # Given an upstream that rate-limits every try
    chat.answers = [(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})] * 3
    s, client = _openai_session(host, chat)
    with pytest.raises(openai.RateLimitError) as exc:
        client.chat.completions.create(model="m", messages=HELLO)
    # Then the agent gets 429 rate_limited with Retry-After; the call is logged with its error, no usage
    assert exc.value.response.json()["error"] == "rate_limited" and "retry-after" in exc.value.response.headers
    assert "slow down" not in exc.value.response.text
    [entry] = _entries(s["runId"])
    assert entry["error"]["code"] == "rate_limited" and _usages(host, s["runId"]) == []


# --------------------------------------------------------------------------- replay (service level)


def _replay_of(host: Any, source_run_id: str, chat: ScriptedChatServer) -> tuple[dict[str, Any], Any]:
    """A live second session of a new agent, turned into a replay of ``source_run_id`` (no fork exists yet)."""
    from shared.services.gateway.session import authenticate

    s, _client = _openai_session(host, chat)
    session = authenticate(_ports(), s["runId"], f"Bearer {s['token']}")
    return s, dataclasses.replace(session, mode=REPLAY, source_run_id=source_run_id)


def _call(session: Any, body: dict[str, Any]) -> Any:
    from shared.services.gateway.models import handle_chat

    req = GatewayRequest(
        "POST", "/v1/chat/completions", {"content-type": "application/json"}, json.dumps(body).encode()
    )
    return handle_chat(_ports(), session, req)


def test_replay_serves_the_record_with_zero_provider_calls_and_reports_divergence(host, chat):
    # Given a source session with three recorded model calls
    chat.answers = [(200, completion(text), {}) for text in ("one", "two", "three")]
    src, client = _openai_session(host, chat)
    for follow_up in ([], [{"role": "user", "content": "again"}], [{"role": "user", "content": "more"}]):
        client.chat.completions.create(model="m", messages=[*HELLO, *follow_up])
    assert len(chat.requests) == 3
    fork, session = _replay_of(host, src["runId"], chat)
    # When the replay asks the same first call, then two changed ones, then a fourth the source never made
    same = _call(session, {"model": "m", "messages": HELLO, "stream": True})
    changed = _call(session, {"model": "m", "messages": [*HELLO, {"role": "user", "content": "CHANGED"}]})
    again = _call(session, {"model": "m", "messages": [*HELLO, {"role": "user", "content": "CHANGED too"}]})
    from shared.errors import ReplaySourceMissingError

    with pytest.raises(ReplaySourceMissingError) as missing:
        _call(session, {"model": "m", "messages": HELLO})
    # Then no provider was called; the answers are the recorded ones
    assert len(chat.requests) == 3
    assert json.loads(again.body)["choices"][0]["message"]["content"] == "three"
    assert again.headers["OpenWOP-Replay-Diverged"] == "/messages/1/content"
    assert same.status == 200 and b'"content":"one"' in same.body and "OpenWOP-Replay-Diverged" not in same.headers
    assert json.loads(changed.body)["choices"][0]["message"]["content"] == "two"
    # and the divergence is named by its pointer on the header, the entries and one replay.diverged (the first)
    assert changed.headers["OpenWOP-Replay-Diverged"] == "/messages/1/content"
    entries = {e["turn"]: e for e in _entries(fork["runId"])}
    assert "divergedAt" not in entries[0] and entries[1]["divergedAt"] == "/messages/1/content"
    events = _events(host, fork["runId"])
    [diverged] = [e["payload"] for e in events if e["type"] == "replay.diverged"]
    usage_seqs = [e["sequence"] for e in events if e["type"] == "provider.usage"]
    src_usage = [e["eventId"] for e in _events(host, src["runId"]) if e["type"] == "provider.usage"]
    assert diverged == {
        "sourceRunId": src["runId"],
        "atSequence": usage_seqs[1],
        "originalEventId": src_usage[1],
        "divergenceKind": "output",
        "divergencePoint": "provider.usage",
    }
    # and a call past the source's last is replay_source_missing at /messages
    assert missing.value.status == 404 and missing.value.details == {"pointer": "/messages"}
