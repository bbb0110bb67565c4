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
        if not re.match(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$", name) or name.lower() in FORBIDDEN_HEADERS:
            raise ValueError("a header name is not allowed (credentials go through credentialRef)")
        if not isinstance(value, str) or len(value) > 1024 or any(ch in value for ch in "\r\n\0"):
            raise ValueError("a header value is not allowed")
    return headers


def _check_url(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on an invalid port
    except ValueError as exc:
        raise ValueError("the URL has an invalid port") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ValueError("the URL must be an absolute http(s) URL without credentials")
    if len(url) > 2048 or any(ch in url for ch in " \r\n\0"):
        raise ValueError("the URL is not allowed")
    return url


def _check_ref(ref: str) -> str:
    if not CREDENTIAL_REF_RE.match(ref):
        raise ValueError("credentialRef is malformed")
    return ref


ToolUrl = Annotated[str, AfterValidator(_check_url)]
CredentialRef = Annotated[str, AfterValidator(_check_ref)]
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

    toolId: str
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
        if not TOOL_ID_RE.match(v) or v.split(".", 1)[0] in RESERVED_ORGS:
            raise ValueError("toolId must be <org>.<pack>:<tool> with a non-reserved lower-case org")
        return v


class McpToolClass(_Closed):
    """The host's classification of one MCP tool (never taken from the server's annotations)."""

    safetyTier: SafetyTier = "write"
    replayPolicy: ReplayPolicy = "non-deterministic"


class McpServerRegistration(_Closed):
    """``POST /host/openwop-serverless/mcp-servers``: a streamable-HTTP MCP server."""

    serverId: str = Field(min_length=1, max_length=48)
    url: ToolUrl
    description: str | None = Field(default=None, max_length=2000)
    credentialRef: CredentialRef | None = None
    timeoutMs: TimeoutMs = 10_000
    tools: dict[str, McpToolClass] | None = None

    @field_validator("serverId")
    @classmethod
    def _server_id(cls, v: str) -> str:
        if not SERVER_ID_RE.match(v):
            raise ValueError("serverId must be lower-case letters, digits and inner hyphens")
        return v


class BearerCredential(_Closed):
    type: Literal["bearer"]
    token: str = Field(min_length=1, max_length=8192)


class HeaderCredential(_Closed):
    type: Literal["header"]
    name: str = Field(min_length=1, max_length=64)
    value: str = Field(min_length=1, max_length=8192)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$", v) or v.lower() in FORBIDDEN_HEADERS - {
                "authorization", "proxy-authorization", "cookie"}:
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
