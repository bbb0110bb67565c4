"""Amazon Bedrock through the Converse API (boto3 ``bedrock-runtime``), with the function role's credentials.

One ``ModelRequest`` is one ``Converse`` call: the system prompt as ``system``, the conversation as ``messages``
(text, ``toolUse`` and ``toolResult`` blocks; consecutive messages of one role are merged because Converse wants
the roles to alternate, and tool answers travel in a ``user`` message), the tools as
``toolConfig.tools[].toolSpec``, ``maxTokens``/``temperature`` as ``inferenceConfig``. Errors become
``ModelProviderError`` with the spec's codes; their reasons name the error class only, never the provider's
message (it can quote the prompt) or the request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from shared.ports import ModelMessage, ModelProviderError, ModelReply, ModelRequest, ModelToolCall
from shared.providers.names import ToolNames
from shared.providers.prices import PriceTable

STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "guardrail_intervened": "refused",
    "content_filtered": "refused",
}

_RATE_LIMITED = {"ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException"}
_UNAVAILABLE = {
    "ModelTimeoutException",
    "ServiceUnavailableException",
    "InternalServerException",
    "ModelNotReadyException",
    "ModelStreamErrorException",
}
_FORBIDDEN = {"AccessDeniedException", "UnrecognizedClientException"}
_INVALID = {"ValidationException", "ResourceNotFoundException"}


def map_client_error(code: str) -> ModelProviderError:
    """A Bedrock error code -> the spec's error (the reason names the class, nothing the caller sent)."""
    if code in _RATE_LIMITED:
        return ModelProviderError("rate_limited", f"Bedrock throttled the model call ({code})", retryable=True)
    if code in _UNAVAILABLE:
        return ModelProviderError("service_unavailable", f"Bedrock could not answer now ({code})", retryable=True)
    if code in _FORBIDDEN:
        return ModelProviderError(
            "credential_forbidden", f"Bedrock refused this host's credentials for the model ({code})"
        )
    if code in _INVALID:
        return ModelProviderError("validation_error", f"Bedrock refused the model request ({code})")
    return ModelProviderError("external_call_failed", "the Bedrock model call failed")


def _tool_result_content(text: str | None) -> list[dict[str, Any]]:
    """A tool answer as toolResult content: a JSON object as a ``json`` block, anything else as ``text``."""
    raw = text or ""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return [{"json": value}]
    return [{"text": raw}]


def _blocks(msg: ModelMessage, names: ToolNames) -> tuple[str, list[dict[str, Any]]]:
    if msg.role == "user":
        return "user", [{"text": msg.text or ""}]
    if msg.role == "assistant":
        blocks: list[dict[str, Any]] = [{"text": msg.text}] if msg.text else []
        blocks += [
            {
                "toolUse": {
                    "toolUseId": c.call_id,
                    "name": names.to_wire(c.name),
                    "input": c.arguments if isinstance(c.arguments, dict) else {},
                }
            }
            for c in msg.tool_calls
        ]
        return "assistant", blocks or [{"text": ""}]
    if msg.role == "tool":
        return "user", [
            {
                "toolResult": {
                    "toolUseId": msg.tool_call_id or "",
                    "content": _tool_result_content(msg.text),
                    "status": "error" if msg.is_error else "success",
                }
            }
        ]
    raise ModelProviderError("validation_error", "a conversation message has an unknown role")


def converse_request(request: ModelRequest) -> tuple[dict[str, Any], ToolNames]:
    """The Converse parameters for ``request`` (and the tool-name mapping to read the answer with)."""
    names = ToolNames(t.name for t in request.tools)
    messages: list[dict[str, Any]] = []
    for msg in request.messages:
        role, blocks = _blocks(msg, names)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    params: dict[str, Any] = {"modelId": request.model, "messages": messages}
    if request.system:
        params["system"] = [{"text": request.system}]
    inference: dict[str, Any] = {}
    if request.max_tokens is not None:
        inference["maxTokens"] = request.max_tokens
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if inference:
        params["inferenceConfig"] = inference
    if request.tools:
        params["toolConfig"] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": names.to_wire(t.name),
                        "description": t.description or t.name,
                        "inputSchema": {"json": t.input_schema},
                    }
                }
                for t in request.tools
            ]
        }
    return params, names


def parse_response(response: dict[str, Any], names: ToolNames, model: str, prices: PriceTable) -> ModelReply:
    content = (((response.get("output") or {}).get("message") or {}).get("content")) or []
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in content:
        if "text" in block:
            texts.append(str(block["text"]))
        elif "toolUse" in block:
            use = block["toolUse"]
            calls.append(
                ModelToolCall(
                    str(use.get("toolUseId", "")),
                    names.to_catalog(str(use.get("name", ""))),
                    use.get("input") if use.get("input") is not None else {},
                )
            )
    stop = STOP_REASONS.get(str(response.get("stopReason", "")), "tool_use" if calls else "end_turn")
    usage = response.get("usage") or {}
    tokens_in, tokens_out = int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0))
    return ModelReply(
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        stop_reason=stop,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        model=model,
        cost_usd=prices.cost_usd(model, tokens_in, tokens_out),
    )


class BedrockConverseProvider:
    """``ModelProvider`` over a ``bedrock-runtime`` client from ``client_factory`` (called once, on first use)."""

    def __init__(self, client_factory: Callable[[], Any], prices: PriceTable | None = None) -> None:
        self._factory = client_factory
        self._client: Any = None
        self._prices = prices or PriceTable()

    def _get(self) -> Any:
        if self._client is None:
            self._client = self._factory()
        return self._client

    def complete(self, request: ModelRequest) -> ModelReply:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        params, names = converse_request(request)
        try:
            response = self._get().converse(**params)
        except ClientError as exc:
            raise map_client_error(str(exc.response.get("Error", {}).get("Code", ""))) from None
        except NoCredentialsError:
            raise ModelProviderError("credential_forbidden", "no AWS credentials are available for Bedrock") from None
        except BotoCoreError as exc:  # connection, timeout, parameter validation: the class name is safe to show
            name = type(exc).__name__
            if name.endswith(("TimeoutError", "ConnectionError", "ConnectionClosedError")) or "Endpoint" in name:
                raise ModelProviderError(
                    "service_unavailable", f"Bedrock could not be reached ({name})", retryable=True
                ) from None
            if name == "ParamValidationError":
                raise ModelProviderError("validation_error", "the Bedrock request is not valid for Converse") from None
            raise ModelProviderError("external_call_failed", "the Bedrock model call failed") from None
        return parse_response(response, names, request.model, self._prices)
