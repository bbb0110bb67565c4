"""Webhook registration bodies (closed shapes; webhooks.md): ``POST /webhooks`` and the secret rotation."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from shared.protocol.webhooks import ALGORITHMS, MAX_EVENT_TYPE_CHARS, MAX_SECRET_CHARS, TAG_RE


def _tag(value: str) -> str:
    if not TAG_RE.match(value):
        raise ValueError("a tag is 1-64 characters of [A-Za-z0-9._:/-]")
    return value


# events[] entries are checked against the registered v2 names by the service, whose refusal names the entry
EventType = Annotated[str, Field(min_length=1, max_length=MAX_EVENT_TYPE_CHARS)]
Tag = Annotated[str, AfterValidator(_tag)]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class RegisterWebhook(_Closed):
    """``POST /webhooks`` (registerWebhook)."""

    url: str = Field(min_length=1, max_length=2048)
    events: list[EventType] = Field(min_length=1, max_length=64)
    secret: str | None = Field(default=None, min_length=16, max_length=MAX_SECRET_CHARS)
    tags: list[Tag] | None = Field(default=None, max_length=32)
    signatureAlgorithms: list[str] | None = Field(default=None, min_length=1, max_length=len(ALGORITHMS))


class RotateWebhookSecret(_Closed):
    """``POST /webhooks/{webhookId}/rotate-secret``: the new ``whsec_`` secret (never echoed)."""

    secret: str = Field(min_length=1, max_length=MAX_SECRET_CHARS)
