"""Eval grading, pure: golden matching, trajectory expectations, trial/task scores, the summary, the paired verdict.

Decisions (docs/decisions/0031-eval-grading-and-summary.md):
- A golden trial scores what its scorer says (``shared.engine.scorers``: 1 or 0, a weighted ``all-of`` in between)
  when its trajectory expectation (if any) holds and no call missed under ``onMiss: "fail"``; otherwise 0. A
  task's score is the mean of its trial scores; it passes when every trial passed. ``aggregateScore`` is the
  plain mean of the task scores.
- Regression verdict from paired per-task scores only (never from the aggregates): ``improved`` iff at least
  one paired score rose and none fell, ``regressed`` iff at least one fell, else ``unchanged``;
  ``inconclusive`` when no task pairs. A task flaky in the baseline counts only with the bootstrap interval
  (``shared.engine.evalstats``, decision 0114) and another task moving the same way (decision 0125).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.engine import evalstats, scorers
from shared.engine.canonical import same_json
from shared.ports import Draws

EPSILON = 1e-9


def golden_match(strategy: str, decision: Any, value: Any) -> bool:
    """``exact``: stringified output equals the value; ``contains``: it contains the stringified value;
    ``json-match``: deep JSON equality (key order and whitespace insensitive; a JSON string is parsed first);
    the host's further strategies (``shared.engine.scorers``) that need nothing but ``value``."""
    return scorers.score({"strategy": strategy, "value": value}, decision).passed


def _call_matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    if expected.get("tool") != actual.get("tool"):
        return False
    return "args" not in expected or same_json(expected.get("args"), actual.get("args"))


def trajectory_match(expectation: dict[str, Any], calls: list[dict[str, Any]]) -> bool:
    """``exact``: the agent's calls are exactly the expected list; ``in-order``: the expected list is a
    subsequence of the agent's calls. Every attempted call counts, whatever served or refused it."""
    expected = list(expectation.get("calls") or [])
    if expectation.get("match", "exact") == "exact":
        return len(expected) == len(calls) and all(_call_matches(e, a) for e, a in zip(expected, calls, strict=True))
    i = 0
    for a in calls:
        if i < len(expected) and _call_matches(expected[i], a):
            i += 1
    return i == len(expected)


@dataclass(frozen=True)
class TrialGrade:
    score: float
    passed: bool
    scorer: dict[str, Any] | None = field(default=None, compare=False)  # {strategy, score, passed, reason, parts}


RUBRIC_PASS_SCORE = 1.0  # without thresholds.passScore, a rubric task passes when every criterion is met


def rubric_score(rubric: list[dict[str, Any]], met: list[bool]) -> float:
    """RFC 0244: the weighted sum of met criteria, normalised to 0..1 (equal weights when all weights are 0)."""
    weights = [float(r.get("weight", 1)) for r in rubric]
    total = sum(weights)
    if total <= 0:
        return sum(1 for m in met if m) / len(met) if met else 0.0
    return sum(w for w, m in zip(weights, met, strict=True) if m) / total


def _graded(score: float, ok: bool, why: scorers.Scored) -> TrialGrade:
    return TrialGrade(score, ok, why.doc())


def grade_trial(
    task: dict[str, Any],
    decided: bool,
    decision: Any,
    calls: list[dict[str, Any]],
    fixture_miss_count: int,
    *,
    met: list[bool] | None = None,
    pass_score: float | None = None,
    facts: scorers.Facts | None = None,
) -> TrialGrade:
    """The trial's score and pass, with the scorer's result and reason (``scorer``) for the eval report."""
    expected = task.get("expected") or {}
    kind = "rubric" if expected.get("kind") == "rubric" else str((expected.get("match") or {}).get("strategy"))
    if fixture_miss_count > 0:
        return _graded(0.0, False, scorers.Scored(kind, 0.0, False, "a tool call missed its fixtures"))
    if not decided:
        return _graded(0.0, False, scorers.Scored(kind, 0.0, False, "the agent did not decide"))
    if expected.get("kind") == "rubric":
        if met is None:
            return _graded(0.0, False, scorers.Scored(kind, 0.0, False, "no judgement"))
        score = rubric_score(list(expected.get("rubric") or []), met)
        ok = score + EPSILON >= (RUBRIC_PASS_SCORE if pass_score is None else pass_score)
        result = scorers.Scored(kind, score, ok, f"{sum(1 for m in met if m)} of {len(met)} criteria met")
    elif expected.get("kind") == "golden":
        result = scorers.score(dict(expected.get("match") or {}), decision, facts)
        score, ok = result.score, result.passed
    else:
        return _graded(0.0, False, scorers.Scored(kind, 0.0, False, "unknown expectation kind"))
    if ok and task.get("trajectory") is not None and not trajectory_match(task["trajectory"], calls):
        doc = result.doc()
        doc.update(passed=False, reason=f"{result.reason}; the trajectory does not match")
        return TrialGrade(0.0 if expected.get("kind") == "golden" else score, False, doc)
    return TrialGrade(score, ok, result.doc())


def task_trials(suite: dict[str, Any], task: dict[str, Any]) -> int:
    return int(task.get("trials") or suite.get("trials") or 1)


def task_result(task_id: str, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The task's summary row (content-free) from its trials' ``{score, passed, fixtureMissCount}``."""
    n = len(trials)
    score = sum(float(t["score"]) for t in trials) / n if n else 0.0
    row: dict[str, Any] = {
        "taskId": task_id,
        "score": score,
        "passed": n > 0 and all(bool(t["passed"]) for t in trials),
        "fixtureMissCount": sum(int(t["fixtureMissCount"]) for t in trials),
        **evalstats.trial_stats([bool(t["passed"]) for t in trials]),
    }
    costs = [float(t["costUsd"]) for t in trials if t.get("costUsd") is not None]
    if costs and len(costs) == n:  # one trial of unknown cost makes the task's unknown (absent), never a partial sum
        row["costUsd"] = sum(costs)
    latencies = [int(t["latencyMs"]) for t in trials if t.get("latencyMs") is not None]
    if latencies:
        row["latencyMs"] = round(sum(latencies) / len(latencies))  # mean per trial: recorded call durations
    return row


def pair(
    candidate: dict[str, float],
    baseline: dict[str, float],
    flaky: frozenset[str] = frozenset(),
    interval: dict[str, Any] | None = None,
) -> tuple[int, str]:
    """RFC 0244 §F: pair by taskId; the verdict comes from the paired per-task scores only. A task flaky in the
    baseline moves the verdict only with others (decision 0125): when at least two paired tasks fell (rose) and
    the bootstrap interval of the delta lies wholly below (above) 0. One flaky task is never ``regressed`` alone,
    whatever the interval (over one paired task the interval is a single point: its own fall)."""
    shared = [t for t in candidate if t in baseline]
    if not shared:
        return 0, "inconclusive"
    below = interval is not None and float(interval["high"]) < 0
    above = interval is not None and float(interval["low"]) > 0
    falls = [t for t in shared if candidate[t] < baseline[t] - EPSILON]
    rises = [t for t in shared if candidate[t] > baseline[t] + EPSILON]
    fell = any(t not in flaky for t in falls) or (below and len(falls) > 1)
    rose = any(t not in flaky for t in rises) or (above and len(rises) > 1)
    if fell:
        return len(shared), "regressed"
    if rose:
        return len(shared), "improved"
    return len(shared), "unchanged"


def regression_block(
    aggregate: float, tasks: list[dict[str, Any]], baseline: dict[str, Any], draws: Draws | None = None
) -> dict[str, Any]:
    """``baseline`` is ``{runId, aggregateScore, tasks: {taskId: score}, flaky?: [taskId]}`` (snapshotted at
    create). With ``draws``: the paired bootstrap interval of the delta (``scoreDeltaInterval``)."""
    cand = {t["taskId"]: float(t["score"]) for t in tasks}
    base = {k: float(v) for k, v in (baseline.get("tasks") or {}).items()}
    shared = [t for t in cand if t in base]
    interval = evalstats.bootstrap([cand[t] - base[t] for t in shared], draws) if draws is not None and shared else None
    flaky = frozenset(str(t) for t in baseline.get("flaky") or [])
    paired, verdict = pair(cand, base, flaky, interval)
    block: dict[str, Any] = {
        "baselineRunId": baseline["runId"],
        "scoreDelta": float(aggregate) - float(baseline["aggregateScore"]),
        "verdict": verdict,
        "pairedTaskCount": paired,
    }
    if interval is not None:
        block["scoreDeltaInterval"] = interval
    if "flaky" in baseline:
        block["flakyTasks"] = [t for t in shared if t in flaky]
    return block


def baseline_snapshot(run_id: str, summary: dict[str, Any]) -> dict[str, Any]:
    """What a candidate keeps of its baseline's summary (content-free): scores, and the tasks whose trials
    disagreed (flaky). ``tasks`` keeps the summary's order, the baseline's suite order (one row per task of a
    completed run): the eval report finds the baseline's trials by it."""
    rows = list(summary.get("tasks") or [])
    return {
        "runId": run_id,
        "aggregateScore": float(summary["aggregateScore"]),
        "tasks": {str(t["taskId"]): float(t["score"]) for t in rows},
        "flaky": evalstats.flaky_tasks(rows),
    }


def summary(
    suite: dict[str, Any], tasks: list[dict[str, Any]], baseline: dict[str, Any] | None, draws: Draws | None = None
) -> dict[str, Any]:
    """The EvalSummary (content-free): scores, counts, per-task rows, the regression block when asked for.

    ``passed``: ``aggregateScore >= thresholds.passScore`` when the suite declares one, else every task passed;
    and ``totalCostUsd <= maxCostUsd`` and the p95 of the tasks' ``latencyMs`` ``<= maxP95LatencyMs`` when the
    suite declares them (cost and latency come from the model calls' usage and the recorded call durations).
    """
    aggregate = sum(float(t["score"]) for t in tasks) / len(tasks) if tasks else 0.0
    passed_count = sum(1 for t in tasks if t["passed"])
    thresholds = suite.get("thresholds") or {}
    if "passScore" in thresholds:
        passed = aggregate + EPSILON >= float(thresholds["passScore"])
    else:
        passed = passed_count == len(tasks)
    costs = [float(t["costUsd"]) for t in tasks if "costUsd" in t]
    if "maxCostUsd" in thresholds and sum(costs) > float(thresholds["maxCostUsd"]) + EPSILON:
        passed = False
    latencies = sorted(int(t["latencyMs"]) for t in tasks if "latencyMs" in t)
    if "maxP95LatencyMs" in thresholds and latencies:
        p95 = latencies[max(0, -(-95 * len(latencies) // 100) - 1)]  # nearest-rank
        passed = passed and p95 <= float(thresholds["maxP95LatencyMs"])
    out: dict[str, Any] = {
        "suiteId": suite["suiteId"],
        "suiteVersion": suite["version"],
        "aggregateScore": aggregate,
        "passed": passed,
        "taskCount": len(tasks),
        "passedCount": passed_count,
        "tasks": tasks,
    }
    if costs and len(costs) == len(tasks):  # absent (unknown) unless every task's cost is known
        out["totalCostUsd"] = sum(costs)
    if baseline is not None:
        out["regression"] = regression_block(aggregate, tasks, baseline, draws)
    return out
