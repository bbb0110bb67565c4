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


def markdown(rep: dict[str, Any], viewer_url: str | None = None) -> str:
    """A pull-request comment: the summary line, the per-task table, the divergences (or expected vs actual) of
    the regressed and unverifiable tasks, and links to the viewer when ``viewer_url`` is given."""
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
    head += f" · cost USD {usd(rep.get('totalCostUsd'))}"
    lines = [
        f"### openwop eval `{_cell(rep.get('suiteId') or run)}`",
        "",
        head,
        "",
        "| task | baseline | candidate | trials (pass^k) | fixture misses | verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in rep.get("tasks") or []:
        tr = t.get("trials")
        trials = f"{tr['passed']}/{tr['total']}" if tr else "-"
        lines.append(
            f"| {_cell(t['taskId'])} | {_num(t.get('baselineScore'))} | {_num(t['score'])} | {trials} | "
            f"{t['fixtureMissCount']} | {_cell(t['verdict'])} |"
        )
    failing = [t for t in rep.get("tasks") or [] if t["verdict"] in FAILING]
    if failing:
        lines += ["", "#### What changed", ""]
        for t in failing:
            lines.append(f"- **{_code(t['taskId'])}** ({t['verdict']}): `{_code(what_changed(t))}`")
            for m in t.get("fixtureMisses") or []:
                lines.append(f"  - fixture miss (trial {m.get('trial')}): `{_code(miss_text(m))}`")
    if viewer_url:
        lines += ["", f"[Side by side in the viewer]({_link(viewer_url, run)})"]
    return "\n".join(lines) + "\n"


def write(rep: dict[str, Any], path: Path | None, viewer_url: str | None) -> None:
    """Write the comment to ``path`` (when given) and append it to ``$GITHUB_STEP_SUMMARY`` (when set)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if path is None and not summary:
        return
    text = markdown(rep, viewer_url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if summary:
        with Path(summary).open("a", encoding="utf-8") as fh:
            fh.write(text)
