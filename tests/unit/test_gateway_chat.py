"""The model gateway's wire (shared/services/gateway/chat.py, decision 0143): body checking, the compared request
and its key, chat body <-> ModelRequest/ModelReply, and buffered SSE. Pure: no AWS, no HTTP."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import rfc8785

from shared.errors import ValidationError
from shared.ports import ModelMessage, ModelReply, ModelToolCall, ModelToolSpec
from shared.services.gateway import chat

BINDING = {"provider": "mock", "model": "m-1", "mockProvider": {"script": [{"text": "hi"}]}}


def _pointers(exc: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return [e["pointer"] for e in (exc.value.details or {})["errors"]]


def _body(**kw: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": [{"role": "user", "content": "hello"}], **kw}


# --------------------------------------------------------------------------- checking


def test_check_body_unknown_member_refused_at_its_pointer() -> None:
    # Given a body with a member outside the allowlist (and one with a slash in its name)
    with pytest.raises(ValidationError) as exc:
        chat.check_body(_body(n=2, **{"a/b": 1}))
    # Then each is named by its JSON pointer
    assert exc.value.status == 400 and exc.value.code == "validation_error"
    assert _pointers(exc) == ["/n", "/a~1b"]


def test_check_body_every_allowlisted_member_accepted() -> None:
    body = {k: None for k in chat.ALLOWED}
    body.update(_body(stream=True, stream_options={"include_usage": True}, tools=[]))
    assert chat.check_body(body) is body


@pytest.mark.parametrize(
    ("body", "at"),
    [
        ([1], ""),
        ({"model": "x"}, "/messages"),
        ({"messages": []}, "/messages"),
        ({"messages": "hi"}, "/messages"),
        ({"messages": [{"content": "x"}]}, "/messages/0"),
        ({"messages": [{"role": "user"}], "stream": "yes"}, "/stream"),
        ({"messages": [{"role": "user"}], "stream_options": True}, "/stream_options"),
        ({"messages": [{"role": "user"}], "tools": {}}, "/tools"),
    ],
)
def test_check_body_bad_shapes_refused_with_pointer(body: Any, at: str) -> None:
    with pytest.raises(ValidationError) as exc:
        chat.check_body(body)
    assert _pointers(exc) == [at]


def test_request_key_is_sha256_of_jcs_without_delivery_members() -> None:
    # Given two bodies that differ only in stream, stream_options, user, metadata and key order
    a = _body(temperature=1.0, stream=True, stream_options={"include_usage": True}, user="u", metadata={"k": "v"})
    b = {"temperature": 1, "messages": [{"content": "hello", "role": "user"}], "model": "gpt-x"}
    # Then they are compared as equal, and the key is SHA-256 over the JCS form of the compared body
    assert chat.compared(a) == {"model": "gpt-x", "messages": a["messages"], "temperature": 1.0}
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(chat.compared(b))).hexdigest()
    assert chat.request_key(a) == chat.request_key(b) == expected
    # And a changed message changes the key
    assert chat.request_key(_body(messages=[{"role": "user", "content": "bye"}])) != expected


# --------------------------------------------------------------------------- chat body -> ModelRequest


def test_to_model_request_carries_system_text_tools_and_tool_calls() -> None:
    body = _body(
        messages=[
            {"role": "system", "content": "Be terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {"role": "user", "content": [{"type": "text", "text": "look "}, {"type": "text", "text": "up c-1"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"id":"c-1"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"name":"Ada"}'},
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Find a customer.",
                    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
                    "strict": True,
                },
            },
            {"type": "function", "function": {"name": "ping"}},
        ],
        temperature=0.5,
        max_completion_tokens=64,
        tool_choice="auto",
        parallel_tool_calls=True,
    )
    req = chat.to_model_request(body, BINDING, turn=3, credential="sk-x")
    assert (req.provider, req.model, req.turn, req.credential) == ("mock", "m-1", 3, "sk-x")
    assert req.mock == BINDING["mockProvider"]
    assert req.system == "Be terse.\n\nUse tools."
    assert req.messages == (
        ModelMessage("user", "look up c-1"),
        ModelMessage("assistant", None, (ModelToolCall("call_1", "lookup", {"id": "c-1"}),)),
        ModelMessage("tool", '{"name":"Ada"}', tool_call_id="call_1"),
    )
    assert req.tools == (
        ModelToolSpec("lookup", "Find a customer.", {"type": "object", "properties": {"id": {"type": "string"}}}),
        ModelToolSpec("ping", "", {"type": "object"}),
    )
    assert (req.temperature, req.max_tokens) == (0.5, 64)


def test_to_model_request_binding_defaults_apply_when_body_is_silent() -> None:
    req = chat.to_model_request(_body(), {**BINDING, "temperature": 0.2, "maxTokens": 99}, turn=0)
    assert (req.temperature, req.max_tokens) == (0.2, 99)
    req = chat.to_model_request(_body(max_tokens=7), {**BINDING, "maxTokens": 99}, turn=0)
    assert req.max_tokens == 7


@pytest.mark.parametrize(
    ("kw", "at"),
    [
        ({"top_p": 0.9}, "/top_p"),
        ({"seed": 1}, "/seed"),
        ({"stop": ["x"]}, "/stop"),
        ({"tool_choice": "required"}, "/tool_choice"),
        ({"parallel_tool_calls": False}, "/parallel_tool_calls"),
        ({"response_format": {"type": "json_object"}}, "/response_format"),
        ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "/messages/0/name"),
        ({"messages": [{"role": "function", "content": "x"}]}, "/messages/0/role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "/messages/0/content/0",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            "/messages/0/tool_calls/0/function/arguments",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "/messages/0/tool_call_id"),
        ({"tools": [{"type": "web_search"}]}, "/tools/0"),
        ({"tools": [{"type": "function", "function": {"name": "f", "x": 1}}]}, "/tools/0/function/x"),
    ],
)
def test_to_model_request_member_it_cannot_carry_refused_at_pointer(kw: dict[str, Any], at: str) -> None:
    with pytest.raises(ValidationError) as exc:
        chat.to_model_request(_body(**kw), BINDING, turn=0)
    assert _pointers(exc) == [at]


def test_a_translated_request_reaches_bedrock_converse_with_tool_use_and_results() -> None:
    # Given a chat body with a system prompt, a tool call and its result, translated for a bedrock binding
    from shared.providers.bedrock import converse_request

    body = _body(
        messages=[
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "look up c-1"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "t1", "content": '{"name":"Ada"}'},
        ],
        tools=[{"type": "function", "function": {"name": "lookup"}}],
    )
    req = chat.to_model_request(body, {"provider": "bedrock", "model": "anthropic.claude"}, turn=1)
    params, _names = converse_request(req)
    # Then Converse gets the system prompt, the toolUse and the toolResult, and the tool's spec
    assert params["modelId"] == "anthropic.claude" and params["system"] == [{"text": "Be terse."}]
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    assert params["messages"][1]["content"] == [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {}}}]
    assert params["messages"][2]["content"][0]["toolResult"]["content"] == [{"json": {"name": "Ada"}}]
    assert params["toolConfig"]["tools"][0]["toolSpec"]["name"] == "lookup"


# --------------------------------------------------------------------------- ModelReply -> chat.completion


def test_completion_renders_text_tool_calls_finish_and_usage() -> None:
    reply = ModelReply(
        text=None,
        tool_calls=(ModelToolCall("call_0", "lookup", {"id": "c-1"}),),
        stop_reason="tool_use",
        input_tokens=11,
        output_tokens=4,
        model="mock-script-v1",
    )
    out = chat.completion(reply, "chatcmpl-r1-0", 1700000000)
    assert out == {
        "id": "chatcmpl-r1-0",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "mock-script-v1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"id":"c-1"}'},
                        }
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
    }
    assert chat.summary(out) == {
        "text": None,
        "toolCalls": [{"id": "call_0", "name": "lookup", "arguments": {"id": "c-1"}}],
        "stopReason": "tool_use",
    }


@pytest.mark.parametrize(
    ("stop", "finish"), [("end_turn", "stop"), ("max_tokens", "length"), ("refused", "content_filter")]
)
def test_completion_finish_reasons(stop: str, finish: str) -> None:
    reply = ModelReply("t", (), stop, 1, 1, "m")
    assert chat.completion(reply, "i", 0)["choices"][0]["finish_reason"] == finish


# --------------------------------------------------------------------------- SSE


def _events(raw: bytes) -> list[Any]:
    assert raw.endswith(b"data: [DONE]\n\n")
    frames = raw.decode().split("\n\n")
    assert frames[-1] == "" and frames[-2] == "data: [DONE]"
    out = []
    for frame in frames[:-2]:
        assert frame.startswith("data: ")
        out.append(json.loads(frame[len("data: ") :]))
    return out


def _tool_answer() -> dict[str, Any]:
    reply = ModelReply(
        "Looking.",
        (ModelToolCall("call_0", "lookup", {"id": "c-1"}), ModelToolCall("call_1", "ping", {})),
        "tool_use",
        5,
        3,
        "m",
    )
    return chat.completion(reply, "chatcmpl-r-1", 42)


def test_sse_chunks_role_content_tool_call_deltas_finish_then_done() -> None:
    chunks = _events(chat.sse(_tool_answer(), usage=False))
    assert {(c["id"], c["object"], c["created"], c["model"]) for c in chunks} == {
        ("chatcmpl-r-1", "chat.completion.chunk", 42, "m")
    }
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": "Looking."},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"id":"c-1"}'},
                }
            ]
        },
        {
            "tool_calls": [
                {"index": 1, "id": "call_1", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
            ]
        },
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, "tool_calls"]
    assert all("usage" not in c for c in chunks)


def test_sse_usage_chunk_only_when_asked() -> None:
    chunks = _events(chat.sse(_tool_answer(), usage=True))
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "total_tokens": 8,
    }
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chat.include_usage({"stream_options": {"include_usage": True}})
    assert not chat.include_usage({"stream_options": {}}) and not chat.include_usage({})


def test_rendered_answers_parse_with_the_official_openai_client() -> None:
    # Given the official client over an in-memory transport that answers with our renderings
    import httpx2 as httpx
    from openai import OpenAI

    answer = _tool_answer()

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("stream"):
            raw = chat.sse(answer, usage=chat.include_usage(body))
            return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=raw)
        return httpx.Response(200, json=answer)

    client = OpenAI(
        base_url="http://gateway.invalid/v1",
        api_key="t",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    # When it asks for a whole completion and for a stream with usage
    whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    chunks = list(
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
        )
    )
    # Then both parse, and the stream adds up to the same message
    assert whole.choices[0].message.tool_calls[1].function.name == "ping"
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Looking."
    calls = [t for d in deltas for t in (d.tool_calls or [])]
    assert [(t.index, t.id, t.function.name, t.function.arguments) for t in calls] == [
        (0, "call_0", "lookup", '{"id":"c-1"}'),
        (1, "call_1", "ping", "{}"),
    ]
    assert chunks[-1].usage.total_tokens == 8 and [c.choices[0].finish_reason for c in chunks if c.choices][-1] == (
        "tool_calls"
    )
