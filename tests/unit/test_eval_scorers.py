"""The golden scorers (decision 0114), pure: score, pass and reason per strategy, negation, weighting, facts."""

from __future__ import annotations

import pytest

from shared.engine import grading
from shared.engine.jsondiff import resolve
from shared.engine.scorers import Facts, problems, score

OUT = {"a": {"b/c": [1, 2.5, "x"], "~k": True}, "n": "7.25"}


@pytest.mark.parametrize(
    ("match", "output", "ok"),
    [
        ({"strategy": "regex", "value": r"^\d{3}$"}, "123", True),
        ({"strategy": "regex", "value": r"^\d{3}$"}, "1234", False),
        ({"strategy": "regex", "value": r'"n":"7'}, OUT, True),  # the stringified (canonical JSON) output
        ({"strategy": "json-schema", "value": {"type": "object", "required": ["a"]}}, OUT, True),
        ({"strategy": "json-schema", "value": {"type": "array"}}, '{"a": 1}', False),  # a JSON string is parsed
        ({"strategy": "json-schema", "value": False}, 1, False),
        ({"strategy": "json-path", "path": "/a/b~1c/1", "value": 2.5}, OUT, True),
        ({"strategy": "json-path", "path": "/a/~0k", "value": True}, OUT, True),
        ({"strategy": "json-path", "path": "/a/b~1c/01", "value": 2.5}, OUT, False),  # no leading zeros
        ({"strategy": "json-path", "path": "/a/b~1c", "op": "contains", "value": "x"}, OUT, True),
        ({"strategy": "json-path", "path": "/a", "op": "contains", "value": {"~k": True}}, OUT, True),
        ({"strategy": "json-path", "path": "/a/b~1c", "op": "contains", "value": 3}, OUT, False),
        ({"strategy": "numeric", "path": "/n", "value": 7.2, "tolerance": 0.05}, OUT, True),
        ({"strategy": "numeric", "path": "/n", "value": 7.2, "tolerance": 0.04}, OUT, False),
        ({"strategy": "numeric", "value": 3}, 3.0, True),
        ({"strategy": "numeric", "value": 1}, True, False),  # a boolean is not a number
        ({"strategy": "numeric", "value": 1}, "NaN", False),
        ({"strategy": "not-exact", "value": "a"}, "b", True),
        ({"strategy": "not-json-match", "value": {"x": 1}}, '{"x": 1}', False),
        ({"strategy": "not-json-path", "path": "/missing", "value": 1}, OUT, True),
    ],
)
def test_each_strategy_passes_and_fails_where_it_should(match, output, ok):
    # Given a match and an output / When scored / Then pass and a 0-or-1 score agree
    got = score(match, output)
    assert (got.passed, got.score) == (ok, 1.0 if ok else 0.0)
    assert got.strategy == match["strategy"] and got.reason


def test_cost_and_latency_are_strictly_below_from_the_trials_facts():
    facts = Facts(cost_usd=0.02, latency_ms=150)
    assert score({"strategy": "cost-below", "value": 0.03}, "x", facts).passed
    assert not score({"strategy": "cost-below", "value": 0.02}, "x", facts).passed
    assert score({"strategy": "latency-below", "value": 151}, "x", facts).reason == "latency 150 ms is below 151"
    assert not score({"strategy": "latency-below", "value": 150}, "x", facts).passed
    assert score({"strategy": "cost-below", "value": 0.001}, "x").passed  # no model call: cost 0


def test_all_of_weights_the_score_and_passes_only_when_every_part_does():
    match = {
        "strategy": "all-of",
        "of": [
            {"strategy": "contains", "value": "a", "weight": 0.5},
            {
                "strategy": "all-of",
                "weight": 1.5,
                "of": [{"strategy": "regex", "value": "b"}, {"strategy": "not-contains", "value": "z"}],
            },
        ],
    }
    assert (score(match, "ab").score, score(match, "ab").passed) == (1.0, True)
    got = score(match, "a")
    assert (got.score, got.passed) == (0.5 * 1 / 2 + 1.5 * 0.5 / 2, False)
    doc = got.doc()
    assert doc["parts"][1]["parts"][0] == {
        "strategy": "regex",
        "score": 0.0,
        "passed": False,
        "reason": "the output does not match the pattern",
    }
    zero = {
        "strategy": "all-of",
        "of": [{"strategy": "exact", "value": "a", "weight": 0}, {"strategy": "exact", "value": "b", "weight": 0}],
    }
    assert score(zero, "a").score == 0.5  # all weights 0: equal weights


def test_a_trial_grade_carries_the_scorers_reason_and_a_trajectory_failure_zeroes_it():
    task = {
        "taskId": "t",
        "input": {},
        "trajectory": {"calls": [{"tool": "t:a"}]},
        "expected": {"kind": "golden", "match": {"strategy": "regex", "value": "ok"}},
    }
    good = grading.grade_trial(task, True, "ok", [{"tool": "t:a", "args": {}}], 0)
    assert (good.score, good.passed, good.scorer["reason"]) == (1.0, True, "the output matches the pattern")
    bad = grading.grade_trial(task, True, "ok", [{"tool": "t:b", "args": {}}], 0)
    assert (bad.score, bad.passed) == (0.0, False)
    assert bad.scorer["reason"] == "the output matches the pattern; the trajectory does not match"
    miss = grading.grade_trial(task, True, "ok", [], 1)
    assert miss.scorer == {
        "strategy": "regex",
        "score": 0.0,
        "passed": False,
        "reason": "a tool call missed its fixtures",
    }


def test_rfc6901_pointers_resolve_and_refuse_what_is_not_there():
    assert resolve(OUT, "") == (True, OUT)
    assert resolve(OUT, "/a/b~1c/2") == (True, "x")
    assert resolve(OUT, "/a/b~1c/3") == (False, None)
    assert resolve(OUT, "/a/b~1c/-") == (False, None)
    assert resolve(OUT, "a") == (False, None)
    assert resolve(OUT, "/n/0") == (False, None)


@pytest.mark.parametrize(
    ("match", "member"),
    [
        ({"strategy": "all-of", "value": 1}, "of"),
        ({"strategy": "exact", "value": 1, "of": [{"strategy": "exact", "value": 1}]}, "of"),
        ({"strategy": "exact"}, "value"),
        ({"strategy": "tool", "value": 1}, "tool"),
        ({"strategy": "exact", "value": 1, "tool": "a.b:c"}, "tool"),
        ({"strategy": "json-path", "value": 1}, "path"),
        ({"strategy": "regex", "value": "x", "path": "/a"}, "path"),
        ({"strategy": "exact", "value": 1, "op": "contains"}, "op"),
        ({"strategy": "json-path", "path": "/a", "value": 1, "tolerance": 1}, "tolerance"),
        ({"strategy": "numeric", "value": "1"}, "value"),
        ({"strategy": "cost-below", "value": -1}, "value"),
        ({"strategy": "regex", "value": 1}, "value"),
        ({"strategy": "judge", "value": ""}, "value"),
        ({"strategy": "json-schema", "value": []}, "value"),
        ({"strategy": "regex", "value": "(unclosed"}, "value"),
        ({"strategy": "not-json-schema", "value": {"type": "nope"}}, "value"),
    ],
)
def test_the_members_a_strategy_takes_are_checked_by_pointer(match, member):
    # Given a match with a member its strategy does not take (or lacks one it needs) / When checked
    # Then one problem names the member's pointer, never the value
    found = problems(match, "/tasks/0/expected/match")
    assert [p["pointer"] for p in found] == [f"/tasks/0/expected/match/{member}"]
    assert all(set(p) == {"pointer", "keyword", "message"} and p["message"] for p in found)
    assert "unclosed" not in str(found)
    assert (
        problems(
            {
                "strategy": "all-of",
                "of": [{"strategy": "numeric", "path": "/n", "value": 1, "tolerance": 0.5, "weight": 2}],
            },
            "",
        )
        == []
    )


def test_an_mcp_scorer_answers_in_its_call_tool_result() -> None:
    from shared.engine.toolscorer import read_answer

    answer = {"score": 0.5, "pass": False, "reason": "half"}
    # Given the same answer as an MCP result's structuredContent, as its JSON text content, and an HTTP body
    structured = {"content": [{"type": "text", "text": "{}"}], "structuredContent": answer, "isError": False}
    text = {"content": [{"type": "text", "text": '{"score": 0.5, "pass": false, "reason": "half"}'}]}
    # Then each reads as the tool's answer
    for result in (structured, text, answer):
        got = read_answer("ok", result, None)
        assert (got.score, got.passed, got.reason) == (0.5, False, "half")
    # and an isError result, or a text that is not the answer, fails the trial with a reason
    errored = read_answer("ok", {"content": [{"type": "text", "text": "boom"}], "isError": True}, None)
    assert (errored.score, errored.passed, errored.reason) == (
        0.0,
        False,
        "the scorer tool answered with an error (isError)",
    )
    prose = read_answer("ok", {"content": [{"type": "text", "text": "looks fine"}]}, None)
    assert (prose.passed, prose.reason) == (False, "the scorer tool's answer is not {score, pass, reason}")
