"""Our served OpenAPI document for the implemented surface, generated from the route table and models."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from shared import manifest
from shared.protocol.models import CancelRunRequest, CreateRunRequest, ForkRunRequest

# One operation per (route, verb). ":verb" operations share an API Gateway route with the plain resource.
OPERATIONS: dict[tuple[str, str], list[tuple[str, str, int, str | None]]] = {
    ("GET", "/.well-known/openwop"): [("/.well-known/openwop", "getCapabilities", 200, None)],
    ("GET", "/openapi.json"): [("/openapi.json", "getOpenApi", 200, None)],
    ("POST", "/runs"): [("/runs", "createRun", 201, "CreateRunRequest")],
    ("GET", "/runs"): [("/runs", "listRuns", 200, None)],
    ("GET", "/runs/{runId}"): [("/runs/{runId}", "getRun", 200, None), ("/runs/{runId}:diff", "diffRun", 200, None)],
    ("POST", "/runs/{runId}"): [("/runs/{runId}:fork", "forkRun", 201, "ForkRunRequest")],
    ("DELETE", "/runs/{runId}"): [("/runs/{runId}", "deleteRun", 204, None)],
    ("POST", "/runs/{runId}/cancel"): [("/runs/{runId}/cancel", "cancelRun", 200, "CancelRunRequest")],
    ("GET", "/runs/{runId}/events"): [("/runs/{runId}/events", "streamRunEvents", 200, None)],
    ("GET", "/runs/{runId}/events/poll"): [("/runs/{runId}/events/poll", "pollRunEvents", 200, None)],
    ("GET", "/runs/{runId}/eval-summary"): [("/runs/{runId}/eval-summary", "getEvalSummary", 200, None)],
    ("GET", "/workflows/{workflowId}"): [("/workflows/{workflowId}", "getWorkflow", 200, None)],
    ("GET", "/host/effect-seams"): [("/host/effect-seams", "getEffectSeamManifest", 200, None)],
    ("POST", "/host/openwop-serverless/eval-suites"): [
        ("/host/openwop-serverless/eval-suites", "putEvalSuite", 201, "EvalSuite")],
}

ERROR_ENVELOPE = {
    "type": "object",
    "required": ["error", "message"],
    "additionalProperties": False,
    "properties": {"error": {"type": "string"}, "message": {"type": "string", "minLength": 1},
                   "details": {"type": "object"}},
}


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    schemas: dict[str, Any] = {"ErrorEnvelope": ERROR_ENVELOPE, "EvalSuite": {"type": "object"}}
    for model in (CreateRunRequest, ForkRunRequest, CancelRunRequest):
        js = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in js.pop("$defs", {}).items():
            schemas[name] = sub
        schemas[model.__name__] = js
    paths: dict[str, Any] = {}
    for route in manifest.ROUTES:
        if route.path == manifest.DEFAULT_ROUTE:
            continue
        for path, op_id, status, body in OPERATIONS[(route.method, route.path)]:
            op: dict[str, Any] = {
                "operationId": op_id,
                "responses": {
                    str(status): {"description": "success"},
                    "default": {"description": "error envelope",
                                "content": {"application/json": {"schema": {
                                    "$ref": "#/components/schemas/ErrorEnvelope"}}}},
                },
            }
            if route.auth:
                op["security"] = [{"bearer": []}]
            params = [seg[1:-1] for seg in path.replace(":", "/").split("/") if seg.startswith("{")]
            if params:
                op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                                    for p in params]
            if body:
                op["requestBody"] = {"required": True, "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{body}"}}}}
            paths.setdefault(path, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "openwop-serverless", "version": "0.1.0",
                 "description": "An OpenWOP v2 host on AWS serverless (the implemented surface)."},
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
