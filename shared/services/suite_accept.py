"""Accepting an intended change (issue 25 part 4): ``POST /host/openwop-serverless/eval-suites/{suiteId}:accept``
{runId, taskIds?} publishes the next minor version of the tenant's suite in which each accepted task takes the
candidate eval run's first trial as its new expectations and fixtures:

- ``fixtures.toolResponses``: the agent's recorded calls of that trial, in call order, each with the answer it got
  (``argsMatch: "exact"``; an error outcome is an ``isError`` entry). A call that missed its fixtures got no
  answer: its entry takes the answer of the closest recorded entry of the same tool (its old answer, now under the
  new arguments), else the miss as an error;
- ``fixtures.onMiss``: the task's own (a ``sourceRunId`` task: ``live-read-only`` if it said so, else ``fail``);
  ``sourceRunId`` is dropped (the fixtures now live in the version); ``fixtureMatching`` is kept;
- ``expected``: a ``golden`` task's ``match.value`` becomes the trial's decision (its strategy kept); a rubric is
  kept; ``trajectory.calls`` (when the task has one) become the recorded calls.
Tasks not named (``taskIds`` absent: all) are copied unchanged. A version is immutable: the new one is registered
through ``suite_runs.register`` (201; the sources of tasks that keep one are checked and linked as for any
registration), never written over.

The run must be the caller's terminal eval run of a version of this suite: an unknown, foreign, unfinished or
other suite's run is the one uniform ``400 validation_error`` RFC 0252 uses for a run a body names.
"""

from __future__ import annotations

from typing import Any

from shared.errors import RunGoneError, UnusableReferenceError, fault, invalid, invalid_at, invalid_parameter, pointer
from shared.ports import Ports, ToolCallRecord
from shared.protocol import codes as c
from shared.services import suites
from shared.services.common import Caller, reference

MAX_TASK_IDS = 10_000


def _evalrun() -> Any:
    from shared.engine import evalrun

    return evalrun


def _request(body: Any) -> tuple[str, list[str] | None]:
    message = "The body is {runId, taskIds?}."
    if not isinstance(body, dict):
        raise invalid(message, [fault("", "type")])
    faults = [fault(pointer([k]), "additionalProperties") for k in sorted(set(body) - {"runId", "taskIds"})]
    if not isinstance(body.get("runId"), str):
        faults.append(fault("/runId", "required" if "runId" not in body else "type"))
    if faults:
        raise invalid(message, faults)
    ids = body.get("taskIds")
    if ids is not None:
        if not isinstance(ids, list):
            faults = [fault("/taskIds", "type")]
        elif not 0 < len(ids) <= MAX_TASK_IDS:
            faults = [fault("/taskIds", "minItems" if not ids else "maxItems")]
        else:
            faults = [fault(f"/taskIds/{i}", "type") for i, t in enumerate(ids) if not isinstance(t, str)]
        if faults:
            raise invalid("taskIds is a non-empty list of task ids.", faults)
    return str(body["runId"]), None if ids is None else list(dict.fromkeys(ids))


def _decision(trial: dict[str, Any]) -> tuple[bool, Any]:
    decided = [e for e in trial.get("events") or [] if e.get("type") == c.AGENT_DECIDED]
    if not decided or trial.get("errorCode"):
        return False, None
    return True, (decided[-1].get("payload") or {}).get("decision")


def _entries(calls: list[ToolCallRecord], agent_id: str, old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from shared.services.eval_report import closest

    out = _evalrun().entries_from_records(calls, agent_id)
    mine = [r for r in sorted(calls, key=lambda r: r.call_key) if r.agent_id == agent_id and not r.delegate]
    for entry, rec in zip(out, mine, strict=True):
        if not rec.extra.get("miss"):
            continue
        same = [e for e in old if e.get("tool") == rec.tool_name]
        near = closest(rec.tool_name, rec.args, same)
        if near is not None:
            was = same[near[0]]
            entry.pop("isError", None)
            entry["response"] = was.get("response")
            if was.get("isError"):
                entry["isError"] = True
    return out


def _accepted(task: dict[str, Any], entries: list[dict[str, Any]], decision: Any) -> dict[str, Any]:
    new = {k: v for k, v in task.items() if k != "sourceRunId"}
    on_miss = str((task.get("fixtures") or {}).get("onMiss", "fail"))
    if task.get("sourceRunId") and on_miss != "live-read-only":
        on_miss = "fail"
    new["fixtures"] = {"toolResponses": entries, "onMiss": on_miss}
    expected = dict(task.get("expected") or {})
    if expected.get("kind") == "golden":
        expected["match"] = {**dict(expected.get("match") or {}), "value": decision}
        new["expected"] = expected
    if task.get("trajectory") is not None:
        new["trajectory"] = {
            **task["trajectory"],
            "calls": [{"tool": e["tool"], "args": e.get("args")} for e in entries],
        }
    return new


def accept(ports: Ports, caller: Caller, suite_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    """201 {suiteId, version, evalSuiteRef, taskCount, acceptedCount}."""
    if not suites.SUITE_ID_RE.fullmatch(suite_id):
        raise invalid_parameter("suiteId", "The suiteId is not a suite id.")
    run_value, task_ids = _request(body)
    evalrun = _evalrun()
    rec = reference(ports, caller, run_value)
    if rec is None or rec.kind != "eval" or not rec.terminal:
        raise UnusableReferenceError("/runId")
    try:
        plan = evalrun.load_plan(ports, rec.run_id, cached=False)
    except RunGoneError as exc:  # erased while we read: unusable, like any other reason
        raise UnusableReferenceError("/runId") from exc
    pinned = plan["suite"]
    tenant = caller.tenant
    if pinned.get("suiteId") != suite_id or not suites.exists(ports, tenant, suite_id, str(pinned["version"])):
        raise UnusableReferenceError("/runId")
    index = {str(t["taskId"]): i for i, t in enumerate(pinned["tasks"])}
    wanted = list(index) if task_ids is None else task_ids
    unknown = [i for i, t in enumerate(body["taskIds"]) if t not in index] if task_ids is not None else []
    if unknown:
        raise invalid(
            "taskIds names a task the suite does not have.", [fault(f"/taskIds/{i}", "enum") for i in unknown]
        )
    trials = evalrun.load_trials(ports, rec.run_id)
    by_invocation: dict[str, list[ToolCallRecord]] = {}
    for call in ports.tool_calls.list_calls(rec.run_id):
        by_invocation.setdefault(call.invocation_id, []).append(call)
    agent_id = str(plan["agentId"])
    tasks = list(pinned["tasks"])
    for task_id in wanted:
        i = index[task_id]
        task = tasks[i]
        decided, decision = _decision(trials.get((i, 1)) or {})
        if task.get("tombstoned") or not decided:
            at = f"/taskIds/{body['taskIds'].index(task_id)}" if task_ids else "/runId"
            raise invalid_at(at, "decided", "A task to accept has no decided first trial in the run.")
        old = _report()._entries_for(ports, plan, task)[0]
        calls = by_invocation.get(evalrun.invocation_id(task_id, 1), [])
        tasks[i] = _accepted(task, _entries(calls, agent_id, old), decision)
    latest = suites.latest_version(ports, tenant, suite_id) or str(pinned["version"])
    major, minor, _patch = (int(x) for x in latest.split("."))
    suite = {k: v for k, v in pinned.items() if k != "tasks"}
    suite.update(version=f"{major}.{minor + 1}.0", tasks=tasks)
    from shared.services import suite_runs  # the tasks that keep their source run are checked and linked again

    status, out = suite_runs.register(ports, tenant, suite)
    return status, {**out, "taskCount": len(tasks), "acceptedCount": len(wanted)}


def _report() -> Any:
    from shared.services import eval_report

    return eval_report
