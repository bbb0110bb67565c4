"""The host's golden scorers through the API (decision 0114): each passes and fails where it should in the summary,
and each trial's scorer result and reason reach the eval report."""

from __future__ import annotations

from typing import Any

import pytest

from shared.protocol.ids import project_id
from tests.helpers import unique
from tests.integration.test_eval_runs import put_suite, run_eval, summary_json
from tests.wire import raw

REPORT = "/host/openwop-serverless/runs/{}/eval-report"
ANSWER = {"order": {"id": 42, "items": ["tea", "cake"], "total": 12.5}, "status": "shipped"}


def _task(task_id: str, match: dict[str, Any], answer: Any = ANSWER) -> dict[str, Any]:
    return {"taskId": task_id, "input": {"calls": [], "answer": answer}, "expected": {"kind": "golden", "match": match}}


CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("regex-pass", {"strategy": "regex", "value": r'"status":"ship+ed"'}, True),
    ("regex-fail", {"strategy": "regex", "value": r"^cancelled"}, False),
    ("schema-pass", {"strategy": "json-schema", "value": {"type": "object", "required": ["order", "status"]}}, True),
    (
        "schema-fail",
        {"strategy": "json-schema", "value": {"type": "object", "properties": {"status": {"enum": ["open"]}}}},
        False,
    ),
    ("path-equals-pass", {"strategy": "json-path", "path": "/order/id", "value": 42}, True),
    ("path-equals-fail", {"strategy": "json-path", "path": "/order/id", "value": 43}, False),
    ("path-missing-fail", {"strategy": "json-path", "path": "/order/nope", "value": 42}, False),
    ("path-contains-pass", {"strategy": "json-path", "path": "/order/items", "op": "contains", "value": "cake"}, True),
    ("path-contains-fail", {"strategy": "json-path", "path": "/order/items", "op": "contains", "value": "pie"}, False),
    ("numeric-pass", {"strategy": "numeric", "path": "/order/total", "value": 12.4, "tolerance": 0.2}, True),
    ("numeric-fail", {"strategy": "numeric", "path": "/order/total", "value": 12.0, "tolerance": 0.2}, False),
    ("not-contains-pass", {"strategy": "not-contains", "value": "cancelled"}, True),
    ("not-contains-fail", {"strategy": "not-contains", "value": "cake"}, False),
    ("not-regex-pass", {"strategy": "not-regex", "value": "^cancelled"}, True),
    ("not-regex-fail", {"strategy": "not-regex", "value": "shipped"}, False),
    ("not-exact-pass", {"strategy": "not-exact", "value": "shipped"}, True),
    ("not-exact-fail", {"strategy": "not-exact", "value": "shipped"}, False),
    ("cost-pass", {"strategy": "cost-below", "value": 0.01}, True),
    ("cost-fail", {"strategy": "cost-below", "value": 0}, False),
    ("latency-pass", {"strategy": "latency-below", "value": 60000}, True),
    ("latency-fail", {"strategy": "latency-below", "value": 0}, False),
    (
        "all-of-pass",
        {
            "strategy": "all-of",
            "of": [
                {"strategy": "contains", "value": "tea"},
                {"strategy": "json-path", "path": "/status", "value": "shipped"},
            ],
        },
        True,
    ),
]

ANSWERS = {"not-exact-fail": "shipped"}  # a case's own answer (the others answer ANSWER)


@pytest.fixture(scope="module")
def scored(host):
    client = host.client(host.key_a)
    suite_id = f"tests.local.evals.{unique('scorers')}"
    tasks = [_task(name, match, ANSWERS.get(name, ANSWER)) for name, match, _ in CASES]
    # weighted all-of: the contains part (weight 3) passes, the json-path part (weight 1) fails -> 0.75, failed
    tasks.append(
        _task(
            "all-of-weighted",
            {
                "strategy": "all-of",
                "of": [
                    {"strategy": "contains", "value": "tea", "weight": 3},
                    {"strategy": "json-path", "path": "/status", "value": "open", "weight": 1},
                ],
            },
        )
    )
    tasks.append(_task("numeric-plain", {"strategy": "numeric", "value": 3.14, "tolerance": 0.01}, answer="3.141"))
    suite = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "tasks": tasks}
    r = put_suite(host, host.key_a, suite)
    assert r.status == 201, r.text
    run_id = run_eval(client, f"{suite_id}@1.0.0")
    rep = raw(host.base_url, "GET", REPORT.format(project_id(run_id)), key=host.key_a)
    assert rep.status == 200, rep.text
    return {"summary": summary_json(host, host.key_a, run_id), "report": rep.json}


def test_each_scorer_passes_and_fails_where_it_should(scored):
    # Given a suite with one task per scorer case, run against the scripted agent
    # When the summary is read
    rows = {t["taskId"]: t for t in scored["summary"]["tasks"]}
    # Then each task passed exactly when its scorer should, scoring 1 or 0
    assert {name: (rows[name]["passed"], rows[name]["score"]) for name, _, _ in CASES} == {
        name: (ok, 1.0 if ok else 0.0) for name, _, ok in CASES
    }
    assert rows["numeric-plain"]["passed"] is True
    # and the weighted all-of scores the weighted share of its parts but fails (a part failed)
    assert (rows["all-of-weighted"]["score"], rows["all-of-weighted"]["passed"]) == (0.75, False)


def test_each_scorers_result_and_reason_reach_the_report(scored):
    # Given the same run
    # When its report is read
    tasks = {t["taskId"]: t for t in scored["report"]["tasks"]}
    # Then every task carries one scorer result per trial, with its strategy, score, pass and reason
    assert all(len(t["scorers"]) == 1 and t["scorers"][0]["trial"] == 1 for t in tasks.values())
    assert tasks["regex-fail"]["scorers"][0] == {
        "trial": 1,
        "strategy": "regex",
        "score": 0.0,
        "passed": False,
        "reason": "the output does not match the pattern",
    }
    assert tasks["schema-fail"]["scorers"][0]["reason"].startswith("the output does not validate: enum at /status")
    assert tasks["path-missing-fail"]["scorers"][0]["reason"] == "the output has no value at '/order/nope'"
    assert tasks["cost-fail"]["scorers"][0]["reason"] == "cost 0 USD is not below 0"
    weighted = tasks["all-of-weighted"]["scorers"][0]
    assert (weighted["strategy"], weighted["score"], weighted["passed"]) == ("all-of", 0.75, False)
    assert weighted["reason"] == "1 of 2 parts passed (failed: json-path)"
    assert [(p["strategy"], p["passed"]) for p in weighted["parts"]] == [("contains", True), ("json-path", False)]


def test_a_bad_pattern_or_schema_is_refused_at_registration(host):
    # Given suites whose regex does not compile, or whose json-schema is not a schema, or a strategy missing its path
    def suite(match: dict[str, Any]) -> dict[str, Any]:
        return {
            "suiteId": f"tests.local.evals.{unique('bad')}",
            "version": "1.0.0",
            "modes": ["golden"],
            "tasks": [_task("t", match)],
        }

    cases = {
        "regex": ({"strategy": "regex", "value": "(unclosed"}, "/tasks/0/expected/match/value"),
        "schema": ({"strategy": "json-schema", "value": {"type": "no-such-type"}}, "/tasks/0/expected/match/value"),
    }
    for name, (match, pointer) in cases.items():
        # When each is registered
        r = put_suite(host, host.key_a, suite(match))
        # Then 400 validation_error names the pointer, never the value
        assert r.status == 400, (name, r.text)
        assert r.json["error"] == "validation_error"
        assert pointer in r.text and "unclosed" not in r.text and "no-such-type" not in r.text
    for match in (
        {"strategy": "json-path", "value": 1},
        {"strategy": "all-of", "value": 1},
        {"strategy": "numeric", "value": "x"},
        {"strategy": "exact", "value": 1, "tolerance": 1},
    ):
        r = put_suite(host, host.key_a, suite(match))
        assert (r.status, r.json["error"]) == (400, "validation_error"), match


def test_the_llm_judge_scores_through_the_model_port_and_a_replay_makes_no_judge_call(host):
    from openwop_client.types import ForkRunRequest

    from tests.integration.test_eval_runs import _ports, eval_request
    from tests.wire import all_events, wait_terminal

    client = host.client(host.key_a)
    suite_id = f"tests.local.evals.{unique('judged')}"
    polite = {"strategy": "judge", "value": "is polite"}
    suite = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": [
            _task(
                "judged-pass",
                {"strategy": "all-of", "of": [{"strategy": "contains", "value": "refund"}, polite]},
                answer="Thank you: your refund is on its way.",
            ),
            _task("judged-fail", polite, answer="Go away."),
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    # Given a judge model that finds only the refund answer polite
    judge = {
        "provider": "mock",
        "model": "judge-1",
        "mockProvider": {
            "script": [{"text": '{"met": [false]}'}],
            "cases": [{"whenInput": "refund is on its way", "script": [{"text": '{"met": [true]}'}]}],
        },
    }
    # When the eval runs with it
    run = client.runs_create(
        eval_request(
            f"{suite_id}@1.0.0", configurable={"version": 1, "extensions": {"openwop-serverless": {"judge": judge}}}
        )
    ).runId
    assert wait_terminal(client, run, timeout=60).status == "completed"
    rows = {t["taskId"]: t for t in summary_json(host, host.key_a, run)["tasks"]}
    # Then the judged task passed, the other failed, and each judge call was logged like any model call
    assert (rows["judged-pass"]["passed"], rows["judged-fail"]["passed"]) == (True, False)
    usage = [e.payload for e in all_events(client, run) if e.type == "provider.usage"]
    assert [u["model"] for u in usage] == ["judge-1", "judge-1"]
    log = _ports().runs.query_aux(run, "MCALL#")
    assert sorted(d["invocationId"] for _, d in log) == ["judge:judged-fail:1", "judge:judged-pass:1"]
    rep = raw(host.base_url, "GET", REPORT.format(project_id(run)), key=host.key_a).json
    tasks = {t["taskId"]: t for t in rep["tasks"]}
    assert tasks["judged-fail"]["scorers"][0]["reason"] == "the judge found the criterion not met"
    assert tasks["judged-pass"]["scorers"][0]["parts"][1] == {
        "strategy": "judge",
        "score": 1.0,
        "passed": True,
        "reason": "the judge found the criterion met",
    }
    # And a replay of the eval re-reads the judgements: 0 judge calls, the same rows
    child = client.runs_fork(run, ForkRunRequest(mode="replay", fromSeq=0)).runId
    assert wait_terminal(client, child, timeout=60).status == "completed"
    assert [d["source"] for _, d in _ports().runs.query_aux(child, "MCALL#")] == ["recorded", "recorded"]
    assert _ports().runs.query_aux(child, "EFFECT#model") == []
    assert summary_json(host, host.key_a, child)["tasks"] == list(rows.values())
