"""Host-defined registration bodies for tools, MCP servers and credentials (closed shapes); the tool id forms they
check are ``shared.protocol.toolids``."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, field_validator

from shared.protocol.toolids import (
    CREDENTIAL_REF_RE,
    FORBIDDEN_HEADERS,
    RESERVED_ORGS,
    SERVER_ID_RE,
    TOOL_ID_RE,
    ReplayPolicy,
    SafetyTier,
)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


def _check_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    if headers is None:
        return None
    if len(headers) > 32:
        raise ValueError("at most 32 headers")
    for name, value in headers.items():
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}", name) or name.lower() in FORBIDDEN_HEADERS:
            raise ValueError("a header name is not allowed (credentials go through credentialRef)")
        if not isinstance(value, str) or len(value) > 1024 or any(ch in value for ch in "\r\n\0"):
            raise ValueError("a header value is not allowed")
    return headers


URL_RE = re.compile(
    r"^https?://(?:[^\s/?#@\[\]:\x00]+|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?"
    r"(?:[/?#][^\s\x00]*)?$"
)
"""An absolute http(s) URL: no credentials, no space or NUL, a port within range (the document's pattern too)."""


def _check_url(url: str) -> str:
    from urllib.parse import urlsplit

    if len(url) > 2048 or not URL_RE.fullmatch(url):
        raise ValueError("the URL must be an absolute http(s) URL without credentials")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on an invalid port
    except ValueError as exc:
        raise ValueError("the URL has an invalid port") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ValueError("the URL must be an absolute http(s) URL without credentials")
    return url


def _check_ref(ref: str) -> str:
    if not CREDENTIAL_REF_RE.fullmatch(ref):
        raise ValueError("credentialRef is malformed")
    return ref


# Fields checked by a validator name its pattern in their JSON schema too, so the OpenAPI document tells the truth.
ToolUrl = Annotated[
    str, AfterValidator(_check_url), Field(max_length=2048, json_schema_extra={"pattern": URL_RE.pattern})
]
CredentialRef = Annotated[
    str, AfterValidator(_check_ref), Field(json_schema_extra={"pattern": CREDENTIAL_REF_RE.pattern})
]
TimeoutMs = Annotated[StrictInt, Field(ge=100, le=30_000)]


class HttpToolSource(_Closed):
    kind: Literal["http"]
    url: ToolUrl
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] | None = None
    timeoutMs: TimeoutMs = 10_000

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        return _check_headers(v)


class ToolRegistration(_Closed):
    """``POST /host/openwop-serverless/tools``: an HTTP tool."""

    toolId: str = Field(
        json_schema_extra={"pattern": TOOL_ID_RE.pattern, "not": {"pattern": r"^(conformance|openwop|core|mcp)\."}}
    )
    version: str | None = Field(default=None, min_length=1, max_length=64)
    title: str | None = Field(default=None, max_length=200)
    description: str = Field(min_length=1, max_length=2000)
    inputSchema: dict[str, Any]
    outputSchema: dict[str, Any] | None = None
    source: HttpToolSource
    credentialRef: CredentialRef | None = None
    replayPolicy: ReplayPolicy | None = None
    safetyTier: SafetyTier | None = None

    @field_validator("toolId")
    @classmethod
    def _tool_id(cls, v: str) -> str:
        if not TOOL_ID_RE.fullmatch(v) or v.split(".", 1)[0] in RESERVED_ORGS:
            raise ValueError("toolId must be <org>.<pack>:<tool> with a non-reserved lower-case org")
        return v


class McpToolClass(_Closed):
    """The host's classification of one MCP tool (never taken from the server's annotations)."""

    safetyTier: SafetyTier = "write"
    replayPolicy: ReplayPolicy = "non-deterministic"


class McpServerRegistration(_Closed):
    """``POST /host/openwop-serverless/mcp-servers``: a streamable-HTTP MCP server."""

    serverId: str = Field(min_length=1, max_length=48, json_schema_extra={"pattern": SERVER_ID_RE.pattern})
    url: ToolUrl
    description: str | None = Field(default=None, max_length=2000)
    credentialRef: CredentialRef | None = None
    timeoutMs: TimeoutMs = 10_000
    tools: dict[str, McpToolClass] | None = None

    @field_validator("serverId")
    @classmethod
    def _server_id(cls, v: str) -> str:
        if not SERVER_ID_RE.fullmatch(v):
            raise ValueError("serverId must be lower-case letters, digits and inner hyphens")
        return v


class BearerCredential(_Closed):
    type: Literal["bearer"]
    token: str = Field(min_length=1, max_length=8192)


HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"
_CREDENTIAL_HEADERS_REFUSED = sorted(FORBIDDEN_HEADERS - {"authorization", "proxy-authorization", "cookie"})


def _any_case(words: list[str]) -> str:
    """A pattern matching exactly these words (letters and ``-``) in any case (a JSON-schema pattern has no flags)."""
    return "^(?:" + "|".join("".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in w) for w in words) + ")$"


class HeaderCredential(_Closed):
    type: Literal["header"]
    name: str = Field(
        min_length=1,
        max_length=64,
        json_schema_extra={"pattern": HEADER_NAME, "not": {"pattern": _any_case(_CREDENTIAL_HEADERS_REFUSED)}},
    )
    value: str = Field(min_length=1, max_length=8192)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(HEADER_NAME[1:-1], v) or v.lower() in _CREDENTIAL_HEADERS_REFUSED:
            raise ValueError("the header name is not allowed")
        return v

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        if any(ch in v for ch in "\r\n\0"):
            raise ValueError("the header value is not allowed")
        return v


class CredentialPut(_Closed):
    """``PUT /host/openwop-serverless/credentials/{credentialRef}``: write-only secret material."""

    credential: BearerCredential | HeaderCredential = Field(discriminator="type")
    description: str | None = Field(default=None, max_length=500)
