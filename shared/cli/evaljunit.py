"""The eval CLI's JUnit report (``--junit FILE``): one testcase per task (named by its id and label), regressed and
unverifiable tasks and tasks that fail their expectation untolerated failing with what changed; flaky ones and
tolerated failures (``knownFailure``, ``--allow-known-failures``) skipped with the reason. The testsuite's properties
name the baseline's run, agent version and verdict, and the condition that decided the exit code."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from shared.cli import evalmarkdown


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def junit(rep: dict[str, Any], path: Path) -> None:
    """One testcase per task; regressed, unverifiable and (untolerated) failed tasks fail (a run that did not
    complete fails all)."""
    cases = rep["tasks"]
    completed = rep.get("status") == "completed"
    failures = sum(1 for t in cases if evalmarkdown.failing(t) or not completed)
    suite = ET.Element(
        "testsuite",
        name=f"openwop eval {rep.get('suiteId') or rep['runId']}",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
    )
    skipped = sum(1 for t in cases if _skip(t) and completed)
    if skipped:
        suite.set("skipped", str(skipped))
    props = ET.SubElement(suite, "properties")
    base = rep.get("baseline") or {}
    values = {
        **{k: rep.get(k) for k in ("runId", "baselineRunId", "scoreDelta", "pairedVerdict", "verdict", "exitCode")},
        "decidedBy": rep.get("decidedBy") or "none",
        "precedence": rep.get("precedence"),
        "baselineAgentVersion": base.get("agentVersion"),
        "baselineVerdict": base.get("verdict") or base.get("status"),
    }
    for k, v in values.items():
        ET.SubElement(props, "property", name=k, value="" if v is None else str(v))
    for t in cases:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=str(rep.get("suiteId") or "eval"),
            name=evalmarkdown.task_name(t),
            time=f"{(t.get('latencyMs') or 0) / 1000:.3f}",
        )
        if evalmarkdown.failing(t) or not completed:
            verdict = (
                t["verdict"]
                if t["verdict"] in evalmarkdown.FAILING
                else "failed"
                if completed and t.get("outcome") == "failed"
                else "unverifiable"
            )
            misses = [f"fixture miss: {evalmarkdown.miss_text(m)}" for m in t.get("fixtureMisses") or []]
            head = (
                f"{verdict}: score {num(t['score'])} vs baseline {num(t.get('baselineScore'))}, "
                f"{t['fixtureMissCount']} fixture misses; {evalmarkdown.what_changed(t)}"
            )
            fail = ET.SubElement(case, "failure", message="; ".join([head, *misses]), type=verdict)
            fail.text = "\n".join([head, *misses])
        elif _skip(t):
            ET.SubElement(case, "skipped", message="; ".join(_skip_reasons(t)))
    ET.indent(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def _skip_reasons(t: dict[str, Any]) -> list[str]:
    """Why a testcase is skipped: flaky (its baseline trials disagreed), a known failure, a tolerated one."""
    out = []
    if t["verdict"] == "flaky":
        out.append(
            f"flaky: the baseline's trials disagreed; score {num(t['score'])} vs baseline {num(t.get('baselineScore'))}"
        )
    if t.get("outcome") == "known-failure":
        out.append(f"known failure: {t.get('knownFailure')}")
    if t.get("outcome") == "tolerated":
        out.append("failed in the baseline too (--allow-known-failures)")
    return out


def _skip(t: dict[str, Any]) -> bool:
    return not evalmarkdown.failing(t) and (
        t.get("outcome") in ("known-failure", "tolerated") or t["verdict"] == "flaky"
    )
