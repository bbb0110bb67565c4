"""Wire request models (closed bodies: unknown keys are ``400 validation_error``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from shared.protocol.codes import EVAL_MODES


class Closed(BaseModel):
    """Closed bodies. Numbers are strict: ``true`` or ``"3"`` where an integer is expected is refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=False, defer_build=True)


class RunSection(Closed):
    recursionLimit: StrictInt | None = Field(default=None, ge=1)
    runTimeoutMs: StrictInt | None = Field(default=None, ge=0)
    maxLoopIterations: StrictInt | None = Field(default=None, ge=0)
    escalationThreshold: StrictFloat | None = None


class AiSection(Closed):
    provider: str | None = None
    model: str | None = None
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)
    maxTokens: StrictInt | None = Field(default=None, ge=1)
    credentialRef: str | None = None
    promptOverrides: dict[str, Any] | None = None
    mockProvider: Any = None
    reasoningVerbosity: str | None = None
    maxRefusals: StrictInt | None = Field(default=None, ge=0)


class DistillationSection(Closed):
    tokenBudget: StrictInt | None = Field(default=None, ge=0)


def _not_bool(v: object) -> object:
    if isinstance(v, bool):
        raise ValueError("a boolean is not a number")
    return v


class Configurable(Closed):
    version: Literal[1]
    run: RunSection | None = None
    ai: AiSection | None = None
    distillation: DistillationSection | None = None
    budget: dict[str, Any] | None = None
    extensions: dict[str, dict[str, Any]] | None = None

    _version = field_validator("version", mode="before")(_not_bool)


def _check_tags(v: list[str] | None) -> list[str] | None:
    if v is None:
        return v
    if len(v) > 100 or any(len(t) > 256 for t in v):
        raise ValueError("too many or too long tags")
    return v


class CreateRunRequest(Closed):
    workflowId: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._~:-]{1,128}$")
    inputs: dict[str, Any] | None = None
    tenantId: str | None = None
    scopeId: str | None = None
    residency: dict[str, Any] | None = None
    callbackUrl: str | None = None
    mode: Literal["eval"] | None = None
    evalSuiteRef: str | None = Field(default=None, min_length=1)
    agentId: str | None = Field(default=None, min_length=1)
    evalModes: list[str] | None = None
    baselineRunId: str | None = None
    fixtureRuns: Any = None
    configurable: Configurable | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None

    _tags = field_validator("tags")(_check_tags)


class CancelRunRequest(Closed):
    reason: str | None = Field(default=None, max_length=1024)


class PauseRunRequest(Closed):
    reason: str | None = Field(default=None, max_length=1024)
    drainPolicy: Literal["immediate", "drain-current-node"] | None = None


class ResumeRunRequest(Closed):
    reason: str | None = Field(default=None, max_length=1024)


class ResolveInterruptRequest(Closed):
    resumeValue: Any = None


class BulkCancelRunsRequest(Closed):
    runIds: list[str]
    reason: str | None = Field(default=None, max_length=1024)


class RunOptionsOverlay(Closed):
    configurable: Configurable | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None

    _tags = field_validator("tags")(_check_tags)


class ForkRunRequest(Closed):
    mode: Literal["replay", "branch"]
    fromSeq: Any = None
    runOptionsOverlay: RunOptionsOverlay | None = None


def known_eval_mode(m: object) -> bool:
    return isinstance(m, str) and m in EVAL_MODES
