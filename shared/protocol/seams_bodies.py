"""Request bodies of the conformance seams profile (api/seams-v2.yaml; closed shapes, as that document states)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt

MAX_SEED_EVENTS = 1000


def _date_time(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("timestamp is an RFC 3339 date-time") from None
    return value


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class SeedEvent(_Closed):
    type: str = Field(min_length=1, max_length=256)
    sequence: StrictInt = Field(ge=0)
    payload: dict[str, Any]
    timestamp: Annotated[str, AfterValidator(_date_time)] | None = Field(default=None, max_length=64)
    causationId: str | None = Field(default=None, min_length=1, max_length=256)


class SeedEventLog(_Closed):
    """``POST /conformance/seams/sample/event-log/seed`` (seedEra2EventLog)."""

    eventLogSchemaVersion: Literal[2]
    status: Literal["running", "completed", "failed", "cancelled"]
    events: list[SeedEvent] = Field(min_length=1, max_length=MAX_SEED_EVENTS)


class FireEffectSeam(_Closed):
    """``POST /conformance/seams/sample/effect-seams/fire`` (fireEffectSeam)."""

    seam: str = Field(min_length=1, max_length=128)
    receiverUrl: str | None = Field(default=None, min_length=1, max_length=2048)


class DurabilityKill(_Closed):
    """``POST /host/durability/kill`` (RFC 0158's durability test hook; this host stages ``duplicate-delivery``)."""

    mode: Literal["after-accept", "during-execution", "duplicate-delivery"]
    workflowId: str | None = Field(default=None, min_length=1, max_length=256)
    effectUrl: str | None = Field(default=None, min_length=1, max_length=2048)


class McpInvoke(_Closed):
    """``POST /conformance/seams/sample/mcp/invoke`` (host-sample-test-seams.md §23): the host's MCP client, once,
    against ``serverUrl``: ``requestVersion`` forces the revision asked for, ``tool`` (with ``arguments``) a
    ``tools/call`` once it is accepted; ``authenticated: false`` marks the exchange unauthenticated."""

    serverUrl: str = Field(min_length=1, max_length=2048)
    requestVersion: str | None = Field(default=None, min_length=1, max_length=64)
    authenticated: bool | None = None
    tool: str | None = Field(default=None, min_length=1, max_length=128)
    arguments: dict[str, Any] | None = None
