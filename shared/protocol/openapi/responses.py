"""The served document's own response schemas, by name (``components.schemas``; the request bodies' come from the
body models and the spec's schemas, ``shared.services.openapi``)."""

from __future__ import annotations

from typing import Any

from shared.protocol.openapi.responses_evals import EVAL_SUITE_RESPONSES

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
    # A refusal of the tool gateway's MCP endpoint (decision 0143): the host's error envelope (a token, a run, a
    # body the host refuses before the SDK sees it), or a JSON-RPC error object as the MCP SDK and the revision check
    # answer it (e.g. -32022 for a protocol revision the gateway does not speak, -32700 for a body that is not JSON).
    "McpRefusal": {
        "anyOf": [
            {"$ref": "#/components/schemas/ErrorEnvelope"},
            {
                "type": "object",
                "required": ["jsonrpc", "error"],
                "properties": {
                    "jsonrpc": {"const": "2.0"},
                    "id": {"type": ["string", "integer", "null"]},
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {"code": {"type": "integer"}, "message": _STR, "data": {}},
                    },
                },
            },
        ]
    },
    # The promotion gate's refusal (decision 0147): every reason the named eval run is no evidence, each a code, a
    # fixed-form message and, where it is about tasks, their ids (at most 20; taskCount says how many).
    "EvalGateRefusal": {
        "allOf": [{"$ref": "#/components/schemas/ErrorEnvelope"}],
        "if": {"required": ["error"], "properties": {"error": {"const": "eval_gate_unmet"}}},
        "then": {
            "required": ["details"],
            "properties": {
                "details": {
                    "type": "object",
                    "required": ["reasons"],
                    "properties": {
                        "reasons": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "required": ["code", "message"],
                                "additionalProperties": False,
                                "properties": {
                                    "code": {
                                        "enum": [
                                            "no_evidence",
                                            "not_found",
                                            "other_agent",
                                            "wrong_version",
                                            "unfinished",
                                            "not_passed",
                                            "fixture_misses",
                                            "regressed",
                                            "score_fell",
                                        ]
                                    },
                                    "message": {"type": "string", "minLength": 1},
                                    "tasks": {"type": "array", "maxItems": 20, "items": _STR},
                                    "taskCount": {"type": "integer", "minimum": 0},
                                },
                            },
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
            "runtime": {
                "type": "object",
                "required": ["kind", "hasEndpoint"],
                "properties": {"kind": {"enum": ["host", "external"]}, "hasEndpoint": {"type": "boolean"}},
            },
        },
    },
    "AgentSession": {
        "type": "object",
        "required": [
            "runId",
            "sessionId",
            "token",
            "mcpUrl",
            "openaiBaseUrl",
            "completeUrl",
            "expiresAt",
            "resolvedAgentVersion",
        ],
        "additionalProperties": False,
        "properties": {
            "runId": _STR,
            "sessionId": _STR,
            "token": _STR,
            "mcpUrl": _STR,
            "openaiBaseUrl": _STR,
            "completeUrl": _STR,
            "expiresAt": {"type": "string", "format": "date-time"},
            "resolvedAgentVersion": _STR,
            "input": {"description": "the session's input (POST /runs/{runId}/session: what a fork's driver runs on)"},
        },
    },
    "SessionComplete": {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {
            "output": {},
            "error": {
                "type": "object",
                "required": ["message"],
                "additionalProperties": False,
                "properties": {"message": {"type": "string", "minLength": 1, "maxLength": 4096}},
            },
        },
    },
    "SessionCompletion": {
        "type": "object",
        "required": ["runId", "status"],
        "additionalProperties": False,
        "properties": {"runId": _STR, "status": {"enum": ["completed", "failed"]}},
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
    **EVAL_SUITE_RESPONSES,
}
