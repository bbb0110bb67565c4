"""How a call's args match a recorded fixture entry: exact by default, relaxed by ``fixtureMatching`` (issue 25)."""

from __future__ import annotations

from shared.engine.matching import MISSING, args_match, resolve, rules_for, would_match
from shared.engine.tools import FixturePlan


def test_without_rules_the_match_is_exact() -> None:
    # Given recorded args and a call that differs only in a timestamp
    recorded = {"customerId": "c-1", "at": "2026-01-01T00:00:00Z"}
    call = {"customerId": "c-1", "at": "2026-12-04T03:00:00Z"}
    # Then the official default refuses it, and equal args (1 == 1.0) match
    assert args_match(recorded, call, None) is False
    assert args_match({"n": 1}, {"n": 1.0}, None) is True


def test_ignore_covers_a_pointer_and_everything_under_it() -> None:
    recorded = {"customerId": "c-1", "meta": {"at": "t1", "requestId": "r1"}}
    # When the rules ignore /meta, a call differing anywhere under it matches
    assert (
        args_match(recorded, {"customerId": "c-1", "meta": {"at": "t2", "requestId": "r2"}}, {"ignore": ["/meta"]})
        is True
    )
    # and one differing elsewhere does not
    assert args_match(recorded, {"customerId": "c-2", "meta": {"at": "t2"}}, {"ignore": ["/meta"]}) is False
    # a pointer deeper than the difference (one side lacks /meta) does not cover it
    assert args_match(recorded, {"customerId": "c-1"}, {"ignore": ["/meta/at"]}) is False


def test_tolerance_bounds_a_numeric_difference_and_never_matches_a_non_number() -> None:
    rules = {"tolerance": {"/amount": 0.5}}
    assert args_match({"amount": 10}, {"amount": 10.5}, rules) is True
    assert args_match({"amount": 10}, {"amount": 10.51}, rules) is False
    assert args_match({"amount": 10}, {"amount": "10"}, rules) is False
    assert args_match({"amount": 1}, {"amount": True}, rules) is False


def test_any_of_accepts_a_listed_value_at_the_pointer() -> None:
    rules = {"anyOf": {"/region": ["eu", {"zone": "us-1"}]}}
    assert args_match({"region": "us"}, {"region": "eu"}, rules) is True
    assert args_match({"region": "us"}, {"region": {"zone": "us-1"}}, rules) is True
    assert args_match({"region": "us"}, {"region": "ap"}, rules) is False


def test_the_plan_matches_under_its_rules_and_keeps_them_per_trial() -> None:
    # Given a plan with one entry and rules ignoring /at
    plan = FixturePlan([{"tool": "t", "args": {"id": 1, "at": "x"}, "response": {"ok": 1}}], rules={"ignore": ["/at"]})
    # When a fresh trial's plan takes a call with another timestamp
    fresh = plan.fresh()
    # Then the entry is served once, and again in the next trial
    assert fresh.take("t", {"id": 1, "at": "y"}) == {"tool": "t", "args": {"id": 1, "at": "x"}, "response": {"ok": 1}}
    assert fresh.take("t", {"id": 1, "at": "y"}) is None
    assert plan.fresh().take("t", {"id": 1, "at": "z"}) is not None


def test_live_read_only_goes_live_only_for_a_read_only_tier() -> None:
    plan = FixturePlan([], "live-read-only")
    assert [plan.goes_live(t) for t in ("pure", "read", "write", "exec")] == [True, True, False, False]
    assert FixturePlan([], "fail").goes_live("read") is False
    assert FixturePlan([], "live").goes_live("write") is True


def test_would_match_names_the_rules_per_pointer_and_no_recorded_value() -> None:
    # Given a call that differs from its recorded entry in a string, a number, an added and a dropped argument
    recorded = {"id": "c-1", "at": "t1", "amount": 10, "gone": True}
    call = {"id": "c-1", "at": "t2", "amount": 12.5, "opts": {"limit": 2}}
    got = would_match(recorded, call)
    # Then ignore + tolerance cover every pointer, and anyOf offers the call's value wherever it has one
    assert got == {
        "ignore": ["/at", "/gone", "/opts"],
        "tolerance": {"/amount": 2.5},
        "anyOf": {"/amount": [12.5], "/at": ["t2"], "/opts": [{"limit": 2}]},
    }
    # and each suggestion, used as the rules, does match (anyOf with ignore only where the call dropped a value)
    assert args_match(recorded, call, {k: got[k] for k in ("ignore", "tolerance")})
    assert args_match(recorded, call, {"anyOf": got["anyOf"], "ignore": ["/gone"]})
    assert not args_match(recorded, call, {"anyOf": got["anyOf"]})
    assert "t1" not in str(got) and 10 not in got["anyOf"]["/amount"]  # no recorded value
    # and a content-free trial gets pointers only
    assert would_match(recorded, call, bounds=False) == {"ignore": ["/amount", "/at", "/gone", "/opts"]}
    assert would_match(recorded, recorded) == {}


def test_task_rules_replace_the_suites() -> None:
    suite = {"fixtureMatching": {"ignore": ["/a"]}}
    assert rules_for(suite, {}) == {"ignore": ["/a"]}
    assert rules_for(suite, {"fixtureMatching": {"ignore": ["/b"]}}) == {"ignore": ["/b"]}
    assert rules_for({}, {}) is None
    assert resolve({"a/b": [1, {"~": 2}]}, "/a~1b/1/~0") == 2
    assert resolve({"a": 1}, "/b") is MISSING
