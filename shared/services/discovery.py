"""The discovery document, the effect-seam manifest, and which fixtures may honestly be advertised."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from shared.engine import negotiation
from shared.engine.registry import AGENTS, MCP_CLIENT_NODE, NODE_TYPES, PROVIDER_SEAMS, TOOLS, TRANSPORT_SEAMS, Seam
from shared.ports import Clock, ModelProviders
from shared.protocol.body import MAX_REQUEST_BODY_BYTES
from shared.protocol.client_version import MIN_CLIENT_VERSION
from shared.services import fixtures

# The conformance seams profile this host serves with OPENWOP_CONFORMANCE_SEAMS (shared/services/seams.py).
SEAMS_PROFILE = "openwop-conformance-seams-v2"

FAMILY = {"status": "experimental", "since": "2.0", "until": "2027-12-31", "witness": "witnessable-gated"}

# Families and facets are advertised only once each works end to end
# (see docs/decisions/0003-openapi-and-discovery-families.md).
FEATURES = {"replay": True, "evalSuite": True, "recordedFixtures": True}


class Discoverable(Protocol):
    """What the discovery document reads: the settings, the clock and the model providers (``Ports`` has them; so
    has ``wiring.get_discovery``'s view, which builds no store and imports no AWS SDK)."""

    @property
    def settings(self) -> Any: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def models(self) -> ModelProviders: ...


def mcp_facet(ports: Discoverable) -> dict[str, Any] | None:
    """interop.md §The facets: this host speaks MCP as a client (registered MCP servers, ``ctx.mcp``), pinned to one
    revision (``shared.engine.negotiation``); None once ``refreshedAt`` is older than the refresh window."""
    members = negotiation.facet(ports.clock.iso())
    return None if members is None else {**FAMILY, "witness": "seam-gated", **members}


def advertised_fixtures(mcp_client: bool = True) -> list[str]:
    """A fixture is listed only when every node type, agent and tool it needs resolves here (the ``ctx.mcp`` node's
    only while ``mcp.client`` is advertised: RFC 0204, a host without it must not list that fixture)."""
    out = []
    for fid, doc in fixtures.workflows().items():
        if all(n.get("typeId") in NODE_TYPES for n in doc["nodes"]):
            if fid.startswith("conformance-replay") and not FEATURES["replay"]:
                continue
            if not mcp_client and any(n.get("typeId") == MCP_CLIENT_NODE for n in doc["nodes"]):
                continue
            out.append(fid)
    if FEATURES["evalSuite"]:
        for fid, suite in fixtures.suites().items():
            if fid.startswith("conformance-eval-recorded") and not FEATURES["recordedFixtures"]:
                continue
            if fixtures.suite_resolves(suite, set(AGENTS), set(TOOLS)):
                out.append(fid)
    return sorted(out)


def capabilities(ports: Discoverable) -> dict[str, Any]:
    mcp = mcp_facet(ports)
    doc: dict[str, Any] = {
        "protocolVersions": ["2.0"],
        "preferredVersion": "2.0",
        "protocolVersion": "2.0",
        "minClientVersion": MIN_CLIENT_VERSION,
        "implementation": {
            "name": ports.settings.host_name,
            "version": "0.1.0",
            "vendor": "openwop-serverless",
            "url": "https://github.com/openwop-serverless",
        },
        "engineVersion": 1,
        "eventLogSchemaVersion": 3,
        "fixtures": advertised_fixtures(mcp_client=mcp is not None),
        "runList": {**FAMILY, "maxPageSize": 100, "filters": ["workflowId", "status"]},
        # No model runs here, so no clarification, schema-validation or envelope rounds: each bound is 0.
        "limits": {
            **FAMILY,
            "maxRequestBodyBytes": MAX_REQUEST_BODY_BYTES,
            "clarificationRounds": 0,
            "schemaRounds": 0,
            "envelopesPerTurn": 0,
        },
        # Idempotency-Key on every mutating operation, records in one region's DynamoDB table.
        "idempotency": {**FAMILY, "crossRegion": "single-region"},
        # Each run's log is sequenced by one conditional write on its run item: a single sequencer per run.
        "eventLog": {**FAMILY, "witness": "claims-check", "crossEngineOrdering": {"orderingModel": "global-sequencer"}},
        # Approval gates: run-scoped resolve, hs256 resume tokens, approversList enforced (explicit principals).
        "interrupt": {**FAMILY, "tokenAlgs": ["hs256"], "refKinds": ["principal"], "callbackDelivery": False},
    }
    if FEATURES["replay"]:
        doc["replay"] = {
            **FAMILY,
            "modes": ["replay", "branch"],
            "retention": {"days": int(ports.settings.retention_days)},
            "effectSeamsManifest": "/host/effect-seams",
        }
    if FEATURES["evalSuite"]:
        suite: dict[str, Any] = {
            "modes": ["golden", "rubric", "regression"],
            "regressionVerdict": True,
            "fixtureMatching": True,
            "fixtureErrors": True,
            "baselineSelection": True,
            "maxTasksPerSuite": 10_000,
        }  # = evals.MAX_TASKS_PER_SUITE (a test checks)
        if FEATURES["recordedFixtures"]:
            suite["recordedFixtures"] = True
        doc["agents"] = {**FAMILY, "evalSuite": suite}
    models = ports.models
    if models is not None and models.names():
        # RFC 0070/0077: tenant-registered manifest agents, run live against their model and tools.
        agents = doc.setdefault("agents", {**FAMILY})
        agents["manifestRuntime"] = {"installScope": "tenant"}
        agents["liveRuntime"] = {"sources": ["workflow-node", "run-api"]}
        agents["deployment"] = {
            "channels": ["stable", "canary", "latest"],
            "canary": False,
            "rollback": True,
            "states": ["draft", "test", "staged", "active", "paused", "deprecated", "rolled-back"],
        }
        doc["aiProviders"] = {
            **FAMILY,
            "providers": [p for p in models.names() if p != "mock"],
            "byok": ["openai"],
            "selfHosted": True,
        }
        doc["providerUsage"] = {**FAMILY, "costEstimates": True, "currency": "USD"}
        if models.mock_ids():
            doc["testing"] = {"mockProviders": list(models.mock_ids())}
    # RFC 0078 / 0204: the catalog of built-in, registered HTTP (connector) and MCP tools.
    doc["toolCatalog"] = {**FAMILY, "sources": ["connector", "mcp", "node-pack"]}
    if mcp is not None:
        doc["mcp"] = mcp
    # webhooks.md: durable signed delivery (v1 always; Standard Webhooks per subscription, RFC 0201), retries with
    # exponential backoff, the delivery dead-letter sink (RFC 0188), secret rotation with an overlap (RFC 0201 §E).
    s = ports.settings
    doc["webhooks"] = {
        **FAMILY,
        "signatureAlgorithms": ["v1", "standard-webhooks-1"],
        "retryPolicy": {"maxAttempts": int(s.webhook_max_attempts), "backoff": "exponential"},
        "deadLetter": {"retentionDays": int(s.webhook_dead_letter_days), "maxPageSize": 100},
        "secretRotation": {"overlapSeconds": int(s.webhook_rotation_overlap_s)},
    }
    if s.conformance_seams:
        # RFC 0168 §C.1: the seams profile is advertised only where it is served (a certification-stage setting)
        doc["conformance"] = {"seamsProfile": SEAMS_PROFILE}
    return doc


def etag_of(doc: dict[str, Any]) -> str:
    return '"' + hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32] + '"'


def all_seams() -> list[Seam]:
    seen: dict[str, Seam] = {}
    for nt in NODE_TYPES.values():
        for s in nt.seams:
            seen[s.seam] = s
    for t in TOOLS.values():
        for s in t.seams:
            seen[s.seam] = s
    for s in (*TRANSPORT_SEAMS, *PROVIDER_SEAMS):
        seen[s.seam] = s
    return [seen[k] for k in sorted(seen)]


def effect_seams(ports: Discoverable) -> dict[str, Any]:
    rows = []
    for s in all_seams():
        row: dict[str, Any] = {
            "seam": s.seam,
            "kind": s.kind,
            "guarded": True,
            "guardedBy": s.guarded_by,
            "branchReFires": s.branch_re_fires,
        }
        if s.note:
            row["note"] = s.note
        rows.append(row)
    return {
        "manifestVersion": "1",
        "host": {"name": ports.settings.host_name, "build": {"kind": "commit", "id": ports.settings.build_id}},
        "seams": rows,
    }
