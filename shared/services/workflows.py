"""Workflows a tenant registers: validation, versions, listing, deletion (docs/decisions/README.md, "Workflows a
tenant registers").

Stored through ``Ports.workflows``: every registered version (immutable), the current definition (the version
registered last, which runs of the workflowId use), the listing rows. Conformance fixtures are the host's and cannot
be registered over or deleted by a tenant (409).
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from functools import lru_cache
from typing import Any

from shared.engine.canonical import same_json
from shared.errors import (
    CapabilityRequiredError,
    NotFoundError,
    ValidationError,
    VersionConflictError,
    fault,
    invalid,
    pointer,
)
from shared.ports import Ports
from shared.services.common import page_limit

MAX_VERSION_CHARS = 128  # the version is part of a sort key; the schema bounds only its minimum
DEFAULT_PAGE = 50
MAX_PAGE = 100
_SCHEMA_ID_RE = re.compile(r"^[a-z][a-z0-9_-]{0,127}$")  # workflow-definition.schema.json `id`
_VENDORED = ("workflow-definition.schema.json", "ids.schema.json", "prompt-ref.schema.json", "agent-ref.schema.json")
# Referenced by the official schema but not vendored: features this host does not serve. Each resolves to a schema
# nothing matches, so a document using one is refused at that path (a 400 naming it), never a resolver crash.
_UNSERVED = ("compensation-policy.schema.json",)
_BASE = "https://openwop.dev/spec/v2/"
_NOT_FOUND = "No such workflow."


@lru_cache(maxsize=1)
def _validator() -> Any:
    """The official WorkflowDefinition schema with its vendored references, built once per cold start (each a valid
    2020-12 schema: checked by tests/unit/test_packaged_schemas.py, not on a request)."""
    from importlib import resources

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    base = resources.files("shared.protocol").joinpath("schemas")
    docs = {name: json.loads(base.joinpath(name).read_text("utf-8")) for name in _VENDORED}
    resources_ = [(_BASE + name, Resource.from_contents(doc, DRAFT202012)) for name, doc in docs.items()]
    resources_ += [(_BASE + name, DRAFT202012.create_resource(False)) for name in _UNSERVED]
    registry: Registry[Any] = Registry().with_resources(resources_)
    return Draft202012Validator(docs["workflow-definition.schema.json"], registry=registry)


def validate_definition(doc: Any) -> Any:
    """Schema (closed shape), then what this host cannot run, then the graph and bindings; returns the loaded
    ``Workflow``. Refusals are 400 ``validation_error`` with ``details.errors: [{path, keyword}]`` (never values),
    or 422 ``capability_required`` for ``settings.compensation``."""
    from shared.engine.registry import NODE_TYPES
    from shared.engine.workflow import MAX_EDGES, MAX_NODES, DefinitionError, check_bindings, load_workflow

    # Bounds before the schema walks a huge document.
    if isinstance(doc, dict):
        for key, bound in (("nodes", MAX_NODES), ("edges", MAX_EDGES)):
            if isinstance(doc.get(key), list) and len(doc[key]) > bound:
                raise invalid(f"The workflow definition has more than {bound} {key}.", [fault(f"/{key}", "maxItems")])
        settings = doc.get("settings")
        if isinstance(settings, dict) and "compensation" in settings:  # workflow-definition.schema.json: refuse it
            raise CapabilityRequiredError(
                "This host does not advertise compensation.", {"requiredCapability": "compensation"}
            )
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (list(e.absolute_path), str(e.validator)))
    if errors:
        raise invalid(
            "The workflow definition does not match the WorkflowDefinition schema.",
            [fault(pointer(e.absolute_path), str(e.validator or "unsupported")) for e in errors],
        )
    assert isinstance(doc, dict)
    if len(doc["version"]) > MAX_VERSION_CHARS:
        raise invalid("The workflow version is too long.", [fault("/version", "maxLength")])
    _refuse_unserved(doc)
    if "configurableSchema" in doc:
        _check_configurable_schema(doc["configurableSchema"])
    try:
        wf = load_workflow(doc, set(NODE_TYPES))
    except DefinitionError as exc:
        raise invalid(f"The workflow definition cannot run: {exc}.", [fault("", "graph")]) from exc
    index = {n: i for i, n in enumerate(wf.node_ids)}
    faults = check_bindings(wf)
    if faults:
        raise invalid(
            "A node input cannot be resolved here.",
            [fault(f"/nodes/{index[n]}/inputs/{k}", why) for n, k, why in faults],
        )
    return wf


def _unserved_node(i: int, n: dict[str, Any], node_types: Container[str]) -> list[dict[str, str]]:
    """The unserved members of node ``i``: disabled, an agent on a non-agent node or an unknown channel, an
    unknown compensation type."""
    errors: list[dict[str, str]] = []
    if n.get("disabled"):
        errors.append(fault(f"/nodes/{i}/disabled", "unsupported"))
    ref = n.get("agent")
    if ref is not None and n.get("typeId") != "core.agent":
        errors.append(fault(f"/nodes/{i}/agent", "unsupported"))
    elif ref is not None and "channel" in ref and ref["channel"] not in ("stable", "canary", "latest"):
        errors.append(fault(f"/nodes/{i}/agent/channel", "enum"))
    comp = n.get("compensation")
    if comp is not None and comp.get("nodeTypeId") not in node_types:
        errors.append(fault(f"/nodes/{i}/compensation/nodeTypeId", "unknown-type"))
    return errors


def _refuse_unserved(doc: dict[str, Any]) -> None:
    """Members the schema allows whose meaning this host does not implement: refused, never silently ignored."""
    from shared.engine.registry import NODE_TYPES

    errors: list[dict[str, str]] = []
    if "channels" in doc:
        errors.append(fault("/channels", "unsupported"))
    for i, e in enumerate(doc["edges"]):
        for key in ("condition", "sourceOutput", "targetInput"):
            if key in e:
                errors.append(fault(f"/edges/{i}/{key}", "unsupported"))
    for i, n in enumerate(doc["nodes"]):
        errors += _unserved_node(i, n, NODE_TYPES)
    if errors:
        raise invalid("The workflow definition uses a feature this host does not run.", errors)


def register(ports: Ports, tenant: str, doc: Any) -> tuple[int, dict[str, Any]]:
    """New (workflowId, version): 201 and it becomes the current version; the identical document again: 200;
    another document under an existing (workflowId, version), or a fixture's id: 409 ``version_conflict``."""
    wf = validate_definition(doc)
    wid, version = wf.id, str(doc["version"])
    body = {"workflowId": wid, "version": version, "name": doc["name"]}
    if ports.workflows.get_fixture(wid) is not None:
        raise VersionConflictError("The workflowId names a host fixture, which cannot be registered over.")
    if not ports.workflows.put_version(tenant, wid, version, doc):
        existing = ports.workflows.get_version(tenant, wid, version)
        if existing is not None and same_json(existing, doc):
            if ports.workflows.get_listing(tenant, wid) is None:  # a first attempt stopped half-way
                _publish(ports, tenant, doc, body)
            return 200, body
        raise VersionConflictError("Another document is already registered under this workflowId and version.")
    _publish(ports, tenant, doc, body)
    return 201, body


def _publish(ports: Ports, tenant: str, doc: dict[str, Any], body: dict[str, Any]) -> None:
    """Make ``doc`` the current definition and list it (last registered wins)."""
    ports.workflows.put_definition(tenant, body["workflowId"], doc)
    ports.workflows.put_listing(tenant, body["workflowId"], {**body, "registeredAt": ports.clock.iso()})


def register_workflow(ports: Ports, tenant: str, doc: Any) -> str:
    """Register and return the workflowId (the CLI, tests and the bench)."""
    return str(register(ports, tenant, doc)[1]["workflowId"])


def list_workflows(ports: Ports, tenant: str, params: dict[str, str]) -> dict[str, Any]:
    """The tenant's own registered workflows by workflowId, ``limit`` (1..100, default 50) per page; ``cursor``
    is the last workflowId of the previous page (the caller's own id; anything else is 400)."""
    limit = page_limit(params, DEFAULT_PAGE, MAX_PAGE)
    after = params.get("cursor")
    if after is not None and not _SCHEMA_ID_RE.fullmatch(after):
        raise ValidationError("The cursor is not valid.")
    rows = ports.workflows.list_listings(tenant, after=after)
    page = rows[:limit]
    out: dict[str, Any] = {
        "workflows": [{k: r[k] for k in ("workflowId", "name", "version", "registeredAt")} for r in page]
    }
    if len(rows) > limit:
        out["nextCursor"] = page[-1]["workflowId"]
    return out


def delete_workflow(ports: Ports, tenant: str, workflow_id: str) -> None:
    """Remove the tenant's registration: every version, the listing row, and the current definition (a marker).
    Runs already created keep the definition pinned in their data. Unknown, foreign or malformed: the same 404."""
    if not _SCHEMA_ID_RE.match(workflow_id):
        raise NotFoundError(_NOT_FOUND)
    if ports.workflows.get_fixture(workflow_id) is not None:
        raise VersionConflictError("The workflowId names a host fixture, which cannot be deleted.")
    if ports.workflows.get_listing(tenant, workflow_id) is None:
        raise NotFoundError(_NOT_FOUND)
    ports.workflows.delete_workflow(tenant, workflow_id, at=ports.clock.iso())


def _check_configurable_schema(schema: Any) -> None:
    """``configurableSchema`` must be a JSON Schema 2020-12 whose ``$ref``s stay inside it (nothing is fetched)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise invalid(
            "configurableSchema is not a JSON Schema 2020-12.",
            [fault("/configurableSchema" + pointer(exc.absolute_path), str(exc.validator))],
        ) from exc
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("$ref", "$dynamicRef"):
                if key in node and not (isinstance(node[key], str) and node[key].startswith("#")):
                    raise invalid(
                        "configurableSchema may only use local references.", [fault("/configurableSchema", key)]
                    )
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def check_configurable(schema: dict[str, Any], configurable: dict[str, Any]) -> None:
    """A run's ``configurable`` must satisfy its workflow's ``configurableSchema`` (runs.md: validated at create)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.exceptions import ValidationError as SchemaValidationError
    from referencing.exceptions import Unresolvable

    try:
        errors = sorted(
            Draft202012Validator(schema).iter_errors(configurable),
            key=lambda e: (list(e.absolute_path), str(e.validator)),
        )
    except (SchemaError, SchemaValidationError, Unresolvable, RecursionError) as exc:
        raise ValidationError("The workflow's configurableSchema cannot be evaluated.") from exc
    if errors:
        raise invalid(
            "configurable does not satisfy the workflow's configurableSchema.",
            [fault("/configurable" + pointer(e.absolute_path), str(e.validator)) for e in errors],
        )
