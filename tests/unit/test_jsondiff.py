"""RFC 6901 pointers where two JSON values differ, and the closest recorded call of a fixture miss."""

from __future__ import annotations

from shared.engine.jsondiff import differing_pointers, escape
from shared.services.eval_report import closest, task_verdict


def test_pointers_name_each_differing_leaf_with_escaped_tokens() -> None:
    a = {"op": "inc", "key": "k1", "a/b": 1, "t~": [1, 2, {"x": True}], "same": {"n": 1}}
    b = {"op": "inc", "key": "k2", "a/b": 2, "t~": [1, 3, {"x": 1}, 4], "same": {"n": 1.0}, "extra": None}
    assert differing_pointers(a, b) == ["/a~1b", "/extra", "/key", "/t~0/1", "/t~0/2/x", "/t~0/3"]
    assert differing_pointers({"k": 1}, {"k": 1}) == []
    assert differing_pointers({"k": 1}, [1]) == [""]
    assert differing_pointers(None, {"k": 1}) == [""]
    assert escape("~/") == "~0~1"


def test_closest_prefers_the_same_tool_then_the_fewest_differences() -> None:
    entries = [
        {"tool": "other", "args": {"key": "k2", "op": "inc"}},
        {"tool": "counter", "args": {"key": "k1", "op": "read"}},
        {"tool": "counter", "args": {"key": "k1", "op": "inc"}},
    ]
    assert closest("counter", {"key": "k2", "op": "inc"}, entries) == (2, ["/key"])
    assert closest("nope", {"key": "k2", "op": "inc"}, entries) == (0, [])
    assert closest("counter", {}, []) is None


def test_task_verdicts() -> None:
    assert task_verdict(0.0, 1.0, 0, True) == "regressed"
    assert task_verdict(1.0, 0.5, 0, True) == "improved"
    assert task_verdict(1.0, 1.0 + 1e-12, 0, True) == "unchanged"
    assert task_verdict(1.0, None, 0, True) == "unpaired"
    assert task_verdict(1.0, 1.0, 1, True) == "unverifiable"
    assert (task_verdict(1.0, None, 0, False), task_verdict(0.5, None, 0, False)) == ("passed", "failed")
