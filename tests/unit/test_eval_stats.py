"""Eval statistics (decision 0114), pure: pass@k / pass^k, flaky baseline tasks, the seeded paired bootstrap."""

from __future__ import annotations

import itertools
import math

import pytest

from shared.clock import SystemIds
from shared.engine import evalstats, grading
from shared.engine.evalpages import closing_drafts

SUITE = {"suiteId": "x.evals.y", "version": "1.0.0", "tasks": []}


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators():
    # Given 4 trials of which 1 passed
    # Then pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1; pass^1 = 1/4, pass^2 = 0
    assert evalstats.pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert evalstats.pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert evalstats.pass_at_k(4, 1, 4) == 1.0
    assert evalstats.pass_hat_k(4, 1, 1) == pytest.approx(0.25)
    assert evalstats.pass_hat_k(4, 1, 2) == 0.0
    assert evalstats.pass_hat_k(4, 3, 2) == pytest.approx(3 / 6)
    assert evalstats.curves(2, 1) == {"passAtK": {"1": 0.5, "2": 1.0}, "passHatK": {"1": 0.5, "2": 0.0}}


def test_a_task_row_of_several_trials_carries_pass_at_k_and_pass_hat_k_at_k_equal_n():
    rows = [
        {"score": 1.0, "passed": True, "fixtureMissCount": 0},
        {"score": 0.0, "passed": False, "fixtureMissCount": 0},
    ]
    row = grading.task_result("t", rows)
    assert (row["trials"], row["passAtK"], row["passHatK"]) == (2, 1.0, 0.0)
    assert evalstats.is_flaky(row) is True
    assert evalstats.is_flaky(grading.task_result("t", [rows[0], rows[0]])) is False
    assert "passAtK" not in grading.task_result("t", rows[:1])  # one trial: no statistics


def test_the_baseline_snapshot_names_its_flaky_tasks():
    summary = {
        "aggregateScore": 0.75,
        "tasks": [
            {"taskId": "steady", "score": 1.0, "passed": True, "trials": 2, "passAtK": 1.0, "passHatK": 1.0},
            {"taskId": "wobbly", "score": 0.5, "passed": False, "trials": 2, "passAtK": 1.0, "passHatK": 0.0},
            {"taskId": "single", "score": 0.5, "passed": False},
        ],
    }
    assert grading.baseline_snapshot("t/b", summary) == {
        "runId": "t/b",
        "aggregateScore": 0.75,
        "tasks": {"steady": 1.0, "wobbly": 0.5, "single": 0.5},
        "flaky": ["wobbly"],
    }


def test_a_flaky_task_alone_is_never_regressed():
    # Given a baseline whose "wobbly" task's trials disagreed, and a candidate where only wobbly fell
    base = {"runId": "t/b", "aggregateScore": 0.75, "tasks": {"steady": 1.0, "wobbly": 0.5}, "flaky": ["wobbly"]}
    cand = [{"taskId": "steady", "score": 1.0}, {"taskId": "wobbly", "score": 0.0}]
    block = grading.regression_block(0.5, cand, base, SystemIds().seeded("s"))
    # Then the verdict is unchanged, wobbly is listed apart, pairing and delta keep their shape
    assert (block["verdict"], block["pairedTaskCount"], block["flakyTasks"]) == ("unchanged", 2, ["wobbly"])
    assert block["scoreDelta"] == -0.25
    # and a non-flaky task falling is still a regression
    cand[0]["score"] = 0.0
    assert grading.regression_block(0.0, cand, base, SystemIds().seeded("s"))["verdict"] == "regressed"


def test_flaky_falls_count_together_when_the_interval_lies_below_zero():
    # Given two tasks, both flaky in the baseline, that both fell
    base = {"a": 1.0, "b": 1.0}
    cand = {"a": 0.0, "b": 0.5}
    # Then without an interval, or with one reaching 0, the verdict is unchanged; wholly below 0 it is regressed
    assert grading.pair(cand, base, frozenset({"a", "b"})) == (2, "unchanged")
    assert grading.pair(cand, base, frozenset({"a", "b"}), {"low": -1.0, "high": -0.5}) == (2, "regressed")
    assert grading.pair(cand, base, frozenset({"a", "b"}), {"low": -1.0, "high": 0.2}) == (2, "unchanged")
    # and the same for two flaky rises and an interval wholly above 0
    assert grading.pair(base, cand, frozenset({"a", "b"}), {"low": 0.5, "high": 1.0}) == (2, "improved")


def test_one_flaky_task_never_regresses_a_suite_alone_whatever_the_interval():
    # Given a one-task suite whose only task was flaky in the baseline and fell: its interval is a point below 0
    base = {"runId": "t/b", "aggregateScore": 0.5, "tasks": {"wobbly": 0.5}, "flaky": ["wobbly"]}
    block = grading.regression_block(0.0, [{"taskId": "wobbly", "score": 0.0}], base, SystemIds().seeded("s"))
    assert block["scoreDeltaInterval"]["high"] == block["scoreDeltaInterval"]["low"] == -0.5
    # Then the verdict is unchanged (the fall is the flaky task's own), the task listed apart
    assert (block["verdict"], block["flakyTasks"]) == ("unchanged", ["wobbly"])
    # and one flaky fall beside an unchanged task, even with an interval below 0 given, is not a regression
    assert grading.pair({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, frozenset({"a"}), {"low": -1.0, "high": -0.1}) == (
        2,
        "unchanged",
    )
    # nor a rise an improvement
    assert grading.pair({"a": 1.0}, {"a": 0.5}, frozenset({"a"}), {"low": 0.5, "high": 0.5}) == (1, "unchanged")


def test_the_bootstrap_is_seeded_reproducible_and_brackets_the_mean():
    # Given more distinct resamples than the exact bootstrap enumerates (9 tasks of 9 distinct differences)
    diffs = [0.0, -1.0, 0.125, 0.5, -0.5, 0.25, -0.25, -0.75, 0.75]
    assert math.comb(2 * len(diffs) - 1, len(diffs) - 1) > evalstats.EXACT_LIMIT
    a = evalstats.bootstrap(diffs, SystemIds().seeded("seed-1"))
    b = evalstats.bootstrap(diffs, SystemIds().seeded("seed-1"))
    c = evalstats.bootstrap(diffs, SystemIds().seeded("seed-2"))
    assert a == b and a != c
    mean = sum(diffs) / len(diffs)
    assert a["low"] <= mean <= a["high"] and -1.0 <= a["low"] < a["high"] <= 1.0
    assert (a["confidence"], a["resamples"], a["method"]) == (0.95, 1000, "paired-bootstrap")


def _brute_force(diffs: list[float], tail: float) -> tuple[float, float]:
    """Every one of the n**n ordered resamples, equally likely: the percentile bounds straight from the definition."""
    n = len(diffs)
    means = sorted(sum(pick) / n for pick in itertools.product(diffs, repeat=n))
    below = [m for i, m in enumerate(means) if (i + 1) / len(means) > tail]
    reach = [m for i, m in enumerate(means) if (i + 1) / len(means) >= 1.0 - tail]
    return below[0], reach[0]


@pytest.mark.parametrize(
    "diffs",
    [
        [0.0, 0.0, -1.0],
        [-1.0, 0.0],
        [0.5],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, -1.0, 0.0, 0.5, -0.5, 0.0],
        [1.0, 0.25, -0.5, 0.0, 1.0, -1.0],
        [-1.0, -1.0, -1.0, 0.0, 0.0, 0.0],
    ],
)
def test_a_small_sample_gets_the_exact_bootstrap_whatever_the_seed(diffs):
    # Given few enough distinct resamples, the interval is the exact one: every seed reports the same
    one = evalstats.bootstrap(diffs, SystemIds().seeded("seed-1"))
    assert one == evalstats.bootstrap(diffs, SystemIds().seeded("seed-2"))
    assert one["method"] == "paired-bootstrap-exact"
    # and it is what all n**n resamples give, counted one by one
    assert (one["low"], one["high"]) == pytest.approx(_brute_force(diffs, 0.025))
    values = len(set(diffs))
    assert one["resamples"] == math.comb(len(diffs) + values - 1, values - 1)


def test_three_tasks_one_fell_reach_minus_one_exactly():
    # 1 of the 27 resamples (3.7%, above the 2.5% tail) draws the fall three times: the low bound is -1, never a
    # seed's luck (1,000 Monte Carlo draws put it at -0.667 about 2 times in 100)
    ci = evalstats.bootstrap([0.0, 0.0, -1.0], SystemIds().seeded("any"))
    assert (ci["low"], ci["high"], ci["resamples"]) == (-1.0, 0.0, 4)
    assert evalstats.bootstrap([0.0, 0.0], SystemIds().seeded("x"))["low"] == 0.0  # no spread: a point


def test_a_pass_fail_suite_of_a_thousand_tasks_is_still_exact():
    diffs = [-1.0 if i % 10 == 0 else 0.0 for i in range(1000)]
    ci = evalstats.bootstrap(diffs, SystemIds().seeded("x"))
    assert (ci["method"], ci["resamples"]) == ("paired-bootstrap-exact", 1001)
    assert ci["low"] < -0.1 < ci["high"] < 0.0
    more = evalstats.bootstrap(diffs + [0.0], SystemIds().seeded("x"))  # one past EXACT_MAX_TASKS
    assert (more["method"], more["resamples"]) == ("paired-bootstrap", 1000)


def test_the_summary_interval_is_seeded_from_the_plan_so_a_replay_reports_the_same():
    plan = {
        "suite": {**SUITE, "tasks": [{"taskId": "a"}, {"taskId": "b"}]},
        "modes": ["golden", "regression"],
        "baseline": {"runId": "t/base", "aggregateScore": 1.0, "tasks": {"a": 1.0, "b": 1.0}, "flaky": []},
    }
    rows = [
        {"taskId": "a", "score": 0.0, "passed": False, "fixtureMissCount": 0},
        {"taskId": "b", "score": 1.0, "passed": True, "fixtureMissCount": 0},
    ]
    _, one = closing_drafts(plan, rows, "now", SystemIds().seeded)
    _, two = closing_drafts(plan, rows, "later", SystemIds().seeded)
    assert one == two
    assert one["regression"]["scoreDeltaInterval"] == {
        "pairedMean": -0.5,
        "low": -1.0,
        "high": 0.0,
        "confidence": 0.95,
        "resamples": 3,
        "method": "paired-bootstrap-exact",
    }
    _, plain = closing_drafts(plan, rows, "now")
    assert "scoreDeltaInterval" not in plain["regression"]
