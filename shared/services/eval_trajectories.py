"""What changed, step by step: the eval report's trajectories and each task's first divergence from the baseline.

For a page of the report (tasks ``start <= i < end``), each trial's trajectory comes from its stored ``TRIAL#``
item (already read for the page) and, when its agent called a model, the page's model-call log (one key-range
Query of ``MCALL#`` items). The baseline's side (the eval's ``baselineRunId``, RFC 0251) is read the same
page-bounded way: which index each task has in its suite version (from the eval's own plan, which keeps the
baseline's scores in that order), one key-range Query of its trials over the page's tasks, and its model-call
log over the same range only when those trials called a model. Tasks pair by ``taskId``, trials by number (see
``shared.engine.trajectory``).

A baseline erased since the eval was created leaves ``divergence`` null, never fails the report. Content-free
agents (``argsHash`` in their events) get steps and divergences without values: types, tools, pointers.
"""

from __future__ import annotations

from typing import Any

from shared import keys
from shared.engine import trajectory
from shared.errors import RunGoneError
from shared.ports import Ports
from shared.protocol import codes as c

Steps = list[dict[str, Any]]
Turns = dict[str, dict[int, str | None]]


def _evalrun() -> Any:
    from shared.engine import evalrun

    return evalrun


def uses_models(trials: dict[tuple[int, int], dict[str, Any]]) -> bool:
    return any(e.get("type") == c.PROVIDER_USAGE for doc in trials.values() for e in doc.get("events") or [])


def model_turns(ports: Ports, run_id: str, start: int, end: int) -> Turns:
    """invocationId -> model turn -> its text, for tasks ``start <= i < end`` (one key-range Query); the rubric
    judge's calls are left out."""
    low, high = _evalrun().call_keys_between(start, end)
    out: Turns = {}
    for _sk, doc in ports.runs.query_aux(
        run_id, keys.MODEL_CALL_PREFIX, between=(keys.MODEL_CALL_PREFIX + low, keys.MODEL_CALL_PREFIX + high)
    ):
        if "blob" in doc:
            got = ports.blobs.get_json(str(doc["blob"]))
            if got is None:
                continue
            doc = dict(got)
        inv = str(doc.get("invocationId", ""))
        if not inv.startswith("judge:"):
            out.setdefault(inv, {})[int(doc.get("turn", 0))] = doc.get("text")
    return out


def trial_steps(doc: dict[str, Any], turns: Turns) -> Steps:
    inv = _evalrun().invocation_id(str(doc["taskId"]), int(doc["trial"]))
    return trajectory.steps(list(doc.get("events") or []), turns.get(inv))


def _content_free(doc: dict[str, Any]) -> bool:
    return any("argsHash" in (e.get("payload") or {}) for e in doc.get("events") or [])


def baseline_order(ports: Ports, plan: dict[str, Any]) -> list[str]:
    """The baseline's taskIds in its suite's order: the plan's snapshot of the baseline's scores holds one per task
    in that order (``grading.baseline_snapshot``), so the baseline's own plan is not read; a snapshot without
    scores (none stored) falls back to it."""
    snapshot = list(((plan.get("baseline") or {}).get("tasks") or {}).keys())
    if snapshot:
        return snapshot
    return [str(t["taskId"]) for t in _evalrun().load_plan(ports, str(plan["baselineRunId"]))["suite"]["tasks"]]


def baseline_page(ports: Ports, plan: dict[str, Any], task_ids: list[str]) -> dict[str, dict[int, Steps]] | None:
    """The baseline's trajectories of these tasks by taskId and trial number; None when the eval has no baseline
    or the baseline is gone."""
    base_id = plan.get("baselineRunId") if "regression" in (plan.get("modes") or []) else None
    if not base_id:
        return None
    evalrun = _evalrun()
    try:
        where = {task: i for i, task in enumerate(baseline_order(ports, plan))}
        wanted = {where[t] for t in task_ids if t in where}
        if not wanted:
            return {}
        span = (min(wanted), max(wanted) + 1)
        trials = evalrun.load_trials(ports, str(base_id), span)
        turns = model_turns(ports, str(base_id), *span) if uses_models(trials) else {}
    except RunGoneError:
        return None
    out: dict[str, dict[int, Steps]] = {}
    for (i, n), doc in trials.items():
        if i in wanted:
            out.setdefault(str(doc["taskId"]), {})[n] = trial_steps(doc, turns)
    return out


def annotate(
    row: dict[str, Any],
    index: int,
    trials: dict[tuple[int, int], dict[str, Any]],
    turns: Turns,
    baseline: dict[str, dict[int, Steps]] | None,
) -> None:
    """Give the task row's trials their ``trajectory`` and the row its ``divergence`` (null: no baseline, no
    paired trial, or the same steps)."""
    candidate: dict[int, Steps] = {}
    hidden = False
    for trial in row.get("trialResults") or []:
        doc = trials.get((index, int(trial["trial"])))
        if doc is None:
            continue
        got = trial_steps(doc, turns)
        candidate[int(trial["trial"])] = got
        free = _content_free(doc)
        hidden = hidden or free
        trial["trajectory"] = [trajectory.redact(s) for s in got] if free else got
    base = (baseline or {}).get(str(row["taskId"]))
    row["divergence"] = None if base is None else trajectory.task_divergence(base, candidate, hidden)
