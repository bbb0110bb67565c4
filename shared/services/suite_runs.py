"""Suites whose tasks carry their source run (issue 24 part 2) and suites built from recorded runs (part 3).

A task may name ``sourceRunId``: an eval of the suite serves that task's tool fixtures from the source run's
as-executed record (RFC 0252 semantics: the agent's own calls, ``onMiss: "fail"``) with no ``fixtureRuns`` in the
request; ``fixtureRuns`` still overrides per task. Sources are checked when the version is registered, not at each
eval (docs/decisions/0112-suites-from-recorded-runs.md): an unusable or foreign run is the one uniform refusal RFC
0252 uses. Before the version is written, each source gets a ``SUITELINK#`` link (its erasure tombstones the task);
a source erased while we registered is tombstoned by us after the write.

``from_runs`` builds a new version from runs named (``runIds``) or found by a filter on the tenant index of runs
(never a scan): each task's input is the input of the agent's first invocation in the run, its expected answer the
decision it reached (``golden``, strategy ``exact`` unless named), its ``sourceRunId`` the run, its taskId derived
from the run's id (``task_id_for``: stable, and not the id itself) and its label the body's ``label`` template or a
summary of the input (``task_labels``). Every check happens before the one write of the version: a refused request writes
nothing but links, which name no version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from shared.clock import ms_from_iso
from shared.errors import (
    UnusableReferenceError,
    ValidationError,
    VersionConflictError,
    fault,
    invalid,
    invalid_at,
    invalid_parameter,
    pointer,
)
from shared.ports import Ports, RunRecord
from shared.services import evals, source_runs, suites, task_labels
from shared.services.common import Caller, chunks, link_under, parallel

DEFAULT_FROM_RUNS = 100
CANDIDATES_PER_TASK = 20  # a filter reads at most this many run items per task it may add,
MAX_CANDIDATES = 20_000  # and at most this many in all
LIST_PAGE = 1_000  # index entries per Query of the tenant's runs (~450 B each: under a 1 MB page)


def _caller(tenant: str) -> Caller:
    return Caller(tenant, "suite-registration")


def _position(at: str) -> tuple[int, str]:
    """A refusal's pointer in request order (``/tasks/<i>/sourceRunId``, ``/runIds/<i>``; ``""`` first)."""
    parts = at.split("/")
    return (int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else -1, at)


# --------------------------------------------------------------------------- registration with sources


def _store_with_sources(
    ports: Ports, tenant: str, suite: dict[str, Any], recs: dict[str, RunRecord], where: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    """Links first (so the source's erasure reaches the version; each written only while its source has no tombstone,
    50 to a transaction), then the version; a source erased meanwhile may have missed it, so the tombstones are read
    again after the write (100 to a request) and its tasks tombstoned here (its tombstone is written before its hook
    runs). ``where``: the request member that named each source (a refusal points at it; ``""`` for a source no
    member named)."""
    ref = suites.ref_for(suite)
    link = {"suiteId": suite["suiteId"], "version": suite["version"]}
    entries = [(rec.run_id, f"{suites.SUITE_LINK_PREFIX}{ref}", link, rec.expires_at) for rec in recs.values()]
    refused = link_under(ports, entries)
    if refused:  # erased since we read it: unusable, like any other reason; the first member naming one
        raise UnusableReferenceError(min((where.get(r, "") for r in refused), key=_position))
    status, body = suites.register(ports, tenant, suite, validated=True)
    gone = set().union(*parallel(ports.runs.tombstoned, chunks(list(recs), source_runs.BATCH_KEYS)))
    if gone:
        suites.tombstone_in(ports, tenant, ref, gone)
    return status, body


def _named_runs(suite: dict[str, Any]) -> list[tuple[str, str]]:
    """Every run the tasks name, with the member that names it: ``sourceRunId`` and ``derivedFromRunIds``."""
    out = []
    for i, t in enumerate(suite["tasks"]):
        if "sourceRunId" in t:
            out.append((str(t["sourceRunId"]), f"/tasks/{i}/sourceRunId"))
        out.extend(
            (str(r), f"/tasks/{i}/derivedFromRunIds/{j}") for j, r in enumerate(t.get("derivedFromRunIds") or [])
        )
    return out


def _sources_rule(suite: dict[str, Any]) -> str | None:
    """The agent the sources are checked for (the suite's targetAgentId), or None when no task names a run."""
    named = [i for i, t in enumerate(suite["tasks"]) if "sourceRunId" in t]
    if not named and not any("derivedFromRunIds" in t for t in suite["tasks"]):
        return None
    if not suite.get("targetAgentId"):
        raise invalid_at("/targetAgentId", "required", "A suite whose tasks name sourceRunId must name targetAgentId.")
    for i in named:
        fx = suite["tasks"][i].get("fixtures") or {}
        if "toolResponses" in fx or fx.get("onMiss", "live-read-only") != "live-read-only":
            raise invalid_at(
                f"/tasks/{i}/fixtures",
                "not",
                "A task that names sourceRunId must not carry its own fixtures (only onMiss live-read-only).",
            )
    return str(suite["targetAgentId"])


def _bound(task: dict[str, Any], bound: dict[str, str]) -> dict[str, Any]:
    out = {**task, "sourceRunId": bound[str(task["sourceRunId"])]} if "sourceRunId" in task else task
    if "derivedFromRunIds" in task:
        out = {**out, "derivedFromRunIds": [bound[str(r)] for r in task["derivedFromRunIds"]]}
    return out


def register(ports: Ports, tenant: str, doc: Any, *, accepted: bool = False) -> tuple[int, dict[str, Any]]:
    """``POST /host/openwop-serverless/eval-suites`` for a tenant: the schema, then every named source run checked
    (one uniform refusal for any unusable one; batched, ``source_runs.named``), then the version. ``acceptance`` is
    written by ``:accept`` only (``accepted``); a registration that names it is refused."""
    suite = suites.validate_suite(doc)
    if "acceptance" in suite and not accepted:
        raise invalid_at("/acceptance", "readOnly", "acceptance is written by :accept; a registration cannot name it.")
    agent_id = _sources_rule(suite)
    if agent_id is None:
        return suites.register(ports, tenant, suite, validated=True)
    named = _named_runs(suite)
    values = sorted({v for v, _ in named})
    found = dict(zip(values, source_runs.named(ports, _caller(tenant), values, agent_id), strict=True))
    first: dict[str, str] = {}  # each source by the first task naming it (a refusal points there)
    for v, at in named:
        first.setdefault(v, at)
    unusable = [first[v] for v, src in found.items() if src is None]
    if unusable:  # the same answer whatever made it unusable; the first task (by position) naming one
        raise UnusableReferenceError(min(unusable, key=_position))
    recs = {src.rec.run_id: src.rec for src in found.values() if src is not None}
    bound = {v: src.rec.run_id for v, src in found.items() if src is not None}
    tasks = [_bound(t, bound) for t in suite["tasks"]]
    where = {bound[v]: at for v, at in first.items()}
    return _store_with_sources(ports, tenant, {**suite, "tasks": tasks}, recs, where)


# --------------------------------------------------------------------------- from recorded runs


@lru_cache(maxsize=1)
def _request_validator() -> Any:
    from jsonschema import Draft202012Validator

    from shared.protocol.schemas import load_schema

    return Draft202012Validator(load_schema("eval-suite-from-runs.schema.json"))


FILTER_FIELDS = (
    "agentVersion",
    "workflowId",
    "status",
    "metadata",
    "startedAfter",
    "startedBefore",
    "limit",
    "sampleRate",
    "seed",
)


def _request(body: Any) -> dict[str, Any]:
    errors = sorted(_request_validator().iter_errors(body), key=lambda e: list(e.absolute_path))
    if errors:
        raise invalid(
            "The request does not match the from-runs body.",
            [fault(pointer(e.absolute_path), str(e.validator)) for e in errors],
        )
    assert isinstance(body, dict)
    if "runIds" in body and any(k in body for k in FILTER_FIELDS):
        raise invalid_at(f"/{next(k for k in FILTER_FIELDS if k in body)}", "not", "Name runIds or a filter, not both.")
    if "seed" in body and "sampleRate" not in body:
        raise invalid_at("/seed", "dependentRequired", "seed needs sampleRate.")
    for k in ("startedAfter", "startedBefore"):
        if k in body:
            try:
                ms_from_iso(str(body[k]))
            except (ValueError, OverflowError, OSError) as exc:
                raise invalid_at(f"/{k}", "format", f"{k} is not an RFC 3339 date-time.") from exc
    return body


def sampled(seed: str, run_id: str, rate: float) -> bool:
    """A deterministic sample: the same (seed, run) is always in or always out."""
    digest = hashlib.sha256(f"{seed}\n{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def filter_matches(rec: RunRecord, req: dict[str, Any], agent_id: str) -> bool:
    """The filter fields the index does not hold (checked on the run items a page of it read). A fork (a replay or
    a branch) is never a candidate: it re-executes a run that is one itself, so it is not production traffic
    (decision 0154); ``sourceRunId`` and ``fixtureRuns`` may still name one."""
    d = rec.data
    if d.get("fork"):
        return False
    if "sampleRate" in req and not sampled(str(req.get("seed", "")), rec.run_id, float(req["sampleRate"])):
        return False
    meta = d.get("metadata") or {}
    if any(meta.get(k) != v for k, v in (req.get("metadata") or {}).items()):
        return False
    started = ms_from_iso(rec.started_at) if rec.started_at else None
    if "startedAfter" in req and (started is None or started < ms_from_iso(req["startedAfter"])):
        return False
    if "startedBefore" in req and (started is None or started >= ms_from_iso(req["startedBefore"])):
        return False
    if "agentVersion" in req:
        pins = [p.get("version") for p in (d.get("agentPins") or {}).values() if p.get("agentId") == agent_id]
        if d.get("agentId") == agent_id:
            pins.append(d.get("agentVersion"))
        if req["agentVersion"] not in pins:
            return False
    return True


def _candidates(ports: Ports, tenant: str, req: dict[str, Any], agent_id: str) -> Iterator[list[RunRecord]]:
    """The tenant's runs the filter selects, newest first, a page of the tenant index at a time (``createdAt`` range
    as its key condition, workflowId and status as its filter; the runs' items read in parallel batches), at most
    ``CANDIDATES_PER_TASK`` run items per task wanted."""
    limit = int(req.get("limit", DEFAULT_FROM_RUNS))
    between = None
    if "startedAfter" in req or "startedBefore" in req:
        lo = ports.clock.iso(ms_from_iso(req["startedAfter"])) if "startedAfter" in req else ""
        hi = ports.clock.iso(ms_from_iso(req["startedBefore"])) if "startedBefore" in req else "~"
        between = (lo, hi + "~")  # createdAt <= startedAt: the index range can only be wider than the filter
    filters = {"status": str(req.get("status", "completed"))}
    if "workflowId" in req:
        filters["workflowId"] = str(req["workflowId"])
    start: dict[str, Any] | None = None
    left = min(limit * CANDIDATES_PER_TASK, MAX_CANDIDATES)
    while left > 0:
        ids, start = ports.runs.list_run_ids(tenant, min(LIST_PAGE, left), start, filters, created_between=between)
        left -= len(ids)
        found = source_runs.read_runs(ports, ids)
        yield [found[i] for i in ids if i in found and filter_matches(found[i], req, agent_id)]
        if start is None:
            return


def _selected(ports: Ports, tenant: str, req: dict[str, Any], agent_id: str) -> list[source_runs.Source]:
    """The first ``limit`` usable runs the filter selects (a run it cannot use is skipped): candidates are checked
    in waves of as many as are still wanted, so no more logs are read than tasks are made when all are usable."""
    limit = int(req.get("limit", DEFAULT_FROM_RUNS))
    out: list[source_runs.Source] = []
    pending: list[RunRecord] = []
    pages = _candidates(ports, tenant, req, agent_id)
    more = True
    while len(out) < limit and (pending or more):
        while more and len(pending) < limit - len(out):
            page = next(pages, None)
            more = page is not None
            pending.extend(page or [])
        wave, pending = pending[: limit - len(out)], pending[limit - len(out) :]
        out.extend(src for src in source_runs.check(ports, wave, agent_id, replay=True) if src is not None)
    return out


def task_id_for(run_id: str) -> str:
    """The taskId a recorded run gives: the same run always the same id, and not the run's id, so a task tombstoned
    when its source is erased keeps nothing of that id (docs/decisions/0112-suites-from-recorded-runs.md)."""
    return "run-" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:26]


def task_from_run(rec: RunRecord, log: Any, strategy: str = "exact") -> dict[str, Any]:
    """The task a recorded run becomes (``:from-runs`` and the sampling rules alike)."""
    return {
        "taskId": task_id_for(rec.run_id),
        "input": log.input,
        "expected": {"kind": "golden", "match": {"strategy": strategy, "value": log.decision}},
        "sourceRunId": rec.run_id,
    }


def next_version(latest: str | None) -> str:
    if latest is None:
        return "1.0.0"
    major, minor, _patch = (int(x) for x in latest.split("."))
    return f"{major}.{minor + 1}.0"


def from_runs(ports: Ports, caller: Caller, suite_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    """``POST /host/openwop-serverless/eval-suites/{suiteId}:from-runs``: 201 {suiteId, version, evalSuiteRef,
    taskCount, addedCount}."""
    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise invalid_parameter("suiteId", "The suiteId is not a suite id.")
    req = _request(body)
    tenant = caller.tenant
    latest = suites.latest_version(ports, tenant, suite_id)
    base, agent_id = _base_and_agent(ports, tenant, suite_id, req, latest)
    version = str(req.get("version") or next_version(latest))
    if suites.exists(ports, tenant, suite_id, version):
        raise VersionConflictError("That version of the suite exists; a from-runs request makes a new one.")
    strategy = str(req.get("strategy", "exact"))
    where: dict[str, str] = {}
    if "runIds" in req:
        checked, where = _named_sources(ports, caller, req["runIds"], agent_id)
    else:
        checked = _selected(ports, tenant, req, agent_id)
    added, recs = _new_tasks(checked, base, strategy, req.get("label"))
    if not added:
        raise invalid_at(
            "/runIds" if "runIds" in req else "", "minItems", "No run the request names or selects can become a task."
        )
    return build_version(
        ports,
        tenant,
        suite_id,
        version,
        agent_id,
        base,
        added,
        recs,
        where=where,
        blame="/strategy" if "strategy" in req else "",
    )


def _base_and_agent(
    ports: Ports, tenant: str, suite_id: str, req: dict[str, Any], latest: str | None
) -> tuple[dict[str, Any] | None, str]:
    """The version the new one extends (``base: latest``, else none) and the agent whose runs become tasks (the
    request's, else the base's target); refused when either is missing or they differ."""
    base: dict[str, Any] | None = None
    if req.get("base") == "latest":
        if latest is None:
            raise invalid_at("/base", "exists", "base 'latest' names no version of this suite.")
        base = suites.get_version(ports, tenant, suite_id, latest)
    agent_id = str(req.get("agentId") or (base or {}).get("targetAgentId") or "")
    if not agent_id:
        raise invalid_at("/agentId", "required", "Name agentId (the agent whose runs become tasks).")
    if base is not None and base.get("targetAgentId") not in (None, agent_id):
        raise invalid_at("/agentId", "const", "agentId differs from the base version's targetAgentId.")
    return base, agent_id


def _named_sources(
    ports: Ports, caller: Caller, run_ids: Any, agent_id: str
) -> tuple[list[source_runs.Source], dict[str, str]]:
    """The runs ``runIds`` names, each usable (else refused at the first unusable one, whatever made it so), and the
    pointer that named each."""
    named = source_runs.named(ports, caller, run_ids, agent_id, replay=True)
    unusable = [i for i, src in enumerate(named) if src is None]
    if unusable:  # the same answer whatever made it unusable; the first one named
        raise UnusableReferenceError(f"/runIds/{unusable[0]}")
    checked = [src for src in named if src is not None]
    where: dict[str, str] = {}
    for i, src in enumerate(checked):
        where.setdefault(src.rec.run_id, f"/runIds/{i}")
    return checked, where


def _new_tasks(
    checked: list[source_runs.Source], base: dict[str, Any] | None, strategy: str, label: Any
) -> tuple[list[dict[str, Any]], dict[str, RunRecord]]:
    """The tasks the runs become that the base does not hold yet (by taskId, or by source for older versions'
    taskIds), and their source records."""
    base_tasks = list((base or {}).get("tasks") or [])
    have = {str(t["taskId"]) for t in base_tasks}
    have_sources = {str(t["sourceRunId"]) for t in base_tasks if "sourceRunId" in t}  # older versions' taskIds
    added = []
    recs: dict[str, RunRecord] = {}
    for src in checked:
        task = task_from_run(src.rec, src.log, strategy)
        task = task_labels.labelled(task, task_labels.render(label, src.log.input))
        if task["taskId"] not in have and src.rec.run_id not in have_sources:
            have.add(task["taskId"])
            added.append(task)
            recs[src.rec.run_id] = src.rec
    return added, recs


def build_version(
    ports: Ports,
    tenant: str,
    suite_id: str,
    version: str,
    agent_id: str,
    base: dict[str, Any] | None,
    added: list[dict[str, Any]],
    recs: dict[str, RunRecord],
    *,
    where: dict[str, str] | None = None,
    blame: str = "",
) -> tuple[int, dict[str, Any]]:
    """Store ``base``'s tasks plus ``added`` as a new version (``:from-runs`` and ``:publish``). ``recs``: the
    sources already read; every other source is read here, and one that is gone (being erased) is tombstoned.
    A refusal points at the request member ``where`` names for a source, or at ``blame`` (the member that made
    the tasks: ``""`` the whole request) when the tasks do not make a valid version."""
    base_tasks = list((base or {}).get("tasks") or [])
    # recorded runs are golden answers and a regression set (an eval names a baseline to use the latter)
    suite: dict[str, Any] = {
        "suiteId": suite_id,
        "version": version,
        "modes": list((base or {}).get("modes") or ["golden", "regression"]),
        "targetAgentId": agent_id,
        "tasks": base_tasks + added,
    }
    for k in ("description", "thresholds", "trials", "allowedModels"):
        if base is not None and k in base:
            suite[k] = base[k]
    if len(suite["tasks"]) > evals.MAX_TASKS_PER_SUITE:
        raise invalid_at("", "maxItems", f"The suite would hold more than {evals.MAX_TASKS_PER_SUITE} tasks.")
    # The base's tasks were checked when it was stored and the added ones are built by ``task_from_run`` in the shape
    # the schema's task takes, unique by taskId: the schema's pass over thousands of them (seconds of a request's
    # CPU) checks the document's own members and one task.
    live = [t for t in suite["tasks"] if not t.get(suites.TOMBSTONED)]
    try:
        suites.validate_suite({**suite, "tasks": live[-1:]})
    except ValidationError as exc:  # its pointers name the built document, not the request
        raise invalid_at(blame, "suite", "The recorded runs do not make valid tasks of a suite version.") from exc
    # the base's own sources keep their links (written when the base was registered) and get this version's too
    others = sorted({r for t in suite["tasks"] for r in suites.lineage(t)} - set(recs))
    found = source_runs.read_runs(ports, others)
    recs.update((run_id, found[run_id]) for run_id in others if run_id in found)
    for i, t in enumerate(suite["tasks"]):
        if any(r in others and r not in found for r in suites.lineage(t)):
            suite["tasks"][i] = suites.tombstone(t)  # being erased: its hook may not reach this new version
    status, out = _store_with_sources(ports, tenant, suite, recs, where or {})
    return status, {**out, "taskCount": len(suite["tasks"]), "addedCount": len(added)}
