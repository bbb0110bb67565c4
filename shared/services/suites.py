"""Eval suites: validation (closed JSON Schema), registration per (tenant, suiteId, version), resolution of evalSuiteRef.

Stored through the suite repository (``ports.suites``; its key layout is the storage's, ``shared.storage.suites``):
the conformance fixtures (seeded); each tenant's versions, several of one suiteId coexisting, however many tasks they
hold; host-wide versions registered by an operator (CLI), owner ``*``.

``evalSuiteRef`` forms (docs/decisions/0025-eval-suite-registration-and-refs.md):
- a conformance fixture id (``conformance-eval-regression-base``), or
  ``https://conformance.openwop.dev/eval-suites/<fixture-id>``;
- a registered suite by its own id: ``<suiteId>`` (the highest version visible to the tenant) or
  ``<suiteId>@<version>``, bare or as ``<host base URL>/eval-suites/<suiteId>[@<version>]``.
A tenant's own suites shadow host-wide ones of the same version; no tenant reads another tenant's suites.

A tenant's resource (issue 24, docs/decisions/0112-suites-from-recorded-runs.md):
- an index row per version {suiteId, version, taskCount, createdAt} (the get routes never read the documents);
- a listing row per suite {suiteId, versions, taskCount, createdAt}, recomputed from the index rows after each write
  of a version (compare-and-set), so a page of the list is one Query (docs/decisions/0123-suite-list-pages.md);
- the eval runs that pinned a version (what a delete checks);
- a task may name its ``sourceRunId``: a link under that run (``SUITELINK#<suiteId>@<version>``) lets its erasure
  tombstone the task in every version that names it, with no scan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from shared import keys
from shared.engine import scorers
from shared.engine.canonical import same_json
from shared.errors import (
    NotFoundError,
    VersionConflictError,
    fault,
    invalid,
    invalid_at,
    pointer,
)
from shared.ports import Ports
from shared.protocol.ids import tenant_of

GLOBAL = "*"
CONFORMANCE_ORIGIN = "conformance.openwop.dev"
SUITE_ID_RE = re.compile(r"^[a-z0-9.-]+\.evals\.[a-z0-9-]+$")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_URL_NAME_RE = re.compile(r"^(?:.*/)?eval-suites/([^/]+)$")


SUITE_LINK_PREFIX = keys.SUITE_LINK_PREFIX
NOT_FOUND = "No such eval suite."  # one answer for unknown, foreign and malformed ids
TOMBSTONED = "tombstoned"


@lru_cache(maxsize=1)
def _validator() -> Any:
    from importlib import resources

    from jsonschema import Draft202012Validator

    text = resources.files("shared.protocol").joinpath("schemas/eval-suite.schema.json").read_text("utf-8")
    return Draft202012Validator(json.loads(text))  # a valid 2020-12 schema: tests/unit/test_packaged_schemas.py


def validate_suite(doc: Any) -> dict[str, Any]:
    """Schema, then the rules a schema cannot say (unique taskIds). Raises 400 validation_error with the
    failing locations (JSON pointers and schema keywords, never the offending values)."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (list(e.absolute_path), e.validator))
    if errors:
        raise invalid(
            "The eval suite does not match the suite schema.",
            [fault(pointer(e.absolute_path), str(e.validator)) for e in errors],
        )
    assert isinstance(doc, dict)
    seen: set[str] = set()
    for i, task in enumerate(doc["tasks"]):
        if task["taskId"] in seen:
            raise invalid("Each taskId must be unique in the suite.", [fault(f"/tasks/{i}/taskId", "unique")])
        seen.add(task["taskId"])
        if "match" in task["expected"]:
            found = scorers.problems(task["expected"]["match"], f"/tasks/{i}/expected/match")
            if found:
                raise invalid("The eval suite does not match the suite schema.", found)
    return doc


def ref_for(suite: dict[str, Any]) -> str:
    return f"{suite['suiteId']}@{suite['version']}"


def register(ports: Ports, tenant: str, doc: Any, *, validated: bool = False) -> tuple[int, dict[str, Any]]:
    """Store a suite under (tenant, suiteId, version) with its listing row. New: 201; the identical document again:
    200; another document under the same suiteId and version: 409 version_conflict. A suite whose tasks name source
    runs is registered through ``suite_runs.register``, which checks them first (``validated``)."""
    suite = doc if validated else validate_suite(doc)
    named = [i for i, t in enumerate(suite["tasks"]) if "sourceRunId" in t]
    if not validated and named:
        raise invalid_at(f"/tasks/{named[0]}/sourceRunId", "not", "A host-wide suite cannot name source runs.")
    sk = ref_for(suite)
    body = {"suiteId": suite["suiteId"], "version": suite["version"], "evalSuiteRef": sk}
    row = {
        "suiteId": suite["suiteId"],
        "version": suite["version"],
        "taskCount": len(suite["tasks"]),
        "createdAt": ports.clock.iso(),
    }
    if ports.suites.put_version(tenant, sk, suite):
        ports.suites.put_index_row(tenant, sk, row)
        _sync_listing(ports, tenant, suite["suiteId"])
        return 201, body
    existing = ports.suites.get_version(tenant, sk)
    if existing is not None and same_json(existing, suite):
        ports.suites.put_index_row(tenant, sk, row, if_absent=True)  # a retry after a crash between the writes
        _sync_listing(ports, tenant, suite["suiteId"])
        return 200, body
    raise VersionConflictError()


def exists(ports: Ports, tenant: str, suite_id: str, version: str) -> bool:
    return ports.suites.get_index_row(tenant, f"{suite_id}@{version}") is not None


def latest_version(ports: Ports, tenant: str, suite_id: str) -> str | None:
    """The highest version of the tenant's own suite (its listing rows), or None."""
    versions = [str(r["version"]) for r in ports.suites.list_index_rows(tenant, suite_id)]
    return max(versions, key=_semver) if versions else None


# --------------------------------------------------------------------------- a tenant's resource


_LIST_CURSOR = frozenset({"suiteId"})  # a page of the list starts after this suite's listing row
_CAS_TRIES = 5


def _rows(ports: Ports, tenant: str, suite_id: str, *, consistent: bool = False) -> list[dict[str, Any]]:
    """One suite's index rows, its versions in SemVer order."""
    rows = ports.suites.list_index_rows(tenant, suite_id, consistent=consistent)
    return sorted(rows, key=lambda r: _semver(str(r["version"])))


def _entry(suite_id: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "suiteId": suite_id,
        "versions": [str(r["version"]) for r in rows],
        "taskCount": int(rows[-1]["taskCount"]),
        "createdAt": str(rows[0]["createdAt"]),
    }


def _sync_listing(ports: Ports, tenant: str, suite_id: str) -> None:
    """The suite's listing row, recomputed from its index rows (read strongly consistent after the caller's write)
    and written only if it still holds what was read before them, so the last row written saw every version."""
    for _ in range(_CAS_TRIES):
        old = ports.suites.get_listing(tenant, suite_id)
        rows = _rows(ports, tenant, suite_id, consistent=True)
        new = _entry(suite_id, rows) if rows else None
        if new == old:
            return
        if new is None:
            done = ports.suites.delete_listing(tenant, suite_id, if_equals=old)
        else:
            done = ports.suites.put_listing(tenant, suite_id, new, if_absent=old is None, if_equals=old)
        if done:
            return
    raise VersionConflictError("The suite's versions kept changing while it was listed.")


def list_suites(ports: Ports, tenant: str, params: dict[str, str]) -> dict[str, Any]:
    """The tenant's own suites by suiteId (``taskCount``: its latest version's; ``createdAt``: its first version's),
    ``limit`` (1..100, default 50) per page, read by one Query of the listing rows; ``nextCursor`` (while more may
    remain) is the signed cursor ``GET /runs`` uses, naming the page's last suite."""
    from shared.services.common import page_limit
    from shared.services.cursors import mint_cursor, page_start

    limit = page_limit(params, 50, 100)
    start = page_start(ports, tenant, params, _LIST_CURSOR)
    rows, more = ports.suites.list_listings(tenant, limit + 1, after=start["suiteId"] if start else "")
    page = rows[:limit]
    out: dict[str, Any] = {
        "suites": [{k: doc[k] for k in ("suiteId", "versions", "taskCount", "createdAt")} for _, doc in page]
    }
    if page and (len(rows) > limit or more):
        out["nextCursor"] = mint_cursor(ports, tenant, {"suiteId": page[-1][0]})
    return out


def get_suite(ports: Ports, tenant: str, suite_id: str) -> dict[str, Any]:
    """One of the tenant's suites and its versions; unknown, foreign or malformed: the same 404."""
    rows = _rows(ports, tenant, suite_id) if SUITE_ID_RE.fullmatch(suite_id) else None
    if not rows:
        raise NotFoundError(NOT_FOUND)
    return {
        **_entry(suite_id, rows),
        "items": [
            {
                "version": r["version"],
                "evalSuiteRef": f"{suite_id}@{r['version']}",
                "taskCount": int(r["taskCount"]),
                "createdAt": r["createdAt"],
            }
            for r in rows
        ],
    }


def get_version(ports: Ports, tenant: str, suite_id: str, version: str) -> dict[str, Any]:
    """The stored document of one version (a tombstoned task keeps only its taskId); the same 404 otherwise."""
    doc = None
    if SUITE_ID_RE.fullmatch(suite_id) and VERSION_RE.fullmatch(version) and exists(ports, tenant, suite_id, version):
        doc = ports.suites.get_version(tenant, f"{suite_id}@{version}")
    if doc is None:
        raise NotFoundError(NOT_FOUND)
    return doc


def record_reference(ports: Ports, owner: str, suite: dict[str, Any], run_id: str, expires_at: int) -> tuple[str, str]:
    """Remember that an eval run pinned this version (the row expires with the run); its key, which the caller
    links under the run so the run's erasure deletes it."""
    return ports.suites.put_reference(owner, ref_for(suite), run_id, expires_at=expires_at)


def delete_version(ports: Ports, tenant: str, suite_id: str, version: str) -> None:
    """Delete a version no eval run of the host still holds (409 version_conflict naming them otherwise: they are
    the tenant's own runs). A reference whose run is gone (erased, expired) is dropped here."""
    if not (
        SUITE_ID_RE.fullmatch(suite_id) and VERSION_RE.fullmatch(version) and exists(ports, tenant, suite_id, version)
    ):
        raise NotFoundError(NOT_FOUND)  # get_version's 404, without reading the version's tasks
    ref = f"{suite_id}@{version}"
    holding: list[str] = []
    for run_id in ports.suites.list_references(tenant, ref):
        if ports.runs.get_run(run_id) is None:
            ports.suites.delete_reference(tenant, ref, run_id)
        else:
            holding.append(run_id)
    if holding:
        raise VersionConflictError("Eval runs reference this suite version.", {"runIds": sorted(holding)})
    ports.suites.delete_index_row(tenant, ref)
    ports.suites.delete_version(tenant, ref)
    _sync_listing(ports, tenant, suite_id)


# --------------------------------------------------------------------------- source runs (erasure follows lineage)


def tombstone(task: dict[str, Any]) -> dict[str, Any]:
    """What a task whose source run was erased keeps: its id and trial count (its input and expected answer were
    the source's content). An eval reports it ``unverifiable``."""
    return {"taskId": task["taskId"], TOMBSTONED: True, **({"trials": task["trials"]} if "trials" in task else {})}


def lineage(task: dict[str, Any]) -> list[str]:
    """The runs whose content a task holds: its ``sourceRunId`` (served from) and its ``derivedFromRunIds`` (an
    accepted task's sources, lineage only: docs/decisions/0146-accept-without-invention.md)."""
    named = [task["sourceRunId"]] if task.get("sourceRunId") else []
    return [str(r) for r in [*named, *(task.get("derivedFromRunIds") or [])]]


def tombstone_in(ports: Ports, tenant: str, ref: str, run_ids: str | set[str]) -> int:
    """Tombstone the tasks of one version (or draft) that name any of ``run_ids`` (``lineage``): compare-and-set of
    the stored parts that hold them; a concurrent rewrite retries."""
    gone = {run_ids} if isinstance(run_ids, str) else set(run_ids)
    done = ports.suites.rewrite_tasks(tenant, ref, lambda t: tombstone(t) if gone.intersection(lineage(t)) else None)
    if done is None:
        raise VersionConflictError("The suite version kept changing while a source run was erased.")
    return done


def on_source_erased(ports: Ports, run_id: str) -> int:
    """The erasure hook's part: every version linked from the run has the tasks naming it tombstoned."""
    return sum(
        tombstone_in(ports, tenant_of(run_id), sk[len(SUITE_LINK_PREFIX) :], run_id)
        for sk, _ in ports.runs.query_aux(run_id, SUITE_LINK_PREFIX)
    )


@dataclass(frozen=True)
class ResolvedSuite:
    suite: dict[str, Any]
    fixture_id: str | None  # set when the ref named a conformance fixture
    owner: str = GLOBAL  # the tenant whose registration it is (GLOBAL: host-wide)

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
        doc = ports.suites.get_fixture(name)  # a conformance fixture id
        return ResolvedSuite(doc, name) if doc is not None else None
    if conformance_only:
        return None
    if version:
        if not VERSION_RE.match(version):
            return None
        for owner in (tenant, GLOBAL):
            doc = ports.suites.get_version(owner, name)
            if doc is not None:
                return ResolvedSuite(doc, None, owner)
        return None
    found = ports.suites.get_latest_version((GLOBAL, tenant), suite_id, _highest)  # the tenant's own shadow
    return ResolvedSuite(found[1], None, found[0]) if found is not None else None


def _highest(versions: Iterable[str]) -> str | None:
    return max((v for v in versions if VERSION_RE.match(v)), key=_semver, default=None)
