"""The ProtocolError tree: spec code, HTTP status, safe message, details.

Nothing below services picks an HTTP status; the one place that turns these into
the wire envelope is ``functions/_common/api.py``.
"""

from __future__ import annotations

from typing import Any

from shared.protocol import codes


class ProtocolError(Exception):
    code: str = codes.INTERNAL_ERROR
    default_message = "The request could not be completed."

    def __init__(self, message: str | None = None, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details = details
        super().__init__(self.message)

    @property
    def status(self) -> int:
        return codes.HTTP_STATUS[self.code]

    def envelope(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class ValidationError(ProtocolError):
    code = codes.VALIDATION_ERROR
    default_message = "The request is not valid."


MAX_FAULTS = 10
MAX_POINTER_SEGMENT = 128  # a member name longer than this is cut in a pointer (never a whole echoed body)
_FAULT_MESSAGES = {
    "required": "A required member is missing.",
    "additionalProperties": "This member is not allowed here.",
    "unsupported": "This host does not serve this member.",
    "enum": "The value is not one of the allowed values.",
    "const": "The value is not the allowed value.",
    "type": "The value has the wrong type.",
    "pattern": "The value does not match the required pattern.",
    "format": "The value does not have the required format.",
    "minLength": "The value is too short.",
    "maxLength": "The value is too long.",
    "minItems": "The list has too few items.",
    "maxItems": "The list has too many items.",
    "minimum": "The number is too small.",
    "maximum": "The number is too large.",
    "unique": "The value must be unique.",
    "oneOf": "The value matches none (or more than one) of the allowed forms.",
    "anyOf": "The value matches none of the allowed forms.",
}


def pointer(parts: Any = ()) -> str:
    """An RFC 6901 JSON Pointer to ``parts`` of the request body: ``""`` is the whole body."""
    return "".join("/" + str(p)[:MAX_POINTER_SEGMENT].replace("~", "~0").replace("/", "~1") for p in parts)


def fault(at: str, keyword: str, message: str | None = None, *, parameter: str | None = None) -> dict[str, str]:
    """One entry of ``details.errors``: where (an RFC 6901 JSON Pointer into the request body; ``""`` the whole
    body), what rule (a schema keyword or a host word), and a fixed text that never carries the offending value.
    A refusal of a path or query parameter points at ``""`` and names the ``parameter``."""
    entry = {
        "pointer": at,
        "keyword": keyword,
        "message": message or _FAULT_MESSAGES.get(keyword, f"The value fails the {keyword} rule."),
    }
    if parameter is not None:
        entry["parameter"] = parameter[:MAX_POINTER_SEGMENT]
    return entry


def invalid(message: str, faults: list[dict[str, str]]) -> ValidationError:
    """``400 validation_error`` with ``details.errors`` (at most ``MAX_FAULTS``)."""
    return ValidationError(message, {"errors": faults[:MAX_FAULTS]})


def invalid_at(at: str, keyword: str, message: str) -> ValidationError:
    """``400 validation_error`` with ``message`` and one ``details.errors`` entry at ``at`` saying the same."""
    return invalid(message, [fault(at, keyword, message)])


def invalid_parameter(name: str, message: str) -> ValidationError:
    """``400 validation_error`` for a path or query parameter: one entry naming it."""
    return invalid(message, [fault("", "pattern", message, parameter=name)])


class WebhookUrlRejectedError(ProtocolError):
    code = codes.WEBHOOK_URL_REJECTED
    default_message = "The webhook URL is not allowed."


class WebhookEndpointUnverifiedError(ProtocolError):
    code = codes.WEBHOOK_ENDPOINT_UNVERIFIED
    default_message = "The webhook endpoint did not answer the verification challenge."


class InteropVersionUnsupportedError(ProtocolError):
    code = codes.INTEROP_VERSION_UNSUPPORTED
    default_message = "The peer does not speak a protocol revision this host negotiates."


class PayloadTooLargeError(ProtocolError):
    code = codes.PAYLOAD_TOO_LARGE
    default_message = "The request body is larger than limits.maxRequestBodyBytes."


class UnsupportedMediaTypeError(ProtocolError):
    code = codes.UNSUPPORTED_MEDIA_TYPE
    default_message = "The request body must be application/json."


class MethodNotAllowedError(ProtocolError):
    code = codes.METHOD_NOT_ALLOWED
    default_message = "This method is not served here."


class UnusableReferenceError(ValidationError):
    """RFC 0251 §C / RFC 0252 §C: one fixed answer for every unusable baseline or source run. A registration names
    the member that named it (``at``: the same pointer whatever made the run unusable)."""

    default_message = "The request names a run that cannot be used here."

    def __init__(self, at: str | None = None) -> None:
        super().__init__(
            self.default_message,
            None if at is None else {"errors": [fault(at, "usable", "This run cannot be used here.")]},
        )


class IdempotencyKeyInvalidError(ProtocolError):
    code = codes.IDEMPOTENCY_KEY_INVALID
    default_message = "The Idempotency-Key header is not valid."


class UnsupportedStreamModeError(ProtocolError):
    code = codes.UNSUPPORTED_STREAM_MODE
    default_message = "The streamMode is not supported."


class UnauthenticatedError(ProtocolError):
    code = codes.UNAUTHENTICATED
    default_message = "A valid bearer credential is required."


class ForbiddenError(ProtocolError):
    code = codes.FORBIDDEN
    default_message = "The credential may not do this."


class IdTenantMismatchError(ProtocolError):
    code = codes.ID_TENANT_MISMATCH
    default_message = "The id belongs to another tenant."


class NotFoundError(ProtocolError):
    code = codes.NOT_FOUND
    default_message = "Not found."


class ProtocolVersionUnsupportedError(ProtocolError):
    code = codes.PROTOCOL_VERSION_UNSUPPORTED
    default_message = "The requested protocol major is not served here."


class ClientVersionUnsupportedError(ProtocolError):
    code = codes.CLIENT_VERSION_UNSUPPORTED
    default_message = "This client is older than the oldest this host serves."


class RunTerminalError(ProtocolError):
    code = codes.RUN_TERMINAL
    default_message = "The run is already terminal."


class RunAlreadyActiveError(ProtocolError):
    code = codes.RUN_ALREADY_ACTIVE
    default_message = "A run for this scopeId is still active."


class RunStateConflictError(ProtocolError):
    code = codes.RUN_STATE_CONFLICT
    default_message = "The run is not in a state that allows this."


class IdempotencyKeyMismatchError(ProtocolError):
    code = codes.IDEMPOTENCY_KEY_MISMATCH
    default_message = "The Idempotency-Key was used with a different request."


class IdempotencyInFlightError(ProtocolError):
    code = codes.IDEMPOTENCY_IN_FLIGHT
    default_message = "A request with this Idempotency-Key is still in flight."


class VersionConflictError(ProtocolError):
    """A different eval-suite document is already registered under this suiteId and version."""

    code = codes.VERSION_CONFLICT
    default_message = "Another document is already registered under this suiteId and version."


class RunExpiredError(ProtocolError):
    code = codes.RUN_EXPIRED
    default_message = "The run history this needs is past retention."


class EvalRecordedFixturesGoneError(ProtocolError):
    code = codes.EVAL_RECORDED_FIXTURES_GONE
    default_message = "The recorded fixtures this eval run used have been erased."


class ForkPointInvalidError(ProtocolError):
    code = codes.FORK_POINT_INVALID
    default_message = "fromSeq does not name a forkable event of the source run."


class CapabilityNotProvidedError(ProtocolError):
    code = codes.CAPABILITY_NOT_PROVIDED
    default_message = "This host does not provide that capability."


class CapabilityRequiredError(ProtocolError):
    """A workflow needs a capability this host does not advertise (``details.requiredCapability``)."""

    code = codes.CAPABILITY_REQUIRED
    default_message = "The workflow needs a capability this host does not advertise."


class InternalError(ProtocolError):
    code = codes.INTERNAL_ERROR
    default_message = "Internal error."


class EventTypeUnmappedError(ProtocolError):
    """An era-2 row whose type the codemap does not name (and that carries no vendor prefix), or a malformed row:
    the read fails rather than guess (persistence.md, the reader rule)."""

    code = codes.EVENT_TYPE_UNMAPPED
    default_message = "A stored event cannot be read through the codemap."


class ServiceUnavailableError(ProtocolError):
    code = codes.SERVICE_UNAVAILABLE
    default_message = "The service is busy; retry later."


class RateLimitedError(ProtocolError):
    code = codes.RATE_LIMITED
    default_message = "Too many requests; retry later."

    def __init__(self, message: str | None = None, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, retry_after_s)


class UpstreamUnavailableError(ProtocolError):
    """The model gateway's provider failed the call (its reason is safe: no prompt, credential or address)."""

    code = codes.UPSTREAM_UNAVAILABLE
    default_message = "The model provider failed the call."


class ReplaySourceMissingError(ProtocolError):
    """A replay fork asked the model gateway for a call its source run never made."""

    code = codes.REPLAY_SOURCE_MISSING
    default_message = "The source run's record has no answer for this request."


# Storage-level errors (no HTTP meaning until a service maps them).
class StorageError(Exception):
    pass


class ItemTooLargeError(StorageError):
    """A write the store cannot hold (DynamoDB's 400 KB item limit); the request was larger than we can keep."""


class ConflictError(StorageError):
    """A conditional write lost (sequence taken, item exists, run no longer writable)."""


class OrdinalTakenError(ConflictError):
    """An ordinal claimed at an expected value was taken first (``RunStore.claim_ordinal``): ``current`` is next."""

    def __init__(self, current: int) -> None:
        super().__init__(f"the ordinal was taken; the next is {current}")
        self.current = current


class StagedRefusedError(ConflictError):
    """A write another store staged for this transaction (``StagedWrite``) found its condition false: nothing of the
    transaction was written (a run's create with its tenant's slot: none free). ``appended``: for an append, the last
    sequence its earlier transactions wrote (the refused one carried the rest)."""

    def __init__(self, message: str, appended: int | None = None) -> None:
        super().__init__(message)
        self.appended = appended


class RunGoneError(StorageError):
    """The run is tombstoned (erased) or expired: late writes are refused."""


class ResidencyUnavailableError(ProtocolError):
    code = codes.RESIDENCY_UNAVAILABLE
    default_message = "This host offers no data residency choice."


class InterruptAlreadyResolvedError(ProtocolError):
    code = codes.INTERRUPT_ALREADY_RESOLVED
    default_message = "The interrupt is already resolved, or its run has ended."


class InterruptTokenInvalidError(ProtocolError):
    code = codes.INTERRUPT_TOKEN_INVALID
    default_message = "The interrupt token is not valid."


class InterruptExpiredError(ProtocolError):
    code = codes.INTERRUPT_EXPIRED
    default_message = "The interrupt token has expired."
