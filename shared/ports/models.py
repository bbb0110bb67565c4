"""Model providers: a provider-neutral request and reply, the adapters and their error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class ModelProviderError(Exception):
    """A model call failed without an answer. ``code`` is a spec error code (``rate_limited``,
    ``external_call_failed``, ``validation_error``, ``credential_forbidden``, ``service_unavailable``,
    ``mock_provider_forbidden``; the ``error`` mock may raise the code its configuration names);
    ``reason`` is safe to show (no prompt, no credential, no address); ``retryable`` says whether the same request
    may be sent again; ``retry_after_s`` is the provider's hint when it gave one."""

    def __init__(self, code: str, reason: str, *, retryable: bool = False, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.retryable = retryable
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ModelToolCall:
    """A tool call the model asked for: ``call_id`` is the provider's id, ``arguments`` a JSON value (an object)."""

    call_id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class ModelMessage:
    """One message of the conversation, provider-neutral.

    ``role``: ``user`` (``text``), ``assistant`` (``text`` and/or ``tool_calls``) or ``tool`` (the answer to
    ``tool_call_id``: ``text`` is the tool result as JSON text, ``is_error`` marks a failed call).
    """

    role: str
    text: str | None = None
    tool_calls: tuple[ModelToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class ModelToolSpec:
    """A tool the model may call: the catalog name, a description and its JSON Schema for arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One model call. ``provider`` picks the adapter (``bedrock`` | ``openai`` | ``mock``); ``credential`` is the
    resolved secret value (an API key) or None (Bedrock uses the function role); ``base_url`` is the
    OpenAI-compatible endpoint; ``mock`` is the mock provider's configuration (``{"id": ..., ...}`` or
    ``{"script": [...]}``); ``turn`` is the 0-based model-call index within the invocation (the scripted mock
    answers with ``script[turn]``)."""

    provider: str
    model: str
    system: str
    messages: tuple[ModelMessage, ...]
    tools: tuple[ModelToolSpec, ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    credential: str | None = None
    base_url: str | None = None
    mock: dict[str, Any] | None = None
    turn: int = 0
    timeout_s: float = 60.0


@dataclass(frozen=True)
class ModelReply:
    """The model's answer: final ``text`` and/or ``tool_calls``; ``stop_reason`` is ``end_turn`` | ``tool_use`` |
    ``max_tokens`` | ``refused``; token counts as the provider reported them; ``cost_usd`` where a price is known;
    ``model`` as the provider stamped it."""

    text: str | None
    tool_calls: tuple[ModelToolCall, ...]
    stop_reason: str
    input_tokens: int
    output_tokens: int
    model: str
    cost_usd: float | None = None


@dataclass(frozen=True)
class ChatCompletion:
    """A chat-completions answer passed through as it came (the model gateway, decision 0143): ``body`` is the
    provider's JSON object; the token counts and ``model`` are read from it, ``cost_usd`` where a price is known."""

    body: dict[str, Any]
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None


class ModelProvider(Protocol):
    """One adapter per provider (``shared/providers/<name>.py``), reached through ``Ports.models``."""

    def complete(self, request: ModelRequest) -> ModelReply: ...


class ModelProviders(Protocol):
    """The providers this host runs, by canonical id; ``complete`` dispatches on ``request.provider``."""

    def names(self) -> tuple[str, ...]: ...
    def complete(self, request: ModelRequest) -> ModelReply: ...
    def mock_ids(self) -> tuple[str, ...]:
        """The mock-provider ids served here (empty where mocks are not served)."""
        ...

    def complete_chat(
        self, body: dict[str, Any], *, base_url: str | None, credential: str | None, timeout_s: float = 60.0
    ) -> ChatCompletion:
        """Send a chat-completions ``body`` as it is to the OpenAI-compatible provider (``base_url``, default
        OpenAI's) and answer its reply unaltered; raises ``ModelProviderError`` as ``complete`` does."""
        ...

    def check_mock(self, config: Any) -> None:
        """Raise ``ModelProviderError("validation_error", ...)`` unless ``config`` is a valid mock configuration."""
        ...
