"""Creating eval runs (RFC 0081, RFC 0251 baselines, RFC 0252 recorded fixtures) and the eval summary.

An eval run served a source's recorded answers (``fixtureRuns``) is linked under each source like a fork
(``CHILD#``): erasing a source erases it, its forks and everything they hold
(docs/decisions/0108-erasure-reaches-served-evals.md).

Every refusal happens before any run item exists. An unusable baseline or source run is refused with one
byte-identical ``400 validation_error`` (``UnusableReferenceError``) whatever the reason, and every such
check takes the same path for an unknown id and another tenant's id: decode, compare the tenant, then
exactly one ``get_run`` -- of the id when it is the caller's tenant's, else of a key that cannot exist -- so
a foreign id is never read and costs the same as an unknown one (``common.reference``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared import keys
from shared.engine import evalrun, grading, recorded
from shared.engine import judge as judge_of
from shared.engine.kernel import resolve_agent, stored_definition
from shared.errors import (
    EvalRecordedFixturesGoneError,
    RunGoneError,
    UnusableReferenceError,
    ValidationError,
)
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol.codes import EVAL_MODES, HOST_EVAL_MODES
from shared.protocol.ids import decode_run_id, tenant_of
from shared.protocol.models import CreateRunRequest, present
from shared.services import agents as agent_svc
from shared.services import suites, summaries
from shared.services.common import Caller, link_under, reference
from shared.services.run_start import Created, common_checks, start_run

# Tasks per suite (advertised as ``maxTasksPerSuite``; the suite schema's ``tasks.maxItems``): with trials <= 10, at
# most 100,000 task-trials per eval run, run by a Distributed Map and finished in pages
# (docs/decisions/0090-ten-thousand-task-suites.md).
MAX_TASKS_PER_SUITE = 10_000
# fixtureRuns entries per eval run: each source is checked and its calls copied inside the create request (RFC
# 0252 refuses an unusable source at create), about four requests per entry
# (docs/decisions/0090-ten-thousand-task-suites.md).
MAX_FIXTURE_RUNS = 200
FIXTURE_ERRORS = True  # agents.evalSuite.fixtureErrors: failed source calls become isError entries
NO_DEFAULT_MODES = ("regression", "live-shadow")  # need a baseline / ignore fixtures: never implied


def _features() -> dict[str, bool]:
    from shared.services import discovery

    return discovery.FEATURES


# --------------------------------------------------------------------------- request rules


def _requested_modes(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValidationError("evalModes must be a non-empty array.")
    if len(set(value)) != len(value):
        raise ValidationError("evalModes must not repeat a mode.")
    if any(m not in EVAL_MODES for m in value):
        raise ValidationError("evalModes names an unknown eval mode.")
    return list(value)


def _run_modes(suite: dict[str, Any], requested: list[str] | None) -> list[str]:
    suite_modes = list(suite.get("modes") or [])
    if requested is not None:
        if any(m not in suite_modes or m not in HOST_EVAL_MODES for m in requested):
            raise ValidationError("evalModes must be modes both the suite and this host support.")
        return requested
    modes = [m for m in HOST_EVAL_MODES if m in suite_modes and m not in NO_DEFAULT_MODES]
    if not modes:
        raise ValidationError("The suite declares no mode this host runs by default; name evalModes.")
    return modes


def _fixture_runs_shape(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise ValidationError("fixtureRuns must be an object with at least one entry.")
    if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()):
        raise ValidationError("fixtureRuns maps taskIds to runIds.")
    if len(value) > MAX_FIXTURE_RUNS:
        raise ValidationError(f"fixtureRuns names more than {MAX_FIXTURE_RUNS} tasks.")
    return dict(value)


# --------------------------------------------------------------------------- referenced runs (uniform path)


def usable_baseline(ports: Ports, caller: Caller, value: str, suite_id: str) -> dict[str, Any]:
    """RFC 0251 §C: an eval run of the caller's tenant, same suiteId, completed with a stored summary.
    Returns the baseline's content-free scores (snapshotted into the plan)."""
    rec = reference(ports, caller, value)
    if (
        rec is None
        or rec.kind != "eval"
        or rec.data.get("suiteId") != suite_id
        or rec.status != "completed"
        or not rec.summary
    ):
        raise UnusableReferenceError()
    s = summaries.stored(ports, rec)
    if not s or s.get("suiteId") != suite_id:
        raise UnusableReferenceError()
    return grading.baseline_snapshot(rec.run_id, s)


def source_log(ports: Ports, rec: RunRecord, agent_id: str, *, replay: bool) -> recorded.AgentLog:
    """The source's log read for the agent (with ``replay``: also its first invocation's input, which a workflow run
    resolves from its pinned definition and an eval run from its pinned suite)."""
    definition = task_inputs = None
    if replay and rec.kind == "eval":
        task_inputs = {str(t["taskId"]): t.get("input") for t in evalrun.load_plan(ports, rec.run_id)["suite"]["tasks"]}
    elif replay:
        definition = stored_definition(ports, rec)
    return recorded.read_agent_log(
        ports.events.iter_events(rec.run_id), agent_id, definition=definition, task_inputs=task_inputs
    )


def usable_source(
    ports: Ports, caller: Caller, value: str, agent_id: str, *, replay: bool = False
) -> tuple[RunRecord, list[ToolCallRecord], recorded.AgentLog]:
    """RFC 0252 §C: refuse an unusable source uniformly (``UnusableReferenceError``); else the run, the agent's own
    as-executed calls and what its log shows. The log is only checked: the agent ran there, and every call it shows
    is still held in the record. With ``replay`` the run must also show the first invocation's input and decision
    (a suite task is built from them)."""
    rec = reference(ports, caller, value)
    if rec is None or not rec.terminal:
        raise UnusableReferenceError()
    try:
        records = ports.tool_calls.list_calls(rec.run_id)
        log = source_log(ports, rec, agent_id, replay=replay)
    except RunGoneError as exc:  # a stored body is gone: the host no longer holds it
        raise UnusableReferenceError() from exc
    mine = source_calls(records, log, agent_id, replay=replay)
    if mine is None:
        raise UnusableReferenceError()
    return rec, mine, log


def source_calls(
    records: list[ToolCallRecord], log: recorded.AgentLog, agent_id: str, *, replay: bool = False
) -> list[ToolCallRecord] | None:
    """RFC 0252 §C on what was read of a terminal run: the agent's own as-executed calls, or None when the run is
    unusable (the agent never ran there, a call its log shows is not held, a call that cannot be served, or, with
    ``replay``, no input or decision to build a task from)."""
    mine = [r for r in records if r.agent_id == agent_id and not r.delegate]
    if not log.invoked or not log.call_ids <= {r.call_id for r in mine} or (replay and not log.replayable):
        return None
    for r in mine:
        if r.status not in ("ok", "error", "forbidden", "rate_limited"):
            return None
        if r.status != "ok" and not FIXTURE_ERRORS:
            return None
    return mine


def derive_from_source(ports: Ports, caller: Caller, value: str, agent_id: str) -> list[dict[str, Any]]:
    """RFC 0252 §C/§D: refuse an unusable source uniformly; else the derived entries, read from the
    as-executed tool-call record."""
    _rec, mine, _log = usable_source(ports, caller, value, agent_id)
    return evalrun.entries_from_records(mine, agent_id)


# --------------------------------------------------------------------------- create


@dataclass(frozen=True)
class _Checked:
    """What create's checks settled, for the plan written once the run item exists."""

    resolved: suites.ResolvedSuite
    agent_id: str
    agent_version: str | None
    judge: Any
    modes: list[str]
    baseline: dict[str, Any] | None
    fixture_runs: dict[str, str] | None
    derived: dict[str, list[dict[str, Any]]]  # per taskId named in fixtureRuns: the entries derived from its source
    sources: dict[str, str]  # per such taskId: its source's run id (decoded)


def create_eval_run(ports: Ports, caller: Caller, req: CreateRunRequest) -> Created:
    features = _features()
    common_checks(caller, req)
    if req.workflowId is not None or req.inputs is not None:
        raise ValidationError("An eval run takes no workflowId or inputs; the suite carries the task inputs.")
    if not req.evalSuiteRef or not req.agentId:
        raise ValidationError("mode 'eval' needs evalSuiteRef and agentId.")
    requested = _requested_modes(req.evalModes)
    fixture_runs = _fixture_runs_shape(req.fixtureRuns)
    if fixture_runs is not None and not features.get("recordedFixtures"):
        raise ValidationError("This host does not accept fixtureRuns.")
    resolved = suites.resolve(ports, caller.tenant, req.evalSuiteRef)
    if resolved is None:
        raise ValidationError("evalSuiteRef names no suite this host holds.")
    suite = resolved.suite
    if len(suite.get("tasks") or []) > MAX_TASKS_PER_SUITE:
        raise ValidationError("The suite has more tasks than this host runs (maxTasksPerSuite).")
    configurable = present(req.configurable) if req.configurable else None
    agent_version, name, judge = _agent_settings(ports, caller, req.agentId, suite, configurable)
    modes = _run_modes(suite, requested)
    _check_baseline_mode(req.baselineRunId, modes)
    _check_fixture_tasks(suite, fixture_runs, modes)
    baseline = (
        usable_baseline(ports, caller, req.baselineRunId, str(suite["suiteId"]))
        if req.baselineRunId is not None
        else None
    )
    derived, sources = _derive_fixture_runs(ports, caller, fixture_runs, req.agentId)
    data: dict[str, Any] = {
        "kind": "eval",
        "workflowId": resolved.stand_in_workflow_id,
        "owner": caller.owner,
        "evalSuiteRef": req.evalSuiteRef,
        "suiteId": suite["suiteId"],
        "suiteVersion": suite["version"],
        "agentId": req.agentId,
        "agentVersion": agent_version,
        "name": name,
        "modes": modes,
        "baselineRunId": baseline["runId"] if baseline else None,
        "fixtureRuns": fixture_runs,
        "configurable": configurable,
        "tags": req.tags,
        "metadata": req.metadata,
        "scopeId": req.scopeId,
    }
    checked = _Checked(resolved, req.agentId, agent_version, judge, modes, baseline, fixture_runs, derived, sources)
    return start_run(ports, caller, data, "eval", before_start=lambda rec: _write_plan(ports, caller, checked, rec))


def _agent_settings(
    ports: Ports, caller: Caller, agent_id: str, suite: dict[str, Any], configurable: dict[str, Any] | None
) -> tuple[str | None, Any, Any]:
    """The agent version an eval run pins, its name and its judge; refuses an agent this host does not run, one
    the suite does not target, and a suite that needs a judge without one."""
    agent_version = agent_svc.eval_pin(ports, caller.tenant, agent_id, configurable)
    if agent_version is None and resolve_agent(ports, caller.tenant, agent_id) is None:
        raise ValidationError("agentId names no agent this host runs.")
    agent_svc.check_ai_overrides(ports, caller.tenant, configurable)
    name = agent_svc.eval_name(configurable)
    if suite.get("targetAgentId") is not None and suite["targetAgentId"] != agent_id:
        raise ValidationError("The suite targets another agent.")
    judge = agent_svc.eval_judge(ports, caller.tenant, configurable)
    if judge is None and any(judge_of.criteria(t.get("expected") or {}) for t in suite["tasks"]):
        raise ValidationError(
            "The suite has a rubric task or a judge scorer and no judge is configured: name one in "
            'configurable.extensions["openwop-serverless"].judge.'
        )
    return agent_version, name, judge


def _check_baseline_mode(baseline_run_id: str | None, modes: list[str]) -> None:
    if baseline_run_id is not None and "regression" not in modes:
        raise ValidationError("baselineRunId needs 'regression' in evalModes.")
    if "regression" in modes and baseline_run_id is None:
        raise ValidationError("'regression' in evalModes needs a baselineRunId.")


def _check_fixture_tasks(suite: dict[str, Any], fixture_runs: dict[str, str] | None, modes: list[str]) -> None:
    """fixtureRuns names tasks of the suite that carry no fixtures of their own, and never with live-shadow."""
    if fixture_runs is None:
        return
    if "live-shadow" in modes:
        raise ValidationError("fixtureRuns cannot be used with live-shadow.")
    tasks_by_id = {str(t["taskId"]): t for t in suite["tasks"]}
    for task_id in fixture_runs:
        task = tasks_by_id.get(task_id)
        if task is None:
            raise ValidationError("A fixtureRuns key names no task of the suite.")
        fx = task.get("fixtures") or {}
        if "toolResponses" in fx or "onMiss" in fx:
            raise ValidationError("A task named in fixtureRuns must not carry its own fixtures.")


def _derive_fixture_runs(
    ports: Ports, caller: Caller, fixture_runs: dict[str, str] | None, agent_id: str
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Per task named in fixtureRuns: the entries derived from its source (each source read once), and the
    source's run id."""
    derived: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, str] = {}
    if fixture_runs is None:
        return derived, sources
    by_source: dict[str, list[dict[str, Any]]] = {}
    for task_id, value in fixture_runs.items():
        if value not in by_source:
            by_source[value] = derive_from_source(ports, caller, value, agent_id)
        derived[task_id] = by_source[value]
        sources[task_id] = decode_run_id(value)
    return derived, sources


def _write_plan(ports: Ports, caller: Caller, checked: _Checked, rec: RunRecord) -> None:
    try:
        _write_plan_items(ports, caller, checked, rec)
    except RunGoneError as exc:  # a source erased meanwhile, its erasure reaching this run too: refused
        raise UnusableReferenceError() from exc


def _write_plan_items(ports: Ports, caller: Caller, checked: _Checked, rec: RunRecord) -> None:
    # Lineage first: an eval run served a source's recorded answers is derived from it, so the source's
    # erasure erases it (and its forks) like a fork. Its tombstone refuses the link once that erasure began:
    # a fixtureRuns source is then unusable; a suite task's source (served from its record by the trials) has
    # its task tombstoned in the plan, so nothing of it is served or kept.
    suite, sources, derived, resolved = checked.resolved.suite, checked.sources, checked.derived, checked.resolved
    served = _suite_sources(suite, checked.fixture_runs, caller.tenant)
    links = sorted(set(sources.values()) | served)
    refused = link_under(
        ports, [(s, f"{keys.CHILD_PREFIX}{rec.run_id}", {"runId": rec.run_id}, rec.expires_at) for s in links]
    )
    if refused & set(sources.values()):
        raise RunGoneError(rec.run_id)
    derived_keys = {t: keys.derived_key(sources[t], rec.run_id, t) for t in derived}
    plan: dict[str, Any] = {
        "v": evalrun.PLAN_VERSION,
        "agentId": checked.agent_id,
        "agentVersion": checked.agent_version,
        "modes": checked.modes,
        "judge": checked.judge,
        "baselineRunId": checked.baseline["runId"] if checked.baseline else None,
        "baseline": checked.baseline,
        "fixtureRuns": checked.fixture_runs,
        "derived": derived_keys,
        "derivedKeys": sorted(derived_keys.values()),
        "suite": _pinned_suite(suite, refused),
        "tenant": caller.tenant,
        evalrun.SOURCES_LINKED: True,
    }
    if resolved.fixture_id is None:  # a registered version: a delete of it must find this run
        from shared.services.erasure import link_host_item

        link_host_item(
            ports,
            rec.run_id,
            *suites.record_reference(ports, resolved.owner, suite, rec.run_id, rec.expires_at),
            rec.expires_at,
        )
    # The plan first: it lists the copies, so erasing this run reaches them even if a write below fails.
    evalrun.store_plan(ports, rec.run_id, plan, rec.expires_at)
    for task_id, key in derived_keys.items():
        ports.blobs.put_json(key, {"v": 1, "taskId": task_id, "onMiss": "fail", "entries": derived[task_id]})
    _drop_copies_of_erased(ports, derived_keys, sources)


def _pinned_suite(suite: dict[str, Any], refused: set[str]) -> dict[str, Any]:
    """The suite as the plan pins it: a task whose source's erasure began (its link refused) tombstoned."""
    if not refused:
        return suite
    return {
        **suite,
        "tasks": [suites.tombstone(t) if refused.intersection(suites.lineage(t)) else t for t in suite["tasks"]],
    }


def _drop_copies_of_erased(ports: Ports, derived_keys: dict[str, str], sources: dict[str, str]) -> None:
    """A source erased while we copied: its hook may have run before our write, so drop the copy ourselves (its
    tombstone is written before the hook deletes, so this read cannot miss an erasure that did) and refuse."""
    gone = sorted(ports.runs.tombstoned(sorted({sources[t] for t in derived_keys})))  # 100 keys a request
    if gone:
        for task_id, key in derived_keys.items():
            if sources[task_id] in gone:
                ports.blobs.delete_prefix(key)
        raise UnusableReferenceError()


def _suite_sources(suite: dict[str, Any], fixture_runs: dict[str, str] | None, tenant: str) -> set[str]:
    """The source runs the trials serve suite tasks from (a task's ``sourceRunId``, unless ``fixtureRuns`` names the
    task), and the runs an accepted task's fixtures came from (``derivedFromRunIds``: the run is served their
    content): the tenant's own; another tenant's serves nothing and is never linked."""
    out: set[str] = set()
    for t in suite["tasks"]:
        if t.get(suites.TOMBSTONED):
            continue
        if t.get("sourceRunId") and str(t["taskId"]) not in (fixture_runs or {}):
            out.add(str(t["sourceRunId"]))
        out.update(str(r) for r in t.get("derivedFromRunIds") or [])
    return {r for r in out if tenant_of(r) == tenant}


# --------------------------------------------------------------------------- reads


def require_derived_copies(ports: Ports, plan_item: dict[str, Any]) -> None:
    """410 eval_recorded_fixtures_gone when a derived copy an eval run's plan reads is gone (its source was erased),
    from the keys its plan item keeps in either layout (``evalplan.derived_read``; a plan stored as an object keeps
    its ``derived`` map inside the object only): the copies are listed by folder, 1,000 to a request, never read."""
    from shared.engine.evalplan import derived_read

    folders: dict[str, set[str]] = {}
    for key in derived_read(plan_item):
        folders.setdefault(key.rsplit("/", 1)[0] + "/", set()).add(key)
    for folder, wanted in sorted(folders.items()):
        if not wanted <= set(ports.blobs.list_keys(folder)):
            raise EvalRecordedFixturesGoneError()
