"""Our served OpenAPI document for the implemented surface, generated from the operation table and the models.

The data (operations, parameters, response schemas) is the protocol's, ``shared.protocol.openapi``; this module
assembles the document. It is complete enough for schemathesis (tests/integration/test_openapi_truth.py, --checks
all): every parameter with its grammar, the bearer scheme, each operation's statuses with their bodies, and links from
createRun to the operations on the created run.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from shared.protocol.agents import AgentRegistration, DeploymentTransition, SessionRequest
from shared.protocol.models import BODIES
from shared.protocol.openapi.operation import Op
from shared.protocol.openapi.operations import OPERATIONS
from shared.protocol.openapi.parameters import PARAMETERS
from shared.protocol.openapi.responses import RESPONSES
from shared.protocol.tools import CredentialPut, McpServerRegistration, ToolRegistration
from shared.protocol.webhook_bodies import RegisterWebhook, RotateWebhookSecret

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


def _operation(op: Op) -> dict[str, Any]:
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
    statuses = sorted({*op.errors, 400, 406, 426, *((401,) if op.auth else ())} - set(op.success))
    for status in statuses:
        envelope = "RegistrationError" if status == 400 and op.registration else "ErrorEnvelope"
        envelope = op.refusals.get(status, envelope)
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
    if op.description:
        out["description"] = op.description
    if op.auth:
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
        SessionRequest,
        RegisterWebhook,
        RotateWebhookSecret,
    ):
        js = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in js.pop("$defs", {}).items():
            schemas[name] = sub
        schemas[model.__name__] = js
    _create_run_requires(schemas["CreateRunRequest"])
    # The seams profile is not among the operations: it has its own document (api/seams-v2.yaml), and is off by default.
    paths: dict[str, Any] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
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
