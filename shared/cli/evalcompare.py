"""Comparing an eval run with its baseline: the report (or, from a host without it, the summary) paired task by
task, each task's verdict, the run's verdict and the exit code it implies."""

from __future__ import annotations

from typing import Any

from openwop_client import WopError

from shared.cli import evalmarkdown
from shared.cli.evalhost import TERMINAL, CliError, Host

OK, REGRESSED, UNVERIFIABLE, USAGE = 0, 1, 2, 3
EPSILON = 1e-9


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


def _load(host: Host, run_id: str) -> dict[str, Any]:
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


def compare(host: Host, run_id: str, baseline: str | None) -> dict[str, Any]:
    """The run's report, paired with ``baseline`` (default: the run's own baseline), and the verdict it implies."""
    rep = _load(host, run_id)
    if baseline and baseline != rep.get("baselineRunId"):
        base = _load(host, baseline)
        base_scores = {t["taskId"]: float(t["score"]) for t in base.get("tasks") or []}
        base_flaky = {t["taskId"] for t in base.get("tasks") or [] if _disagree(t)}
        rep["baselineRunId"] = baseline
        rep["baselineAggregateScore"] = base.get("aggregateScore")
        for t in rep["tasks"]:
            t["baselineScore"] = base_scores.get(t["taskId"])
            t["baselineFlaky"] = t["taskId"] in base_flaky
        paired = [t for t in rep["tasks"] if t["baselineScore"] is not None]
        counted = [t for t in paired if not t["baselineFlaky"]]  # no interval client-side: flaky never counts
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
    has_baseline = rep.get("baselineRunId") is not None
    for t in rep["tasks"]:
        t["verdict"] = _task_verdict(
            float(t["score"]),
            t.get("baselineScore"),
            int(t["fixtureMissCount"]),
            has_baseline,
            bool(t.get("baselineFlaky")),
        )
    misses = sum(int(t["fixtureMissCount"]) for t in rep["tasks"])
    if rep.get("status") != "completed" or misses or rep.get("baselineStatus"):
        verdict = "unverifiable"
    elif not has_baseline:
        verdict = "no-baseline"
    else:
        verdict = str(rep.get("pairedVerdict"))
    rep["verdict"] = verdict
    rep["exitCode"] = {"regressed": REGRESSED, "unverifiable": UNVERIFIABLE, "inconclusive": UNVERIFIABLE}.get(
        verdict, OK
    )
    return rep
