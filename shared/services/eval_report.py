"""GET /host/openwop-serverless/runs/{runId}/eval-report: why each task of an eval run scored what it did.

Built from what the host already stores, never from a re-run: the eval plan (the pinned suite, the baseline's
scores, the derived fixture copies), the ``TRIAL#`` items (each trial's events and grade), the tool-call record
(``source`` live | fixture | recorded | none, ``miss``) and the summary. Per task: the expected outcome and each
trial's actual one, every tool call's provenance (``served`` from the source run or the suite's fixtures,
``refused``, ``live``, ``recorded``), each fixture miss with the closest recorded call, the RFC 6901 pointers
at which the arguments differ and the ``fixtureMatching`` rules that would have matched it (``wouldMatchWith``), the paired per-task verdict against the baseline, latency (the trial's recorded call
durations), and its model calls (``provider.usage``: calls, tokens, estimated cost). Each trial carries its
``trajectory`` and each task its first ``divergence`` from the baseline's (``shared.services.eval_trajectories``).

Tenant-private: a well-formed id of another tenant takes the same path as an unknown one (one read of a key that
cannot exist) and gets the same 404 bytes. A run that is not an eval run is ``404 not_found`` with its own
message (the caller's own run: nothing leaks); a run not yet terminal is ``409 run_state_conflict``, as for the
summary, its details carrying the progress (tasks and trials done / total). Content-free agents (their events
carry ``argsHash``) get no argument, response or decision values in the report: only pointers, provenance and
grades.

Paged by task, in suite order: ``limit`` tasks (default 200, at most 1,000) and no more than ``PAGE_BYTES`` of
task rows after the first; ``nextCursor`` (present while tasks remain) is the next page's ``cursor``. Every page
carries the same header (scores, verdicts, ``taskCount``), so a caller that needs only the verdict reads one page.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from shared import keys
from shared.engine import evalstats, grading
from shared.engine.matching import closest, would_match
from shared.errors import (
    EvalRecordedFixturesGoneError,
    NotFoundError,
    RunGoneError,
    RunStateConflictError,
    ValidationError,
)
from shared.ports import Ports, RunRecord, ToolCallRecord
from shared.protocol import codes as c
from shared.protocol.ids import tenant_of
from shared.services import eval_trajectories, summaries
from shared.services.common import Caller, decode_path_run_id, page_limit

_UNREADABLE = "~"  # an opaque part no run id can have
DEFAULT_PAGE_TASKS = 200
MAX_PAGE_TASKS = 1000
# Task rows per page after the first: an answer stays well inside Lambda's 6 MB response (its JSON is escaped
# once more inside the proxy response) whatever the trials hold.
PAGE_BYTES = 2_000_000
_CURSOR_RE = re.compile(r"^tasks-(\d{5})$")


def _evalrun() -> Any:
    """The eval engine module, imported on first use (it pulls the run engine: kept off the cold import)."""
    from shared.engine import evalrun

    return evalrun


def _features() -> dict[str, bool]:
    from shared.services import discovery

    return discovery.FEATURES


def own_run_or_404(ports: Ports, caller: Caller, wire_run_id: str) -> RunRecord:
    """The run if it is the caller's tenant's; unknown and foreign ids both read one key and answer one 404."""
    run_id = decode_path_run_id(wire_run_id)
    own = tenant_of(run_id) == caller.tenant
    rec = ports.runs.get_run(run_id if own else f"{caller.tenant}/{_UNREADABLE}")
    if not own or rec is None or rec.run_id != run_id:
        raise NotFoundError("No such run.")
    return rec


# --------------------------------------------------------------------------- pure helpers


def _ms(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0, round((b - a).total_seconds() * 1000))


def _usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The trial's model calls from its ``provider.usage`` events (the agent's and the rubric judge's)."""
    usage = [e.get("payload") or {} for e in events if e.get("type") == c.PROVIDER_USAGE]
    return {
        "modelCalls": len(usage),
        "inputTokens": sum(int(u.get("inputTokens", 0)) for u in usage),
        "outputTokens": sum(int(u.get("outputTokens", 0)) for u in usage),
        # unknown (None) when a call had no known price: never a partial sum, never 0 for an unpriced model
        "costUsd": None
        if any(u.get("costEstimateUsd") is None for u in usage)
        else sum(float(u["costEstimateUsd"]) for u in usage),
    }


def provenance(rec: ToolCallRecord) -> str:
    if rec.source == "fixture":
        return "refused" if rec.extra.get("miss") else "served"
    if rec.source == "none":
        return "refused"
    return rec.source  # live | recorded


def task_verdict(score: float, baseline: float | None, misses: int, has_baseline: bool, flaky: bool = False) -> str:
    """``unverifiable`` (a fixture miss), else paired against the baseline: ``flaky`` when the baseline's trials
    of the task disagreed, else ``regressed`` | ``improved`` | ``unchanged``; ``unpaired`` when the baseline has no
    such task; without a baseline ``passed``/``failed``."""
    if misses:
        return "unverifiable"
    if not has_baseline:
        return "passed" if score >= 1.0 - grading.EPSILON else "failed"
    if baseline is None:
        return "unpaired"
    if flaky:
        return "flaky"
    if score < baseline - grading.EPSILON:
        return "regressed"
    if score > baseline + grading.EPSILON:
        return "improved"
    return "unchanged"


def overall_verdict(status: str, regression: dict[str, Any] | None, misses: int) -> str:
    """What the CLI's exit code reads: ``unverifiable`` for a run that did not complete or any fixture miss,
    else the paired verdict, else ``no-baseline``."""
    if status != "completed" or misses:
        return "unverifiable"
    if regression is None:
        return "no-baseline"
    return str(regression.get("verdict"))


# --------------------------------------------------------------------------- the report


def _entries_for(ports: Ports, plan: dict[str, Any], task: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The recorded entries a task was served from, and where they came from (a source run id, ``suite``)."""
    task_id = str(task["taskId"])
    source = (plan.get("fixtureRuns") or {}).get(task_id)
    try:
        derived = _evalrun().derived_entries(ports, plan, task_id)
    except EvalRecordedFixturesGoneError:  # the copy is gone (its source was erased): nothing to compare against
        derived = None
        source = None
    if derived is not None:
        return derived, source
    if task.get("sourceRunId") and plan.get("tenant"):
        return _evalrun().source_entries(ports, plan, task, str(plan["tenant"])), str(task["sourceRunId"])
    fx = task.get("fixtures")
    if fx is not None and "live-shadow" not in (plan.get("modes") or []):
        return list(fx.get("toolResponses") or []), "suite"
    return [], None


def _trial(
    doc: dict[str, Any],
    calls: list[ToolCallRecord],
    entries: list[dict[str, Any]],
    served_from: str | None,
    content_free: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = list(doc.get("events") or [])
    decided = [e for e in events if e.get("type") == c.AGENT_DECIDED]
    trial: dict[str, Any] = {
        "trial": int(doc["trial"]),
        "score": float(doc["score"]),
        "passed": bool(doc["passed"]),
        "fixtureMissCount": int(doc.get("fixtureMissCount", 0)),
        "decided": bool(decided),
    }
    if decided and not content_free:
        trial["actual"] = (decided[-1].get("payload") or {}).get("decision")
    if doc.get("errorCode"):  # a failed trial says why (a content-free agent's message may quote content: code only)
        trial["error"] = {"code": doc["errorCode"]}
        if doc.get("errorMessage") and not content_free:
            trial["error"]["message"] = doc["errorMessage"]
    # The trial's recorded call durations (stored with it; a replay reports the same), else its events' span.
    trial["latencyMs"] = (
        doc.get("latencyMs")
        if doc.get("latencyMs") is not None
        else (_ms(events[0].get("timestamp"), events[-1].get("timestamp")) if events else None)
    )
    trial.update(_usage(events))
    out_calls: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []
    for rec in sorted(calls, key=lambda r: r.call_key):
        out_calls.append(_call(rec, served_from, content_free))
        if rec.extra.get("miss"):
            misses.append(_miss(rec, entries, served_from, content_free))
    trial["toolCalls"] = out_calls
    trial["liveToolCalls"] = sum(1 for x in out_calls if x["provenance"] == "live")
    return trial, misses


def _call(rec: ToolCallRecord, served_from: str | None, content_free: bool) -> dict[str, Any]:
    """One tool call of a trial: its provenance (and where a served one came from), status, duration, args."""
    prov = provenance(rec)
    call: dict[str, Any] = {"callId": rec.call_id, "tool": rec.tool_name, "provenance": prov, "status": rec.status}
    if prov == "served" and served_from:
        call["servedFrom"] = served_from
    if rec.error and rec.status != "ok":
        call["errorCode"] = rec.error.get("code")
    if rec.duration_ms is not None:
        call["durationMs"] = rec.duration_ms
    if not content_free:
        call["args"] = rec.args
    return call


def _miss(
    rec: ToolCallRecord, entries: list[dict[str, Any]], served_from: str | None, content_free: bool
) -> dict[str, Any]:
    """A fixture miss: the call, the closest recorded entry, where they differ, the rules that would match it."""
    miss: dict[str, Any] = {"callId": rec.call_id, "tool": rec.tool_name, "recordedFrom": served_from}
    if not content_free:
        miss["args"] = rec.args
    near = closest(rec.tool_name, rec.args, entries)
    if near is None:
        miss["closest"] = None
        miss["differingPointers"] = []
        return miss
    index, ptrs = near
    entry = entries[index]
    miss["closest"] = {
        "index": index,
        "tool": entry.get("tool"),
        **({} if content_free else {"args": entry.get("args")}),
    }
    miss["sameTool"] = entry.get("tool") == rec.tool_name
    miss["differingPointers"] = ptrs
    if miss["sameTool"]:  # the fixtureMatching rules under which the closest entry would have matched
        miss["wouldMatchWith"] = would_match(entry.get("args"), rec.args, bounds=not content_free)
    return miss


def _scorer(doc: dict[str, Any], content_free: bool) -> dict[str, Any]:
    """A trial's scorer result as stored; a content-free agent's keeps no reason (a tool scorer's may quote it)."""
    out = {k: v for k, v in doc.items() if k != "parts" and not (content_free and k == "reason")}
    if doc.get("parts"):
        out["parts"] = [_scorer(p, content_free) for p in doc["parts"]]
    return out


def _task_row(
    ports: Ports,
    plan: dict[str, Any],
    i: int,
    task: dict[str, Any],
    row: dict[str, Any] | None,
    base_scores: dict[str, float],
    has_baseline: bool,
    trials: dict[tuple[int, int], dict[str, Any]],
    by_invocation: dict[str, list[ToolCallRecord]],
) -> dict[str, Any]:
    suite = plan["suite"]
    task_id = str(task["taskId"])
    entries, served_from = _entries_for(ports, plan, task)
    k = grading.task_trials(suite, task)
    trial_rows: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []
    scored: list[dict[str, Any]] = []
    hidden = False
    for n in range(1, k + 1):
        doc = trials.get((i, n))
        if doc is None:
            continue
        calls = by_invocation.get(_evalrun().invocation_id(task_id, n), [])
        content_free = any("argsHash" in (e.get("payload") or {}) for e in doc.get("events") or [])
        hidden = hidden or content_free
        trial, trial_misses = _trial(doc, calls, entries, served_from, content_free)
        trial_rows.append(trial)
        if doc.get("scorer") is not None:
            scored.append({"trial": n, **_scorer(doc["scorer"], content_free)})
        misses.extend({"trial": n, **m} for m in trial_misses)
    score = (
        float(row["score"]) if row else (sum(t["score"] for t in trial_rows) / len(trial_rows) if trial_rows else 0.0)
    )
    miss_count = int(row["fixtureMissCount"]) if row else sum(t["fixtureMissCount"] for t in trial_rows)
    expected: dict[str, Any] = {"kind": (task.get("expected") or {}).get("kind")}
    if not hidden:
        expected.update({k2: v for k2, v in (task.get("expected") or {}).items() if k2 != "kind"})
        if task.get("trajectory") is not None:
            expected["trajectory"] = task["trajectory"]
    latencies = [t["latencyMs"] for t in trial_rows if t["latencyMs"] is not None]
    passed = sum(1 for t in trial_rows if t["passed"])
    flaky = set((plan.get("baseline") or {}).get("flaky") or [])
    return {
        "taskId": task_id,
        "expected": expected,
        "score": score,
        "passed": bool(row["passed"]) if row else False,
        "baselineScore": base_scores.get(task_id),
        "verdict": task_verdict(score, base_scores.get(task_id), miss_count, has_baseline, task_id in flaky)
        if trial_rows
        else "unverifiable",
        "baselineFlaky": task_id in flaky if has_baseline else None,
        "trials": {"total": k, "done": len(trial_rows), "passed": passed},
        "passAllK": len(trial_rows) == k and all(t["passed"] for t in trial_rows),
        **(evalstats.curves(len(trial_rows), passed) if k > 1 else {}),
        "fixtureMissCount": miss_count,
        "fixtureMisses": misses,
        "servedFrom": served_from,
        "liveToolCalls": sum(t["liveToolCalls"] for t in trial_rows),
        "costUsd": None
        if any(t["costUsd"] is None for t in trial_rows)
        else sum(float(t["costUsd"]) for t in trial_rows),
        "latencyMs": round(sum(latencies) / len(latencies)) if latencies else None,
        "scorers": scored,
        "trialResults": trial_rows,
    }


def build(
    ports: Ports, rec: RunRecord, start: int = 0, limit: int | None = None, page_bytes: int = PAGE_BYTES
) -> dict[str, Any]:
    """The report's page of tasks ``start, start + 1, ...``: at most ``limit`` tasks (all when None) and, after
    the first, no more than ``page_bytes`` of task rows; ``nextCursor`` names the next page's first task. Only
    that page's trials and tool calls are read (one key-range Query each); the header (scores, verdicts) is the
    same on every page, from the plan and the summary (both immutable once the run is terminal: read once by a
    container; the run item is read for every page, so an erased run is a 404)."""
    evalrun = _evalrun()
    plan = evalrun.load_plan(ports, rec.run_id)  # immutable: a container serving the pages reads it once
    suite = plan["suite"]
    n_tasks = len(suite["tasks"])
    if start >= n_tasks > 0:
        raise ValidationError("The cursor is not valid.")
    summary = summaries.stored(ports, rec, cached=True) or {}
    rows = {str(t["taskId"]): t for t in summary.get("tasks") or []}
    baseline = plan.get("baseline") if "regression" in (plan.get("modes") or []) else None
    base_scores = {str(k): float(v) for k, v in ((baseline or {}).get("tasks") or {}).items()}
    end = n_tasks if limit is None else min(n_tasks, start + limit)
    tasks: list[dict[str, Any]] = []
    if end > start:
        trials = evalrun.load_trials(ports, rec.run_id, (start, end))
        by_invocation: dict[str, list[ToolCallRecord]] = {}
        for call in ports.tool_calls.list_calls(rec.run_id, between=evalrun.call_keys_between(start, end)):
            by_invocation.setdefault(call.invocation_id, []).append(call)
        turns = (
            eval_trajectories.model_turns(ports, rec.run_id, start, end)
            if eval_trajectories.uses_models(trials)
            else {}
        )
        base_steps = eval_trajectories.baseline_page(ports, plan, [str(t["taskId"]) for t in suite["tasks"][start:end]])
        size = 0
        for i in range(start, end):
            if tasks and size >= page_bytes:
                break
            task = suite["tasks"][i]
            tasks.append(
                _task_row(
                    ports,
                    plan,
                    i,
                    task,
                    rows.get(str(task["taskId"])),
                    base_scores,
                    baseline is not None,
                    trials,
                    by_invocation,
                )
            )
            eval_trajectories.annotate(tasks[-1], i, trials, turns, base_steps)
            size += len(json.dumps(tasks[-1], separators=(",", ":"), default=str))
    regression = summary.get("regression")
    # A completed run has a summary row for every task; a run that did not complete is unverifiable whatever
    # its rows say, so the verdict never needs the other pages' trials.
    total_misses = sum(int(r.get("fixtureMissCount", 0)) for r in rows.values())
    out: dict[str, Any] = {
        "runId": rec.run_id,
        "status": rec.status,
        "suiteId": suite["suiteId"],
        "suiteVersion": suite["version"],
        "agentId": plan.get("agentId"),
        "agentVersion": plan.get("agentVersion"),  # what ran: the pin, or what the host resolved at create
        "modes": list(plan.get("modes") or []),
        "baselineRunId": plan.get("baselineRunId"),
        "aggregateScore": summary.get("aggregateScore"),
        "totalCostUsd": summary.get("totalCostUsd"),  # None: some task's cost is unknown (an unpriced model)
        "baselineAggregateScore": (baseline or {}).get("aggregateScore"),
        "scoreDelta": (regression or {}).get("scoreDelta"),
        "pairedVerdict": (regression or {}).get("verdict"),
        "pairedTaskCount": (regression or {}).get("pairedTaskCount"),
        "scoreDeltaInterval": (regression or {}).get("scoreDeltaInterval"),
        "flakyTasks": (regression or {}).get("flakyTasks"),
        "verdict": overall_verdict(rec.status, regression, total_misses),
        "error": rec.error.get("code") if rec.error else None,
        "taskCount": n_tasks,
        "tasks": tasks,
    }
    if start + len(tasks) < n_tasks:
        out["nextCursor"] = _cursor(start + len(tasks))
    return out


def _cursor(index: int) -> str:
    return f"tasks-{index:05d}"


def _page(params: dict[str, str]) -> tuple[int, int]:
    """(first task, limit) from ``cursor`` (a ``nextCursor`` of this report) and ``limit``; else ``400``."""
    limit = page_limit(params, DEFAULT_PAGE_TASKS, MAX_PAGE_TASKS)
    cursor = params.get("cursor")
    if cursor is None:
        return 0, limit
    match = _CURSOR_RE.match(cursor)
    if match is None:
        raise ValidationError("The cursor is not valid.")
    return int(match.group(1)), limit


def progress(ports: Ports, rec: RunRecord) -> dict[str, Any]:
    """Tasks and trials done / total of an eval run in flight, from its stored ``TRIAL#`` keys (no bodies read)."""
    try:
        plan = _evalrun().load_plan(ports, rec.run_id)
    except RunGoneError:
        return {}
    suite = plan["suite"]
    totals = [grading.task_trials(suite, t) for t in suite["tasks"]]
    done: dict[int, int] = {}
    for sk, _doc in ports.runs.query_aux(rec.run_id, keys.TRIAL_PREFIX):
        task_part, _, _trial = sk[len(keys.TRIAL_PREFIX) :].partition("#")
        if task_part.isdigit():
            done[int(task_part)] = done.get(int(task_part), 0) + 1
    return {
        "tasks": {"done": sum(1 for i, n in enumerate(totals) if done.get(i, 0) >= n), "total": len(totals)},
        "trials": {"done": sum(min(done.get(i, 0), n) for i, n in enumerate(totals)), "total": sum(totals)},
    }


def eval_report(ports: Ports, caller: Caller, wire_run_id: str, params: dict[str, str] | None = None) -> dict[str, Any]:
    start, limit = _page(params or {})
    rec = own_run_or_404(ports, caller, wire_run_id)
    if not _features().get("evalSuite") or rec.kind != "eval":
        raise NotFoundError("The run is not an eval run.")
    if not rec.terminal:
        raise RunStateConflictError(
            "The eval run has not finished.", {"runStatus": rec.status, "progress": progress(ports, rec)}
        )
    try:
        return build(ports, rec, start, limit)
    except RunGoneError as exc:  # erased while we read
        raise NotFoundError("No such run.") from exc
