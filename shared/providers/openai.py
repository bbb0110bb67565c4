"""The OpenAI-compatible chat-completions wire (OpenAI, vLLM, Ollama, LiteLLM, ...).

One ``ModelRequest`` is one ``POST {base_url}/chat/completions`` sent through the ``HttpTransport`` port, so the
egress guard decides whether the base URL may be reached (a private address needs ``EGRESS_ALLOW``). The API key,
when there is one, travels only in ``Authorization: Bearer``; no error reason, log line or exception carries it,
the prompt, the URL or the provider's own error text (which can quote the prompt).
"""

from __future__ import annotations

import email.utils
import json
import math
from typing import Any
from urllib.parse import urlsplit

from shared.ports import (
    ChatCompletion,
    EgressRefusedError,
    HttpTransport,
    ModelMessage,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    TransportError,
)
from shared.providers.names import ToolNames
from shared.providers.prices import PriceTable

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_ANSWER_BYTES = 8_000_000
FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refused",
}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _message(msg: ModelMessage, names: ToolNames) -> dict[str, Any]:
    if msg.role == "user":
        return {"role": "user", "content": msg.text or ""}
    if msg.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": msg.text}
        if msg.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": names.to_wire(c.name), "arguments": _dumps(c.arguments)},
                }
                for c in msg.tool_calls
            ]
        return out
    if msg.role == "tool":
        return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.text or ""}
    raise ModelProviderError("validation_error", "a conversation message has an unknown role")


def chat_request(request: ModelRequest) -> tuple[dict[str, Any], ToolNames]:
    """The chat-completions body for ``request`` (and the tool-name mapping to read the answer with)."""
    names = ToolNames(t.name for t in request.tools)
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages += [_message(m, names) for m in request.messages]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": names.to_wire(t.name), "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    return body, names


def retry_after_seconds(headers: dict[str, str]) -> float | None:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date read against the answer's own ``Date``
    header (this module reads no clock); None when absent or unreadable."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        when, now = email.utils.parsedate_tz(value), email.utils.parsedate_tz(headers.get("date") or "")
        if when is None or now is None:
            return None
        seconds = float(email.utils.mktime_tz(when) - email.utils.mktime_tz(now))
        return max(seconds, 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def map_status(status: int, headers: dict[str, str]) -> ModelProviderError:
    if status == 429:
        return ModelProviderError(
            "rate_limited",
            "the model provider is rate limiting (429)",
            retryable=True,
            retry_after_s=retry_after_seconds(headers),
        )
    if status in (401, 403):
        return ModelProviderError("credential_forbidden", f"the model provider refused the credential ({status})")
    if status in (400, 404, 422):
        return ModelProviderError("validation_error", f"the model provider refused the request ({status})")
    if status == 408 or status >= 500:
        return ModelProviderError(
            "service_unavailable", f"the model provider could not answer now ({status})", retryable=True
        )
    return ModelProviderError("external_call_failed", f"the model provider answered {status}")


def _arguments(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ModelProviderError("external_call_failed", "the model's tool-call arguments are not a JSON object")
    return value


def parse_answer(data: Any, names: ToolNames, request_model: str, prices: PriceTable) -> ModelReply:
    bad = ModelProviderError("external_call_failed", "the model provider's answer is not a chat completion")
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise bad
    choice = data["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise bad
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            raise bad
        calls.append(
            ModelToolCall(
                str(call.get("id", "")), names.to_catalog(str(fn.get("name", ""))), _arguments(fn.get("arguments"))
            )
        )
    content = message.get("content")
    text = content if isinstance(content, str) else None
    finish = FINISH_REASONS.get(str(choice.get("finish_reason")), "tool_use" if calls else "end_turn")
    usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
    tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    model = str(data.get("model") or request_model)
    rate_model = model if prices.rate(model) is not None else request_model
    return ModelReply(
        text=text,
        tool_calls=tuple(calls),
        stop_reason=finish,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        model=model,
        cost_usd=prices.cost_usd(rate_model, tokens_in, tokens_out),
    )


class OpenAiChatProvider:
    """``ModelProvider`` over the chat-completions wire, sent through ``http`` (the egress-guarded transport)."""

    def __init__(
        self, http: HttpTransport, prices: PriceTable | None = None, *, max_answer_bytes: int = MAX_ANSWER_BYTES
    ) -> None:
        self._http = http
        self._prices = prices or PriceTable()
        self._max = max_answer_bytes

    def complete(self, request: ModelRequest) -> ModelReply:
        body, names = chat_request(request)
        data = self._post(body, request.base_url, request.credential, request.timeout_s)
        return parse_answer(data, names, request.model, self._prices)

    def complete_chat(
        self, body: dict[str, Any], *, base_url: str | None, credential: str | None, timeout_s: float = 60.0
    ) -> ChatCompletion:
        """``body`` sent as it is (the model gateway's passthrough); the answer comes back unaltered once it is
        a chat completion (an object with a non-empty ``choices`` array of objects with a ``message``)."""
        data = self._post(body, base_url, credential, timeout_s)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise ModelProviderError("external_call_failed", "the model provider's answer is not a chat completion")
        if not all(isinstance(ch, dict) and isinstance(ch.get("message"), dict) for ch in choices):
            raise ModelProviderError("external_call_failed", "the model provider's answer is not a chat completion")
        usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
        tokens_in, tokens_out = _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens"))
        sent = str(body.get("model") or "")
        model = str(data.get("model") or sent)
        rate_model = model if self._prices.rate(model) is not None else sent
        return ChatCompletion(
            data, model, tokens_in, tokens_out, self._prices.cost_usd(rate_model, tokens_in, tokens_out)
        )

    def _post(self, body: dict[str, Any], base_url: str | None, credential: str | None, timeout_s: float) -> Any:
        base = base_url or DEFAULT_BASE_URL
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelProviderError(
                "validation_error", "the model provider's base URL must be an absolute http or https URL"
            )
        url = base.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if credential:
            headers["Authorization"] = f"Bearer {credential}"
        try:
            reply = self._http.send(
                "POST", url, headers, _dumps(body).encode(), timeout_s=timeout_s, max_bytes=self._max
            )
        except EgressRefusedError as exc:
            # the guard's reason is safe; it speaks of "the tool" because tools were its first callers
            raise ModelProviderError(
                "external_call_failed", exc.reason.replace("the tool's", "the model provider's")
            ) from None
        except TransportError as exc:
            if "larger than" in exc.reason:
                raise ModelProviderError(
                    "external_call_failed", f"the model provider's answer is larger than {self._max} bytes"
                ) from None
            raise ModelProviderError(
                "service_unavailable",
                "the model provider could not be reached or did not answer in time",
                retryable=True,
            ) from None
        if reply.status != 200:
            raise map_status(reply.status, reply.headers)
        try:
            return json.loads(reply.body)
        except ValueError:
            raise ModelProviderError("external_call_failed", "the model provider's answer is not JSON") from None


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
