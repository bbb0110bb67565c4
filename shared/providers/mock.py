"""The mock provider: the spec's canonical mock-provider catalog plus a scripted form. Deterministic, no I/O.

A configuration is the spec's ``configurable.ai.mockProvider`` shape, ``{"id": <catalog id>, "config": {...}}``,
or the scripted shorthand ``{"script": [<answer>, ...]}`` (the same as ``{"id": "openwop-serverless.script",
"config": {"script": [...]}}``). Catalog (see docs/decisions/0064-mock-provider-semantics.md for what is inferred):

- ``stream-text``: answers ``"".join(tokens)`` (default ``["mock", " response"]``) with ``finishReason`` (default
  ``stop``) and ``usage`` (default ``promptTokens = 1``, ``completionTokens = len(tokens)``, as the spec says);
  ``model`` defaults to ``mock-stream-text-v1``. ``delayMsPerToken`` is accepted (0..5000) and not slept: this port
  answers whole replies, and a mock that reads the clock would not be deterministic.
- ``tool-calls``: the first model call (``turn`` 0) answers the configured ``toolCalls`` (``{id?, name,
  arguments}``); every later call answers an empty final text, so an agent loop ends after one round of tools.
- ``error``: fails the call with ``code`` (default ``external_call_failed``), ``message``, ``retryable``;
  ``failAfterMs`` is accepted and not slept.
- ``usage-only``: no content, only ``usage``.
- scripted: ``{"script": [...], "cases"?: [{"whenInput": str, "script": [...]}]}``; the first case whose
  ``whenInput`` occurs in the task (the first user message) is the script, else ``script``. Answer ``k`` serves
  model call ``turn == k``: ``{"text"?, "toolCalls"?: [{"name", "arguments",
  "id"?}], "usage"?: {"inputTokens", "outputTokens"}, "error"?: {"code", "retryable"?, "message"?}}``. Past the
  end of the script the mock answers an empty final text (never repeats tool calls, so a loop always ends).

Token counts not given by the configuration are computed from sizes: input = ceil(UTF-8 bytes of the canonical
JSON of the request's system prompt, messages and tools / 4), output = ceil(bytes of the answer / 4). Equal
requests always get equal counts, so replay can compare them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from shared.ports import ModelProviderError, ModelReply, ModelRequest, ModelToolCall
from shared.providers.prices import MOCK, PriceTable

STREAM_TEXT = "stream-text"
TOOL_CALLS = "tool-calls"
ERROR = "error"
USAGE_ONLY = "usage-only"
SCRIPT = "openwop-serverless.script"
CANONICAL_IDS = (STREAM_TEXT, TOOL_CALLS, ERROR, USAGE_ONLY)
MOCK_PROVIDER_IDS = (*CANONICAL_IDS, SCRIPT)  # what Capabilities.testing.mockProviders lists

FINISH_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refused"}
_CODE = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
_CONFIG_KEYS = {
    STREAM_TEXT: {"tokens", "delayMsPerToken", "finishReason", "usage", "model"},
    TOOL_CALLS: {"toolCalls", "delayMsPerToken", "model"},
    ERROR: {"code", "message", "retryable", "failAfterMs"},
    USAGE_ONLY: {"usage", "model"},
    SCRIPT: {"script", "cases"},
}


def _invalid(reason: str) -> ModelProviderError:
    return ModelProviderError("validation_error", f"mockProvider: {reason}")


def _check_keys(
    value: Any, allowed: set[str], where: str, required: frozenset[str] | set[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{where} must be an object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _invalid(f"{where} has unknown key(s) {', '.join(unknown)[:200]}")
    missing = sorted(required - set(value))
    if missing:
        raise _invalid(f"{where} needs {', '.join(missing)}")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(f"{where} must be a non-negative integer")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where} must be a string")
    return value


def _tool_calls(value: Any, where: str) -> None:
    if not isinstance(value, list) or not value:
        raise _invalid(f"{where} must be a non-empty array")
    for i, call in enumerate(value):
        c = _check_keys(call, {"id", "name", "arguments"}, f"{where}[{i}]", {"name", "arguments"})
        if not isinstance(c["name"], str) or not c["name"]:
            raise _invalid(f"{where}[{i}].name must be a non-empty string")
        if not isinstance(c["arguments"], dict):
            raise _invalid(f"{where}[{i}].arguments must be an object")
        if "id" in c and (not isinstance(c["id"], str) or not c["id"]):
            raise _invalid(f"{where}[{i}].id must be a non-empty string")


def _spec_usage(value: Any, where: str) -> None:
    u = _check_keys(
        value, {"promptTokens", "completionTokens", "totalTokens"}, where, {"promptTokens", "completionTokens"}
    )
    for key, v in u.items():
        _count(v, f"{where}.{key}")


def _error(value: Any, where: str) -> None:
    e = _check_keys(value, {"code", "retryable", "message", "failAfterMs"}, where)
    if "code" in e and (not isinstance(e["code"], str) or not _CODE.match(e["code"])):
        raise _invalid(f"{where}.code must be an error code (lower case, digits, '_', '.', '-')")
    if "retryable" in e and not isinstance(e["retryable"], bool):
        raise _invalid(f"{where}.retryable must be a boolean")
    if "message" in e:
        _text(e["message"], f"{where}.message")
    if "failAfterMs" in e:
        _count(e["failAfterMs"], f"{where}.failAfterMs")


def _script(value: Any) -> None:
    if not isinstance(value, list):
        raise _invalid("script must be an array of answers")
    for k, answer in enumerate(value):
        a = _check_keys(answer, {"text", "toolCalls", "usage", "error"}, f"script[{k}]")
        if "error" in a:
            if len(a) != 1:
                raise _invalid(f"script[{k}] is an error or an answer, not both")
            _error(a["error"], f"script[{k}].error")
            continue
        if "text" in a:
            _text(a["text"], f"script[{k}].text")
        if "toolCalls" in a:
            _tool_calls(a["toolCalls"], f"script[{k}].toolCalls")
        if "usage" in a:
            u = _check_keys(
                a["usage"], {"inputTokens", "outputTokens"}, f"script[{k}].usage", {"inputTokens", "outputTokens"}
            )
            for key, v in u.items():
                _count(v, f"script[{k}].usage.{key}")


def _normalize(cfg: Any) -> tuple[str, dict[str, Any]]:
    """(catalog id, config) of a configuration, validated."""
    mock_id, config = _form(cfg)
    where = f"config of {mock_id}"
    config = _check_keys(config, _CONFIG_KEYS[mock_id], where)
    if "delayMsPerToken" in config and _count(config["delayMsPerToken"], f"{where}.delayMsPerToken") > 5000:
        raise _invalid(f"{where}.delayMsPerToken must be at most 5000")
    if "model" in config and not _text(config["model"], f"{where}.model"):
        raise _invalid(f"{where}.model must not be empty")
    check = _CONFIG_CHECKS.get(mock_id)
    if check is not None:
        check(config, where)
    return mock_id, config


def _form(cfg: Any) -> tuple[str, Any]:
    """(catalog id, unchecked config) of the scripted form or of ``{id, config}``."""
    if isinstance(cfg, dict) and "script" in cfg:
        _check_keys(cfg, {"script", "cases"}, "the scripted form")
        return SCRIPT, {k: cfg[k] for k in ("script", "cases") if k in cfg}
    c = _check_keys(cfg, {"id", "config"}, "the configuration", {"id"})
    mock_id = c["id"]
    if not isinstance(mock_id, str) or mock_id not in _CONFIG_KEYS:
        raise _invalid(f"unknown mock provider id (supported: {', '.join(MOCK_PROVIDER_IDS)})")
    return mock_id, c.get("config", {})


def _check_stream_text(config: dict[str, Any], where: str) -> None:
    tokens = config.get("tokens", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise _invalid(f"{where}.tokens must be an array of strings")
    if "finishReason" in config and config["finishReason"] not in FINISH_REASONS:
        raise _invalid(f"{where}.finishReason must be one of {', '.join(FINISH_REASONS)}")
    _check_usage(config, where)


def _check_usage(config: dict[str, Any], where: str) -> None:
    if "usage" in config:
        _spec_usage(config["usage"], f"{where}.usage")


def _check_tool_calls(config: dict[str, Any], where: str) -> None:
    if "toolCalls" not in config:
        raise _invalid(f"{where} needs toolCalls")
    _tool_calls(config["toolCalls"], f"{where}.toolCalls")


def _check_script(config: dict[str, Any], where: str) -> None:
    if "script" not in config:
        raise _invalid(f"{where} needs script")
    _script(config["script"])
    cases = config.get("cases", [])
    if not isinstance(cases, list) or len(cases) > 100:
        raise _invalid(f"{where}.cases must be an array of at most 100 cases")
    for i, case in enumerate(cases):
        case = _check_keys(case, {"whenInput", "script"}, f"{where}.cases[{i}]", {"whenInput", "script"})
        if not _text(case["whenInput"], f"{where}.cases[{i}].whenInput"):
            raise _invalid(f"{where}.cases[{i}].whenInput must not be empty")
        _script(case["script"])


# What each mock id checks of its config beyond its keys, the delay and the model.
_CONFIG_CHECKS: dict[str, Callable[[dict[str, Any], str], None]] = {
    STREAM_TEXT: _check_stream_text,
    USAGE_ONLY: _check_usage,
    TOOL_CALLS: _check_tool_calls,
    ERROR: _error,
    SCRIPT: _check_script,
}


def _pick_script(config: dict[str, Any], request: ModelRequest) -> list[dict[str, Any]]:
    """The scripted form's answers for this conversation: the first case whose ``whenInput`` occurs in the task
    (the first user message), else the default ``script``."""
    task = next((m.text or "" for m in request.messages if m.role == "user"), "")
    for case in config.get("cases", []):
        if case["whenInput"] in task:
            return list(case["script"])
    return list(config["script"])


def validate_mock_config(cfg: Any) -> None:
    """Raise ``ModelProviderError("validation_error", ...)`` unless ``cfg`` is a valid mock configuration (for the
    registration layer: an agent version or a run refuses a bad mock at once, not at its first model call)."""
    _normalize(cfg)


def _tokens(data: bytes) -> int:
    return math.ceil(len(data) / 4)


def request_tokens(request: ModelRequest) -> int:
    """The mock's deterministic input-token count for ``request``."""
    payload = {
        "system": request.system,
        "messages": [asdict(m) for m in request.messages],
        "tools": [asdict(t) for t in request.tools],
    }
    return max(1, _tokens(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()))


def _answer_tokens(text: str | None, calls: tuple[ModelToolCall, ...]) -> int:
    payload = {"text": text, "toolCalls": [asdict(c) for c in calls]}
    return (
        _tokens(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode())
        if (text or calls)
        else 0
    )


def _calls(items: list[dict[str, Any]], turn: int) -> tuple[ModelToolCall, ...]:
    return tuple(
        ModelToolCall(str(c.get("id") or f"call_{turn}_{i}"), c["name"], c["arguments"]) for i, c in enumerate(items)
    )


def _fail(e: dict[str, Any]) -> ModelProviderError:
    code = str(e.get("code", "external_call_failed"))
    return ModelProviderError(
        code,
        str(e.get("message") or f"the mock provider failed the call ({code})"),
        retryable=bool(e.get("retryable", False)),
    )


class MockProvider:
    """``ModelProvider`` that answers from its configuration (``request.mock``) alone."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self._prices = prices or PriceTable()

    def _reply(
        self, text: str | None, calls: tuple[ModelToolCall, ...], stop: str, tokens_in: int, tokens_out: int, model: str
    ) -> ModelReply:
        return ModelReply(
            text=text,
            tool_calls=calls,
            stop_reason=stop,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            model=model,
            cost_usd=self._prices.cost_usd(MOCK, tokens_in, tokens_out),
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        mock_id, config = _normalize(request.mock if request.mock is not None else {"id": STREAM_TEXT})
        model = str(
            config.get("model")
            or (
                request.model
                if mock_id == SCRIPT and request.model
                else f"mock-{'script' if mock_id == SCRIPT else mock_id}-v1"
            )
        )
        if mock_id == ERROR:
            raise _fail(config)
        if mock_id == STREAM_TEXT:
            tokens = config.get("tokens", ["mock", " response"])
            usage = config.get("usage", {"promptTokens": 1, "completionTokens": len(tokens)})
            stop = FINISH_REASONS[config.get("finishReason", "stop")]
            return self._reply("".join(tokens), (), stop, usage["promptTokens"], usage["completionTokens"], model)
        if mock_id == USAGE_ONLY:
            usage = config.get("usage", {"promptTokens": request_tokens(request), "completionTokens": 0})
            return self._reply(None, (), "end_turn", usage["promptTokens"], usage["completionTokens"], model)
        if mock_id == TOOL_CALLS:
            calls = _calls(config["toolCalls"], request.turn) if request.turn == 0 else ()
            text = None if calls else ""
            return self._reply(
                text,
                calls,
                "tool_use" if calls else "end_turn",
                request_tokens(request),
                _answer_tokens(text, calls),
                model,
            )
        script = _pick_script(config, request)
        answer: dict[str, Any] = script[request.turn] if 0 <= request.turn < len(script) else {"text": ""}
        if "error" in answer:
            raise _fail(answer["error"])
        calls = _calls(answer.get("toolCalls", []), request.turn)
        text = answer.get("text")
        if text is None and not calls:
            text = ""
        usage = answer.get("usage")
        tokens_in = usage["inputTokens"] if usage else request_tokens(request)
        tokens_out = usage["outputTokens"] if usage else _answer_tokens(text, calls)
        return self._reply(text, calls, "tool_use" if calls else "end_turn", tokens_in, tokens_out, model)
