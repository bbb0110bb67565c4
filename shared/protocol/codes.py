"""Error codes (with their registered HTTP status) and event types, spelled exactly as the spec."""

from __future__ import annotations

# Error codes -> HTTP status (spec/v2/errors.json as generated into openwop-client 2.7.0).
VALIDATION_ERROR = "validation_error"
IDEMPOTENCY_KEY_INVALID = "idempotency_key_invalid"
UNSUPPORTED_STREAM_MODE = "unsupported_stream_mode"
UNAUTHENTICATED = "unauthenticated"
FORBIDDEN = "forbidden"
ID_TENANT_MISMATCH = "id_tenant_mismatch"
NOT_FOUND = "not_found"
PROTOCOL_VERSION_UNSUPPORTED = "protocol_version_unsupported"
CLIENT_VERSION_UNSUPPORTED = "client_version_unsupported"
RUN_TERMINAL = "run_terminal"
RUN_ALREADY_ACTIVE = "run_already_active"
RUN_STATE_CONFLICT = "run_state_conflict"
IDEMPOTENCY_KEY_MISMATCH = "idempotency_key_mismatch"
IDEMPOTENCY_IN_FLIGHT = "idempotency_in_flight"
REPLAY_MEMORY_SNAPSHOT_UNAVAILABLE = "replay_memory_snapshot_unavailable"
RUN_EXPIRED = "run_expired"
FORK_POINT_INVALID = "fork_point_invalid"
CAPABILITY_NOT_PROVIDED = "capability_not_provided"
CAPABILITY_REQUIRED = "capability_required"
INTERNAL_ERROR = "internal_error"
EVENT_TYPE_UNMAPPED = "event_type_unmapped"
SERVICE_UNAVAILABLE = "service_unavailable"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"  # the model gateway: the provider failed the call (decision 0143)
RATE_LIMITED = "rate_limited"
RESIDENCY_UNAVAILABLE = "residency_unavailable"
VERSION_CONFLICT = "version_conflict"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
INTERRUPT_TOKEN_INVALID = "interrupt_token_invalid"
INTERRUPT_ALREADY_RESOLVED = "interrupt_already_resolved"
INTERRUPT_EXPIRED = "interrupt_expired"
CREDENTIAL_FORBIDDEN = "credential_forbidden"
MOCK_PROVIDER_FORBIDDEN = "mock_provider_forbidden"
EVAL_GATE_UNMET = "eval_gate_unmet"
NO_ACTIVE_DEPLOYMENT = "no_active_deployment"  # RFC 0082 (client 2.7.0: 400); not in the generated registry
WEBHOOK_URL_REJECTED = "webhook_url_rejected"
INTEROP_VERSION_UNSUPPORTED = "interop_version_unsupported"  # interop.md §The floor: a refused negotiation
WEBHOOK_ENDPOINT_UNVERIFIED = "webhook_endpoint_unverified"
# Host decision (docs/decisions/0020-fork-point-retention-and-clock.md): not in the public registry; 410 like
# run_expired.
EVAL_RECORDED_FIXTURES_GONE = "eval_recorded_fixtures_gone"
# Host decision (docs/decisions/0047-local-mode-front-and-moto.md): the registry has no 405 code; a vendor code in
# the registry's vendor grammar.
METHOD_NOT_ALLOWED = "openwop-serverless.method_not_allowed"
# Host decision (docs/decisions/0111-safe-channels-rollback-strict-registration.md): no registered 409 code says "this
# channel has nothing earlier to return to"; a vendor code in the registry's vendor grammar.
NO_PREVIOUS_DEPLOYMENT = "openwop-serverless.no_previous_deployment"
# Host decision (docs/decisions/0143-agent-gateway.md): a session asked of a host-run agent (or a session route asked
# of a run that is not a session); a vendor code in the registry's vendor grammar.
AGENT_RUNTIME_MISMATCH = "openwop-serverless.agent_runtime_mismatch"

HTTP_STATUS: dict[str, int] = {
    VALIDATION_ERROR: 400,
    IDEMPOTENCY_KEY_INVALID: 400,
    UNSUPPORTED_STREAM_MODE: 400,
    UNAUTHENTICATED: 401,
    FORBIDDEN: 403,
    ID_TENANT_MISMATCH: 403,
    NOT_FOUND: 404,
    PROTOCOL_VERSION_UNSUPPORTED: 406,
    CLIENT_VERSION_UNSUPPORTED: 426,
    RUN_TERMINAL: 409,
    RUN_ALREADY_ACTIVE: 409,
    RUN_STATE_CONFLICT: 409,
    IDEMPOTENCY_KEY_MISMATCH: 409,
    IDEMPOTENCY_IN_FLIGHT: 409,
    REPLAY_MEMORY_SNAPSHOT_UNAVAILABLE: 409,
    VERSION_CONFLICT: 409,
    RUN_EXPIRED: 410,
    EVAL_RECORDED_FIXTURES_GONE: 410,
    METHOD_NOT_ALLOWED: 405,
    NO_PREVIOUS_DEPLOYMENT: 409,
    AGENT_RUNTIME_MISMATCH: 409,
    INTERRUPT_TOKEN_INVALID: 401,
    INTERRUPT_ALREADY_RESOLVED: 409,
    INTERRUPT_EXPIRED: 410,
    CREDENTIAL_FORBIDDEN: 403,
    MOCK_PROVIDER_FORBIDDEN: 403,
    EVAL_GATE_UNMET: 422,
    NO_ACTIVE_DEPLOYMENT: 400,
    WEBHOOK_URL_REJECTED: 400,
    INTEROP_VERSION_UNSUPPORTED: 400,
    WEBHOOK_ENDPOINT_UNVERIFIED: 400,
    PAYLOAD_TOO_LARGE: 413,
    UNSUPPORTED_MEDIA_TYPE: 415,
    FORK_POINT_INVALID: 422,
    CAPABILITY_NOT_PROVIDED: 422,
    CAPABILITY_REQUIRED: 422,
    RESIDENCY_UNAVAILABLE: 422,
    RATE_LIMITED: 429,
    INTERNAL_ERROR: 500,
    EVENT_TYPE_UNMAPPED: 500,
    SERVICE_UNAVAILABLE: 503,
    UPSTREAM_UNAVAILABLE: 502,
    "replay_source_missing": 404,  # REPLAY_SOURCE_MISSING below; an HTTP answer only of the model gateway (0143)
}

# Run-document codes (RunSnapshot.error.code, run.failed / node.failed error.code).
NODE_EXECUTION_FAILED = "node_execution_failed"
EXTERNAL_CALL_FAILED = "external_call_failed"
RUN_TIMEOUT = "run_timeout"
LOOP_LIMIT_EXCEEDED = "loop_limit_exceeded"
REPLAY_SOURCE_MISSING = "replay_source_missing"
REPLAY_DIVERGED_AT_REFUSAL = "replay_diverged_at_refusal"
PERSISTENCE_FAILED = "persistence_failed"
APPROVAL_REJECTED = "approval_rejected"
SESSION_EXPIRED = "session_expired"  # an external agent's session not completed by its expiresAt (decision 0143)

# Event types (v2 spellings).
RUN_STARTED = "run.started"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_CANCELLED = "run.cancelled"
NODE_STARTED = "node.started"
NODE_COMPLETED = "node.completed"
NODE_FAILED = "node.failed"
NODE_CANCELLED = "node.cancelled"
NODE_SKIPPED = "node.skipped"
AGENT_INVOCATION_STARTED = "agent.invocation-started"
AGENT_INVOCATION_COMPLETED = "agent.invocation-completed"
AGENT_TOOL_CALLED = "agent.tool-called"
AGENT_TOOL_RETURNED = "agent.tool-returned"
AGENT_DECIDED = "agent.decided"
PROVIDER_USAGE = "provider.usage"
EVAL_STARTED = "eval.started"
EVAL_SCORED = "eval.scored"
EVAL_COMPLETED = "eval.completed"
REPLAY_DIVERGED = "replay.diverged"
REPLAY_DIVERGED_AT_REFUSAL_EVENT = "replay.diverged-at-refusal"
RUN_PAUSED = "run.paused"
RUN_RESUMED = "run.resumed"
INTERRUPT_REQUESTED = "interrupt.requested"
INTERRUPT_RESOLVED = "interrupt.resolved"
NEGOTIATION_DECIDED = "negotiation.decided"

# A run in one of these statuses waits on a task token: its execution holds no Lambda (runs.md §Pause and resume,
# interrupt.md).
PARKED_STATUSES = frozenset({"paused", "waiting-approval"})

TERMINAL_RUN_EVENTS = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED})
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
NODE_TERMINAL_OUTCOMES = frozenset({NODE_COMPLETED, NODE_FAILED})

# streamMode "updates" admits these (events.md §3.1); "debug" admits everything.
UPDATES_PREFIXES = ("run.", "node.", "eval.", "replay.", "interrupt.", "artifact.")

EVAL_MODES = ("golden", "rubric", "adversarial", "regression", "live-shadow")
HOST_EVAL_MODES = ("golden", "rubric", "regression")

MAX_BULK_CANCEL_RUN_IDS = 100
"""runs.md §Bulk cancel: ``runIds[1..100]``; over the cap, ``400 validation_error`` with ``details.maxRunIds``."""

RUN_STATUSES = (
    "pending",
    "running",
    "paused",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "completed",
    "failed",
    "cancelling",
    "cancelled",
)
"""runs.md §Snapshot: every status a run can have (the ``GET /runs`` ``status`` filter's values)."""
