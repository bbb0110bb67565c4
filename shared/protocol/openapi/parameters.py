"""The served document's parameters, by name: path, query and header parameters with their grammar. An operation names
its query and header parameters (``Op.query``, ``Op.headers``); its path names the path parameters. A name with a
``?`` suffix is a variant of the parameter before it (``workflowId?``: the query filter, not the path segment)."""

from __future__ import annotations

from typing import Any

from shared.protocol.agents import AGENT_ID_PATTERN
from shared.protocol.client_version import below_floor_pattern
from shared.protocol.codes import RUN_STATUSES

# Wire run ids: "<tenant>/<opaque>" travels as one path segment with "/" written "~2F".
WIRE_RUN_ID = r"^(anon:)?[A-Za-z0-9._-]{1,64}~2F[A-Za-z0-9._-]{16,64}$"
NAME_ID = r"^[A-Za-z0-9._~:-]{1,128}$"
STREAM_MODE = r"^(values|(updates|messages|debug)(,(updates|messages|debug))*)$"

PARAMETERS: dict[str, dict[str, Any]] = {
    "runId": {"in": "path", "schema": {"type": "string", "pattern": WIRE_RUN_ID}},
    "gatewayId": {"in": "path", "schema": {"type": "string", "pattern": WIRE_RUN_ID}},
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
    # listWaitingTrials: the one listing of an eval run's trials (those waiting for their driver)
    "status?": {"in": "query", "schema": {"type": "string", "enum": ["waiting"]}},
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
