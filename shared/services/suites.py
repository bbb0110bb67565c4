"""Eval suites: validation (closed JSON Schema), registration per (tenant, suiteId, version), resolution of evalSuiteRef.

Storage (host table):
- conformance fixtures, seeded: ``pk SUITE#*``, ``sk <fixture-id>``;
- user suites: ``pk SUITE#<tenant>``, ``sk <suiteId>@<version>`` (several versions of one suiteId coexist);
- host-wide suites registered by an operator (CLI): ``pk SUITE#*``, ``sk <suiteId>@<version>``.

``evalSuiteRef`` forms (docs/decisions/0025-eval-suite-registration-and-refs.md):
- a conformance fixture id (``conformance-eval-regression-base``), or
  ``https://conformance.openwop.dev/eval-suites/<fixture-id>``;
- a registered suite by its own id: ``<suiteId>`` (the highest version visible to the tenant) or
  ``<suiteId>@<version>``, bare or as ``<host base URL>/eval-suites/<suiteId>[@<version>]``.
A tenant's own suites shadow host-wide ones of the same version; no tenant reads another tenant's suites.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from shared.engine import scorers
from shared.engine.canonical import same_json
from shared.errors import ValidationError, VersionConflictError
from shared.ports import Ports

GLOBAL = "*"
CONFORMANCE_ORIGIN = "conformance.openwop.dev"
SUITE_ID_RE = re.compile(r"^[a-z0-9.-]+\.evals\.[a-z0-9-]+$")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_URL_NAME_RE = re.compile(r"^(?:.*/)?eval-suites/([^/]+)$")


def suite_pk(tenant: str) -> str:
    return f"SUITE#{tenant}"


@lru_cache(maxsize=1)
def _validator() -> Any:
    from importlib import resources

    from jsonschema import Draft202012Validator

    text = resources.files("shared.protocol").joinpath("schemas/eval-suite.schema.json").read_text("utf-8")
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path) if path else "/"


def validate_suite(doc: Any) -> dict[str, Any]:
    """Schema, then the rules a schema cannot say (unique taskIds). Raises 400 validation_error with the
    failing locations (JSON pointers and schema keywords, never the offending values)."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (list(e.absolute_path), e.validator))
    if errors:
        details = [{"path": _pointer(e.absolute_path), "keyword": str(e.validator)} for e in errors[:10]]
        raise ValidationError("The eval suite does not match the suite schema.", {"errors": details})
    assert isinstance(doc, dict)
    seen: set[str] = set()
    for i, task in enumerate(doc["tasks"]):
        if task["taskId"] in seen:
            raise ValidationError("Each taskId must be unique in the suite.",
                                  {"errors": [{"path": f"/tasks/{i}/taskId", "keyword": "unique"}]})
        seen.add(task["taskId"])
        if "match" in task["expected"]:
            found = scorers.problems(task["expected"]["match"], f"/tasks/{i}/expected/match")
            if found:
                raise ValidationError("The eval suite does not match the suite schema.", {"errors": found[:10]})
    return doc


def ref_for(suite: dict[str, Any]) -> str:
    return f"{suite['suiteId']}@{suite['version']}"


def register(ports: Ports, tenant: str, doc: Any) -> tuple[int, dict[str, Any]]:
    """Store a suite under (tenant, suiteId, version). New: 201; the identical document again: 200;
    another document under the same suiteId and version: 409 version_conflict."""
    suite = validate_suite(doc)
    sk = ref_for(suite)
    body = {"suiteId": suite["suiteId"], "version": suite["version"], "evalSuiteRef": sk}
    if ports.host.put_item(suite_pk(tenant), sk, suite, if_absent=True, compress=True):
        return 201, body
    existing = ports.host.get_item(suite_pk(tenant), sk)
    if existing is not None and same_json(existing, suite):
        return 200, body
    raise VersionConflictError()


@dataclass(frozen=True)
class ResolvedSuite:
    suite: dict[str, Any]
    fixture_id: str | None  # set when the ref named a conformance fixture

    @property
    def stand_in_workflow_id(self) -> str:
        """A grammar-valid workflowId for the run's snapshot and run.started (eval runs have no workflow)."""
        return self.fixture_id or str(self.suite["suiteId"])


def _semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def resolve(ports: Ports, tenant: str, ref: str) -> ResolvedSuite | None:
    """The suite an evalSuiteRef names for this tenant, or None."""
    name = ref
    conformance_only = False
    if ref.startswith(("https://", "http://")):
        parts = urlsplit(ref)
        m = _URL_NAME_RE.match(parts.path)
        if m is None or parts.query or parts.fragment:
            return None
        name = m.group(1)
        conformance_only = parts.netloc == CONFORMANCE_ORIGIN
    suite_id, _, version = name.partition("@")
    if not SUITE_ID_RE.match(suite_id):
        if version or not name:
            return None
        doc = ports.host.get_item(suite_pk(GLOBAL), name)  # a conformance fixture id
        return ResolvedSuite(doc, name) if doc is not None else None
    if conformance_only:
        return None
    if version:
        if not VERSION_RE.match(version):
            return None
        doc = ports.host.get_item(suite_pk(tenant), name) or ports.host.get_item(suite_pk(GLOBAL), name)
        return ResolvedSuite(doc, None) if doc is not None else None
    candidates: dict[str, dict[str, Any]] = {}
    for pk in (suite_pk(GLOBAL), suite_pk(tenant)):  # the tenant's own shadow host-wide ones
        for sk, doc in ports.host.query(pk, f"{suite_id}@"):
            candidates[sk.partition("@")[2]] = doc
    if not candidates:
        return None
    best = max((v for v in candidates if VERSION_RE.match(v)), key=_semver, default=None)
    return ResolvedSuite(candidates[best], None) if best is not None else None
