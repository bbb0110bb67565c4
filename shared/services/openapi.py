"""Our served OpenAPI document for the implemented surface, generated from the route table and models.

It is complete enough for schemathesis (tests/integration/test_openapi_truth.py, --checks all): every parameter with its
grammar, the bearer scheme, each operation's statuses with their bodies, and links from createRun to the
operations on the created run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from shared.manifest import matching, routes
from shared.protocol.agents import AGENT_ID_PATTERN, AgentRegistration, DeploymentTransition
from shared.protocol.client_version import below_floor_pattern
from shared.protocol.codes import RUN_STATUSES
from shared.protocol.models import BODIES
from shared.protocol.tools import CredentialPut, McpServerRegistration, ToolRegistration
from shared.protocol.webhook_bodies import RegisterWebhook, RotateWebhookSecret


@dataclass(frozen=True)
class Op:
    path: str
    operation_id: str
    success: dict[int, str | None]  # status -> response schema name (None: no body)
    errors: tuple[int, ...]
    body: str | None = None
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    media: str = "application/json"
    links: dict[str, str] = field(default_factory=dict)


# Registration routes: their 400 validation_error always carries details.errors (issue 24 part 6).
REGISTRATIONS = frozenset(
    {
        "putEvalSuite",
        "evalSuiteFromRuns",
        "publishEvalSuiteDraft",
        "evalSuiteAccept",
        "createEvalSuiteRule",
        "registerWorkflow",
        "registerTool",
        "registerMcpServer",
        "putCredential",
        "registerAgentVersion",
        "transitionAgentDeployment",
        "rollbackAgentChannel",
        "registerWebhook",
        "rotateWebhookSecret",
    }
)
_READ = (400, 401, 403, 404, 406)
_WRITE = (400, 401, 403, 404, 406, 409, 413, 415, 422)

# One operation per (route, verb). ":verb" operations share an API Gateway route with the plain resource.
OPERATIONS: dict[tuple[str, str], list[Op]] = {
    ("GET", "/.well-known/openwop"): [
        Op(
            "/.well-known/openwop",
            "getCapabilities",
            {200: "Capabilities", 304: None},
            (406,),
            headers=("If-None-Match",),
        )
    ],
    ("GET", "/openapi.json"): [Op("/openapi.json", "getOpenApi", {200: "Object"}, (406,))],
    ("POST", "/runs"): [
        Op(
            "/runs",
            "createRun",
            {201: "CreateRunResponse"},
            (*_WRITE, 429),
            body="CreateRunRequest",
            headers=("Idempotency-Key", "OpenWOP-Dedup"),
            links={
                "GetRun": "getRun",
                "PollRunEvents": "pollRunEvents",
                "CancelRun": "cancelRun",
                "ForkRun": "forkRun",
                "DiffRun": "diffRun",
                "GetEvalSummary": "getEvalSummary",
            },
        )
    ],
    ("GET", "/runs"): [
        Op("/runs", "listRuns", {200: "RunList"}, (400, 401, 406), query=("limit", "cursor", "workflowId", "status"))
    ],
    ("GET", "/runs/{runId}"): [
        Op("/runs/{runId}", "getRun", {200: "RunSnapshot", 304: None}, _READ, headers=("If-None-Match",)),
        Op("/runs/{runId}:diff", "diffRun", {200: "Object"}, _READ, query=("against",)),
    ],
    ("POST", "/runs/{runId}"): [
        Op(
            "/runs/{runId}:fork",
            "forkRun",
            {201: "ForkRunResponse"},
            (*_WRITE, 410),
            body="ForkRunRequest",
            headers=("Idempotency-Key",),
        ),
        Op(
            "/runs/{runId}:pause",
            "pauseRun",
            {202: "PauseRunResponse"},
            _WRITE,
            body="PauseRunRequest",
            headers=("Idempotency-Key",),
        ),
        Op(
            "/runs/{runId}:resume",
            "resumeRun",
            {202: "ResumeRunResponse"},
            _WRITE,
            body="ResumeRunRequest",
            headers=("Idempotency-Key",),
        ),
    ],
    ("POST", "/{collection}"): [
        Op(
            "/runs:bulk-cancel",
            "bulkCancelRuns",
            {200: "BulkCancelRunsResponse"},
            _WRITE,
            body="BulkCancelRunsRequest",
            headers=("Idempotency-Key",),
        )
    ],
    ("POST", "/runs/{runId}/interrupts/{nodeId}"): [
        Op(
            "/runs/{runId}/interrupts/{nodeId}",
            "resolveInterruptByRun",
            {200: "ResolveInterruptResponse"},
            _WRITE,
            body="ResolveInterruptRequest",
            headers=("Idempotency-Key",),
        )
    ],
    ("GET", "/interrupts/{token}"): [
        Op("/interrupts/{token}", "inspectInterruptByToken", {200: "InterruptPayload"}, (401, 404, 406, 409, 410))
    ],
    ("POST", "/interrupts/{token}"): [
        Op(
            "/interrupts/{token}",
            "resolveInterruptByToken",
            {200: "ResolveInterruptResponse"},
            (*_WRITE, 401, 410),
            body="ResolveInterruptRequest",
            headers=("Idempotency-Key",),
        )
    ],
    ("POST", "/host/openwop-serverless/runs/{runId}/interrupts/{nodeId}/token"): [
        Op(
            "/host/openwop-serverless/runs/{runId}/interrupts/{nodeId}/token",
            "mintInterruptToken",
            {201: "InterruptToken"},
            (*_READ, 409),
        )
    ],
    ("DELETE", "/runs/{runId}"): [Op("/runs/{runId}", "deleteRun", {204: None}, (*_READ, 409))],
    ("POST", "/runs/{runId}/cancel"): [
        Op(
            "/runs/{runId}/cancel",
            "cancelRun",
            {200: "CancelRunResponse"},
            _WRITE,
            body="CancelRunRequest",
            headers=("Idempotency-Key",),
        )
    ],
    ("GET", "/runs/{runId}/events"): [
        Op(
            "/runs/{runId}/events",
            "streamRunEvents",
            {200: "EventStream"},
            _READ,
            query=("streamMode", "bufferMs"),
            headers=("Last-Event-ID",),
            media="text/event-stream",
        )
    ],
    ("GET", "/runs/{runId}/events/poll"): [
        Op(
            "/runs/{runId}/events/poll",
            "pollRunEvents",
            {200: "PollPage"},
            _READ,
            query=("afterSequence", "timeout", "streamMode"),
        )
    ],
    ("GET", "/runs/{runId}/effects"): [
        Op("/runs/{runId}/effects", "getRunEffects", {200: "EffectLedgerProjection"}, _READ)
    ],
    ("GET", "/runs/{runId}/eval-summary"): [
        Op("/runs/{runId}/eval-summary", "getEvalSummary", {200: "Object"}, (*_READ, 409))
    ],
    ("GET", "/host/openwop-serverless/runs/{runId}/eval-report"): [
        Op(
            "/host/openwop-serverless/runs/{runId}/eval-report",
            "getEvalReport",
            {200: "Object"},
            (*_READ, 409),
            query=("limit", "cursor"),
        )
    ],
    ("GET", "/host/openwop-serverless/eval-runs"): [
        Op(
            "/host/openwop-serverless/eval-runs",
            "listEvalRuns",
            {200: "Object"},
            (400, 401, 406),
            query=("suite", "agent", "name", "status", "limit", "cursor"),
        )
    ],
    ("GET", "/host/openwop-serverless/ui"): [
        Op("/host/openwop-serverless/ui", "getViewer", {200: "Html"}, (406,), media="text/html")
    ],
    ("GET", "/workflows/{workflowId}"): [
        Op("/workflows/{workflowId}", "getWorkflow", {200: "Object"}, (400, 401, 404, 406))
    ],
    ("GET", "/host/effect-seams"): [Op("/host/effect-seams", "getEffectSeamManifest", {200: "Object"}, (401, 406))],
    ("POST", "/host/openwop-serverless/eval-suites"): [
        Op(
            "/host/openwop-serverless/eval-suites",
            "putEvalSuite",
            {200: "SuiteRegistration", 201: "SuiteRegistration"},
            (400, 401, 406, 409, 413, 415),
            body="EvalSuite",
        )
    ],
    ("GET", "/host/openwop-serverless/eval-suites"): [
        Op(
            "/host/openwop-serverless/eval-suites",
            "listEvalSuites",
            {200: "EvalSuiteList"},
            (400, 401, 406),
            query=("limit", "cursor"),
        )
    ],
    ("GET", "/host/openwop-serverless/eval-suites/{suiteId}"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}",
            "getEvalSuite",
            {200: "EvalSuiteVersions"},
            (401, 404, 406),
        )
    ],
    ("POST", "/host/openwop-serverless/eval-suites/{suiteId}"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}:from-runs",
            "evalSuiteFromRuns",
            {201: "SuiteFromRuns"},
            (400, 401, 404, 406, 409, 413, 415),
            body="EvalSuiteFromRunsRequest",
        ),
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}:publish",
            "publishEvalSuiteDraft",
            {201: "SuiteFromRuns"},
            (400, 401, 406, 409, 413, 415),
            body="EvalSuitePublishRequest",
        ),
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}:accept",
            "evalSuiteAccept",
            {201: "SuiteAccepted"},
            (400, 401, 406, 409, 413, 415),
            body="EvalSuiteAcceptRequest",
        ),
    ],
    ("GET", "/host/openwop-serverless/eval-suites/{suiteId}/rules"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/rules",
            "listEvalSuiteRules",
            {200: "Object"},
            (401, 404, 406),
        )
    ],
    ("POST", "/host/openwop-serverless/eval-suites/{suiteId}/rules"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/rules",
            "createEvalSuiteRule",
            {201: "Object"},
            (400, 401, 406, 413, 415),
            body="EvalSuiteRuleRequest",
        )
    ],
    ("DELETE", "/host/openwop-serverless/eval-suites/{suiteId}/rules/{ruleId}"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/rules/{ruleId}",
            "deleteEvalSuiteRule",
            {204: None},
            (401, 404, 406),
        )
    ],
    ("GET", "/host/openwop-serverless/eval-suites/{suiteId}/draft"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/draft",
            "getEvalSuiteDraft",
            {200: "Object"},
            (401, 404, 406),
        )
    ],
    ("GET", "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}",
            "getEvalSuiteVersion",
            {200: "Object"},
            (401, 404, 406),
        )
    ],
    ("DELETE", "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}"): [
        Op(
            "/host/openwop-serverless/eval-suites/{suiteId}/versions/{version}",
            "deleteEvalSuiteVersion",
            {204: None},
            (401, 404, 406, 409),
        )
    ],
    ("POST", "/host/openwop-serverless/workflows"): [
        Op(
            "/host/openwop-serverless/workflows",
            "registerWorkflow",
            {200: "WorkflowRegistration", 201: "WorkflowRegistration"},
            (400, 401, 406, 409, 413, 415, 422),
            body="Object",
        )
    ],
    ("GET", "/host/openwop-serverless/workflows"): [
        Op(
            "/host/openwop-serverless/workflows",
            "listWorkflows",
            {200: "WorkflowList"},
            (400, 401, 406),
            query=("limit", "cursor?workflows"),
        )
    ],
    ("DELETE", "/host/openwop-serverless/workflows/{workflowId}"): [
        Op("/host/openwop-serverless/workflows/{workflowId}", "deleteWorkflow", {204: None}, (401, 404, 406, 409))
    ],
    ("GET", "/tools"): [Op("/tools", "listTools", {200: "ToolList"}, (401, 406))],
    ("GET", "/tools/{toolId}"): [Op("/tools/{toolId}", "getTool", {200: "ToolDescriptor"}, (401, 404, 406))],
    ("POST", "/host/openwop-serverless/tools"): [
        Op(
            "/host/openwop-serverless/tools",
            "registerTool",
            {200: "ToolDescriptor", 201: "ToolDescriptor"},
            (400, 401, 406, 409, 413, 415),
            body="ToolRegistration",
        )
    ],
    ("DELETE", "/host/openwop-serverless/tools/{toolId}"): [
        Op("/host/openwop-serverless/tools/{toolId}", "deleteTool", {204: None}, (401, 404, 406))
    ],
    ("POST", "/host/openwop-serverless/mcp-servers"): [
        Op(
            "/host/openwop-serverless/mcp-servers",
            "registerMcpServer",
            {200: "McpServer", 201: "McpServer"},
            (400, 401, 406, 413, 415),
            body="McpServerRegistration",
        )
    ],
    ("GET", "/host/openwop-serverless/mcp-servers"): [
        Op("/host/openwop-serverless/mcp-servers", "listMcpServers", {200: "McpServerList"}, (401, 406))
    ],
    ("DELETE", "/host/openwop-serverless/mcp-servers/{serverId}"): [
        Op("/host/openwop-serverless/mcp-servers/{serverId}", "deleteMcpServer", {204: None}, (401, 404, 406))
    ],
    ("PUT", "/host/openwop-serverless/credentials/{credentialRef}"): [
        Op(
            "/host/openwop-serverless/credentials/{credentialRef}",
            "putCredential",
            {200: "Credential", 201: "Credential"},
            (400, 401, 406, 413, 415),
            body="CredentialPut",
        )
    ],
    ("GET", "/host/openwop-serverless/credentials"): [
        Op("/host/openwop-serverless/credentials", "listCredentials", {200: "CredentialList"}, (401, 406))
    ],
    ("GET", "/host/openwop-serverless/credentials/{credentialRef}"): [
        Op(
            "/host/openwop-serverless/credentials/{credentialRef}",
            "getCredential",
            {200: "Credential"},
            (401, 404, 406),
        )
    ],
    ("DELETE", "/host/openwop-serverless/credentials/{credentialRef}"): [
        Op("/host/openwop-serverless/credentials/{credentialRef}", "deleteCredential", {204: None}, (401, 404, 406))
    ],
    ("POST", "/host/openwop-serverless/agents"): [
        Op(
            "/host/openwop-serverless/agents",
            "registerAgentVersion",
            {200: "AgentInventoryEntry", 201: "AgentInventoryEntry"},
            (400, 401, 403, 406, 409, 413, 415),
            body="AgentRegistration",
        )
    ],
    ("GET", "/agents"): [Op("/agents", "listAgents", {200: "AgentList"}, (401, 406))],
    ("GET", "/agents/{agentId}"): [Op("/agents/{agentId}", "getAgent", {200: "AgentInventoryEntry"}, (401, 404, 406))],
    ("GET", "/agents/{agentId}/deployments"): [
        Op("/agents/{agentId}/deployments", "listAgentDeployments", {200: "AgentDeploymentList"}, (401, 404, 406))
    ],
    ("POST", "/agents/{agentId}/deployments"): [
        Op(
            "/agents/{agentId}/deployments",
            "transitionAgentDeployment",
            {200: "AgentDeployment"},
            (400, 401, 404, 406, 413, 415, 422),
            body="DeploymentTransition",
        )
    ],
    ("POST", "/host/openwop-serverless/agents/{agentId}/deployments/{channel}"): [
        Op(
            "/host/openwop-serverless/agents/{agentId}/deployments/{channel}:rollback",
            "rollbackAgentChannel",
            {200: "ChannelRollback"},
            (400, 401, 404, 406, 409),
        )
    ],
    ("GET", "/host/openwop-serverless/agents/{agentId}/deployments/{channel}/history"): [
        Op(
            "/host/openwop-serverless/agents/{agentId}/deployments/{channel}/history",
            "listAgentChannelHistory",
            {200: "ChannelHistory"},
            (400, 401, 404, 406),
        )
    ],
    ("POST", "/webhooks"): [
        Op(
            "/webhooks",
            "registerWebhook",
            {201: "WebhookRegistration"},
            (400, 401, 406, 409, 413, 415),
            body="RegisterWebhook",
            headers=("Idempotency-Key",),
        )
    ],
    ("GET", "/webhooks"): [
        Op("/webhooks", "listWebhooks", {200: "WebhookList"}, (400, 401, 406), query=("limit", "cursor"))
    ],
    ("DELETE", "/webhooks/{webhookId}"): [
        Op("/webhooks/{webhookId}", "unregisterWebhook", {204: None}, (400, 401, 403, 404, 406))
    ],
    ("POST", "/webhooks/{webhookId}/rotate-secret"): [
        Op(
            "/webhooks/{webhookId}/rotate-secret",
            "rotateWebhookSecret",
            {200: "RotatedWebhookSecret"},
            (400, 401, 403, 404, 406, 413, 415),
            body="RotateWebhookSecret",
        )
    ],
    ("GET", "/webhooks/{webhookId}/dead-letters"): [
        Op(
            "/webhooks/{webhookId}/dead-letters",
            "listWebhookDeadLetters",
            {200: "WebhookDeadLetterPage"},
            (400, 401, 403, 404, 406),
            query=("limit", "cursor"),
        )
    ],
}

# Wire run ids: "<tenant>/<opaque>" travels as one path segment with "/" written "~2F".
WIRE_RUN_ID = r"^(anon:)?[A-Za-z0-9._-]{1,64}~2F[A-Za-z0-9._-]{16,64}$"
NAME_ID = r"^[A-Za-z0-9._~:-]{1,128}$"
STREAM_MODE = r"^(values|(updates|messages|debug)(,(updates|messages|debug))*)$"

PARAMETERS: dict[str, dict[str, Any]] = {
    "runId": {"in": "path", "schema": {"type": "string", "pattern": WIRE_RUN_ID}},
    "workflowId": {"in": "path", "schema": {"type": "string", "pattern": NAME_ID}},
    "agentId": {"in": "path", "schema": {"type": "string", "pattern": AGENT_ID_PATTERN}},
    "channel": {"in": "path", "schema": {"type": "string", "enum": ["stable", "canary"]}},
    "webhookId": {"in": "path", "schema": {"type": "string", "pattern": WIRE_RUN_ID}},
    "toolId": {"in": "path", "schema": {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,200}$"}},
    "serverId": {"in": "path", "schema": {"type": "string", "pattern": r"^[a-z0-9-]{1,48}$"}},
    "credentialRef": {"in": "path", "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"}},
    "nodeId": {"in": "path", "schema": {"type": "string", "pattern": NAME_ID}},
    "token": {
        "in": "path",
        "schema": {"type": "string", "minLength": 1, "maxLength": 2048, "pattern": r"^[A-Za-z0-9._~-]+$"},
    },
    "limit": {"in": "query", "schema": {"type": "integer", "minimum": 1}},
    "cursor": {"in": "query", "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{8,2048}$"}},
    "workflowId?": {"in": "query", "schema": {"type": "string", "pattern": NAME_ID}},
    "status": {"in": "query", "schema": {"type": "string", "enum": list(RUN_STATUSES)}},
    # listWorkflows pages by workflowId (the last one of the previous page), not by an opaque cursor
    "cursor?workflows": {"in": "query", "schema": {"type": "string", "pattern": r"^[a-z][a-z0-9_-]{0,127}$"}},
    "suiteId": {"in": "path", "schema": {"type": "string", "maxLength": 200}},
    "version": {"in": "path", "schema": {"type": "string", "maxLength": 64}},
    "ruleId": {"in": "path", "schema": {"type": "string", "maxLength": 64}},
    # listEvalRuns filters: a suiteId, an agentId, an experiment name (1..128 characters each)
    "suite": {"in": "query", "schema": {"type": "string", "minLength": 1, "maxLength": 128}},
    "agent": {"in": "query", "schema": {"type": "string", "minLength": 1, "maxLength": 128}},
    "name": {"in": "query", "schema": {"type": "string", "minLength": 1, "maxLength": 128}},
    "against": {"in": "query", "required": True, "schema": {"type": "string", "pattern": WIRE_RUN_ID}},
    "streamMode": {"in": "query", "schema": {"type": "string", "pattern": STREAM_MODE}},
    "bufferMs": {"in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 5000}},
    "afterSequence": {"in": "query", "schema": {"type": "integer", "minimum": 0}},
    "timeout": {"in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 60}},
    # Any value (the spec's own document: a string): one that is not the current ETag is simply no match.
    "If-None-Match": {"in": "header", "schema": {"type": "string"}},
    "Idempotency-Key": {"in": "header", "schema": {"type": "string", "pattern": r"^[A-Za-z0-9._~-]{22,128}$"}},
    "OpenWOP-Dedup": {"in": "header", "schema": {"type": "string", "enum": ["enforce"]}},
    "Last-Event-ID": {"in": "header", "schema": {"type": "string", "pattern": r"^[0-9]{1,9}$"}},
    # The major alone or major.minor (versioning.md §1): present but empty names no version and is a 406.
    "OpenWOP-Version": {"in": "header", "schema": {"type": "string", "pattern": r"^2(\.[0-9]+)?$"}},
    # The corpus release the client was built against (versioning.md §1.5): below minClientVersion is a 426; any
    # other value, well-formed or not, is served.
    "OpenWOP-Client-Version": {"in": "header", "schema": {"type": "string", "not": {"pattern": below_floor_pattern()}}},
}

_STR = {"type": "string"}
_OBJ: dict[str, Any] = {"type": "object"}
RESPONSES: dict[str, dict[str, Any]] = {
    "Object": _OBJ,
    "EventStream": {
        "type": "object",
        "description": "one Server-Sent Events frame; data is the JSON event (an array of them for event: batch)",
        "required": ["data"],
        "properties": {"event": _STR, "id": _STR, "data": _STR},
    },
    "ErrorEnvelope": {
        "type": "object",
        "required": ["error", "message"],
        "additionalProperties": False,
        "properties": {
            "error": {"type": "string", "pattern": r"^[a-z][a-z0-9_.-]*$"},
            "message": {"type": "string", "minLength": 1},
            "details": _OBJ,
        },
    },
    # A registration's validation_error says where: one entry per fault (at most 10), each an RFC 6901 pointer into
    # the request body ("" the whole body; with "parameter", a path or query parameter instead) and a fixed message.
    "RegistrationError": {
        "allOf": [{"$ref": "#/components/schemas/ErrorEnvelope"}],
        "if": {"required": ["error"], "properties": {"error": {"const": "validation_error"}}},
        "then": {
            "required": ["details"],
            "properties": {
                "details": {
                    "type": "object",
                    "required": ["errors"],
                    "properties": {
                        "errors": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 10,
                            "items": {"$ref": "#/components/schemas/ValidationFault"},
                        }
                    },
                }
            },
        },
    },
    "ValidationFault": {
        "type": "object",
        "required": ["pointer", "message"],
        "properties": {
            "pointer": {"type": "string", "pattern": r"^(/([^~/]|~[01])*)*$"},
            "message": {"type": "string", "minLength": 1},
            "keyword": _STR,
            "parameter": _STR,
        },
    },
    "Capabilities": {
        "type": "object",
        "required": ["protocolVersions", "preferredVersion"],
        "properties": {"protocolVersions": {"type": "array", "items": _STR}},
    },
    "CreateRunResponse": {
        "type": "object",
        "required": ["runId", "status"],
        "properties": {"runId": _STR, "status": _STR, "eventsUrl": _STR, "statusUrl": _STR},
    },
    "ForkRunResponse": {
        "type": "object",
        "required": ["runId", "sourceRunId", "fromSeq", "mode"],
        "properties": {
            "runId": _STR,
            "sourceRunId": _STR,
            "fromSeq": {"type": "integer"},
            "mode": {"enum": ["replay", "branch"]},
        },
    },
    "RunSnapshot": {
        "type": "object",
        "required": ["runId", "status", "owner"],
        "properties": {"runId": _STR, "status": _STR, "owner": _OBJ},
    },
    "RunList": {
        "type": "object",
        "required": ["runs"],
        "properties": {
            "runs": {"type": "array", "items": {"$ref": "#/components/schemas/RunSnapshot"}},
            "nextCursor": _STR,
        },
    },
    "EffectLedgerProjection": {
        "type": "object",
        "required": ["runId", "effects"],
        "properties": {
            "runId": _STR,
            "effects": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["effectId", "nodeId", "attempt", "keying", "state", "at"],
                    "properties": {
                        "effectId": _STR,
                        "nodeId": _STR,
                        "attempt": {"type": "integer", "minimum": 1},
                        "keying": {"enum": ["business-identity", "activity-recipe"]},
                        "state": {"enum": ["claimed", "completed", "released", "escaped"]},
                        "at": _STR,
                    },
                },
            },
        },
    },
    "CancelRunResponse": {
        "type": "object",
        "required": ["runId", "status"],
        "properties": {"runId": _STR, "status": {"const": "cancelled"}},
    },
    "PauseRunResponse": {
        "type": "object",
        "required": ["runId", "status"],
        "properties": {"runId": _STR, "status": {"const": "paused"}, "pausedAt": _STR},
    },
    "ResumeRunResponse": {
        "type": "object",
        "required": ["runId", "status"],
        "properties": {"runId": _STR, "status": {"const": "running"}, "resumedAt": _STR},
    },
    "BulkCancelRunsResponse": {
        "type": "object",
        "required": ["results"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["runId", "ok"],
                    "properties": {
                        "runId": _STR,
                        "ok": {"type": "boolean"},
                        "status": _STR,
                        "error": {"type": "object", "required": ["code", "message"]},
                    },
                },
            }
        },
    },
    "ResolveInterruptResponse": {
        "type": "object",
        "required": ["runId", "nodeId", "status"],
        "properties": {"runId": _STR, "nodeId": _STR, "status": _STR, "interruptId": _STR},
    },
    "InterruptPayload": {
        "type": "object",
        "required": ["kind", "key", "data"],
        "properties": {"kind": _STR, "key": _STR, "data": _OBJ},
    },
    "InterruptToken": {
        "type": "object",
        "required": ["token", "expiresAt"],
        "properties": {"token": _STR, "expiresAt": _STR},
    },
    "PollPage": {
        "type": "object",
        "required": ["events", "lastSequence", "isTerminal"],
        "properties": {
            "events": {"type": "array", "items": _OBJ},
            "lastSequence": {"type": "integer"},
            "isTerminal": {"type": "boolean"},
        },
    },
    "WorkflowRegistration": {
        "type": "object",
        "required": ["workflowId", "version", "name"],
        "properties": {"workflowId": _STR, "version": _STR, "name": _STR},
    },
    "WorkflowList": {
        "type": "object",
        "required": ["workflows"],
        "properties": {
            "workflows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["workflowId", "name", "version"],
                    "properties": {"workflowId": _STR, "name": _STR, "version": _STR, "registeredAt": _STR},
                },
            },
            "nextCursor": _STR,
        },
    },
    "ToolList": {
        "type": "object",
        "required": ["tools"],
        "properties": {"tools": {"type": "array", "items": {"$ref": "#/components/schemas/ToolDescriptor"}}},
    },
    "McpServer": {
        "type": "object",
        "required": ["serverId", "url", "toolIds"],
        "properties": {
            "serverId": _STR,
            "url": _STR,
            "description": _STR,
            "timeoutMs": {"type": "integer"},
            "credentialRef": _STR,
            "toolIds": {"type": "array", "items": _STR},
            # a registration's answer: the audit run of the listing's MCP negotiation
            "negotiation": {
                "type": "object",
                "required": ["runId", "version"],
                "properties": {"runId": _STR, "version": _STR},
            },
        },
    },
    "McpServerList": {
        "type": "object",
        "required": ["servers"],
        "properties": {"servers": {"type": "array", "items": {"$ref": "#/components/schemas/McpServer"}}},
    },
    "Credential": {
        "type": "object",
        "required": ["credentialRef", "type", "createdAt", "updatedAt"],
        "additionalProperties": False,
        "properties": {
            "credentialRef": _STR,
            "type": {"enum": ["bearer", "header"]},
            "createdAt": _STR,
            "updatedAt": _STR,
            "description": _STR,
        },
    },
    "CredentialList": {
        "type": "object",
        "required": ["credentials"],
        "properties": {"credentials": {"type": "array", "items": {"$ref": "#/components/schemas/Credential"}}},
    },
    "AgentInventoryEntry": {
        "type": "object",
        "required": ["agentId", "persona", "modelClass", "toolAllowlist"],
        "properties": {
            "agentId": _STR,
            "persona": _STR,
            "label": _STR,
            "modelClass": _STR,
            "packName": _STR,
            "packVersion": _STR,
            "description": _STR,
            "toolAllowlist": {"type": "array", "items": _STR},
            "hasHandoffSchemas": {"type": "boolean"},
            "version": _STR,
            "versions": {"type": "array", "items": _STR},
            "model": _OBJ,
            "maxTurns": {"type": "integer"},
        },
    },
    "AgentList": {
        "type": "object",
        "required": ["agents"],
        "properties": {"agents": {"type": "array", "items": {"$ref": "#/components/schemas/AgentInventoryEntry"}}},
    },
    "AgentDeployment": {
        "type": "object",
        "required": ["agentId", "version", "state"],
        "additionalProperties": False,
        "properties": {
            "agentId": _STR,
            "version": _STR,
            "state": {"enum": ["draft", "test", "staged", "active", "paused", "deprecated", "rolled-back"]},
            "canaryPercent": {"type": "integer"},
            "rollbackPointer": _STR,
            "channels": {"type": "array", "items": _STR},
            "evalRunId": _STR,
        },
    },
    "ChannelRollback": {
        "type": "object",
        "required": ["agentId", "channel", "version", "rolledBackVersion"],
        "additionalProperties": False,
        "properties": {"agentId": _STR, "channel": _STR, "version": _STR, "rolledBackVersion": _STR},
    },
    "ChannelHistory": {
        "type": "object",
        "required": ["agentId", "channel", "history"],
        "additionalProperties": False,
        "properties": {
            "agentId": _STR,
            "channel": _STR,
            "history": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["version", "evalRunId", "at", "keyId"],
                    "additionalProperties": False,
                    "properties": {
                        "version": {"type": ["string", "null"]},
                        "evalRunId": {"type": ["string", "null"]},
                        "at": _STR,
                        "keyId": {"type": ["string", "null"]},
                    },
                },
            },
        },
    },
    "AgentDeploymentList": {
        "type": "object",
        "required": ["deployments"],
        "properties": {"deployments": {"type": "array", "items": {"$ref": "#/components/schemas/AgentDeployment"}}},
    },
    "Html": {"type": "string"},
    "WebhookRegistration": {
        "type": "object",
        "required": ["webhookId", "subscriptionId", "url", "eventTypes", "createdAt"],
        "properties": {
            "webhookId": _STR,
            "subscriptionId": _STR,
            "url": _STR,
            "createdAt": _STR,
            "eventTypes": {"type": "array", "items": _STR},
            "secret": _STR,
            "signatureAlgorithms": {"type": "array", "items": _STR},
        },
    },
    "WebhookList": {
        "type": "object",
        "required": ["webhooks"],
        "properties": {
            "webhooks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "webhookId",
                        "subscriptionId",
                        "url",
                        "events",
                        "eventTypes",
                        "tags",
                        "signatureAlgorithms",
                        "createdAt",
                    ],
                    "properties": {
                        "webhookId": _STR,
                        "subscriptionId": _STR,
                        "url": _STR,
                        "events": {"type": "array", "items": _STR},
                        "eventTypes": {"type": "array", "items": _STR},
                        "tags": {"type": "array", "items": _STR},
                        "signatureAlgorithms": {"type": "array", "items": _STR},
                        "createdAt": _STR,
                    },
                },
            },
            "nextCursor": _STR,
        },
    },
    "RotatedWebhookSecret": {
        "type": "object",
        "required": ["rotatedAt", "previousSecretExpiresAt"],
        "additionalProperties": False,
        "properties": {"rotatedAt": _STR, "previousSecretExpiresAt": _STR},
    },
    "WebhookDeadLetterPage": {
        "type": "object",
        "required": ["deliveries"],
        "properties": {
            "deliveries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "deliveryId",
                        "webhookId",
                        "runId",
                        "eventId",
                        "eventType",
                        "attempts",
                        "deadLetteredAt",
                        "expiresAt",
                        "reason",
                    ],
                    "properties": {
                        "deliveryId": _STR,
                        "webhookId": _STR,
                        "runId": _STR,
                        "eventId": _STR,
                        "eventType": _STR,
                        "attempts": {"type": "integer"},
                        "deadLetteredAt": _STR,
                        "expiresAt": _STR,
                        "reason": {"enum": ["retries_exhausted", "payload_unprojectable"]},
                        "lastStatus": {"type": "integer"},
                    },
                },
            },
            "nextCursor": _STR,
        },
    },
    "SuiteRegistration": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef"],
        "properties": {"suiteId": _STR, "version": _STR, "evalSuiteRef": _STR},
    },
    "SuiteFromRuns": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef", "taskCount", "addedCount"],
        "properties": {
            "suiteId": _STR,
            "version": _STR,
            "evalSuiteRef": _STR,
            "taskCount": {"type": "integer"},
            "addedCount": {"type": "integer"},
        },
    },
    "SuiteAccepted": {
        "type": "object",
        "required": ["suiteId", "version", "evalSuiteRef", "taskCount", "acceptedCount"],
        "properties": {
            "suiteId": _STR,
            "version": _STR,
            "evalSuiteRef": _STR,
            "taskCount": {"type": "integer"},
            "acceptedCount": {"type": "integer"},
        },
    },
    "EvalSuiteAcceptRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["runId"],
        "properties": {"runId": _STR, "taskIds": {"type": "array", "minItems": 1, "items": _STR}},
    },
    "EvalSuiteList": {
        "type": "object",
        "required": ["suites"],
        "properties": {
            "suites": {"type": "array", "items": {"$ref": "#/components/schemas/EvalSuiteEntry"}},
            "nextCursor": _STR,
        },
    },
    "EvalSuiteEntry": {
        "type": "object",
        "required": ["suiteId", "versions", "taskCount", "createdAt"],
        "properties": {
            "suiteId": _STR,
            "versions": {"type": "array", "items": _STR},
            "taskCount": {"type": "integer"},
            "createdAt": _STR,
        },
    },
    "EvalSuiteVersions": {
        "type": "object",
        "required": ["suiteId", "versions", "taskCount", "createdAt", "items"],
        "properties": {
            "suiteId": _STR,
            "versions": {"type": "array", "items": _STR},
            "taskCount": {"type": "integer"},
            "createdAt": _STR,
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["version", "evalSuiteRef", "taskCount", "createdAt"],
                    "properties": {
                        "version": _STR,
                        "evalSuiteRef": _STR,
                        "taskCount": {"type": "integer"},
                        "createdAt": _STR,
                    },
                },
            },
        },
    },
}

# createRun's links: the created run's id, in its wire form, feeds the operations on it.
_LINK_PARAMS = {"diffRun": {"runId": "$response.body#/runId", "against": "$response.body#/runId"}}


def _eval_suite_schemas() -> dict[str, Any]:
    """The host's own eval-suite schema, its ``$defs`` moved under components."""
    text = resources.files("shared.protocol").joinpath("schemas/eval-suite.schema.json").read_text("utf-8")
    text = text.replace('"#/$defs/', '"#/components/schemas/EvalSuite_')
    doc = json.loads(text)
    out = {f"EvalSuite_{name}": sub for name, sub in doc.pop("$defs", {}).items()}
    doc.pop("$schema", None)
    doc.pop("$id", None)
    out["EvalSuite"] = doc
    return out


def _parameter(name: str) -> dict[str, Any]:
    spec = PARAMETERS[name]
    return {
        "name": name.partition("?")[0],
        "required": spec["in"] == "path" or spec.get("required", False),
        **{k: v for k, v in spec.items() if k != "required"},
    }


def _operation(op: Op, auth: bool) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, schema in op.success.items():
        entry: dict[str, Any] = {"description": "success"}
        if schema is not None:
            entry["content"] = {
                op.media if status == 200 else "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{schema}"}
                }
            }
        responses[str(status)] = entry
    # Any request can be refused for its framing or headers (400), its protocol version (406) or its client's (426).
    statuses = sorted({*op.errors, 400, 406, 426, *((401,) if auth else ())} - set(op.success))
    for status in statuses:
        envelope = "RegistrationError" if status == 400 and op.operation_id in REGISTRATIONS else "ErrorEnvelope"
        responses[str(status)] = {
            "description": "error envelope",
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{envelope}"}}},
        }
    if op.links:
        responses["201"]["links"] = {
            name: {"operationId": target, "parameters": _LINK_PARAMS.get(target, {"runId": "$response.body#/runId"})}
            for name, target in op.links.items()
        }
    out: dict[str, Any] = {"operationId": op.operation_id, "responses": responses}
    if auth:
        out["security"] = [{"bearer": []}]
    names = [seg[1:-1] for seg in op.path.replace(":", "/").split("/") if seg.startswith("{")]
    names += [q if q not in PARAMETERS or PARAMETERS[q]["in"] == "query" else f"{q}?" for q in op.query]
    names += [*op.headers, "OpenWOP-Version", "OpenWOP-Client-Version"]
    out["parameters"] = [_parameter(n) for n in names]
    if op.body:
        optional = ("CancelRunRequest", "PauseRunRequest", "ResumeRunRequest")
        out["requestBody"] = {
            "required": op.body not in optional,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{op.body}"}}},
        }
    return out


def _create_run_requires(schema: dict[str, Any]) -> None:
    """runs.md §Create: ``mode: eval`` requires ``evalSuiteRef`` and ``agentId``, any other run ``workflowId``
    (a string: ``null`` is absent). The body struct cannot say it, so the document does."""
    string = {"type": "string", "minLength": 1}
    schema["if"] = {"required": ["mode"], "properties": {"mode": {"const": "eval"}}}
    schema["then"] = {
        "required": ["evalSuiteRef", "agentId"],
        "properties": {"evalSuiteRef": string, "agentId": string},
    }
    schema["else"] = {"required": ["workflowId"], "properties": {"workflowId": string}}


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    from shared.protocol.schemas import load_schema

    descriptor = {k: v for k, v in load_schema("tool-descriptor.schema.json").items() if k not in ("$schema", "$id")}
    from_runs = {
        k: v for k, v in load_schema("eval-suite-from-runs.schema.json").items() if k not in ("$schema", "$id")
    }
    rule = {k: v for k, v in load_schema("eval-suite-rule.schema.json").items() if k not in ("$schema", "$id")}
    schemas: dict[str, Any] = {
        **RESPONSES,
        **_eval_suite_schemas(),
        "ToolDescriptor": descriptor,
        "EvalSuiteFromRunsRequest": from_runs,
        "EvalSuiteRuleRequest": rule,
        "EvalSuitePublishRequest": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"version": {"type": "string", "pattern": r"^\d+\.\d+\.\d+$"}},
        },
    }
    import msgspec

    schemas.update(msgspec.json.schema_components(BODIES, ref_template="#/components/schemas/{name}")[1])
    for model in (
        ToolRegistration,
        McpServerRegistration,
        CredentialPut,
        AgentRegistration,
        DeploymentTransition,
        RegisterWebhook,
        RotateWebhookSecret,
    ):
        js = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in js.pop("$defs", {}).items():
            schemas[name] = sub
        schemas[model.__name__] = js
    _create_run_requires(schemas["CreateRunRequest"])
    paths: dict[str, Any] = {}
    for route in routes.ROUTES:
        if route.path == routes.DEFAULT_ROUTE or matching.is_seam_path(route.path):
            continue  # the seams profile has its own document (api/seams-v2.yaml), and is off by default
        ops = OPERATIONS[(route.method, route.path)]
        if tuple(op.path for op in ops) != route.operations:  # the manifest's 405s answer from route.operations
            raise ValueError(f"{route.key}: the document's operations differ from the route table's")
        for op in ops:
            paths.setdefault(op.path, {})[route.method.lower()] = _operation(op, route.auth)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "openwop-serverless",
            "version": "0.1.0",
            "description": "An OpenWOP v2 host on AWS serverless (the implemented surface).",
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


STORED = "openapi.json"
"""The generated document as this package serves it (``make openapi`` writes it; a test keeps it equal to
``document()``): serving it takes no validation library, where generating it imports every body model."""


def stored_text() -> str:
    return json.dumps(document(), indent=1) + "\n"


def main() -> None:
    (resources.files("shared.services") / STORED).write_text(stored_text(), encoding="utf-8")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
