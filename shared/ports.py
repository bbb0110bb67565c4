"""Ports: the narrow interfaces the engine and services depend on.

Implementations live in ``shared.storage`` / ``shared.orchestration`` (real AWS or
moto) and are built only by ``shared.wiring``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

# A run takes new events, and may perform effects, only while its status is one of these.
WRITABLE = ("pending", "running")
# Limits of the stores that their callers plan by (the storage implements them, services batch by them):
# ``RunStore.put_aux_many`` writes this many items (each with its run's tombstone check) to a transaction,
AUX_PER_TRANSACTION = 50
# and a page of a run's stored log holds at most this many events (a longer log is read by Query).
EVENTS_PER_PAGE = 99


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def iso(self, ms: int | None = None) -> str: ...
    def sleep(self, seconds: float) -> None: ...


class Draws(Protocol):
    """A seeded generator (``IdSource.seeded``): the same seed draws the same sequence, on every host."""

    def choices(self, population: Sequence[float], *, k: int) -> list[float]: ...


class IdSource(Protocol):
    def ulid(self) -> str: ...
    def token(self, nbytes: int = 32) -> str: ...
    def event_id(self, run_id: str, seq: int) -> str: ...
    def seeded(self, seed: str) -> Draws: ...


@dataclass
class RunRecord:
    """The stored run item. ``data`` holds the immutable creation facts; the rest mutate."""

    run_id: str
    tenant: str
    status: str
    last_seq: int
    created_at: str
    data: dict[str, Any]
    state: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started_at: str | None = None
    completed_at: str | None = None
    execution_arn: str | None = None
    expires_at: int = 0
    summary: dict[str, Any] | None = None
    # Where a run that works in pages goes on (an eval fork: its next task, draft position, divergence), written
    # with the page's last append so it moves exactly when the page's events are stored.
    cursor: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", "workflow"))

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")


@dataclass
class ListPage:
    runs: list[RunRecord]
    next_key: dict[str, Any] | None


class RunStore(Protocol):
    def create_run(self, record: RunRecord, *, parent: str | None = None) -> None: ...
    def get_run(self, run_id: str, *, consistent: bool = True, include_expired: bool = False) -> RunRecord | None: ...
    def get_runs(
        self, run_ids: Sequence[str], *, include_expired: bool = False, state: bool = True
    ) -> dict[str, RunRecord]: ...
    def list_runs(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> ListPage: ...
    def list_run_ids(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> tuple[list[str], dict[str, Any] | None]: ...
    def set_execution(self, run_id: str, execution_arn: str) -> None: ...
    def update_status(self, run_id: str, status: str, *, allowed_from: Sequence[str]) -> bool: ...
    def put_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> None: ...
    def put_aux_many(self, entries: Sequence[tuple[str, str, dict[str, Any], int]]) -> set[str]:
        """``put_aux`` for many (runId, sk, value, expiresAt), batched; returns the runs whose tombstone refused
        their items (nothing of theirs is written)."""
        ...

    def tombstoned(self, run_ids: Sequence[str]) -> set[str]: ...
    def get_definitions(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]: ...
    def claim_effect(
        self, run_id: str, effect_key: str, value: dict[str, Any], expires_at: int, *, stale_before: str | None = None
    ) -> bool: ...
    def get_aux(self, run_id: str, sk: str) -> dict[str, Any] | None: ...
    def get_definition(self, run_id: str) -> dict[str, Any] | None: ...
    def query_aux(
        self, run_id: str, prefix: str, *, between: tuple[str, str] | None = None
    ) -> list[tuple[str, dict[str, Any]]]: ...
    def is_tombstoned(self, run_id: str) -> bool: ...
    def set_progress(self, run_id: str, expected_last_seq: int, new_last_seq: int, updates: dict[str, Any]) -> None: ...
    def write_tombstone(self, run_id: str, tenant: str, at: str, expires_at: int) -> None: ...
    def delete_run_item(self, run_id: str) -> bool: ...
    def delete_aux_all(self, run_id: str) -> int: ...
    def delete_tombstone(self, run_id: str) -> None: ...


class EventStore(Protocol):
    def append_events(
        self,
        run_id: str,
        expected_next_seq: int,
        events: Sequence[dict[str, Any]],
        *,
        run_updates: dict[str, Any] | None = None,
        require_status: Sequence[str] | None = None,
        expires_at: int = 0,
    ) -> int: ...
    def read_events(self, run_id: str, after_seq: int = -1, *, limit: int | None = None) -> list[dict[str, Any]]: ...
    def read_logs(self, last_seqs: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]: ...
    def iter_events(
        self, run_id: str, after_seq: int = -1, upto_seq: int | None = None, *, limit: int | None = None
    ) -> Iterator[list[dict[str, Any]]]: ...
    def copy_events(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int) -> int: ...
    def seed_log(
        self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int, owner: dict[str, Any]
    ) -> int: ...
    def read_page(self, run_id: str, after_seq: int, limit: int | None = None) -> list[dict[str, Any]]: ...
    def delete_all(self, run_id: str) -> int: ...
    def events_from_image(self, image: dict[str, Any]) -> list[tuple[int, dict[str, Any] | None]]:
        """The (sequence, event) pairs an item image of this store holds (a stream record's NewImage: a page of
        events or one); an event is None when it is stored out of line or in v1 vocabulary (read it with
        ``read_events``, which translates it)."""
        ...


@dataclass
class ToolCallRecord:
    run_id: str
    call_key: str
    agent_id: str
    invocation_id: str
    delegate: bool
    tool_name: str
    call_id: str
    args: Any
    status: str  # ok | error | forbidden | rate_limited
    result: Any = None
    error: dict[str, Any] | None = None
    source: str = "live"  # live | fixture | recorded
    started_at: str = ""
    duration_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ToolCallStore(Protocol):
    def put_call(self, record: ToolCallRecord, expires_at: int) -> bool: ...
    def put_calls(
        self, run_id: str, records: list[ToolCallRecord], expires_at: int, aux: tuple[str, dict[str, Any]] | None = None
    ) -> None: ...
    def put_counted_call(
        self, record: ToolCallRecord, expires_at: int, counter: tuple[str, str], expected: int
    ) -> tuple[str, int | None]: ...
    def get_call(self, run_id: str, call_key: str) -> ToolCallRecord | None: ...
    def list_calls(self, run_id: str, *, between: tuple[str, str] | None = None) -> list[ToolCallRecord]: ...
    def get_calls(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], ToolCallRecord]: ...
    def delete_all(self, run_id: str) -> int: ...


class HostStore(Protocol):
    """Host-wide items: API key hashes, eval suites, tool counters, the effect ledger."""

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None: ...
    def get_item_and_run(self, pk: str, sk: str, run_id: str) -> tuple[dict[str, Any] | None, int | None]: ...
    def put_item(
        self,
        pk: str,
        sk: str,
        value: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
        expires_at: int = 0,
        compress: bool = False,
    ) -> bool: ...
    def query(self, pk: str, prefix: str = "", *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]: ...
    def query_page(self, pk: str, limit: int, *, after: str = "") -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """At most ``limit`` items of the partition whose sort key is above ``after``, in sort-key order, read by
        one Query; and whether the partition may hold more past them."""
        ...

    def delete_item(
        self, pk: str, sk: str, *, if_equals: dict[str, Any] | None = None, compress: bool = False
    ) -> bool: ...
    def put_effect(self, pk: str, sk: str, value: dict[str, Any], *, run_id: str, expires_at: int) -> bool: ...
    def delete_prefix(self, pk: str, prefix: str) -> int: ...
    def counter_read(self, pk: str, sk: str) -> int: ...
    def add_counter(self, pk: str, sk: str, *, expires_at: int) -> int: ...


class IdempotencyStore(Protocol):
    """The stored answers of ``Idempotency-Key`` requests (written by Powertools); erasure removes them."""

    def delete_record(self, record_id: str) -> None: ...


class BlobStore(Protocol):
    def put_json(self, key: str, value: Any) -> None: ...
    def get_json(self, key: str) -> Any | None: ...
    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None: ...
    def get_range(self, key: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of an object (fewer at its end); None when the object is gone."""
        ...

    def delete_prefix(self, prefix: str) -> int: ...
    def list_keys(self, prefix: str) -> list[str]: ...


class SecretNotFoundError(Exception):
    """No such secret (or it cannot be read); the message never carries a value."""


class SecretStore(Protocol):
    """Secret values by id (name or ARN), cached by the implementation for ``max_age_s`` (default: a day)."""

    def get_secret(self, secret_id: str, *, max_age_s: int | None = None) -> str: ...
    def put_secret(self, name: str, value: str, *, description: str = "") -> bool: ...
    def update_secret(self, secret_id: str, value: str) -> None: ...
    def delete_secret(self, name: str) -> bool: ...


class Cipher(Protocol):
    """Encryption of small values (at most 4 KB) under a named key of the manifest (``manifest.KEYS``), bound to
    a context: a ciphertext only decrypts with the context it was sealed with (so it cannot be moved to another
    item). Who may encrypt or decrypt is the platform's grant, not the caller's choice."""

    def encrypt(self, key: str, plaintext: bytes, context: dict[str, str]) -> bytes: ...
    def decrypt(self, key: str, ciphertext: bytes, context: dict[str, str]) -> bytes: ...


class StackLookupError(Exception):
    """A deployed stack's outputs cannot be read; ``reason`` is one line for the operator (no secret, no trace)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StackOutputs(Protocol):
    """A deployed stack's CloudFormation outputs (OutputKey -> OutputValue). Used by the operator CLI only."""

    def read_outputs(self, stack_name: str) -> dict[str, str]: ...


@dataclass(frozen=True)
class QueueMessage:
    """One message for a FIFO queue: ``group`` orders it (messages of one group are handed out one at a time, in
    send order); ``dedup_id`` makes a re-send within the queue's deduplication window a no-op."""

    body: str
    group: str
    dedup_id: str


class Queue(Protocol):
    """A message queue with a dead-letter queue behind it (SQS FIFO). Consumers are invoked by the platform
    (an event source mapping); they only ever push a message's next attempt back."""

    def send_batch(self, messages: Sequence[QueueMessage]) -> int: ...
    def retry_later(self, receipts: Sequence[tuple[str, int]]) -> None: ...


@dataclass(frozen=True)
class RateLimit:
    """A token bucket: ``burst`` tokens at most, refilled at ``per_second``; each request takes one."""

    per_second: float
    burst: int


@dataclass(frozen=True)
class RateDecision:
    """A bucket's answer: ``allowed``, or refused until ``retry_after_ms`` from now (when a token is back)."""

    allowed: bool
    retry_after_ms: int = 0


class RateLimiter(Protocol):
    """Token buckets by key (a tenant and a route class), shared by every instance of every function: each
    ``take`` is one conditional write of the bucket's item, and refused takes change nothing."""

    def take(self, key: str, limit: RateLimit, now_ms: int) -> RateDecision: ...


class Orchestrator(Protocol):
    def start(
        self, machine: str, run_id: str, payload: dict[str, Any], *, generation: int = 0, redelivery: bool = False
    ) -> str:
        """Start (once: executions are named) an execution of ``machine`` for ``run_id``; its ARN. ``redelivery``:
        a second execution of the same generation (the durability hook's duplicate delivery, never the engine)."""
        ...

    def stop(self, execution_arn: str) -> None: ...
    def resume(self, task_token: str) -> None: ...


class EffectDeniedError(Exception):
    """An effect seam refused an effect (default-deny in replay)."""


class EffectGuard(Protocol):
    def check(self, seam: str) -> None: ...


class EgressRefusedError(Exception):
    """The egress guard refused an outbound call's destination before connecting; ``reason`` is safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransportError(Exception):
    """An outbound call failed without a result (timeout, connection, protocol, oversized answer).

    ``reason`` is safe to show: it names no address, header or credential.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


class HttpTransport(Protocol):
    """Outbound HTTP through the egress guard: resolve once, refuse guarded addresses, connect to what was checked."""

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *, timeout_s: float, max_bytes: int
    ) -> HttpReply: ...
    def check(self, url: str) -> bool:
        """Resolve ``url``'s host through the guard without connecting: ``EgressRefusedError`` when refused,
        ``TransportError`` when malformed; True when the destination passes only because the operator allowlisted
        it (a private or loopback address in ``EGRESS_ALLOW``), False for a public one."""
        ...


@dataclass(frozen=True)
class McpDiscovery:
    """What one ``server/discover`` probe at ``revision`` got back from an MCP server that answered it.

    ``result``: the ``DiscoverResult`` as the server sent it (None when the server refused the request);
    ``supported``: the revisions the server named (its ``supportedVersions``, or the ``supported`` list of its
    ``-32022`` refusal; empty when it named none); ``refusal``: the server's error when it refused (safe text, its
    JSON-RPC code and message). The server speaks ``revision`` only when ``accepted``.
    """

    revision: str
    result: dict[str, Any] | None
    supported: tuple[str, ...] = ()
    refusal: str | None = None

    @property
    def accepted(self) -> bool:
        return self.result is not None and self.revision in self.supported


@dataclass(frozen=True)
class McpOp:
    """One request of an exchange after the probe: ``tools/call`` (``name``, ``arguments``, ``meta`` sent as
    ``_meta``), one ``tools/list`` page (``cursor``) or ``resources/read`` (``uri``)."""

    method: str
    name: str = ""
    arguments: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    cursor: str | None = None
    uri: str = ""


@dataclass(frozen=True)
class McpExchange:
    """What one exchange got: the probe's answer, then (only when the server accepted the revision) the request's
    result as the server sent it, or why it has none (``error``: the request failed after the probe)."""

    discovery: McpDiscovery
    result: dict[str, Any] | None = None
    error: TransportError | EgressRefusedError | None = None


class McpTransport(Protocol):
    """An MCP client (streamable HTTP) through the same egress guard, pinned to one revision.

    ``discover`` probes the server at a revision and reports what it answered (``TransportError`` only when no MCP
    answer came: no connection, a timeout, an answer that is not MCP). Every other method takes an accepted
    probe (``discovered``) and speaks exactly its revision, with no second probe and no handshake. ``exchange``
    is the probe and one request together: one name lookup, one connection pool, one ``timeout_s`` for both; the
    request is sent only when the server accepted the revision. Results are the server's JSON, unaltered."""

    def discover(self, url: str, headers: dict[str, str], *, revision: str, timeout_s: float) -> McpDiscovery: ...
    def exchange(
        self, url: str, headers: dict[str, str], op: McpOp, *, revision: str, timeout_s: float
    ) -> McpExchange: ...
    def list_tools(
        self, url: str, headers: dict[str, str], *, discovered: McpDiscovery, timeout_s: float
    ) -> list[dict[str, Any]]: ...
    def call_tool(
        self,
        url: str,
        headers: dict[str, str],
        name: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any],
        discovered: McpDiscovery,
        timeout_s: float,
    ) -> dict[str, Any]: ...


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

    def check_mock(self, config: Any) -> None:
        """Raise ``ModelProviderError("validation_error", ...)`` unless ``config`` is a valid mock configuration."""
        ...


AttrValue = str | bool | int | float | Sequence[str]


class Span(Protocol):
    """One open span: attributes may be added (and the name changed) until it ends."""

    def set(self, key: str, value: AttrValue) -> None: ...
    def rename(self, name: str) -> None: ...
    def fail(self, error_type: str) -> None:
        """Mark the span failed with ``error.type`` (a spec error code or a class name; never a message)."""
        ...


class Tracing(Protocol):
    """Spans of runs, nodes, model and tool calls (OpenTelemetry where it is on: ``shared/telemetry/otel.py``).

    ``span`` opens a span under the current one, or under ``parent`` (a W3C ``traceparent``: the trace context a run
    stored when it was created, so every task of the run joins one trace). ``current`` is the open span's
    ``traceparent`` (None when tracing is off). ``capture_content`` (an operator's opt-in) allows prompt, message
    and tool-argument text in attributes; without it no span carries any. ``flush`` exports what has ended (the
    end of a Lambda invocation)."""

    capture_content: bool

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttrValue] | None = None,
        *,
        parent: str | None = None,
        kind: str = "internal",
    ) -> AbstractContextManager[Span]: ...
    def current(self) -> str | None: ...
    def flush(self) -> None: ...


class _NoSpan:
    def set(self, key: str, value: AttrValue) -> None:
        pass

    def rename(self, name: str) -> None:
        pass

    def fail(self, error_type: str) -> None:
        pass


_NO_SPAN = _NoSpan()


class NoTracing:
    """Tracing off (the default): no span, no trace context, nothing imported."""

    capture_content = False

    def span(
        self,
        name: str,
        attributes: Mapping[str, AttrValue] | None = None,
        *,
        parent: str | None = None,
        kind: str = "internal",
    ) -> AbstractContextManager[Span]:
        return nullcontext(_NO_SPAN)

    def current(self) -> str | None:
        return None

    def flush(self) -> None:
        pass


@dataclass
class Ports:
    runs: RunStore
    events: EventStore
    tool_calls: ToolCallStore
    host: HostStore
    blobs: BlobStore
    idempotency: IdempotencyStore
    orchestrator: Orchestrator
    clock: Clock
    ids: IdSource
    http: HttpTransport
    mcp: McpTransport
    secrets: SecretStore
    cipher: Cipher
    signing: HostStore  # webhook signing secrets (sealed by ``cipher``): a table only registration and delivery read
    settings: Any
    models: ModelProviders
    rate_limits: RateLimiter
    queues: dict[str, Queue] = field(default_factory=dict)
    tracing: Tracing = field(default_factory=NoTracing)
