"""The eval CLI's output: the per-task table with its fixture misses and what changed, the verdict line, and the
``--json`` / ``--junit`` / ``--markdown`` documents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from shared.cli import evalmarkdown
from shared.cli.evaljunit import junit, num


def _trials(t: dict[str, Any]) -> str:
    tr = t.get("trials")
    if not tr:
        return "-"
    return f"{tr['passed']}/{tr['total']} {'pass' if t.get('passAllK') else 'fail'}"


STYLE = {"regressed": "bold red", "unverifiable": "yellow", "improved": "green", "failed": "red", "flaky": "magenta"}


def _task_table(rep: dict[str, Any]) -> Table:
    """One row per task: scores, trials, fixture misses, live calls, cost, latency, verdict."""
    title = f"eval {rep['runId']}"
    if rep.get("suiteId"):
        title += f"  suite {rep['suiteId']}@{rep.get('suiteVersion')}"
    t = Table(title=title, title_justify="left")
    labelled = any(task.get("label") for task in rep["tasks"])
    if labelled:
        t.add_column("task")
    for col, just in (
        ("label" if labelled else "task", "left"),
        ("baseline", "right"),
        ("candidate", "right"),
        ("trials (pass^k)", "right"),
        ("fixture misses", "right"),
        ("live tool calls", "right"),
        ("cost USD", "right"),
        ("latency ms", "right"),
        ("verdict", "left"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for task in rep["tasks"]:
        verdict = evalmarkdown.verdict_text(task)
        t.add_row(
            *([task["taskId"]] if labelled else []),
            (task.get("label") or "-") if labelled else task["taskId"],
            num(task.get("baselineScore")),
            num(task["score"]),
            _trials(task),
            str(task["fixtureMissCount"]),
            "-" if task.get("liveToolCalls") is None else str(task["liveToolCalls"]),
            evalmarkdown.usd(task.get("costUsd")),
            "-" if task.get("latencyMs") is None else str(task["latencyMs"]),
            verdict,
            style=STYLE.get(task["verdict"]) or STYLE.get(task.get("outcome") or ""),
        )
    return t


def _print_misses(rep: dict[str, Any], out: Console) -> None:
    """Each fixture miss: the call, the closest recorded call, where they differ, the rules that would match."""
    for task in rep["tasks"]:
        for m in task.get("fixtureMisses") or []:
            near = m.get("closest")
            where = ", ".join(m.get("differingPointers") or []) or ("the tool name" if near else "-")
            out.print(
                f"fixture miss in {task['taskId']} (trial {m.get('trial')}): {m['tool']} "
                f"{json.dumps(m.get('args'))}; closest recorded call "
                f"{json.dumps(near.get('args')) if near else 'none'} differs at {where}"
                f"{evalmarkdown.would_match_with(m)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def _status_line(rep: dict[str, Any]) -> str:
    """The run's status and its score delta against the baseline (with its interval), or ``no baseline``."""
    line = f"status {rep.get('status')}"
    if not rep.get("baselineRunId"):
        return line + "  no baseline"
    line += f"  baseline {rep['baselineRunId']}  scoreDelta {num(rep.get('scoreDelta'), 3)}"
    ci = rep.get("scoreDeltaInterval")
    if ci:
        line += f" [{round(100 * float(ci['confidence']))}% {num(ci['low'], 3)}, {num(ci['high'], 3)}]"
    return line + f"  paired verdict {rep.get('pairedVerdict')} ({rep.get('pairedTaskCount')} paired tasks)"


def _print_excused(rep: dict[str, Any], out: Console) -> None:
    """The failures that do not fail the result: known failures, tolerated tasks, flaky tasks."""
    for k in rep.get("knownFailures") or []:
        state = "fails" if k["failed"] else "passes now"
        out.print(
            f"known failure {evalmarkdown.task_name(k)} ({state}): {k['reason']}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if rep.get("toleratedTasks"):
        out.print(
            f"tolerated (failed in the baseline too, --allow-known-failures): {', '.join(rep['toleratedTasks'])}",
            highlight=False,
            soft_wrap=True,
        )
    if rep.get("flakyTasks"):
        out.print(
            f"flaky (baseline trials disagreed, never a regression alone): {', '.join(rep['flakyTasks'])}",
            highlight=False,
        )


def table(rep: dict[str, Any], out: Console) -> None:
    out.print(_task_table(rep))
    _print_misses(rep, out)
    for task in rep["tasks"]:
        if evalmarkdown.failing(task):
            out.print(
                f"  {evalmarkdown.task_name(task)}: {evalmarkdown.what_changed(task)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    out.print(f"total cost USD {evalmarkdown.usd(rep.get('totalCostUsd'))}", highlight=False)
    out.print(_status_line(rep), highlight=False)
    base = evalmarkdown.baseline_line(rep)
    if base:
        out.print(base, highlight=False, markup=False, soft_wrap=True)
    _print_excused(rep, out)
    out.print(evalmarkdown.decided_line(rep), highlight=False, markup=False, soft_wrap=True)
    out.print(f"verdict: {rep['verdict']} (exit {rep['exitCode']})", style=STYLE.get(rep["verdict"]), highlight=False)


def emit(
    rep: dict[str, Any],
    as_json: bool,
    junit_file: Path | None,
    markdown_file: Path | None = None,
    viewer_url: str | None = None,
    changed_only: bool = False,
) -> int:
    if junit_file is not None:
        junit(rep, junit_file)
    evalmarkdown.write(rep, markdown_file, viewer_url, changed_only)
    if as_json:
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
    else:
        table(rep, Console(width=None if sys.stdout.isatty() else 160))
    return int(rep["exitCode"])
