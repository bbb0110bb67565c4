"""The eval CLI's JUnit report (``--junit FILE``): one testcase per task, regressed and unverifiable tasks failing
with what changed, flaky ones skipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from shared.cli import evalmarkdown


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def junit(rep: dict[str, Any], path: Path) -> None:
    """One testcase per task; regressed and unverifiable tasks fail (a run that did not complete fails all)."""
    cases = rep["tasks"]
    failing = {"regressed", "unverifiable"}
    failures = sum(1 for t in cases if t["verdict"] in failing or rep.get("status") != "completed")
    suite = ET.Element(
        "testsuite",
        name=f"openwop eval {rep.get('suiteId') or rep['runId']}",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
    )
    flaky = sum(1 for t in cases if t["verdict"] == "flaky" and rep.get("status") == "completed")
    if flaky:
        suite.set("skipped", str(flaky))
    props = ET.SubElement(suite, "properties")
    for k in ("runId", "baselineRunId", "scoreDelta", "pairedVerdict", "verdict"):
        ET.SubElement(props, "property", name=k, value="" if rep.get(k) is None else str(rep.get(k)))
    for t in cases:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=str(rep.get("suiteId") or "eval"),
            name=t["taskId"],
            time=f"{(t.get('latencyMs') or 0) / 1000:.3f}",
        )
        if t["verdict"] in failing or rep.get("status") != "completed":
            verdict = t["verdict"] if t["verdict"] in failing else "unverifiable"
            misses = [f"fixture miss: {evalmarkdown.miss_text(m)}" for m in t.get("fixtureMisses") or []]
            head = (
                f"{verdict}: score {num(t['score'])} vs baseline {num(t.get('baselineScore'))}, "
                f"{t['fixtureMissCount']} fixture misses; {evalmarkdown.what_changed(t)}"
            )
            fail = ET.SubElement(case, "failure", message="; ".join([head, *misses]), type=verdict)
            fail.text = "\n".join([head, *misses])
        elif t["verdict"] == "flaky":
            ET.SubElement(
                case,
                "skipped",
                message=f"flaky: the baseline's trials disagreed; score {num(t['score'])} "
                f"vs baseline {num(t.get('baselineScore'))}",
            )
    ET.indent(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
