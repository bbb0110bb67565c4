"""Sampling rules (issue 24 part 4, docs/decisions/0117-sampling-rules.md): production runs that complete become
tasks of a suite's draft, driven by the run's terminal event on the events stream (no scan, no poll).

Storage (host table):
- a rule: ``pk SUITERULE#<tenant>``, ``sk <suiteId>#<ruleId>`` {ruleId, suiteId, agentId, filter, sampleRate,
  maxTasks, createdAt} (one Query reads a tenant's rules);
- the draft: ``pk SUITE#<tenant>``, ``sk <suiteId>@draft`` {suiteId, targetAgentId, tasks}, one item written by
  compare-and-set, so ``maxTasks`` is exact and a stream retry adds nothing twice. "draft" is no SemVer: no ref
  resolves to it. Each source run gets the ``SUITELINK#<suiteId>@draft`` link before its task is written, so its
  erasure tombstones the task here as in any version.

The stream side (``on_stored``) looks only at ``run.completed`` events. Whether a tenant has rules, and which
version of them, comes with what the fan-out already reads of it (``stream_interest``: one strongly consistent
Query of ``WEBHOOK#<tenant>``, whose answer without a subscription is kept 2 s); a registration or deletion writes a
new version and outlasts those kept answers before it answers (docs/decisions/0124-sampling-rules-freshness.md), so
every run completing after it is sampled by the rules as they are. A tenant that never had a rule costs no request
here; the rules themselves are read again only when their version changed. The sample is ``sampled(ruleId, runId, sampleRate)``, pure: a run outside it costs no request. Replays, forks, eval
runs and runs seeded as a v1 host wrote them are never sampled. The task is the one ``:from-runs`` builds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from shared.caches import LockedLRUCache
from shared.errors import (
    NotFoundError,
    RunGoneError,
    UnusableReferenceError,
    VersionConflictError,
    fault,
    invalid,
    invalid_at,
    invalid_parameter,
    pointer,
)
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.protocol.codemap import ERA_V1
from shared.protocol.ids import tenant_of
from shared.services import stream_interest, suites
from shared.services.common import Caller

DRAFT = "draft"
MAX_RULES_PER_SUITE = 10
MAX_RULES_PER_TENANT = 100
NO_RULE = "No such rule."  # unknown, foreign and malformed rule ids alike
_RULE_ID_RE = re.compile(r"^[0-9A-Za-z]{26}$")
_CAS_TRIES = 5

# Per warm container: tenant -> (the rules version they were read at, its rules). Bounded; an evicted tenant is read
# again.
_RULES_MAX = 4096
_RULES: LockedLRUCache[str, tuple[str, list[dict[str, Any]]]] = LockedLRUCache(maxsize=_RULES_MAX)


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    from shared.protocol.schemas import load_schema

    return Draft202012Validator(load_schema("eval-suite-rule.schema.json"))


def _suite_id(suite_id: str) -> str:
    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise NotFoundError(suites.NOT_FOUND)
    return suite_id


def _public(rule: dict[str, Any]) -> dict[str, Any]:
    return {k: rule[k] for k in ("ruleId", "suiteId", "agentId", "filter", "sampleRate", "maxTasks", "createdAt")}


def suite_rules(ports: Ports, tenant: str, suite_id: str) -> list[dict[str, Any]]:
    return ports.sampling_rules.list_rules(tenant, suite_id)


# --------------------------------------------------------------------------- the routes


def register_rule(ports: Ports, caller: Caller, suite_id: str, body: Any) -> dict[str, Any]:
    """``POST .../eval-suites/{suiteId}/rules``: 201 the rule. One agent per suite: the rule's agentId must be the
    suite's latest version's targetAgentId and that of its other rules."""
    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise invalid_parameter("suiteId", "The suiteId is not a suite id.")
    errors = sorted(_validator().iter_errors(body), key=lambda e: list(e.absolute_path))
    if errors:
        raise invalid(
            "The request does not match the rule body.",
            [fault(pointer(e.absolute_path), str(e.validator)) for e in errors],
        )
    tenant = caller.tenant
    agent_id = str(body["agentId"])
    mine = ports.sampling_rules.list_rules(tenant)
    if len(mine) >= MAX_RULES_PER_TENANT:
        raise invalid_at("", "quota", f"A tenant may hold at most {MAX_RULES_PER_TENANT} sampling rules.")
    same = [r for r in mine if r["suiteId"] == suite_id]
    if len(same) >= MAX_RULES_PER_SUITE:
        raise invalid_at("", "quota", f"A suite may hold at most {MAX_RULES_PER_SUITE} sampling rules.")
    if any(r["agentId"] != agent_id for r in same):
        raise invalid_at("/agentId", "const", "agentId differs from the agent of this suite's other rules.")
    latest = suites.latest_version(ports, tenant, suite_id)
    if latest is not None and suites.get_version(ports, tenant, suite_id, latest).get("targetAgentId") not in (
        None,
        agent_id,
    ):
        raise invalid_at("/agentId", "const", "agentId differs from the suite's targetAgentId.")
    rule = {
        "ruleId": ports.ids.ulid(),
        "suiteId": suite_id,
        "agentId": agent_id,
        "filter": body.get("filter") or {},
        "sampleRate": body.get("sampleRate", 1),
        "maxTasks": int(body.get("maxTasks", 100)),
        "createdAt": ports.clock.iso(),
    }
    ports.sampling_rules.put_rule(tenant, rule)
    stream_interest.rules_changed(ports, tenant)  # every run completing from now on meets it
    return _public(rule)


def list_rules(ports: Ports, caller: Caller, suite_id: str) -> dict[str, Any]:
    return {"rules": [_public(r) for r in suite_rules(ports, caller.tenant, _suite_id(suite_id))]}


def delete_rule(ports: Ports, caller: Caller, suite_id: str, rule_id: str) -> None:
    if not (
        suites.SUITE_ID_RE.fullmatch(suite_id)
        and _RULE_ID_RE.fullmatch(rule_id)
        and ports.sampling_rules.delete_rule(caller.tenant, suite_id, rule_id)
    ):
        raise NotFoundError(NO_RULE)
    stream_interest.rules_changed(ports, caller.tenant)  # no run completing from now on meets it


def get_draft(ports: Ports, caller: Caller, suite_id: str) -> dict[str, Any]:
    """``GET .../eval-suites/{suiteId}/draft``: {suiteId, targetAgentId?, taskCount, tasks}; a suite id with no
    draft, rule or version is the suites' one 404."""
    tenant = caller.tenant
    doc = ports.suite_drafts.get_draft(tenant, _suite_id(suite_id))
    if (
        doc is None
        and not suite_rules(ports, tenant, suite_id)
        and suites.latest_version(ports, tenant, suite_id) is None
    ):
        raise NotFoundError(suites.NOT_FOUND)
    tasks = list((doc or {}).get("tasks") or [])
    out: dict[str, Any] = {"suiteId": suite_id, "taskCount": len(tasks), "tasks": tasks}
    if doc is not None and doc.get("targetAgentId"):
        out["targetAgentId"] = doc["targetAgentId"]
    return out


def publish(ports: Ports, caller: Caller, suite_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    """``POST .../eval-suites/{suiteId}:publish`` {version?}: the latest version's tasks plus the draft's as a new
    version (the next minor unless named), then the published tasks leave the draft. 201 as ``:from-runs``."""
    from shared.services import suite_runs

    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise invalid_parameter("suiteId", "The suiteId is not a suite id.")
    body = _publish_body(body)
    tenant = caller.tenant
    draft = ports.suite_drafts.get_draft(tenant, suite_id)
    tasks = [t for t in (draft or {}).get("tasks") or [] if not t.get(suites.TOMBSTONED)]
    if draft is None or not tasks:
        raise invalid_at("", "minItems", "The draft holds no task to publish.")
    latest = suites.latest_version(ports, tenant, suite_id)
    base = suites.get_version(ports, tenant, suite_id, latest) if latest is not None else None
    version = str(body.get("version") or suite_runs.next_version(latest))
    if suites.exists(ports, tenant, suite_id, version):
        raise VersionConflictError("That version of the suite exists; a publish makes a new one.")
    have = {str(t["taskId"]) for t in (base or {}).get("tasks") or []}
    added = [t for t in tasks if str(t["taskId"]) not in have]
    status, out = suite_runs.build_version(
        ports, tenant, suite_id, version, str(draft["targetAgentId"]), base, added, {}
    )
    _drop_from_draft(ports, tenant, suite_id, {str(t["taskId"]) for t in draft["tasks"]})
    return status, out


def _publish_body(body: Any) -> dict[str, Any]:
    """``{version?}``, closed, with a SemVer version; else ``400`` pointing at what is wrong."""
    message = "The body is {version?} with a SemVer version."
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise invalid(message, [fault("", "type")])
    faults = [fault(pointer([k]), "additionalProperties") for k in sorted(set(body) - {"version"})]
    if "version" in body and not (isinstance(body["version"], str) and suites.VERSION_RE.fullmatch(body["version"])):
        faults.append(fault("/version", "pattern"))
    if faults:
        raise invalid(message, faults)
    return body


def _drop_from_draft(ports: Ports, tenant: str, suite_id: str, task_ids: set[str]) -> None:
    for _ in range(_CAS_TRIES):
        doc = ports.suite_drafts.get_draft(tenant, suite_id)
        if doc is None:
            return
        left = {**doc, "tasks": [t for t in doc["tasks"] if str(t["taskId"]) not in task_ids]}
        if ports.suite_drafts.put_draft(tenant, suite_id, left, if_equals=doc):
            return
    raise VersionConflictError("The draft kept changing while it was published.")


# --------------------------------------------------------------------------- the stream side


def _tenant_rules(ports: Ports, tenant: str, version: str) -> list[dict[str, Any]]:
    """The tenant's rules at ``version``: kept while it is the version the fan-out reads, else one strongly
    consistent Query (each rule is written before the version that announces it)."""
    hit = _RULES.get(tenant)
    if hit is not None and hit[0] == version:
        return hit[1]
    rules = ports.sampling_rules.list_rules(tenant, consistent=True)
    _RULES[tenant] = (version, rules)
    return rules


def production(rec: RunRecord) -> bool:
    """A run a rule may sample: a workflow run of the tenant's own, not a fork or replay, not an eval, not seeded."""
    d = rec.data
    return rec.kind == "workflow" and not d.get("fork") and d.get("eventLogSchemaVersion") != ERA_V1


def on_stored(
    ports: Ports,
    stored: Sequence[tuple[str, int, dict[str, Any] | None]],
    interests: Mapping[str, stream_interest.Interest] | None = None,
) -> int:
    """The events stream's part: each ``run.completed`` of a tenant with rules, sampled, production and matching,
    adds its task to the rule's draft. ``interests``: what the fan-out read of the batch's tenants (read here when
    absent). Returns the number of tasks added."""
    added = 0
    for run_id, _seq, event in stored:
        if event is None or event.get("type") != c.RUN_COMPLETED:
            continue
        tenant = tenant_of(run_id)
        version = ((interests or {}).get(tenant) or stream_interest.read(ports, tenant)).rules_version
        rules = _tenant_rules(ports, tenant, version) if version is not None else []
        if not rules:
            continue
        from shared.services.suite_runs import sampled

        picked = [r for r in rules if sampled(str(r["ruleId"]), run_id, float(r["sampleRate"]))]
        if not picked:
            continue
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.tenant != tenant or rec.status != "completed" or not production(rec):
            continue
        added += sum(_sample(ports, rule, rec) for rule in picked)
    return added


def _sample(ports: Ports, rule: dict[str, Any], rec: RunRecord) -> int:
    from shared.services import evals, task_labels
    from shared.services.suite_runs import filter_matches, task_from_run

    flt = dict(rule.get("filter") or {})
    if "workflowId" in flt and rec.data.get("workflowId") != flt["workflowId"]:
        return 0
    agent_id = str(rule["agentId"])
    if not filter_matches(rec, flt, agent_id):
        return 0
    tenant, suite_id = rec.tenant, str(rule["suiteId"])
    sk = ports.suite_drafts.get_ref(suite_id)
    draft = ports.suite_drafts.get_draft(tenant, suite_id)
    if draft is not None and _done(rule, rec.run_id, draft["tasks"]):
        return 0
    try:
        rec, _calls, log = evals.usable_source(
            ports, Caller(tenant, "sampling-rule"), rec.run_id, agent_id, replay=True
        )
    except UnusableReferenceError:
        return 0  # the agent did not run there, or the run cannot be replayed: not a task
    try:
        ports.runs.put_aux(
            rec.run_id, f"{suites.SUITE_LINK_PREFIX}{sk}", {"suiteId": suite_id, "version": DRAFT}, rec.expires_at
        )
    except RunGoneError:
        return 0  # erased since it completed
    task = task_labels.labelled(task_from_run(rec, log), task_labels.render(None, log.input))  # as :from-runs
    if not _add_to_draft(ports, tenant, rule, rec.run_id, draft, task):
        return 0
    if ports.runs.is_tombstoned(rec.run_id):  # erased while we sampled it: its hook may have missed the draft
        suites.tombstone_in(ports, tenant, sk, rec.run_id)
    return 1


def _done(rule: dict[str, Any], run_id: str, tasks: list[dict[str, Any]]) -> bool:
    """The rule's draft is full, or holds the run already (a stream retry)."""
    return len(tasks) >= int(rule["maxTasks"]) or any(t.get("sourceRunId") == run_id for t in tasks)


def _add_to_draft(
    ports: Ports, tenant: str, rule: dict[str, Any], run_id: str, draft: dict[str, Any] | None, task: dict[str, Any]
) -> bool:
    """Add the run's task to the rule's draft (made when there is none), compare-and-swap; False when the draft
    filled up or took the run meanwhile."""
    suite_id, agent_id = str(rule["suiteId"]), str(rule["agentId"])
    for _ in range(_CAS_TRIES):
        if draft is None:
            if ports.suite_drafts.put_draft(
                tenant, suite_id, {"suiteId": suite_id, "targetAgentId": agent_id, "tasks": [task]}, if_absent=True
            ):
                return True
        else:
            if _done(rule, run_id, draft["tasks"]):
                return False
            if ports.suite_drafts.put_draft(
                tenant, suite_id, {**draft, "tasks": [*draft["tasks"], task]}, if_equals=draft
            ):
                return True
        draft = ports.suite_drafts.get_draft(tenant, suite_id)
    raise VersionConflictError("The draft kept changing while a run was sampled.")  # the batch is retried
