"""The eval CLI's exit code (issue 36, decision 0145): one total precedence over the conditions that apply,
usage 3 > regression 1 > unverifiable 2 > failure 4 > 0, and what tolerates a failing task."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from shared.cli.evalcompare import PRECEDENCE, decide, task_outcome
from shared.cli.evalmarkdown import decided_line, markdown


def _rep(*, regression: bool, miss: bool, failure: bool) -> dict[str, Any]:
    """A compared report where each condition is made to apply or not, independently."""
    tasks = [
        {"taskId": "r", "score": 0.5 if regression else 1.0, "passed": True, "fixtureMissCount": 0},
        {"taskId": "m", "score": 1.0, "passed": True, "fixtureMissCount": 1 if miss else 0},
        {"taskId": "f", "score": 0.0, "passed": not failure, "fixtureMissCount": 0},
    ]
    for t in tasks:
        t["verdict"] = "regressed" if t["taskId"] == "r" and regression else "unchanged"
        t["outcome"] = task_outcome(t, allow_known=False)
    return {
        "runId": "tenant-a/r-1",
        "status": "completed",
        "baselineRunId": "tenant-a/r-0",
        "pairedVerdict": "regressed" if regression else "unchanged",
        "pairedTaskCount": 3,
        "tasks": tasks,
    }


@pytest.mark.parametrize("regression,miss,failure", list(itertools.product([False, True], repeat=3)))
def test_the_first_condition_that_applies_decides_the_exit_code(regression, miss, failure):
    # Given any combination of a regression, a fixture miss and a failing task
    rep = _rep(regression=regression, miss=miss, failure=failure)
    # When the verdict is decided
    decide(rep)
    # Then every condition that applies is listed in precedence order, and the first decides the exit code
    want = [name for name, on in (("regression", regression), ("unverifiable", miss), ("failure", failure)) if on]
    assert rep["conditions"] == want
    assert rep["decidedBy"] == (want[0] if want else None)
    assert rep["exitCode"] == ({"regression": 1, "unverifiable": 2, "failure": 4}[want[0]] if want else 0)
    # and the markdown's first line says so
    first = markdown(rep).splitlines()[0]
    assert (
        first.endswith(decided_line(rep)) and "precedence usage 3 > regression 1 > unverifiable 2 > failure 4" in first
    )
    if len(want) > 1:
        assert f"decided by {want[0]} (also: {', '.join(want[1:])})" in first


def test_the_precedence_is_total_and_distinct():
    assert [code for _, code in PRECEDENCE] == [3, 1, 2, 4]
    assert len({name for name, _ in PRECEDENCE}) == len(PRECEDENCE)


def test_what_tolerates_a_failing_task():
    failing = {"taskId": "t", "score": 0.0, "passed": False, "fixtureMissCount": 0}
    # a suite's knownFailure mark tolerates it, with or without the flag
    assert task_outcome({**failing, "knownFailure": "why"}, allow_known=False) == "known-failure"
    # --allow-known-failures tolerates it only when the baseline failed it too
    assert task_outcome({**failing, "baselinePassed": False}, allow_known=True) == "tolerated"
    assert task_outcome({**failing, "baselinePassed": True}, allow_known=True) == "failed"
    assert task_outcome({**failing, "baselinePassed": None}, allow_known=True) == "failed"  # no baseline: nothing
    assert task_outcome({**failing, "baselinePassed": False}, allow_known=False) == "failed"
    # a fixture miss is never an absolute failure: it is unverifiable
    assert task_outcome({**failing, "fixtureMissCount": 2, "knownFailure": "why"}, allow_known=True) == "unverifiable"
