"""Comparing an eval run with its baseline: the report (or, from a host without it, the summary) paired task by
task, each task's verdict and outcome, the conditions that apply and the exit code the first of them decides.

Relative: each task's ``verdict`` against the baseline (regressed, improved, unchanged, flaky, unpaired; passed or
failed without a baseline; unverifiable with a fixture miss). Absolute: each task's ``outcome`` against its own
expectation (passed; failed; ``known-failure`` when its suite marks it ``knownFailure``; ``tolerated`` when
``--allow-known-failures`` is given and the baseline failed it too; unverifiable). The conditions, in the order of
``PRECEDENCE`` (the first that applies decides the exit code; decision 0145):

- usage (3): a usage or connection error, or a refused baseline: raised before anything is compared;
- regression (1): the completed run's paired verdict is ``regressed``;
- unverifiable (2): a fixture miss, a run (or baseline) that did not complete, no task paired with the baseline;
- failure (4): a task fails its expectation and nothing tolerates it.
"""

from __future__ import annotations

from typing import Any

from openwop_client import WopError

from shared.cli import evalmarkdown
from shared.cli.evalhost import TERMINAL, CliError, Host

OK, REGRESSED, UNVERIFIABLE, USAGE, FAILED = 0, 1, 2, 3, 4
EPSILON = 1e-9
PRECEDENCE = (("usage", USAGE), ("regression", REGRESSED), ("unverifiable", UNVERIFIABLE), ("failure", FAILED))
VERDICT_OF = {"regression": "regressed", "unverifiable": "unverifiable", "failure": "failed"}
TOLERATED = ("known-failure", "tolerated")


def precedence_text() -> str:
    """``usage 3 > regression 1 > unverifiable 2 > failure 4``."""
    return " > ".join(f"{name} {code}" for name, code in PRECEDENCE)


def _task_verdict(score: float, base: float | None, misses: int, has_baseline: bool, flaky: bool = False) -> str:
    if misses:
        return "unverifiable"
    if not has_baseline:
        return "passed" if score >= 1.0 - EPSILON else "failed"
    if base is None:
        return "unpaired"
    if flaky:
        return "flaky"
    if score < base - EPSILON:
        return "regressed"
    if score > base + EPSILON:
        return "improved"
    return "unchanged"


def _disagree(row: dict[str, Any]) -> bool:
    """A task's trials disagreed: from a report row's trial counts, or a summary row's pass@k / pass^k."""
    tr = row.get("trials")
    if isinstance(tr, dict):
        return 0 < int(tr.get("passed", 0)) < int(tr.get("done", 0))
    return "passAtK" in row and float(row["passAtK"]) > 0 and float(row.get("passHatK", 0)) < 1


def _from_summary(run_id: str, status: str, summary: dict[str, Any]) -> dict[str, Any]:
    """A report-shaped document from a summary alone (a host without the eval report)."""
    reg = summary.get("regression") or {}
    flaky = set(reg.get("flakyTasks") or [])
    return {
        "runId": run_id,
        "status": status,
        "suiteId": summary.get("suiteId"),
        "suiteVersion": summary.get("suiteVersion"),
        "baselineRunId": reg.get("baselineRunId"),
        "aggregateScore": summary.get("aggregateScore"),
        "totalCostUsd": summary.get("totalCostUsd"),
        "scoreDelta": reg.get("scoreDelta"),
        "pairedVerdict": reg.get("verdict"),
        "pairedTaskCount": reg.get("pairedTaskCount"),
        "scoreDeltaInterval": reg.get("scoreDeltaInterval"),
        "flakyTasks": reg.get("flakyTasks"),
        "baselineAggregateScore": None,
        "tasks": [
            {
                "taskId": t["taskId"],
                "score": float(t["score"]),
                "passed": t.get("passed"),
                "baselineFlaky": t["taskId"] in flaky,
                "passAtK": t.get("passAtK"),
                "passHatK": t.get("passHatK"),
                "baselineScore": None,
                "fixtureMissCount": int(t.get("fixtureMissCount", 0)),
                "trials": None,
                "passAllK": None,
                "liveToolCalls": None,
                "costUsd": t.get("costUsd"),  # absent from the summary: unknown
                "latencyMs": None,
                "fixtureMisses": [],
                "verdict": None,
            }
            for t in summary.get("tasks") or []
        ],
    }


def load_report(host: Host, run_id: str) -> dict[str, Any]:
    status = host.client.runs_get(run_id).status
    if status not in TERMINAL:
        raise CliError(f"{run_id} is still {status}: wait for it (eval run --wait) before comparing")
    rep = host.report(run_id)
    if rep is not None:
        return rep
    try:
        return _from_summary(run_id, status, host.summary(run_id))
    except WopError as err:
        if err.status == 404 and status != "completed":
            return {"runId": run_id, "status": status, "tasks": [], "baselineRunId": None}
        raise


def task_passed(task: dict[str, Any]) -> bool:
    """The task met its expectation (the host's ``passed``; from a bare score, a full score)."""
    got = task.get("passed")
    return bool(got) if isinstance(got, bool) else float(task["score"]) >= 1.0 - EPSILON


def task_outcome(t: dict[str, Any], allow_known: bool) -> str:
    if int(t["fixtureMissCount"]):
        return "unverifiable"
    if task_passed(t):
        return "passed"
    if t.get("knownFailure"):
        return "known-failure"
    if allow_known and t.get("baselinePassed") is False:
        return "tolerated"
    return "failed"


def _pair(rep: dict[str, Any], base: dict[str, Any], baseline: str) -> None:
    """Pair ``rep`` with another baseline's report, client-side (no interval: a flaky task never counts)."""
    base_scores = {t["taskId"]: float(t["score"]) for t in base.get("tasks") or []}
    base_flaky = {t["taskId"] for t in base.get("tasks") or [] if _disagree(t)}
    rep["baselineRunId"] = baseline
    rep["baselineAggregateScore"] = base.get("aggregateScore")
    for t in rep["tasks"]:
        t["baselineScore"] = base_scores.get(t["taskId"])
        t["baselineFlaky"] = t["taskId"] in base_flaky
    paired = [t for t in rep["tasks"] if t["baselineScore"] is not None]
    counted = [t for t in paired if not t["baselineFlaky"]]
    fell = any(t["score"] < t["baselineScore"] - EPSILON for t in counted)
    rose = any(t["score"] > t["baselineScore"] + EPSILON for t in counted)
    rep["flakyTasks"] = [t["taskId"] for t in paired if t["baselineFlaky"]]
    rep["scoreDeltaInterval"] = None
    rep["pairedTaskCount"] = len(paired)
    rep["pairedVerdict"] = (
        "inconclusive" if not paired else "regressed" if fell else "improved" if rose else "unchanged"
    )
    if rep.get("aggregateScore") is not None and base.get("aggregateScore") is not None:
        rep["scoreDelta"] = float(rep["aggregateScore"]) - float(base["aggregateScore"])
    if base.get("status") != "completed":
        rep["baselineStatus"] = base.get("status")
    evalmarkdown.rediverge(rep, base)


def _own_baseline(host: Host, run_id: str) -> dict[str, Any] | None:
    """The run's own baseline's report, or None where the caller cannot read it (erased, foreign)."""
    try:
        return load_report(host, run_id)
    except (WopError, CliError):
        return None


def compare(
    host: Host,
    run_id: str,
    baseline: str | None,
    *,
    allow_known: bool = False,
    baseline_doc: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's report, paired with ``baseline`` (default: the run's own baseline), each task's verdict and
    outcome, the conditions that apply and the exit code the first of them (``PRECEDENCE``) decides.
    ``baseline_doc``: what the CLI knows of the baseline it picked (``evalbaseline.Baseline.doc``)."""
    rep = load_report(host, run_id)
    base: dict[str, Any] | None = None
    if baseline and baseline != rep.get("baselineRunId"):
        base = load_report(host, baseline)
        _pair(rep, base, baseline)
    elif rep.get("baselineRunId"):
        base = _own_baseline(host, str(rep["baselineRunId"]))
    has_baseline = rep.get("baselineRunId") is not None
    base_passed = {t["taskId"]: task_passed(t) for t in (base or {}).get("tasks") or []}
    marks = host.suite_marks(rep.get("suiteId"), rep.get("suiteVersion"))
    for t in rep["tasks"]:
        mark = marks.get(t["taskId"]) or {}
        t["label"] = mark.get("label")
        t["knownFailure"] = (mark.get("knownFailure") or {}).get("reason")
        t["baselinePassed"] = base_passed.get(t["taskId"])
        t["verdict"] = _task_verdict(
            float(t["score"]),
            t.get("baselineScore"),
            int(t["fixtureMissCount"]),
            has_baseline,
            bool(t.get("baselineFlaky")),
        )
        t["outcome"] = task_outcome(t, allow_known)
    if has_baseline:
        rep["baseline"] = _baseline_facts(rep, base, baseline_doc)
    decide(rep)
    return rep


def _baseline_facts(rep: dict[str, Any], base: dict[str, Any] | None, picked: dict[str, Any] | None) -> dict[str, Any]:
    """The baseline's run, agent version and verdict, for the summary, the markdown and the JUnit."""
    out: dict[str, Any] = {"runId": rep["baselineRunId"]}
    if base is not None:
        out |= {
            "agentVersion": base.get("agentVersion"),
            "status": base.get("status"),
            "verdict": base.get("verdict"),
            "failedTasks": [t["taskId"] for t in base.get("tasks") or [] if not task_passed(t)],
        }
    out |= {k: v for k, v in (picked or {}).items() if v is not None}
    return out


def decide(rep: dict[str, Any]) -> None:
    tasks = rep["tasks"]
    completed = rep.get("status") == "completed"
    has_baseline = rep.get("baselineRunId") is not None
    misses = sum(int(t["fixtureMissCount"]) for t in tasks)
    applies = {
        "regression": completed and has_baseline and rep.get("pairedVerdict") == "regressed",
        "unverifiable": not completed
        or bool(misses)
        or bool(rep.get("baselineStatus"))
        or (has_baseline and rep.get("pairedVerdict") == "inconclusive"),
        "failure": any(t["outcome"] == "failed" for t in tasks),
    }
    rep["precedence"] = precedence_text()
    rep["conditions"] = [name for name, _code in PRECEDENCE if applies.get(name)]
    decided = rep["conditions"][0] if rep["conditions"] else None
    rep["decidedBy"] = decided
    rep["exitCode"] = dict(PRECEDENCE)[decided] if decided else OK
    if decided:
        rep["verdict"] = VERDICT_OF[decided]
    else:
        rep["verdict"] = str(rep.get("pairedVerdict")) if has_baseline else "no-baseline"
    rep["knownFailures"] = [
        {"taskId": t["taskId"], "label": t.get("label"), "reason": t["knownFailure"], "failed": not task_passed(t)}
        for t in tasks
        if t.get("knownFailure")
    ]
    rep["toleratedTasks"] = [t["taskId"] for t in tasks if t["outcome"] == "tolerated"]
    rep["failedTasks"] = [t["taskId"] for t in tasks if t["outcome"] == "failed"]
