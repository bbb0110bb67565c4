"""Model-backed agents a tenant registers in versions (host-defined registration, official AgentManifest inside).

``POST /host/openwop-serverless/agents`` takes ``{version, manifest, model, maxTurns?, runtime?}``:
- ``manifest`` is an official AgentManifest (``agent-manifest.schema.json``, vendored, closed), with an inline
  ``systemPrompt`` (a ``systemPromptRef`` needs an agent pack, which this host does not install);
- ``version`` is a semantic version (``MAJOR.MINOR.PATCH[-pre][+build]``); a version is immutable;
- ``model`` binds the agent to a provider and model: ``{provider, model, temperature?, maxTokens?, credentialRef?,
  baseUrl?, mockProvider?}``;
- ``maxTurns`` bounds the model calls of one invocation;
- ``runtime`` says where the agent's loop runs (decision 0143): ``host`` (the default: this host's loop) or
  ``external`` (the agent's own code, reaching the host through its gateway), with an optional ``endpoint`` the host
  invokes per eval trial.

``POST /host/openwop-serverless/agents/{agentId}/sessions`` takes ``{input, version?, channel?}`` (``SessionRequest``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from shared.protocol.semver import SEMVER_RE
from shared.protocol.toolids import ALLOWLIST_ID_RE, CREDENTIAL_REF_RE, MAX_ALLOWLIST

PROVIDER_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
BASE_URL_RE = re.compile(r"^https?://[^\s/?#]+(?:/[^\s?#]*)?$")
MAX_TURNS = 50
DEFAULT_MAX_TURNS = 8
MAX_SYSTEM_PROMPT_CHARS = 100_000
_BASE = "https://openwop.dev/spec/v2/"
AGENT_ID_PATTERN = r"^[A-Za-z0-9._~:-]{1,128}$"  # ids.schema.json#/$defs/agentId
ENDPOINT_URL_RE = re.compile(r"^https?://[^\s/?#]+(?:/[^\s#]*)?$")
MAX_ENDPOINT_TIMEOUT_MS = 840_000  # under the trial task's Lambda timeout (decision 0143)


def _credential_ref(v: str | None) -> str | None:
    if v is not None and not CREDENTIAL_REF_RE.fullmatch(v):
        raise ValueError("credentialRef is malformed")
    return v


CredentialRef = Annotated[str | None, AfterValidator(_credential_ref)]  # a model binding's, an endpoint's


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ModelPrice(_Closed):
    """What the bound model costs, USD per million tokens: prices its calls where the host's table does not know
    the model (or knows another price). Closed; both members required (decision 0147)."""

    inputPerMTokUsd: float = Field(ge=0, le=100_000, allow_inf_nan=False, strict=True)
    outputPerMTokUsd: float = Field(ge=0, le=100_000, allow_inf_nan=False, strict=True)


class ModelBinding(_Closed):
    # Fields checked by a validator name its pattern in their JSON schema too, so the OpenAPI document tells the truth.
    provider: str = Field(json_schema_extra={"pattern": PROVIDER_RE.pattern})
    model: str = Field(min_length=1, max_length=256)
    temperature: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=2)
    maxTokens: StrictInt | None = Field(default=None, ge=1, le=200_000)
    credentialRef: CredentialRef = Field(default=None, json_schema_extra={"pattern": CREDENTIAL_REF_RE.pattern})
    baseUrl: str | None = Field(default=None, max_length=2048, json_schema_extra={"pattern": BASE_URL_RE.pattern})
    mockProvider: dict[str, Any] | None = None
    price: ModelPrice | None = None

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if not PROVIDER_RE.fullmatch(v):
            raise ValueError("provider is a lower-case provider id")
        return v

    @field_validator("baseUrl")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is not None and not BASE_URL_RE.fullmatch(v):
            raise ValueError("baseUrl is an http(s) URL without query or fragment")
        return v


class RuntimeEndpoint(_Closed):
    url: str = Field(max_length=2048, json_schema_extra={"pattern": ENDPOINT_URL_RE.pattern})
    credentialRef: CredentialRef = Field(default=None, json_schema_extra={"pattern": CREDENTIAL_REF_RE.pattern})
    timeoutMs: StrictInt | None = Field(default=None, ge=1, le=MAX_ENDPOINT_TIMEOUT_MS)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not ENDPOINT_URL_RE.fullmatch(v):
            raise ValueError("url is an http(s) URL without a fragment")
        return v


class AgentRuntime(_Closed):
    kind: Literal["host", "external"]
    endpoint: RuntimeEndpoint | None = None


class SessionRequest(_Closed):
    """``POST /host/openwop-serverless/agents/{agentId}/sessions``: the session's input, and the version it runs (an
    exact ``version`` or a ``channel``; neither: what ``stable`` serves, like a run's pin)."""

    input: Any
    version: str | None = Field(default=None, min_length=1, max_length=64)
    channel: str | None = Field(default=None, min_length=1, max_length=64)


class AgentRegistration(_Closed):
    version: str = Field(min_length=5, max_length=64, json_schema_extra={"pattern": SEMVER_RE.pattern})
    # The official AgentManifest (checked against the vendored schema); the document shows the ids it must use.
    manifest: dict[str, Any] = Field(
        json_schema_extra={
            "properties": {
                "agentId": {"type": "string", "pattern": AGENT_ID_PATTERN},
                "toolAllowlist": {
                    "type": "array",
                    "maxItems": MAX_ALLOWLIST,
                    "items": {"type": "string", "pattern": ALLOWLIST_ID_RE.pattern},
                },
            }
        }
    )
    model: ModelBinding
    maxTurns: StrictInt = Field(default=DEFAULT_MAX_TURNS, ge=1, le=MAX_TURNS)
    runtime: AgentRuntime | None = None

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not SEMVER_RE.fullmatch(v):
            raise ValueError("version is a semantic version (MAJOR.MINOR.PATCH)")
        return v


@lru_cache(maxsize=1)
def _manifest_validator() -> Any:
    """The official AgentManifest schema with its vendored references, built once per cold start."""
    from importlib import resources

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    base = resources.files("shared.protocol").joinpath("schemas")
    names = ("agent-manifest.schema.json", "ids.schema.json", "prompt-ref.schema.json")
    docs = {name: json.loads(base.joinpath(name).read_text("utf-8")) for name in names}
    registry: Registry[Any] = Registry().with_resources(
        [(_BASE + name, Resource.from_contents(doc, DRAFT202012)) for name, doc in docs.items()]
    )
    return Draft202012Validator(docs["agent-manifest.schema.json"], registry=registry)


def manifest_errors(manifest: Any) -> list[dict[str, str]]:
    """Where the manifest breaks the official schema: ``[{pointer, keyword, message}]`` (never the offending
    values)."""
    from shared.errors import fault, pointer

    errors = sorted(
        _manifest_validator().iter_errors(manifest), key=lambda e: (list(e.absolute_path), str(e.validator))
    )
    return [fault("/manifest" + pointer(e.absolute_path), str(e.validator)) for e in errors]


DeploymentState = Literal["draft", "test", "staged", "active", "paused", "deprecated", "rolled-back"]


class DeploymentTransition(_Closed):
    """``POST /agents/{agentId}/deployments`` (``agent-deployment-transition.schema.json``, RFC 0082 §E)."""

    version: str = Field(min_length=1, max_length=64)
    transition: Literal["promote", "pause", "deprecate", "rollback", "adjust-canary"]
    toState: DeploymentState | None = None
    channel: str | None = Field(default=None, min_length=1, max_length=64)
    canaryPercent: StrictInt | None = Field(default=None, ge=0, le=100)
    evalRunId: str | None = Field(default=None, min_length=1, max_length=256)
    reason: str | None = Field(default=None, min_length=1, max_length=512)
