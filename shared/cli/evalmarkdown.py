"""What changed in an eval, as the lines a reviewer reads: the CLI table's indented line per failing task, the
JUnit failure message, and a pull-request comment in markdown (``eval run|compare --markdown FILE``, appended
to ``$GITHUB_STEP_SUMMARY`` when that is set).

Works on the compared report (``evalcompare.compare``'s document): each task's ``divergence`` (the first step where
its trajectory departs from the baseline's, ``shared.engine.trajectory``), else its expected vs actual outcome.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from shared.engine.trajectory import describe, short, task_divergence

FAILING = ("regressed", "unverifiable")
UNCHANGED = ("unchanged", "passed")  # what --changed-only leaves out (when the task also met its expectation)


def failing(task: dict[str, Any]) -> bool:
    """The task fails the CI result: regressed, unverifiable, or failed its expectation untolerated."""
    return task["verdict"] in FAILING or task.get("outcome") == "failed"


def task_name(task: dict[str, Any]) -> str:
    """The task id and, when its suite gives one, its label: ``run-3f2a… (customer=ACME, order=17)``."""
    label = task.get("label")
    return f"{task['taskId']} ({label})" if label else str(task["taskId"])


def verdict_text(task: dict[str, Any]) -> str:
    """The task's verdict, and its outcome where that adds something (``unchanged, failed``, ``failed,
    known-failure``)."""
    verdict, outcome = str(task["verdict"]), task.get("outcome")
    if outcome in ("failed", "known-failure", "tolerated") and verdict not in (*FAILING, outcome):
        return f"{verdict}, {outcome}"
    return verdict


def decided_line(rep: dict[str, Any]) -> str:
    """Which condition decided the exit code, and the precedence it was decided by."""
    decided = rep.get("decidedBy")
    others = [c for c in rep.get("conditions") or [] if c != decided]
    why = f"decided by {decided}" if decided else "no condition applies"
    also = f" (also: {', '.join(others)})" if others else ""
    return f"exit {rep['exitCode']}: {why}{also}; precedence {rep.get('precedence')}"


def baseline_line(rep: dict[str, Any]) -> str | None:
    """The baseline's run, agent version and verdict (and how it was picked), or None without a baseline."""
    base = rep.get("baseline")
    if not base:
        return None
    verdict = base.get("verdict") or base.get("status") or "-"
    failed = base.get("failedTasks") or []
    line = f"baseline {base['runId']}: agent version {base.get('agentVersion') or '-'}, verdict {verdict}"
    if failed:
        line += f", {len(failed)} failing task{'s' if len(failed) != 1 else ''}"
    if base.get("passed") is False:
        line += f", did not pass ({base.get('notPassedBecause')})"
    elif base.get("passed") and verdict != "passed":
        line += ", passed"
    if base.get("picked"):
        line += f"; picked by --baseline {base['picked'] if base['picked'] != 'run' else 'RUN'}"
        if base.get("name"):
            line += f", experiment {base['name']}"
    return line


def expected_actual(task: dict[str, Any]) -> str:
    """``expected X, actual Y / Z`` (one actual per trial); ``-`` where the report does not carry them."""
    exp = task.get("expected") or {}
    want = (exp.get("match") or {}).get("value", exp.get("kind")) if exp else None
    actual = [t.get("actual") for t in task.get("trialResults") or [] if "actual" in t]
    got = " / ".join(short(a) for a in actual) if actual else "-"
    return f"expected {short(want) if exp else '-'}, actual {got}"


def what_changed(task: dict[str, Any]) -> str:
    """The divergence when there is one, else expected vs actual."""
    div = task.get("divergence")
    return describe(div) if div else expected_actual(task)


def would_match_with(miss: dict[str, Any]) -> str:
    """A fixture miss's ``wouldMatchWith`` as text to append to its line (empty when it has none): the rules as
    ``fixtureMatching`` JSON to paste into the suite, ``ignore``/``tolerance`` first, ``anyOf`` as the alternative."""
    rules = miss.get("wouldMatchWith") or {}
    plain = {k: rules[k] for k in ("ignore", "tolerance") if rules.get(k)}
    options = [short(r, 240) for r in (plain, {"anyOf": rules.get("anyOf")}) if any(r.values())]
    return f"; would match with {' or '.join(options)}" if options else ""


def miss_text(miss: dict[str, Any]) -> str:
    """One fixture miss: the tool, where it differs from the closest recorded call, the rules that would match."""
    where = ", ".join(miss.get("differingPointers") or []) or ("the tool name" if miss.get("closest") else "-")
    return f"{miss['tool']} differs at {where}{would_match_with(miss)}"


def rediverge(rep: dict[str, Any], base: dict[str, Any]) -> None:
    """Each task's divergence against another baseline's report (``compare --baseline``), from both reports'
    trial trajectories; null where either side carries none."""
    trajectories = {t["taskId"]: _trajectories(t) for t in base.get("tasks") or []}
    for t in rep.get("tasks") or []:
        theirs, ours = trajectories.get(t["taskId"]), _trajectories(t)
        t["divergence"] = task_divergence(theirs, ours) if theirs and ours else None


def _trajectories(task: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    return {
        int(r["trial"]): list(r["trajectory"])
        for r in task.get("trialResults") or []
        if r.get("trajectory") is not None
    }


# --------------------------------------------------------------------------- markdown


def _cell(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _code(value: Any) -> str:
    """Text inside a code span outside a table (no escapes there: a backtick would end the span)."""
    return str(value).replace("`", "'").replace("\n", " ")


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def usd(value: Any) -> str:
    """A cost: ``unknown`` where a model's price is (None), never ``0.0000``."""
    return "unknown" if value is None else f"{float(value):.4f}"


def _link(viewer_url: str | None, run_id: str) -> str:
    return f"{viewer_url}#run={quote(run_id, safe='')}" if viewer_url else ""


def _row(t: dict[str, Any]) -> str:
    tr = t.get("trials")
    trials = f"{tr['passed']}/{tr['total']}" if tr else "-"
    verdict = verdict_text(t)
    return (
        f"| {_cell(task_name(t))} | {_num(t.get('baselineScore'))} | {_num(t['score'])} | {trials} | "
        f"{t['fixtureMissCount']} | {_cell(verdict)} |"
    )


def _head(rep: dict[str, Any], viewer_url: str | None) -> str:
    """The summary line: verdict, run, suite, aggregate score against the baseline's, cost."""
    run = str(rep["runId"])
    cand = f"[`{_cell(run)}`]({_link(viewer_url, run)})" if viewer_url else f"`{_cell(run)}`"
    head = f"**eval {_cell(rep['verdict'])}** (exit {rep['exitCode']}) · run {cand}"
    if rep.get("suiteId"):
        head += f" · suite `{_cell(rep['suiteId'])}@{_cell(rep.get('suiteVersion'))}`"
    head += f" · aggregate {_num(rep.get('aggregateScore'), 3)}"
    if rep.get("baselineRunId"):
        base = str(rep["baselineRunId"])
        link = f"[`{_cell(base)}`]({_link(viewer_url, base)})" if viewer_url else f"`{_cell(base)}`"
        head += (
            f" vs baseline {link} {_num(rep.get('baselineAggregateScore'), 3)} (scoreDelta "
            f"{_num(rep.get('scoreDelta'), 3)}, paired verdict {_cell(rep.get('pairedVerdict'))} over "
            f"{rep.get('pairedTaskCount')} tasks)"
        )
    else:
        head += " · no baseline"
    return head + f" · cost USD {usd(rep.get('totalCostUsd'))}"


def _task_table(tasks: list[dict[str, Any]], changed_only: bool) -> list[str]:
    """The per-task table (``changed_only``: only the tasks that changed or fail, a line counting the others)."""
    lines = [
        "| task | baseline | candidate | trials (pass^k) | fixture misses | verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    hide = [changed_only and t["verdict"] in UNCHANGED and t.get("outcome") == "passed" for t in tasks]
    shown = [t for t, h in zip(tasks, hide, strict=True) if not h]
    lines += [_row(t) for t in shown]
    if changed_only:
        hidden: dict[str, int] = {}
        for t, h in zip(tasks, hide, strict=True):
            if h:
                hidden[t["verdict"]] = hidden.get(t["verdict"], 0) + 1
        counts = ", ".join(f"{n} {v}" for v, n in hidden.items()) or "none"
        lines += ["", f"_Not listed (--changed-only): {len(tasks) - len(shown)} of {len(tasks)} tasks ({counts})._"]
    return lines


def _known_failures(rep: dict[str, Any]) -> list[str]:
    """The known failures and the tasks tolerated because they failed in the baseline too (none: no lines)."""
    known = rep.get("knownFailures") or []
    if not (known or rep.get("toleratedTasks")):
        return []
    lines = ["", "#### Known failures (tolerated)", ""]
    for k in known:
        state = "fails" if k["failed"] else "passes now"
        name = task_name(k)
        lines.append(f"- **{_code(name)}** ({state}, knownFailure): {_code(k['reason'])}")
    for tid in rep.get("toleratedTasks") or []:
        lines.append(f"- **{_code(tid)}** (failed in the baseline too; --allow-known-failures)")
    return lines


def _what_changed_lines(tasks: list[dict[str, Any]]) -> list[str]:
    """The divergence (or expected vs actual) and fixture misses of each failing task (none: no lines)."""
    failing_tasks = [t for t in tasks if failing(t)]
    if not failing_tasks:
        return []
    lines = ["", "#### What changed", ""]
    for t in failing_tasks:
        why = t["verdict"] if t["verdict"] in FAILING else t["outcome"]
        lines.append(f"- **{_code(task_name(t))}** ({why}): `{_code(what_changed(t))}`")
        for m in t.get("fixtureMisses") or []:
            lines.append(f"  - fixture miss (trial {m.get('trial')}): `{_code(miss_text(m))}`")
    return lines


def markdown(rep: dict[str, Any], viewer_url: str | None = None, changed_only: bool = False) -> str:
    """A pull-request comment: which condition decided the exit code (its first line), the summary line, the
    per-task table (``changed_only``: only the tasks that changed or fail, a line counting the others), the known
    failures, the divergences (or expected vs actual) of the failing tasks, and links to the viewer when
    ``viewer_url`` is given."""
    run = str(rep["runId"])
    lines = [
        f"### openwop eval `{_cell(rep.get('suiteId') or run)}`: {_cell(decided_line(rep))}",
        "",
        _head(rep, viewer_url),
        "",
    ]
    if baseline_line(rep):
        lines += [_cell(baseline_line(rep)), ""]
    tasks = rep.get("tasks") or []
    lines += _task_table(tasks, changed_only)
    lines += _known_failures(rep)
    lines += _what_changed_lines(tasks)
    if viewer_url:
        lines += ["", f"[Side by side in the viewer]({_link(viewer_url, run)})"]
    return "\n".join(lines) + "\n"


def write(rep: dict[str, Any], path: Path | None, viewer_url: str | None, changed_only: bool = False) -> None:
    """Write the comment to ``path`` (when given) and append it to ``$GITHUB_STEP_SUMMARY`` (when set)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if path is None and not summary:
        return
    text = markdown(rep, viewer_url, changed_only)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if summary:
        with Path(summary).open("a", encoding="utf-8") as fh:
            fh.write(text)
