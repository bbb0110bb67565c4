"""Model-backed agents a tenant registers in versions, the inventory it reads, and the version a run pins.

Versions live in the host table under ``AGENTV#<tenant>`` with sk ``<agentId>#<version>`` (``agent_versions``
reads them): one immutable item per version (an identical re-post is 200, another body under the same version 409
``version_conflict``). Another tenant's agent is simply not found, with the same bytes as an unknown one. The
inventory (``GET /agents``, ``GET /agents/{agentId}``, RFC 0072 §A) projects each agent's latest version and never
carries the system prompt, the model binding's credential or the mock script.

Which version a run uses is decided once, at create, and stored on the run (``data.agentPins``): a workflow's
``core.agent`` node pins it with its AgentRef ``version`` or ``channel``; an eval run pins it with
``configurable.extensions["openwop-serverless"].agentVersion``. Absent both: what the ``stable`` channel serves once
the agent has any deployment, the newest registered release only while it has none. Replay and fork re-read
the pin from the run, never resolve again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.engine.canonical import same_json
from shared.errors import MAX_FAULTS, NotFoundError, ProtocolError, VersionConflictError, fault, invalid
from shared.ports import ModelProviderError, Ports
from shared.protocol import codes as c
from shared.protocol.semver import semver_key
from shared.services import agent_versions as av
from shared.services.common import Caller

if TYPE_CHECKING:  # pydantic: only the routes that validate a body load it
    from shared.protocol.agents import AgentRegistration

EXTENSION = "openwop-serverless"
_NOT_FOUND = "No such agent."


class CredentialForbiddenError(ProtocolError):
    code = c.CREDENTIAL_FORBIDDEN


class MockProviderForbiddenError(ProtocolError):
    code = c.MOCK_PROVIDER_FORBIDDEN


def check_model_binding(ports: Ports, tenant: str, model: dict[str, Any], where: str) -> None:
    """A provider this host runs, a credential the tenant owns, a mock configuration the mock accepts."""
    provider = model.get("provider")
    mock = model.get("mockProvider")
    if mock is not None or provider == "mock":
        if not ports.settings.mock_providers_allowed:
            raise MockProviderForbiddenError("Mock providers are not served by this deployment.")
        try:
            ports.models.check_mock(mock or {"id": "stream-text"})
        except ModelProviderError as exc:
            raise invalid(
                "The mock provider configuration is not valid.", [fault(f"{where}/mockProvider", "mockProvider")]
            ) from exc
    if provider is not None and provider not in ports.models.names():
        raise invalid("The model provider is not one this host runs.", [fault(f"{where}/provider", "enum")])
    ref = model.get("credentialRef")
    if ref is not None and ports.credentials.get_credential(tenant, str(ref)) is None:
        raise CredentialForbiddenError("credentialRef names no credential this tenant may use.")
    if provider == "openai" and not model.get("baseUrl") and not ports.settings.openai_base_url:
        raise invalid("An OpenAI-compatible binding needs a baseUrl.", [fault(f"{where}/baseUrl", "required")])


def check_allowlist(ports: Ports, tenant: str, allowlist: list[Any]) -> None:
    """Every tool an agent may call is one the tenant can call now (built in, registered, or listed by one of its
    MCP servers): the engine's own catalog decides, so registration and the run agree. ``400`` with a pointer to
    each tool that is not (one read per distinct id)."""
    from shared.engine.catalog import Catalog
    from shared.protocol.toolids import ALLOWLIST_ID_RE, MAX_ALLOWLIST

    if len(allowlist) > MAX_ALLOWLIST:
        raise invalid(
            f"A toolAllowlist names at most {MAX_ALLOWLIST} tools.", [fault("/manifest/toolAllowlist", "maxItems")]
        )
    catalog = Catalog(ports, tenant)
    faults = []
    for i, tool in enumerate(allowlist):
        at = f"/manifest/toolAllowlist/{i}"
        if not ALLOWLIST_ID_RE.fullmatch(str(tool)):
            faults.append(fault(at, "pattern", "A tool id is <org>.<pack>:<tool> or mcp:<serverId>.<tool>."))
        elif catalog.resolve(str(tool)) is None:
            faults.append(
                fault(
                    at,
                    "toolId",
                    "No tool this tenant can call has this id: register the tool (or its MCP server) first.",
                )
            )
        if len(faults) >= MAX_FAULTS:
            break
    if faults:
        raise invalid("The toolAllowlist names a tool this tenant cannot call.", faults)


def check_runtime(ports: Ports, tenant: str, body: AgentRegistration) -> dict[str, Any] | None:
    """The stored ``runtime`` of an external agent (a host agent stores none: its versions are as before); an
    endpoint's credential is one the tenant owns (decision 0143)."""
    if body.runtime is None:
        return None
    runtime = body.runtime.model_dump(mode="json", exclude_none=True)
    if runtime["kind"] == "host":
        if "endpoint" in runtime:
            raise invalid("Only an external agent has an endpoint.", [fault("/runtime/endpoint", "unsupported")])
        return None
    ref = (runtime.get("endpoint") or {}).get("credentialRef")
    if ref is not None and ports.credentials.get_credential(tenant, str(ref)) is None:
        raise CredentialForbiddenError("credentialRef names no credential this tenant may use.")
    return runtime


def _view(doc: dict[str, Any], versions: list[str]) -> dict[str, Any]:
    """The RFC 0072 inventory entry (no system prompt, no credential, no mock script) plus the versions."""
    m = doc["manifest"]
    entry: dict[str, Any] = {
        "agentId": m["agentId"],
        "persona": m["persona"],
        "label": m.get("label", m["persona"]),
        "modelClass": m["modelClass"],
        "packName": EXTENSION,
        "packVersion": doc["version"],
        "toolAllowlist": list(m.get("toolAllowlist") or []),
        "hasHandoffSchemas": False,
    }
    if m.get("description"):
        entry["description"] = m["description"]
    threshold = (m.get("confidence") or {}).get("defaultThreshold")
    if threshold is not None:
        entry["confidenceThreshold"] = threshold
    entry["version"] = doc["version"]
    entry["versions"] = versions
    entry["model"] = {"provider": doc["model"]["provider"], "model": doc["model"]["model"]}
    entry["maxTurns"] = doc.get("maxTurns")
    runtime = doc.get("runtime") or {}
    entry["runtime"] = {"kind": runtime.get("kind", "host"), "hasEndpoint": "endpoint" in runtime}
    return entry


def register_agent(ports: Ports, caller: Caller, body: AgentRegistration) -> tuple[int, dict[str, Any]]:
    """201 a new version, 200 the identical version again, 409 another body under the same version."""
    from shared.protocol.agents import manifest_errors

    errors = manifest_errors(body.manifest)
    if errors:
        raise invalid("The manifest does not match the AgentManifest schema.", errors)
    if "systemPromptRef" in body.manifest:
        raise invalid(
            "systemPromptRef needs an agent pack; register the prompt inline as systemPrompt.",
            [fault("/manifest/systemPromptRef", "unsupported")],
        )
    for key in ("handoff", "memoryShape", "evalSuiteRef", "promptLibraryRef", "promptOverrides"):
        if key in body.manifest:
            raise invalid(
                f"This host does not serve manifest member {key}.", [fault(f"/manifest/{key}", "unsupported")]
            )
    model = body.model.model_dump(mode="json", exclude_none=True)
    check_model_binding(ports, caller.tenant, model, "/model")
    check_allowlist(ports, caller.tenant, body.manifest.get("toolAllowlist") or [])
    doc = {"version": body.version, "manifest": body.manifest, "model": model, "maxTurns": body.maxTurns}
    runtime = check_runtime(ports, caller.tenant, body)
    if runtime is not None:
        doc["runtime"] = runtime
    agent_id = str(body.manifest["agentId"])
    if ports.agents.put_version(caller.tenant, agent_id, body.version, doc):
        status = 201
    else:
        current = ports.agents.get_version(caller.tenant, agent_id, body.version)
        if current is None or not same_json(current, doc):
            raise VersionConflictError("Another agent definition is registered under this agentId and version.")
        status = 200
    return status, _view(doc, av.versions(ports, caller.tenant, agent_id))


def list_agents(ports: Ports, caller: Caller) -> dict[str, Any]:
    by_agent: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for agent_id, version, doc in ports.agents.list_all_versions(caller.tenant):
        by_agent.setdefault(agent_id, []).append((version, doc))
    out = []
    for agent_id in sorted(by_agent):
        rows = sorted(by_agent[agent_id], key=lambda r: semver_key(r[0]))
        out.append(_view(av.latest_row(rows)[1], [v for v, _ in rows]))  # type: ignore[index]
    return {"agents": out}


def get_agent(ports: Ports, caller: Caller, agent_id: str) -> dict[str, Any]:
    rows = av.rows(ports, caller.tenant, agent_id)
    got = av.latest_row(rows)
    if got is None:
        raise NotFoundError(_NOT_FOUND)
    return _view(got[1], [v for v, _ in rows])


def pin(ports: Ports, tenant: str, agent_id: str, version: str | None, where: str) -> str | None:
    """The version a run uses: the exact pin if it exists, else what ``stable`` serves once the agent has a
    deployment, else the newest registered release (``deployments.default_version``); None for an agent with no
    versions (a built-in or scripted agent). A pin naming no version of a registered agent is a 400."""
    if version is not None:
        if not av.exists(ports, tenant, agent_id, version):
            raise invalid("The agent has no such version.", [fault(where, "version")])
        return version
    from shared.services.deployments import default_version

    return default_version(ports, tenant, agent_id)


def workflow_pins(ports: Ports, tenant: str, doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``{nodeId: {agentId, version}}`` for each ``core.agent`` node bound to a model-backed agent."""
    pins: dict[str, dict[str, str]] = {}
    for i, node in enumerate(doc.get("nodes") or []):
        if node.get("typeId") != "core.agent":
            continue
        ref = node.get("agent") or {}
        agent_id = str(ref.get("agentId") or (node.get("config") or {}).get("agentId") or "")
        if not agent_id:
            continue
        if ref.get("channel") is not None:
            from shared.services.deployments import resolve_channel

            channel = str(ref["channel"])
            pins[str(node["id"])] = {
                "agentId": agent_id,
                "channel": channel,
                "version": resolve_channel(ports, tenant, agent_id, channel),
            }
            continue
        version = pin(ports, tenant, agent_id, ref.get("version"), f"/nodes/{i}/agent/version")
        if version is not None:
            pins[str(node["id"])] = {"agentId": agent_id, "version": version}
    return pins


def eval_pin(ports: Ports, tenant: str, agent_id: str, configurable: dict[str, Any] | None) -> str | None:
    ext = ((configurable or {}).get("extensions") or {}).get(EXTENSION) or {}
    unknown = set(ext) - {"agentVersion", "judge", "name"}
    if unknown:
        raise invalid(
            "Unknown member of the openwop-serverless extension.",
            [fault(f"/configurable/extensions/{EXTENSION}/{sorted(unknown)[0]}", "additionalProperties")],
        )
    version = ext.get("agentVersion")
    if version is not None and not isinstance(version, str):
        raise invalid(
            "agentVersion is a string.", [fault(f"/configurable/extensions/{EXTENSION}/agentVersion", "type")]
        )
    return pin(ports, tenant, agent_id, version, f"/configurable/extensions/{EXTENSION}/agentVersion")


NAME_MAX = 128


def eval_name(configurable: dict[str, Any] | None) -> str | None:
    """An eval run's experiment name: ``configurable.extensions["openwop-serverless"].name`` (1..128 printable
    characters), listed and filtered by ``GET /host/openwop-serverless/eval-runs``."""
    name = (((configurable or {}).get("extensions") or {}).get(EXTENSION) or {}).get("name")
    if name is None:
        return None
    if not isinstance(name, str) or not 0 < len(name) <= NAME_MAX or not name.isprintable() or name != name.strip():
        raise invalid(
            f"name is 1..{NAME_MAX} printable characters without surrounding spaces.",
            [fault(f"/configurable/extensions/{EXTENSION}/name", "pattern")],
        )
    return name


def eval_judge(ports: Ports, tenant: str, configurable: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rubric judge an eval run uses: ``configurable.extensions["openwop-serverless"].judge`` (a model binding),
    else the host's default judge (``JUDGE_PROVIDER`` / ``JUDGE_MODEL``), else None."""
    from pydantic import ValidationError as PydanticError

    from shared.protocol.agents import ModelBinding

    where = f"/configurable/extensions/{EXTENSION}/judge"
    raw = (((configurable or {}).get("extensions") or {}).get(EXTENSION) or {}).get("judge")
    if raw is None:
        s = ports.settings
        return {"provider": s.judge_provider, "model": s.judge_model} if s.judge_provider and s.judge_model else None
    try:
        judge = ModelBinding.model_validate(raw).model_dump(mode="json", exclude_none=True)
    except PydanticError as exc:
        raise invalid("The judge is not a valid model binding.", [fault(where, "judge")]) from exc
    check_model_binding(ports, tenant, judge, where)
    return judge


def check_ai_overrides(ports: Ports, tenant: str, configurable: dict[str, Any] | None) -> None:
    """``configurable.ai`` (the run's model overrides): a known provider, the tenant's own credential, a valid mock."""
    ai = (configurable or {}).get("ai") or {}
    check_model_binding(
        ports, tenant, {k: ai[k] for k in ("provider", "credentialRef", "mockProvider") if k in ai}, "/configurable/ai"
    )
