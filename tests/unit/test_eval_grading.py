"""Eval grading, pairing and verdicts, fixture selection/consumption/reset, derivation from the record, suites."""

from __future__ import annotations

import copy

import pytest

from shared.engine import grading
from shared.engine.evalpages import closing_drafts, finish_drafts, page_end, task_drafts
from shared.engine.evalrun import items
from shared.engine.evalsources import entries_from_records
from shared.engine.evaltrial import order_key, trial_sk
from shared.engine.tools import FixturePlan
from shared.errors import ValidationError
from shared.ports import ToolCallRecord
from shared.services import fixtures, suites

AGENT = "conformance-eval-agent"


# --------------------------------------------------------------------------- golden and trajectory


@pytest.mark.parametrize(
    ("strategy", "decision", "value", "ok"),
    [
        ("exact", "shared-a answer", "shared-a answer", True),
        ("exact", "shared-a answer ", "shared-a answer", False),
        ("exact", 42, "42", True),  # the stringified output
        ("exact", {"b": 1, "a": 2}, {"a": 2, "b": 1}, True),
        ("contains", "the candidate-only answer", "candidate-only", True),
        ("contains", "the candidate answer", "candidate-only", False),
        ("json-match", {"task": "x", "ok": True}, {"ok": True, "task": "x"}, True),
        ("json-match", '{"ok": true, "task": "x"}', {"task": "x", "ok": True}, True),
        ("json-match", {"ok": True}, {"ok": False}, False),
        ("json-match", [1, 2], [2, 1], False),
        ("nope", "a", "a", False),
    ],
)
def test_golden_strategies(strategy, decision, value, ok):
    assert grading.golden_match(strategy, decision, value) is ok


def test_trajectory_exact_and_in_order():
    calls = [{"tool": "t:a", "args": {"x": 1}}, {"tool": "t:b", "args": {"y": 2}}, {"tool": "t:a", "args": {}}]
    exact = {"match": "exact", "calls": [{"tool": "t:a", "args": {"x": 1}}, {"tool": "t:b"}, {"tool": "t:a"}]}
    assert grading.trajectory_match(exact, calls)
    assert not grading.trajectory_match({"calls": [{"tool": "t:a"}, {"tool": "t:b"}]}, calls)  # default exact
    assert not grading.trajectory_match(
        {"calls": [{"tool": "t:a", "args": {"x": 2}}, {"tool": "t:b"}, {"tool": "t:a"}]}, calls
    )
    assert grading.trajectory_match({"match": "in-order", "calls": [{"tool": "t:a"}, {"tool": "t:a"}]}, calls)
    assert not grading.trajectory_match({"match": "in-order", "calls": [{"tool": "t:b"}, {"tool": "t:b"}]}, calls)
    assert grading.trajectory_match({"match": "exact", "calls": []}, [])


def _task(value="ok", trajectory=None):
    t = {"taskId": "t", "input": {}, "expected": {"kind": "golden", "match": {"strategy": "exact", "value": value}}}
    if trajectory is not None:
        t["trajectory"] = trajectory
    return t


def test_trial_grade_miss_trajectory_and_undecided():
    assert grading.grade_trial(_task(), True, "ok", [], 0) == grading.TrialGrade(1.0, True)
    assert grading.grade_trial(_task(), True, "ok", [], 1) == grading.TrialGrade(0.0, False)  # fail-closed miss
    assert grading.grade_trial(_task(), False, None, [], 0) == grading.TrialGrade(0.0, False)
    traj = {"calls": [{"tool": "t:a"}]}
    assert grading.grade_trial(_task(trajectory=traj), True, "ok", [{"tool": "t:b", "args": {}}], 0).score == 0.0
    assert grading.grade_trial(_task(trajectory=traj), True, "ok", [{"tool": "t:a", "args": {}}], 0).passed


def test_task_score_is_the_mean_over_trials_and_passes_only_if_every_trial_passed():
    rows = [
        {"score": 1.0, "passed": True, "fixtureMissCount": 0},
        {"score": 0.0, "passed": False, "fixtureMissCount": 2},
        {"score": 1.0, "passed": True, "fixtureMissCount": 0},
    ]
    r = grading.task_result("t", rows)
    assert r == {
        "taskId": "t",
        "score": pytest.approx(2 / 3),
        "passed": False,
        "fixtureMissCount": 2,
        "trials": 3,
        "passAtK": 1.0,
        "passHatK": 0.0,
    }  # content-free; pass@k / pass^k at k = 3
    assert grading.task_result("t", rows[:1]) == {"taskId": "t", "score": 1.0, "passed": True, "fixtureMissCount": 0}


def test_trials_suite_level_task_level_default():
    assert grading.task_trials({}, {}) == 1
    assert grading.task_trials({"trials": 3}, {}) == 3
    assert grading.task_trials({"trials": 3}, {"trials": 2}) == 2


# --------------------------------------------------------------------------- pairing and verdict


def test_conformance_pair_is_unchanged_with_a_third_score_delta():
    base = {"runId": "a/base", "aggregateScore": 2 / 3, "tasks": {"base-only": 0.0, "shared-a": 1.0, "shared-b": 1.0}}
    cand = [
        {"taskId": "shared-a", "score": 1.0},
        {"taskId": "shared-b", "score": 1.0},
        {"taskId": "candidate-only", "score": 1.0},
    ]
    block = grading.regression_block(1.0, cand, base)
    assert block["baselineRunId"] == "a/base"
    assert abs(block["scoreDelta"] - 1 / 3) < 1e-9
    assert block["pairedTaskCount"] == 2
    assert block["verdict"] == "unchanged"  # an aggregate comparison would have said "improved"


@pytest.mark.parametrize(
    ("cand", "base", "paired", "verdict"),
    [
        ({"a": 1.0, "b": 0.5}, {"a": 0.5, "b": 0.5}, 2, "improved"),
        ({"a": 0.0, "b": 0.5}, {"a": 0.5, "b": 0.5}, 2, "regressed"),
        ({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, 2, "regressed"),  # mixed: any fall is a regression
        ({"a": 1.0}, {"b": 1.0}, 0, "inconclusive"),
        ({"a": 0.1 + 0.2}, {"a": 0.3}, 1, "unchanged"),  # float noise is not a change
    ],
)
def test_verdict_from_paired_scores(cand, base, paired, verdict):
    assert grading.pair(cand, base) == (paired, verdict)


def test_summary_passed_rule_and_regression_only_with_a_baseline():
    suite = {"suiteId": "x.evals.y", "version": "1.0.0"}
    rows = [
        {"taskId": "a", "score": 1.0, "passed": True, "fixtureMissCount": 0},
        {"taskId": "b", "score": 0.0, "passed": False, "fixtureMissCount": 1},
    ]
    s = grading.summary(suite, rows, None)
    assert (s["aggregateScore"], s["passed"], s["taskCount"], s["passedCount"]) == (0.5, False, 2, 1)
    assert "regression" not in s
    assert grading.summary({**suite, "thresholds": {"passScore": 0.5}}, rows, None)["passed"] is True
    assert grading.summary({**suite, "thresholds": {"passScore": 0.6}}, rows, None)["passed"] is False
    reg = grading.summary(suite, rows, {"runId": "t/b", "aggregateScore": 0.75, "tasks": {"a": 1.0, "b": 0.5}})
    assert reg["regression"] == {
        "baselineRunId": "t/b",
        "scoreDelta": -0.25,
        "verdict": "regressed",
        "pairedTaskCount": 2,
    }


# --------------------------------------------------------------------------- fixtures: selection, consumption, reset


def test_fixture_selection_is_exact_canonical_args_and_first_unconsumed_entry():
    plan = FixturePlan(
        [
            {"tool": "c", "args": {"op": "inc", "key": "k"}, "response": 1},
            {"tool": "c", "args": {"key": "k", "op": "inc"}, "response": 2},  # same args, other key order
            {"tool": "c", "response": "any"},  # no args: matches on the tool alone
        ],
        "fail",
    )
    assert plan.take("c", {"key": "k", "op": "inc"})["response"] == 1
    assert plan.take("c", {"op": "inc", "key": "k"})["response"] == 2  # a repeat consumes the next entry
    assert plan.take("c", {"op": "inc", "key": "k"})["response"] == "any"
    assert plan.take("c", {"op": "inc", "key": "k"}) is None  # all consumed: a miss
    assert plan.take("other", {}) is None
    fresh = plan.fresh()  # the next trial starts with every entry again
    assert fresh.take("c", {"op": "inc", "key": "k"})["response"] == 1
    assert fresh.on_miss == "fail" and not plan.fresh().consumed


def test_fixture_args_differing_in_a_value_or_type_miss():
    plan = FixturePlan([{"tool": "c", "args": {"n": 1}, "response": 1}])
    assert plan.take("c", {"n": "1"}) is None
    assert plan.take("c", {"n": 1, "extra": None}) is None
    assert plan.take("c", {"n": 1}) is not None


# --------------------------------------------------------------------------- derivation from the record


def _rec(
    key,
    agent=AGENT,
    delegate=False,
    status="ok",
    tool="conformance.eval:counter",
    args=None,
    result=None,
    error=None,
    inv="record:1",
):
    return ToolCallRecord(
        run_id="t/src",
        call_key=key,
        agent_id=agent,
        invocation_id=inv,
        delegate=delegate,
        tool_name=tool,
        call_id=f"{inv}#0",
        args=args if args is not None else {"k": key},
        status=status,
        result=result,
        error=error,
    )


def test_derivation_takes_the_agents_own_calls_in_call_key_order_one_entry_each():
    records = [
        _rec("T00001-001#00000", args={"op": "read", "key": "k1"}, result={"key": "k1", "count": 5}, inv="b:1"),
        _rec("T00000-001#00001", args={"op": "read", "key": "k1"}, result={"key": "k1", "count": 4}),
        _rec("T00000-001#00000", args={"op": "inc", "key": "k1"}, result={"key": "k1", "count": 4}),
        _rec("T00000-001#00002", delegate=True, result="delegate's"),
        _rec("T00000-001#00003", agent="someone-else", result="other agent's"),
        _rec(
            "T00000-002#00000",
            status="error",
            tool="conformance.eval:fail",
            args={},
            error={"code": "external_call_failed", "message": "the tool failed"},
        ),
        _rec(
            "T00000-003#00000",
            status="forbidden",
            tool="x:y",
            args={"a": 1},
            error={"code": "forbidden", "message": "no"},
        ),
    ]
    entries = entries_from_records(records, AGENT)
    assert entries == [
        {
            "tool": "conformance.eval:counter",
            "args": {"op": "inc", "key": "k1"},
            "argsMatch": "exact",
            "response": {"key": "k1", "count": 4},
        },
        {
            "tool": "conformance.eval:counter",
            "args": {"op": "read", "key": "k1"},
            "argsMatch": "exact",
            "response": {"key": "k1", "count": 4},
        },
        {
            "tool": "conformance.eval:fail",
            "args": {},
            "argsMatch": "exact",
            "isError": True,
            "response": {"code": "external_call_failed", "message": "the tool failed"},
        },
        {
            "tool": "x:y",
            "args": {"a": 1},
            "argsMatch": "exact",
            "isError": True,
            "response": {"code": "forbidden", "message": "no"},
        },
        {
            "tool": "conformance.eval:counter",
            "args": {"op": "read", "key": "k1"},
            "argsMatch": "exact",
            "response": {"key": "k1", "count": 5},
        },
    ]
    assert entries_from_records(records, "nobody") == []


def test_order_keys_sort_in_suite_then_trial_then_call_order():
    keys = [f"{order_key(t, k)}#{i:05d}" for t in (0, 1, 12) for k in (1, 2, 10) for i in (0, 1)]
    assert sorted(keys) == keys
    assert sorted([trial_sk(3, 1), trial_sk(0, 10), trial_sk(0, 2)]) == [
        trial_sk(0, 2),
        trial_sk(0, 10),
        trial_sk(3, 1),
    ]


# --------------------------------------------------------------------------- finish: event order and the summary


def test_finish_drafts_put_trials_in_suite_order_with_one_scored_event_per_task():
    suite = {
        "suiteId": "x.evals.y",
        "version": "1.0.0",
        "trials": 2,
        "tasks": [
            {"taskId": "a", "input": {}, "expected": {}},
            {"taskId": "b", "input": {}, "expected": {}, "trials": 1},
        ],
    }
    plan = {"suite": suite, "modes": ["golden"], "baseline": {"runId": "x/b", "aggregateScore": 0, "tasks": {}}}

    def trial(i, k, score, miss=0):
        return {
            "taskIndex": i,
            "trial": k,
            "events": [{"type": "agent.decided", "payload": {"i": i, "k": k}, "timestamp": "t"}],
            "score": score,
            "passed": score == 1.0,
            "fixtureMissCount": miss,
        }

    trials = {(1, 1): trial(1, 1, 1.0), (0, 2): trial(0, 2, 0.0, 1), (0, 1): trial(0, 1, 1.0)}
    assert [it["t"] * 10 + it["k"] for it in items(plan, "x/r")] == [1, 2, 11]
    drafts, summ = finish_drafts(plan, trials, "now")
    assert [(d["type"], d["payload"].get("taskId") or d["payload"].get("k")) for d in drafts[:5]] == [
        ("agent.decided", 1),
        ("agent.decided", 2),
        ("eval.scored", "a"),
        ("agent.decided", 1),
        ("eval.scored", "b"),
    ]
    assert drafts[2]["payload"] == {"taskId": "a", "score": 0.5, "passed": False, "fixtureMissCount": 1}
    assert [d["type"] for d in drafts[-2:]] == ["eval.completed", "run.completed"]
    assert drafts[-2]["payload"] == {"aggregateScore": 0.75, "passed": False, "taskCount": 2, "passedCount": 1}
    assert drafts[-1]["payload"] == {"outputs": summ}
    assert "regression" not in summ  # a baseline only counts in regression mode
    drafts, summ = finish_drafts({**plan, "modes": ["golden", "regression"]}, trials, "now")
    assert drafts[-2]["payload"]["regressionVsBaseline"] == summ["regression"]["scoreDelta"] == 0.75
    leaks = {
        "taskOutput",
        "output",
        "rubric",
        "completion",
        "prompt",
        "body",
        "secret",
        "credentials",
        "token",
        "apiKey",
    }
    for d in drafts:
        if d["type"].startswith("eval."):
            assert not leaks & set(d["payload"])
    for row in summ["tasks"]:
        assert not leaks & set(row)


def test_finish_pages_hold_whole_tasks_and_join_to_the_one_page_log():
    # Given tasks of 3, 1, 4 and 2 trials and pages of at most 4 task-trials
    counts = [3, 1, 4, 2]
    suite = {
        "suiteId": "x.evals.y",
        "version": "1.0.0",
        "tasks": [{"taskId": f"t{i}", "input": {}, "expected": {}, "trials": n} for i, n in enumerate(counts)],
    }
    plan = {"suite": suite, "modes": ["golden"]}
    starts, start = [], 0
    while start < len(counts):
        starts.append(start)
        start = page_end(plan, start, 4)
    # Then a page never splits a task, fills up to the limit, and a task over the limit is a page of its own
    assert starts == [0, 2, 3]
    assert page_end(plan, 0, 1) == 1 and page_end(plan, 0, 100) == 4
    # and the pages' events and rows joined are the one-page result
    trials = {
        (i, k): {
            "taskIndex": i,
            "trial": k,
            "events": [{"type": "agent.decided", "payload": {"i": i, "k": k}, "timestamp": "t"}],
            "score": float(k % 2),
            "passed": k % 2 == 1,
            "fixtureMissCount": 0,
        }
        for i, n in enumerate(counts)
        for k in range(1, n + 1)
    }
    drafts, rows = [], []
    for a, b in zip(starts, starts[1:] + [len(counts)], strict=True):
        d, r = task_drafts(plan, trials, a, b, "now")
        drafts += d
        rows += r
    closing, summ = closing_drafts(plan, rows, "now")
    assert (drafts + closing, summ) == finish_drafts(plan, trials, "now")


# --------------------------------------------------------------------------- suites


def test_the_six_conformance_suites_validate_and_have_the_contract_shape():
    all_suites = fixtures.suites()
    assert set(all_suites) == {
        "conformance-eval-regression-base",
        "conformance-eval-regression-candidate",
        "conformance-eval-trajectory",
        "conformance-eval-recorded-source",
        "conformance-eval-recorded-replay",
        "conformance-eval-recorded-drift",
    }
    for doc in all_suites.values():
        suites.validate_suite(copy.deepcopy(doc))
    base, cand = all_suites["conformance-eval-regression-base"], all_suites["conformance-eval-regression-candidate"]
    assert base["suiteId"] == cand["suiteId"] and (base["version"], cand["version"]) == ("1.0.0", "1.1.0")
    assert base["modes"] == cand["modes"] == ["golden", "regression"]
    assert [t["taskId"] for t in base["tasks"]] == ["base-only", "shared-a", "shared-b"]
    assert [t["taskId"] for t in cand["tasks"]] == ["shared-a", "shared-b", "candidate-only"]
    assert base["tasks"][1:] == cand["tasks"][:2]
    assert all_suites["conformance-eval-trajectory"]["suiteId"] != base["suiteId"]
    src = all_suites["conformance-eval-recorded-source"]["tasks"][0]
    assert src["fixtures"] == {"toolResponses": [], "onMiss": "live"}
    replay = all_suites["conformance-eval-recorded-replay"]["tasks"][0]
    drift = all_suites["conformance-eval-recorded-drift"]["tasks"][0]
    assert "fixtures" not in replay and "fixtures" not in drift and replay["input"] == src["input"]
    assert drift["input"]["calls"][0]["args"]["key"] != src["input"]["calls"][0]["args"]["key"]
    for doc in all_suites.values():  # each suite's golden answer is graded against its own script's answer
        for t in doc["tasks"]:
            m = t["expected"]["match"]
            passes = grading.golden_match(m["strategy"], t["input"]["answer"], m["value"])
            assert passes is (t["taskId"] != "base-only"), t["taskId"]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.update(suiteId="no-evals-segment"),
        lambda s: s.update(version="1.0"),
        lambda s: s.update(modes=[]),
        lambda s: s.update(modes=["golden", "golden"]),
        lambda s: s.update(extra=1),
        lambda s: s["tasks"][0].update(taskId="Bad_Id"),
        lambda s: s["tasks"][0].pop("expected"),
        lambda s: s["tasks"][0]["expected"]["match"].update(strategy="glob"),  # not a scorer of this host
        lambda s: s["tasks"][0].update(fixtures={"onMiss": "skip"}),
        lambda s: s["tasks"][0].update(fixtures={"toolResponses": [{"args": {}}]}),
        lambda s: s["tasks"][0].update(fixtures={"memorySeed": []}),
        lambda s: s["tasks"][0].update(trials=0),
        lambda s: s.update(trials=11),
        lambda s: s["tasks"].append(copy.deepcopy(s["tasks"][0])),  # duplicate taskId
        lambda s: s.update(tasks=[]),
    ],
)
def test_bad_suites_are_refused(mutate):
    doc = copy.deepcopy(fixtures.suites()["conformance-eval-trajectory"])
    mutate(doc)
    with pytest.raises(ValidationError) as err:
        suites.validate_suite(doc)
    assert err.value.code == "validation_error" and err.value.details["errors"]


def test_a_non_object_suite_is_refused():
    with pytest.raises(ValidationError):
        suites.validate_suite([1, 2])
