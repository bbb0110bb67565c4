"""Accepting an intended change (issue 25 part 4, issue 36 part 3): ``POST /host/openwop-serverless/eval-suites/
{suiteId}:accept`` {runId, reason, taskIds?, answers?, dropTaskIds?} publishes the next minor version of the tenant's
suite in which each accepted task takes the candidate eval run's first trial as its new expectations and fixtures:

- ``fixtures.toolResponses``: the agent's calls of that trial, in call order, each with its answer
  (``argsMatch: "exact"``; an error outcome is an ``isError`` entry) and where that answer came from
  (``shared.services.accept_answers``): the record, a live read at accept time, or the reviewer. A call the record
  lacks (a fixture miss) of a write tool with no reviewer's answer refuses the whole accept, naming it; nothing is
  ever given another call's answer. ``dropTaskIds`` leaves tasks out of the new version;
- ``fixtures.onMiss``: the task's own (a ``sourceRunId`` task: ``live-read-only`` if it said so, else ``fail``);
  ``sourceRunId`` is dropped (the fixtures now live in the version) and kept as lineage in ``derivedFromRunIds``
  with the ``fixtureRuns`` run that served the task, so the source's erasure reaches the new version;
  ``fixtureMatching`` is kept;
- ``expected``: a ``golden`` task's ``match.value`` becomes the trial's decision (its strategy kept); a rubric is
  kept; ``trajectory.calls`` (when the task has one) become the recorded calls;
- ``acceptance``: who (the API key's id, the subject), when, why (``reason``), each accepted task's provenance per
  call and the dropped tasks.
Tasks not named (``taskIds`` absent: all) are copied unchanged. A version is immutable: the new one is registered
through ``suite_runs.register`` (201; every run a task names is checked and linked as for any registration), never
written over. Every check happens before the first live call and the one write.

The run must be the caller's terminal eval run of a version of this suite: an unknown, foreign, unfinished or
other suite's run is the one uniform ``400 validation_error`` RFC 0252 uses for a run a body names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.errors import RunGoneError, UnusableReferenceError, fault, invalid, invalid_at, invalid_parameter
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c
from shared.services import accept_answers as aa
from shared.services import suites
from shared.services.common import Caller, reference


def _evalrun() -> Any:
    from shared.engine import evalrun

    return evalrun


def _report() -> Any:
    from shared.services import eval_report

    return eval_report


def _decision(trial: dict[str, Any]) -> tuple[bool, Any]:
    decided = [e for e in trial.get("events") or [] if e.get("type") == c.AGENT_DECIDED]
    if not decided or trial.get("errorCode"):
        return False, None
    return True, (decided[-1].get("payload") or {}).get("decision")


def _mine(calls: list[ToolCallRecord], agent_id: str) -> list[ToolCallRecord]:
    """The agent's own calls of a trial in call order (what ``entries_from_records`` turns into entries)."""
    return [r for r in sorted(calls, key=lambda r: r.call_key) if r.agent_id == agent_id and not r.delegate]


@dataclass
class _Accepted:
    """One task being accepted: its entries and each one's provenance, and the calls still to go live."""

    at: int  # its position in the suite
    task: dict[str, Any]
    decision: Any
    calls: list[ToolCallRecord]
    entries: list[dict[str, Any]]
    provenance: list[str] = field(default_factory=list)
    live: list[int] = field(default_factory=list)


def _unanswered(task_id: str, k: int, rec: ToolCallRecord, old: Callable[[], list[dict[str, Any]]]) -> dict[str, Any]:
    """A new call no one answered: the task, the call's position, its tool and where its args differ from the
    closest recorded call of that tool (RFC 6901 pointers; null when the record has no call of it)."""
    same = [e for e in old() if e.get("tool") == rec.tool_name]
    near = _report().closest(rec.tool_name, rec.args, same)
    return {"taskId": task_id, "call": k, "tool": rec.tool_name, "differingPointers": None if near is None else near[1]}


def _lineage(task: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """The runs whose content the accepted task holds: what it was served from (its source, its own lineage, the
    ``fixtureRuns`` run of the eval)."""
    served = (plan.get("fixtureRuns") or {}).get(str(task["taskId"]))
    return list(dict.fromkeys([*suites.lineage(task), *([str(served)] if served else [])]))


def _new_task(job: _Accepted, plan: dict[str, Any]) -> dict[str, Any]:
    task = job.task
    new = {k: v for k, v in task.items() if k not in ("sourceRunId", "derivedFromRunIds")}
    derived = _lineage(task, plan)
    if derived:
        new["derivedFromRunIds"] = derived
    on_miss = str((task.get("fixtures") or {}).get("onMiss", "fail"))
    if task.get("sourceRunId") and on_miss != "live-read-only":
        on_miss = "fail"
    new["fixtures"] = {"toolResponses": job.entries, "onMiss": on_miss}
    expected = dict(task.get("expected") or {})
    if expected.get("kind") == "golden":
        expected["match"] = {**dict(expected.get("match") or {}), "value": job.decision}
        new["expected"] = expected
    if task.get("trajectory") is not None:
        new["trajectory"] = {
            **task["trajectory"],
            "calls": [{"tool": e["tool"], "args": e.get("args")} for e in job.entries],
        }
    return new


def _classify(
    job: _Accepted, task_id: str, req: aa.AcceptRequest, live: aa.LiveCaller, old: Callable[[], list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Each call's provenance (the reviewer's answers applied, live reads queued); the calls no one answered and
    the answers that name no new call. ``old``: the entries the task was served from (read only for a refusal)."""
    unanswered: list[dict[str, Any]] = []
    faults: list[dict[str, str]] = []
    for k, rec in enumerate(job.calls):
        given = req.answers.get((task_id, k))
        if not rec.extra.get("miss"):
            job.provenance.append(aa.RECORDED)
            if given is not None:
                faults.append(fault(f"/answers/{req.answer_at[(task_id, k)]}/call", "enum", NOT_NEW))
        elif given is not None:
            job.entries[k] = {"tool": rec.tool_name, "args": rec.args, "argsMatch": "exact", **given}
            job.provenance.append(aa.SUPPLIED)
        elif live.read_only(rec.tool_name):
            job.live.append(k)
            job.provenance.append(aa.LIVE)
        else:
            unanswered.append(_unanswered(task_id, k, rec, old))
            job.provenance.append("")
    faults += [
        fault(f"/answers/{at}/call", "enum", NOT_NEW)
        for (t, k), at in req.answer_at.items()
        if t == task_id and k >= len(job.calls)
    ]
    return unanswered, faults


NOT_NEW = "The task's first trial has no call the record lacks at this position."


def _targets(req: aa.AcceptRequest, index: dict[str, int], body: dict[str, Any]) -> list[str]:
    """The tasks to accept (named or all), every name in the body checked against them."""
    if req.task_ids is not None:
        unknown = [i for i, t in enumerate(body["taskIds"]) if t not in index]
        if unknown:
            raise invalid(
                "taskIds names a task the suite does not have.", [fault(f"/taskIds/{i}", "enum") for i in unknown]
            )
    wanted = list(index) if req.task_ids is None else req.task_ids
    named = set(wanted)
    faults = [fault(f"/dropTaskIds/{i}", "enum") for i, t in enumerate(body.get("dropTaskIds") or []) if t not in named]
    faults += [
        fault(f"/answers/{at}/taskId", "enum")
        for (t, _k), at in sorted(req.answer_at.items(), key=lambda kv: kv[1])
        if t not in named or t in req.drop
    ]
    if faults:
        raise invalid("dropTaskIds and answers name only tasks being accepted (an answer not a dropped one).", faults)
    if set(req.drop) >= set(index):
        raise invalid_at("/dropTaskIds", "maxItems", "A version keeps at least one task.")
    return wanted


def _accepted_run(ports: Ports, caller: Caller, suite_id: str, run_id: str) -> tuple[RunRecord, dict[str, Any]]:
    """The caller's terminal eval run of a version of ``suite_id`` this tenant holds, and its plan; any other
    reference is unusable, whatever the reason."""
    rec = reference(ports, caller, run_id)
    if rec is None or rec.kind != "eval" or not rec.terminal:
        raise UnusableReferenceError("/runId")
    try:
        plan = _evalrun().load_plan(ports, rec.run_id, cached=False)
    except RunGoneError as exc:  # erased while we read: unusable, like any other reason
        raise UnusableReferenceError("/runId") from exc
    pinned = plan["suite"]
    if pinned.get("suiteId") != suite_id or not suites.exists(ports, caller.tenant, suite_id, str(pinned["version"])):
        raise UnusableReferenceError("/runId")
    return rec, plan


def _go_live(job: _Accepted, live: aa.LiveCaller) -> None:
    """The job's read-only calls answered live, once each, as exact-match entries."""
    task_id = str(job.task["taskId"])
    for k in job.live:
        got = live.call(task_id, k, job.calls[k].tool_name, job.calls[k].args)
        job.entries[k] = {"tool": job.calls[k].tool_name, "args": job.calls[k].args, "argsMatch": "exact", **got}


def accept(ports: Ports, caller: Caller, suite_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    """201 {suiteId, version, evalSuiteRef, taskCount, acceptedCount, accepted, droppedTaskIds}."""
    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise invalid_parameter("suiteId", "The suiteId is not a suite id.")
    req = aa.parse(body)
    evalrun = _evalrun()
    rec, plan = _accepted_run(ports, caller, suite_id, req.run_id)
    pinned = plan["suite"]
    tenant = caller.tenant
    index = {str(t["taskId"]): i for i, t in enumerate(pinned["tasks"])}
    wanted = _targets(req, index, body)
    trials = evalrun.load_trials(ports, rec.run_id)
    by_invocation: dict[str, list[ToolCallRecord]] = {}
    for call in ports.tool_calls.list_calls(rec.run_id):
        by_invocation.setdefault(call.invocation_id, []).append(call)
    agent_id = str(plan["agentId"])
    tasks = list(pinned["tasks"])
    live = aa.LiveCaller(ports, tenant, rec.run_id)
    jobs: list[_Accepted] = []
    unanswered: list[dict[str, Any]] = []
    faults: list[dict[str, str]] = []
    for task_id in wanted:
        if task_id in req.drop:
            continue
        i = index[task_id]
        decided, decision = _decision(trials.get((i, 1)) or {})
        if tasks[i].get("tombstoned") or not decided:
            at = f"/taskIds/{body['taskIds'].index(task_id)}" if req.task_ids else "/runId"
            raise invalid_at(at, "decided", "A task to accept has no decided first trial in the run.")
        mine = _mine(by_invocation.get(evalrun.invocation_id(task_id, 1), []), agent_id)
        job = _Accepted(i, tasks[i], decision, mine, evalrun.entries_from_records(mine, agent_id))
        old = functools.cache(lambda task=tasks[i]: list(_report()._entries_for(ports, plan, task)[0]))
        missing, wrong = _classify(job, task_id, req, live, old)
        unanswered += missing
        faults += wrong
        jobs.append(job)
    if faults:
        raise invalid("An answer names no call the record lacks.", faults)
    if unanswered:
        raise aa.unanswered_error(unanswered)
    for job in jobs:  # every check passed: the read-only calls go live now, once each
        _go_live(job, live)
        tasks[job.at] = _new_task(job, plan)
    dropped = set(req.drop)
    kept = [t for t in tasks if str(t["taskId"]) not in dropped]
    latest = suites.latest_version(ports, tenant, suite_id) or str(pinned["version"])
    major, minor, _patch = (int(x) for x in latest.split("."))
    suite = {k: v for k, v in pinned.items() if k not in ("tasks", "acceptance")}
    record: dict[str, Any] = {
        "by": {"keyId": caller.key_id or None, "subjectId": caller.subject_id},
        "at": ports.clock.iso(),
        "reason": req.reason,
        "tasks": [{"taskId": str(j.task["taskId"]), "provenance": j.provenance} for j in jobs],
    }
    if req.drop:
        record["droppedTaskIds"] = list(req.drop)
    suite.update(version=f"{major}.{minor + 1}.0", acceptance=record, tasks=kept)
    from shared.services import suite_runs  # every run a task names is checked and linked again

    status, out = suite_runs.register(ports, tenant, suite, accepted=True)
    accepted = [
        {
            "taskId": str(j.task["taskId"]),
            "calls": [
                {"call": k, "tool": r.tool_name, "provenance": p}
                for k, (r, p) in enumerate(zip(j.calls, j.provenance, strict=True))
            ],
        }
        for j in jobs
    ]
    return status, {
        **out,
        "taskCount": len(kept),
        "acceptedCount": len(jobs),
        "accepted": accepted,
        "droppedTaskIds": list(req.drop),
    }
