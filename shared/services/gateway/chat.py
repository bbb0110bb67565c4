"""The model gateway's wire (decision 0143, pure): a chat-completions body checked, keyed, translated to a
provider-neutral ``ModelRequest`` and back, and an answer rendered as buffered server-sent events.

- ``check_body`` admits a JSON object whose members are all in ``ALLOWED`` and whose ``messages`` is a non-empty
  array; anything else is ``400 validation_error`` with the pointer of the offending member.
- ``compared`` is what is recorded and compared in a replay: the body without ``stream``, ``stream_options``,
  ``user`` and ``metadata`` (``model`` stays as the agent sent it); ``request_key`` is SHA-256 over its JCS form.
- ``to_model_request`` carries a body to the providers that take a ``ModelRequest`` (``bedrock``, ``mock``): text
  content, tools and tool calls. A member they cannot carry is refused at its pointer, never dropped silently.
- ``completion`` renders a ``ModelReply`` as a ``chat.completion``; ``sse`` renders any ``chat.completion`` as
  ``chat.completion.chunk`` events ending in ``data: [DONE]``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from shared.engine.canonical import canonical_bytes
from shared.errors import ValidationError, fault, invalid, invalid_at, pointer
from shared.ports import ModelMessage, ModelReply, ModelRequest, ModelToolCall, ModelToolSpec

ALLOWED = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "user",
    "metadata",
)
NOT_COMPARED = ("stream", "stream_options", "user", "metadata")
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refused": "content_filter"}
STOP_REASONS = {v: k for k, v in FINISH_REASONS.items()}


def check_body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid_at("", "type", "The request body must be a JSON object.")
    unknown = [k for k in body if k not in ALLOWED]
    if unknown:
        raise invalid(
            "The body has a member the model gateway does not take.",
            [fault(pointer([k]), "additionalProperties") for k in unknown],
        )
    messages = body.get("messages")
    if "messages" not in body:
        raise invalid_at("/messages", "required", "messages is required.")
    if not isinstance(messages, list) or not messages:
        raise invalid_at("/messages", "minItems", "messages must be a non-empty array.")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise invalid_at(pointer(["messages", i]), "type", "A message must be an object with a role.")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise invalid_at("/stream", "type", "stream must be a boolean.")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid_at("/stream_options", "type", "stream_options must be an object.")
    if "tools" in body and not isinstance(body["tools"], list):
        raise invalid_at("/tools", "type", "tools must be an array.")
    return body


def compared(body: dict[str, Any]) -> dict[str, Any]:
    """The request as recorded and compared: everything but how it is delivered and who the agent says it is."""
    return {k: v for k, v in body.items() if k not in NOT_COMPARED}


def request_key(body: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(compared(body))).hexdigest()


def streamed(body: dict[str, Any]) -> bool:
    return body.get("stream") is True


def include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


# --------------------------------------------------------------------------- chat body -> ModelRequest


def _cannot(at: list[Any], what: str = "This provider cannot carry this member.") -> ValidationError:
    return invalid_at(pointer(at), "unsupported", what)


def _text(content: Any, at: list[Any]) -> str | None:
    """Text content: a string, null, or an array of ``{"type": "text", "text"}`` parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid_at(pointer(at), "type", "content must be a string or an array of text parts.")
    out = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise _cannot([*at, j], "This provider takes text content parts only.")
        extra = [k for k in part if k not in ("type", "text")]
        if extra:
            raise _cannot([*at, j, extra[0]])
        out.append(part["text"])
    return "".join(out)


def _arguments(raw: Any, at: list[Any]) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise invalid_at(pointer(at), "type", "Tool-call arguments must be a JSON object in a string.")
    return value


def _tool_calls(calls: Any, at: list[Any]) -> tuple[ModelToolCall, ...]:
    if not isinstance(calls, list):
        raise invalid_at(pointer(at), "type", "tool_calls must be an array.")
    out = []
    for j, call in enumerate(calls):
        where = [*at, j]
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise invalid_at(pointer(where), "type", "A tool call must be an object with a function.")
        extra = [k for k in call if k not in ("id", "type", "function")]
        if extra:
            raise _cannot([*where, extra[0]])
        if call.get("type", "function") != "function":
            raise _cannot([*where, "type"], "Only function tool calls are carried.")
        fn = call["function"]
        extra = [k for k in fn if k not in ("name", "arguments")]
        if extra:
            raise _cannot([*where, "function", extra[0]])
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid_at(pointer([*where, "function", "name"]), "type", "A tool call needs a function name.")
        args = _arguments(fn.get("arguments"), [*where, "function", "arguments"])
        out.append(ModelToolCall(str(call.get("id") or f"call_{j}"), fn["name"], args))
    return tuple(out)


_MESSAGE_MEMBERS = {
    "system": ("role", "content"),
    "developer": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "content", "tool_calls"),
    "tool": ("role", "content", "tool_call_id"),
}


def _conversation(messages: list[dict[str, Any]]) -> tuple[str, tuple[ModelMessage, ...]]:
    system: list[str] = []
    out: list[ModelMessage] = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role not in _MESSAGE_MEMBERS:
            raise _cannot(["messages", i, "role"], "This provider takes system, developer, user, assistant and tool.")
        extra = [k for k in m if k not in _MESSAGE_MEMBERS[role]]
        # an assistant's empty refusal (null) is how some clients echo an answer back: nothing to carry
        extra = [k for k in extra if not (role == "assistant" and k == "refusal" and m[k] is None)]
        if extra:
            raise _cannot(["messages", i, extra[0]])
        text = _text(m.get("content"), ["messages", i, "content"])
        if role in ("system", "developer"):
            system.append(text or "")
        elif role == "user":
            out.append(ModelMessage("user", text or ""))
        elif role == "assistant":
            calls = _tool_calls(m["tool_calls"], ["messages", i, "tool_calls"]) if m.get("tool_calls") else ()
            out.append(ModelMessage("assistant", text, calls))
        else:
            if not isinstance(m.get("tool_call_id"), str):
                raise invalid_at(pointer(["messages", i, "tool_call_id"]), "required", "A tool message names its call.")
            out.append(ModelMessage("tool", text or "", tool_call_id=m["tool_call_id"]))
    return "\n\n".join(system), tuple(out)


def _tools(tools: list[Any]) -> tuple[ModelToolSpec, ...]:
    out = []
    for j, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise _cannot(["tools", j], "This provider takes function tools only.")
        extra = [k for k in tool if k not in ("type", "function")]
        if extra:
            raise _cannot(["tools", j, extra[0]])
        fn = tool["function"]
        # ``strict`` asks the provider to hold its arguments to the schema; the schema itself is carried
        extra = [k for k in fn if k not in ("name", "description", "parameters", "strict")]
        if extra:
            raise _cannot(["tools", j, "function", extra[0]])
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid_at(pointer(["tools", j, "function", "name"]), "type", "A tool needs a name.")
        params = fn.get("parameters") or {"type": "object"}
        if not isinstance(params, dict):
            raise invalid_at(pointer(["tools", j, "function", "parameters"]), "type", "parameters must be an object.")
        out.append(ModelToolSpec(fn["name"], str(fn.get("description") or ""), params))
    return tuple(out)


def _number(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_at(pointer([name]), "type", f"{name} must be a number.")
    return float(value)


def _carried_defaults(body: dict[str, Any]) -> None:
    """Members a ``ModelRequest`` cannot carry: accepted only at the value that asks for nothing."""
    if body.get("tool_choice") not in (None, "auto"):
        raise _cannot(["tool_choice"], "This provider takes tool_choice auto only.")
    if body.get("parallel_tool_calls") not in (None, True):
        raise _cannot(["parallel_tool_calls"])
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise _cannot(["response_format"], "This provider takes text responses only.")
    for name in ("top_p", "stop", "seed"):
        if body.get(name) is not None:
            raise _cannot([name])


def to_model_request(
    body: dict[str, Any], binding: dict[str, Any], *, turn: int, credential: str | None = None
) -> ModelRequest:
    """``body`` for a provider that takes a ``ModelRequest``, bound to the version's ``binding`` (provider, model,
    its temperature and max tokens unless the body sets them, the mock configuration)."""
    _carried_defaults(body)
    system, conversation = _conversation(body["messages"])
    temperature = _number(body, "temperature")
    if temperature is None and binding.get("temperature") is not None:
        temperature = float(binding["temperature"])
    limit = _number(body, "max_completion_tokens")
    limit = _number(body, "max_tokens") if limit is None else limit
    if limit is None and binding.get("maxTokens") is not None:
        limit = float(binding["maxTokens"])
    return ModelRequest(
        provider=str(binding.get("provider", "")),
        model=str(binding.get("model", "")),
        system=system,
        messages=conversation,
        tools=_tools(body.get("tools") or []),
        temperature=temperature,
        max_tokens=None if limit is None else int(limit),
        credential=credential,
        mock=binding.get("mockProvider"),
        turn=turn,
    )


# --------------------------------------------------------------------------- ModelReply -> chat.completion


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def completion(reply: ModelReply, completion_id: str, created: int) -> dict[str, Any]:
    """``reply`` as an OpenAI ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": t.call_id, "type": "function", "function": {"name": t.name, "arguments": dumps(t.arguments)}}
            for t in reply.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(reply.stop_reason, "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def summary(answer: dict[str, Any]) -> dict[str, Any]:
    """What the model-call log keeps of an answer besides the answer itself (``text``, ``toolCalls``,
    ``stopReason``): the fields a host agent's entries have, read from the first choice."""
    choices = answer.get("choices") if isinstance(answer.get("choices"), list) else []
    message = (choices[0].get("message") if choices and isinstance(choices[0], dict) else None) or {}
    calls = []
    for call in message.get("tool_calls") or []:
        fn = (call.get("function") if isinstance(call, dict) else None) or {}
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw  # kept as the model wrote it: the gateway passes answers through, it does not judge them
        calls.append({"id": str(call.get("id", "")), "name": str(fn.get("name", "")), "arguments": args})
    content = message.get("content")
    finish = str(choices[0].get("finish_reason")) if choices and isinstance(choices[0], dict) else "stop"
    return {
        "text": content if isinstance(content, str) else None,
        "toolCalls": calls,
        "stopReason": STOP_REASONS.get(finish, "tool_use" if calls else "end_turn"),
    }


# --------------------------------------------------------------------------- chat.completion -> SSE


def _event(value: Any) -> bytes:
    return b"data: " + dumps(value).encode() + b"\n\n"


def sse(answer: dict[str, Any], *, usage: bool) -> bytes:
    """A whole ``chat.completion`` as the chunks a streaming call gets, per choice: the role and content, each
    tool call as a delta with its ``index``, the ``finish_reason``; then the usage chunk when ``usage`` (the
    request's ``stream_options.include_usage``), then ``data: [DONE]``."""
    base: dict[str, Any] = {
        "id": answer.get("id"),
        "object": "chat.completion.chunk",
        "created": answer.get("created"),
        "model": answer.get("model"),
    }
    if answer.get("system_fingerprint") is not None:
        base["system_fingerprint"] = answer["system_fingerprint"]
    if usage:
        base["usage"] = None

    def chunk(index: int, delta: dict[str, Any], finish: Any = None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _event({**base, "choices": [choice]})

    out: list[bytes] = []
    for n, choice in enumerate(answer.get("choices") or []):
        index = choice.get("index", n)
        message = choice.get("message") or {}
        first: dict[str, Any] = {"role": message.get("role", "assistant"), "content": message.get("content")}
        if message.get("refusal") is not None:
            first["refusal"] = message["refusal"]
        out.append(chunk(index, first))
        for k, call in enumerate(message.get("tool_calls") or []):
            out.append(chunk(index, {"tool_calls": [{"index": k, **call}]}))
        out.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if usage:
        out.append(_event({**base, "choices": [], "usage": answer.get("usage")}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)
