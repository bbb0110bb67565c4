"""Wire request bodies of the run lifecycle (closed bodies: unknown keys are ``400 validation_error``).

msgspec Structs, converted with ``strict=True``: a number is never read from a string, ``true`` is not a number,
and an integer field refuses a fraction (``1.5``; the request reader hands ``1.0`` over as ``1``,
as JSON Schema reads it). These bodies are validated on every route of ``create_run``, ``cancel_run``
and ``run_actions``, so their library is imported with those handlers: msgspec imports in ~15 ms where pydantic
took ~90 ms of a cold start. Host registration bodies (tools, agents, webhooks), validated by routes of their own,
keep pydantic, loaded only by those routes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from shared.protocol.codes import EVAL_MODES, MAX_BULK_CANCEL_RUN_IDS

_WORKFLOW_ID = r"^[A-Za-z0-9._~:-]{1,128}$"
_WORKFLOW_ID_RE = re.compile(_WORKFLOW_ID.replace("$", r"\Z"))  # ``$`` would let a trailing newline through

Reason = Annotated[str, msgspec.Meta(max_length=1024)]
Tags = Annotated[list[Annotated[str, msgspec.Meta(max_length=256)]], msgspec.Meta(max_length=100)]


class Closed(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A closed body: unknown keys are refused; every field is named at construction."""


class RunSection(Closed):
    recursionLimit: Annotated[int, msgspec.Meta(ge=1)] | None = None
    runTimeoutMs: Annotated[int, msgspec.Meta(ge=0)] | None = None
    maxLoopIterations: Annotated[int, msgspec.Meta(ge=0)] | None = None
    escalationThreshold: float | None = None


class AiSection(Closed):
    provider: str | None = None
    model: str | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    maxTokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    credentialRef: str | None = None
    promptOverrides: dict[str, Any] | None = None
    mockProvider: Any = None
    reasoningVerbosity: str | None = None
    maxRefusals: Annotated[int, msgspec.Meta(ge=0)] | None = None


class DistillationSection(Closed):
    tokenBudget: Annotated[int, msgspec.Meta(ge=0)] | None = None


class Configurable(Closed):
    version: Literal[1]
    run: RunSection | None = None
    ai: AiSection | None = None
    distillation: DistillationSection | None = None
    budget: dict[str, Any] | None = None
    extensions: dict[str, dict[str, Any]] | None = None


class CreateRunRequest(Closed):
    workflowId: Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=_WORKFLOW_ID)] | None = None
    inputs: dict[str, Any] | None = None
    tenantId: str | None = None
    scopeId: str | None = None
    residency: dict[str, Any] | None = None
    callbackUrl: str | None = None
    mode: Literal["eval"] | None = None
    evalSuiteRef: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    agentId: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    evalModes: list[str] | None = None
    baselineRunId: str | None = None
    fixtureRuns: Any = None
    configurable: Configurable | None = None
    tags: Tags | None = None
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.workflowId is not None and not _WORKFLOW_ID_RE.match(self.workflowId):
            raise ValueError("workflowId does not match its pattern")


class CancelRunRequest(Closed):
    reason: Reason | None = None


class PauseRunRequest(Closed):
    reason: Reason | None = None
    drainPolicy: Literal["immediate", "drain-current-node"] | None = None


class ResumeRunRequest(Closed):
    reason: Reason | None = None


class ResolveInterruptRequest(Closed):
    resumeValue: Any = None


class BulkCancelRunsRequest(Closed):
    runIds: Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_BULK_CANCEL_RUN_IDS)]
    reason: Reason | None = None


class RunOptionsOverlay(Closed):
    configurable: Configurable | None = None
    tags: Tags | None = None
    metadata: dict[str, Any] | None = None


class ForkRunRequest(Closed):
    mode: Literal["replay", "branch"]
    fromSeq: Any = None
    runOptionsOverlay: RunOptionsOverlay | None = None


BODIES = (
    CreateRunRequest,
    ForkRunRequest,
    CancelRunRequest,
    PauseRunRequest,
    ResumeRunRequest,
    BulkCancelRunsRequest,
    ResolveInterruptRequest,
)
"""The bodies above that a route reads whole (the OpenAPI document names them)."""

B = TypeVar("B", bound=Closed)


def parse(data: dict[str, Any], body: type[B]) -> B:
    """The body as ``body``; ``msgspec.ValidationError`` when it does not fit."""
    return msgspec.convert(data, body, strict=True)


def dump(body: Closed) -> dict[str, Any]:
    """Every field, ``None`` included, in declaration order (what an idempotency record fingerprints)."""
    out: dict[str, Any] = msgspec.to_builtins(body)
    return out


def present(body: Closed) -> dict[str, Any]:
    """The fields that are not ``None``, nested bodies alike (values inside plain objects are kept as sent)."""
    out: dict[str, Any] = {}
    for name in body.__struct_fields__:
        value = getattr(body, name)
        if value is not None:
            out[name] = present(value) if isinstance(value, Closed) else value
    return out


def known_eval_mode(m: object) -> bool:
    return isinstance(m, str) and m in EVAL_MODES
