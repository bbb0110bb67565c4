"""The Bedrock adapter on the real ``bedrock-runtime`` client, its traffic intercepted by botocore's ``Stubber``.

The Stubber validates every request we send and every response it plays against the Converse service model, so a
field we misname or mistype fails here; dummy credentials and a region, no network.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from shared.ports import ModelMessage, ModelProviderError, ModelRequest, ModelToolCall, ModelToolSpec
from shared.providers.bedrock import BedrockConverseProvider
from shared.providers.prices import PriceTable

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
PROMPT = "Look up customer c-1, SENTINEL-PROMPT."
SCHEMA = {"type": "object", "required": ["customerId"], "properties": {"customerId": {"type": "string"}}}
TOOLS = (ModelToolSpec("acme.crm:lookup", "Find a customer", SCHEMA), ModelToolSpec("refund", "Refund", {}))
WIRE = "acme_crm_lookup_" + hashlib.sha256(b"acme.crm:lookup").hexdigest()[:8]


@pytest.fixture
def client() -> Any:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    return session.client("bedrock-runtime", endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")


@pytest.fixture
def stub(client: Any) -> Any:
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def calls(client: Any) -> Counter[str]:
    """AWS operations the client sends (counted before the Stubber answers)."""
    seen: Counter[str] = Counter()
    client.meta.events.register_first("before-call.*.*", lambda model, **_: seen.update([model.name]))
    return seen


def _provider(client: Any) -> BedrockConverseProvider:
    built: list[Any] = []

    def factory() -> Any:
        built.append(client)
        return client

    provider = BedrockConverseProvider(factory, PriceTable())
    assert built == []  # lazily: no client until the first call
    return provider


def _response(content: list[dict[str, Any]], stop: str, tokens_in: int = 30, tokens_out: int = 9) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out},
        "metrics": {"latencyMs": 12},
    }


def _request(**kw: Any) -> ModelRequest:
    base: dict[str, Any] = {
        "provider": "bedrock",
        "model": MODEL,
        "system": "You are terse.",
        "messages": (ModelMessage("user", PROMPT),),
    }
    base.update(kw)
    return ModelRequest(**base)


def test_a_text_answer_with_usage_cost_and_the_exact_converse_request(client, stub, calls):
    # Given Bedrock answering text
    stub.add_response(
        "converse",
        _response([{"text": "Ada, "}, {"text": "VIP."}], "end_turn"),
        {
            "modelId": MODEL,
            "system": [{"text": "You are terse."}],
            "messages": [{"role": "user", "content": [{"text": PROMPT}]}],
            "inferenceConfig": {"maxTokens": 256, "temperature": 0.0},
        },
    )
    # When the adapter completes a request with max tokens and temperature
    reply = _provider(client).complete(_request(max_tokens=256, temperature=0.0))
    # Then the text blocks are joined, the stop reason mapped, usage and a rate-table cost reported, one Converse sent
    assert (reply.text, reply.tool_calls, reply.stop_reason, reply.model) == ("Ada, VIP.", (), "end_turn", MODEL)
    assert (reply.input_tokens, reply.output_tokens) == (30, 9)
    assert reply.cost_usd == pytest.approx((30 * 0.80 + 9 * 4.00) / 1_000_000)
    assert calls == Counter({"Converse": 1})


def test_tools_and_a_tool_round_trip_map_to_tool_config_tool_use_and_tool_result(client, stub):
    # Given Bedrock asking for two tools (one outside the request's list)
    stub.add_response(
        "converse",
        _response(
            [
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "tu-2", "name": WIRE, "input": {"customerId": "c-1"}}},
                {"toolUse": {"toolUseId": "tu-3", "name": "delete_everything", "input": {}}},
            ],
            "tool_use",
        ),
        {
            "modelId": MODEL,
            "system": [{"text": "You are terse."}],
            "messages": [
                {"role": "user", "content": [{"text": PROMPT}]},
                {
                    "role": "assistant",
                    "content": [
                        {"toolUse": {"toolUseId": "tu-0", "name": WIRE, "input": {"customerId": "c-0"}}},
                        {"toolUse": {"toolUseId": "tu-1", "name": "refund", "input": {"orderId": "o-9"}}},
                    ],
                },
                # two tool answers travel in ONE user message (roles alternate), a JSON object as json, else text
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": "tu-0",
                                "content": [{"json": {"name": "Ada"}}],
                                "status": "success",
                            }
                        },
                        {
                            "toolResult": {
                                "toolUseId": "tu-1",
                                "content": [{"text": "refund refused"}],
                                "status": "error",
                            }
                        },
                    ],
                },
            ],
            "toolConfig": {
                "tools": [
                    {"toolSpec": {"name": WIRE, "description": "Find a customer", "inputSchema": {"json": SCHEMA}}},
                    {"toolSpec": {"name": "refund", "description": "Refund", "inputSchema": {"json": {}}}},
                ]
            },
        },
    )
    history = (
        ModelMessage("user", PROMPT),
        ModelMessage(
            "assistant",
            None,
            (
                ModelToolCall("tu-0", "acme.crm:lookup", {"customerId": "c-0"}),
                ModelToolCall("tu-1", "refund", {"orderId": "o-9"}),
            ),
        ),
        ModelMessage("tool", '{"name": "Ada"}', tool_call_id="tu-0"),
        ModelMessage("tool", "refund refused", tool_call_id="tu-1", is_error=True),
    )
    reply = _provider(client).complete(_request(messages=history, tools=TOOLS))
    # Then the calls come back under catalog names (an unknown one as the model spelled it), with their input
    assert reply.stop_reason == "tool_use" and reply.text == "Checking."
    assert [(c.call_id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("tu-2", "acme.crm:lookup", {"customerId": "c-1"}),
        ("tu-3", "delete_everything", {}),
    ]


@pytest.mark.parametrize(
    ("stop", "mapped"),
    [
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "end_turn"),
        ("guardrail_intervened", "refused"),
        ("content_filtered", "refused"),
    ],
)
def test_stop_reasons_map(client, stub, stop, mapped):
    stub.add_response("converse", _response([{"text": "x"}], stop))
    assert _provider(client).complete(_request()).stop_reason == mapped


def test_an_unknown_model_has_no_cost(client, stub):
    stub.add_response("converse", _response([{"text": "x"}], "end_turn"))
    reply = _provider(client).complete(_request(model="vendor.unpriced-model-v1:0"))
    assert reply.cost_usd is None and reply.input_tokens == 30


def test_an_inference_profile_id_is_priced_as_its_model(client, stub):
    stub.add_response("converse", _response([{"text": "x"}], "end_turn", 1_000_000, 0))
    assert _provider(client).complete(_request(model="us." + MODEL)).cost_usd == pytest.approx(0.80)


@pytest.mark.parametrize(
    ("error", "status", "code", "retryable"),
    [
        ("ThrottlingException", 429, "rate_limited", True),
        ("ServiceQuotaExceededException", 400, "rate_limited", True),
        ("ModelTimeoutException", 408, "service_unavailable", True),
        ("ServiceUnavailableException", 503, "service_unavailable", True),
        ("InternalServerException", 500, "service_unavailable", True),
        ("ModelNotReadyException", 429, "service_unavailable", True),
        ("AccessDeniedException", 403, "credential_forbidden", False),
        ("ValidationException", 400, "validation_error", False),
        ("ResourceNotFoundException", 404, "validation_error", False),
        ("ModelErrorException", 424, "external_call_failed", False),
    ],
)
def test_errors_map_to_the_spec_codes_without_echoing_the_provider_message(
    client, stub, calls, error, status, code, retryable
):
    # Given Bedrock failing with a message that quotes the prompt
    stub.add_client_error(
        "converse", service_error_code=error, service_message=f"bad input: {PROMPT}", http_status_code=status
    )
    with pytest.raises(ModelProviderError) as err:
        _provider(client).complete(_request())
    # Then the error carries the spec code and retryability, and its reason never the provider's message
    assert (err.value.code, err.value.retryable) == (code, retryable)
    assert "SENTINEL" not in err.value.reason and "SENTINEL" not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert calls == Counter({"Converse": 1})  # botocore's own retries are the client's; the stub answered once


def test_a_request_the_service_model_refuses_is_a_validation_error(client, calls):
    # Given a queued answer, and a request Converse's model refuses (maxTokens below 1)
    with Stubber(client) as stubber:
        stubber.add_response("converse", _response([{"text": "x"}], "end_turn"))
        with pytest.raises(ModelProviderError) as err:
            _provider(client).complete(_request(max_tokens=0))
    # Then it is a validation error, and nothing was sent (the answer is still queued)
    assert (err.value.code, err.value.retryable) == ("validation_error", False)
    assert calls == Counter()


def test_the_client_is_built_once(client, stub):
    built: list[int] = []

    def factory() -> Any:
        built.append(1)
        return client

    provider = BedrockConverseProvider(factory)
    for _ in range(3):
        stub.add_response("converse", _response([{"text": "x"}], "end_turn"))
        provider.complete(_request())
    assert built == [1]
