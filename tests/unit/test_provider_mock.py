"""The mock provider: the spec's canonical catalog, the scripted form, strict configuration, deterministic counts."""

from __future__ import annotations

from typing import Any

import pytest

from shared.ports import ModelMessage, ModelProviderError, ModelRequest, ModelToolCall, ModelToolSpec
from shared.providers.mock import MOCK_PROVIDER_IDS, MockProvider, request_tokens, validate_mock_config

TOOLS = (ModelToolSpec("acme.crm:lookup", "Find a customer", {"type": "object"}),)


def _request(mock: dict[str, Any] | None, turn: int = 0, **kw: Any) -> ModelRequest:
    base: dict[str, Any] = {
        "provider": "mock",
        "model": "",
        "system": "Be brief.",
        "messages": (ModelMessage("user", "hello"),),
        "tools": TOOLS,
        "mock": mock,
        "turn": turn,
    }
    base.update(kw)
    return ModelRequest(**base)


def test_stream_text_defaults_follow_the_spec():
    reply = MockProvider().complete(_request({"id": "stream-text"}))
    # tokens ["mock", " response"], finishReason stop, usage promptTokens 1 / completionTokens = len(tokens)
    assert (reply.text, reply.tool_calls, reply.stop_reason) == ("mock response", (), "end_turn")
    assert (reply.input_tokens, reply.output_tokens, reply.model, reply.cost_usd) == (1, 2, "mock-stream-text-v1", 0.0)


def test_stream_text_config_is_served():
    cfg = {
        "id": "stream-text",
        "config": {
            "tokens": ["Hello", " ", "world", "!"],
            "delayMsPerToken": 10,
            "finishReason": "length",
            "model": "m-1",
            "usage": {"promptTokens": 5, "completionTokens": 4, "totalTokens": 9},
        },
    }
    reply = MockProvider().complete(_request(cfg))
    assert (reply.text, reply.stop_reason, reply.input_tokens, reply.output_tokens, reply.model) == (
        "Hello world!",
        "max_tokens",
        5,
        4,
        "m-1",
    )


def test_no_configuration_is_stream_text_with_its_defaults():
    assert MockProvider().complete(_request(None)).text == "mock response"


def test_tool_calls_answers_its_calls_once_then_a_final_answer():
    cfg = {
        "id": "tool-calls",
        "config": {
            "toolCalls": [
                {"id": "c-1", "name": "acme.crm:lookup", "arguments": {"customerId": "c-1"}},
                {"name": "acme.crm:lookup", "arguments": {"customerId": "c-2"}},
            ]
        },
    }
    first = MockProvider().complete(_request(cfg, turn=0))
    assert first.stop_reason == "tool_use" and first.text is None
    assert first.tool_calls == (
        ModelToolCall("c-1", "acme.crm:lookup", {"customerId": "c-1"}),
        ModelToolCall("call_0_1", "acme.crm:lookup", {"customerId": "c-2"}),
    )
    later = MockProvider().complete(_request(cfg, turn=1))
    assert (later.text, later.tool_calls, later.stop_reason) == ("", (), "end_turn")
    assert first.input_tokens > 0 and first.output_tokens > 0 and later.output_tokens == 0


def test_error_fails_the_call_with_its_code():
    cfg = {
        "id": "error",
        "config": {"code": "rate_limited", "message": "slow down", "retryable": True, "failAfterMs": 5},
    }
    with pytest.raises(ModelProviderError) as err:
        MockProvider().complete(_request(cfg))
    assert (err.value.code, err.value.reason, err.value.retryable) == ("rate_limited", "slow down", True)
    with pytest.raises(ModelProviderError) as default:
        MockProvider().complete(_request({"id": "error"}))
    assert (default.value.code, default.value.retryable) == ("external_call_failed", False)


def test_usage_only_reports_usage_and_no_content():
    cfg = {"id": "usage-only", "config": {"usage": {"promptTokens": 120, "completionTokens": 30, "totalTokens": 150}}}
    reply = MockProvider().complete(_request(cfg))
    assert (reply.text, reply.tool_calls, reply.input_tokens, reply.output_tokens) == (None, (), 120, 30)


SCRIPT = {
    "script": [
        {"toolCalls": [{"name": "acme.crm:lookup", "arguments": {"customerId": "c-1"}, "id": "s-1"}]},
        {"text": "Ada is a VIP.", "usage": {"inputTokens": 50, "outputTokens": 6}},
        {"error": {"code": "service_unavailable", "retryable": True}},
    ]
}


def test_a_script_answers_by_turn_and_ends_with_an_empty_final_answer():
    mock = MockProvider()
    r0, r1 = mock.complete(_request(SCRIPT, 0)), mock.complete(_request(SCRIPT, 1))
    assert r0.tool_calls == (ModelToolCall("s-1", "acme.crm:lookup", {"customerId": "c-1"}),)
    assert (r0.stop_reason, r0.text) == ("tool_use", None)
    assert (r1.text, r1.stop_reason, r1.input_tokens, r1.output_tokens) == ("Ada is a VIP.", "end_turn", 50, 6)
    with pytest.raises(ModelProviderError) as err:
        mock.complete(_request(SCRIPT, 2))
    assert (err.value.code, err.value.retryable) == ("service_unavailable", True)
    past = mock.complete(_request(SCRIPT, 3))
    assert (past.text, past.tool_calls, past.stop_reason, past.output_tokens) == ("", (), "end_turn", 0)
    # the long form names the vendor id, and the request's model is stamped on scripted answers
    long = {"id": "openwop-serverless.script", "config": SCRIPT}
    assert mock.complete(_request(long, 1, model="team-model")).model == "team-model"


def test_token_counts_are_a_function_of_the_request_alone():
    mock = MockProvider()
    a = mock.complete(_request(SCRIPT, 0))
    b = mock.complete(_request(SCRIPT, 0))
    assert (a.input_tokens, a.output_tokens) == (b.input_tokens, b.output_tokens)
    longer = _request(SCRIPT, 0, messages=(ModelMessage("user", "hello " * 100),))
    assert request_tokens(longer) > request_tokens(_request(SCRIPT, 0)) == a.input_tokens


@pytest.mark.parametrize(
    "cfg",
    [
        {"id": "does-not-exist"},
        {"id": "stream-text", "config": {"tokens": "Hello"}},
        {"id": "stream-text", "config": {"finishReason": "done"}},
        {"id": "stream-text", "config": {"delayMsPerToken": 6000}},
        {"id": "stream-text", "config": {"usage": {"promptTokens": -1, "completionTokens": 1}}},
        {"id": "stream-text", "config": {"unknownKey": 1}},
        {"id": "stream-text", "extra": 1},
        {"id": "tool-calls", "config": {}},
        {"id": "tool-calls", "config": {"toolCalls": [{"name": "", "arguments": {}}]}},
        {"id": "tool-calls", "config": {"toolCalls": [{"name": "t", "arguments": "{}"}]}},
        {"id": "error", "config": {"code": "Not A Code"}},
        {"id": "error", "config": {"retryable": "yes"}},
        {"script": "answer"},
        {"script": [{"text": 1}]},
        {"script": [{"text": "x", "error": {"code": "x"}}]},
        {"script": [{"usage": {"inputTokens": 1}}]},
        {"script": [{"say": "x"}]},
        {"script": [], "id": "stream-text"},
        {},
        ["stream-text"],
    ],
)
def test_a_malformed_configuration_is_a_validation_error(cfg):
    with pytest.raises(ModelProviderError) as err:
        validate_mock_config(cfg)
    assert err.value.code == "validation_error" and err.value.reason.startswith("mockProvider: ")
    with pytest.raises(ModelProviderError):
        MockProvider().complete(_request(cfg))


@pytest.mark.parametrize(
    "cfg",
    [{"id": i} for i in ("stream-text", "error", "usage-only")]
    + [{"script": []}, SCRIPT, {"id": "tool-calls", "config": {"toolCalls": [{"name": "t", "arguments": {}}]}}],
)
def test_valid_configurations_pass(cfg):
    assert validate_mock_config(cfg) is None


def test_the_catalog_lists_the_canonical_ids_and_the_scripted_form():
    assert MOCK_PROVIDER_IDS == ("stream-text", "tool-calls", "error", "usage-only", "openwop-serverless.script")
