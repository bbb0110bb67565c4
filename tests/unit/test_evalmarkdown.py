"""The pull-request comment's markdown: cells and code spans that a task id or a value cannot break."""

from __future__ import annotations

from shared.cli.evalmarkdown import expected_actual, markdown


def _rep() -> dict:
    div = {
        "trial": 1,
        "step": 0,
        "kind": "tool-arguments",
        "pointers": ["/q"],
        "baseline": {"type": "tool-call", "tool": "t", "args": {"q": "x`y"}},
        "candidate": {"type": "tool-call", "tool": "t", "args": {"q": "z"}},
    }
    return {
        "runId": "tenant-a/r-2",
        "verdict": "regressed",
        "exitCode": 1,
        "suiteId": "s.x",
        "suiteVersion": "2.0.0",
        "aggregateScore": 0.5,
        "baselineRunId": None,
        "tasks": [
            {
                "taskId": "a|b",
                "baselineScore": None,
                "score": 0.0,
                "trials": {"passed": 0, "total": 1},
                "fixtureMissCount": 0,
                "verdict": "regressed",
                "divergence": div,
            },
            {
                "taskId": "ok",
                "baselineScore": None,
                "score": 1.0,
                "trials": None,
                "fixtureMissCount": 0,
                "verdict": "passed",
                "divergence": None,
            },
        ],
    }


def test_a_pipe_in_a_task_id_is_escaped_in_the_table_and_a_backtick_never_ends_a_code_span() -> None:
    # Given a task id with a pipe and an argument value with a backtick
    text = markdown(_rep())
    lines = text.splitlines()
    # Then the table row keeps its six cells and the divergence line keeps one code span
    assert "| a\\|b | - | 0.00 | 0/1 | 0 | regressed |" in lines
    assert "| ok | - | 1.00 | - | 0 | passed |" in lines
    line = next(ln for ln in lines if ln.startswith("- **a|b**"))
    assert line.count("`") == 2 and "x'y" in line
    # and without --viewer-url there is no link
    assert "](" not in text and "no baseline" in lines[2]


def test_expected_vs_actual_reads_the_golden_value_and_each_trials_answer() -> None:
    task = {
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "the answer"}},
        "trialResults": [{"trial": 1, "actual": "a"}, {"trial": 2, "actual": {"k": 1}}],
    }
    assert expected_actual(task) == 'expected "the answer", actual "a" / {"k":1}'
    assert expected_actual({"taskId": "x"}) == "expected -, actual -"


def test_would_match_with_is_pasteable_json_ignore_and_tolerance_first_anyof_as_the_alternative() -> None:
    from shared.cli.evalmarkdown import miss_text, would_match_with

    # Given misses with every kind of rule, with ignore only (a content-free trial), and with none
    both = {
        "tool": "t",
        "differingPointers": ["/amount", "/at"],
        "closest": {"index": 0},
        "wouldMatchWith": {"ignore": ["/at"], "tolerance": {"/amount": 0.5}, "anyOf": {"/at": ["x`y"]}},
    }
    plain = {"tool": "t", "differingPointers": ["/at"], "closest": {"index": 0}, "wouldMatchWith": {"ignore": ["/at"]}}
    # Then the rules read as fixtureMatching JSON, anyOf after "or"; nothing is appended without rules
    assert would_match_with(both) == (
        '; would match with {"ignore":["/at"],"tolerance":{"/amount":0.5}} or {"anyOf":{"/at":["x`y"]}}'
    )
    assert miss_text(plain) == 't differs at /at; would match with {"ignore":["/at"]}'
    assert miss_text({"tool": "t", "closest": None}) == "t differs at -"
    # and in the comment a backtick in a value never ends the miss's code span
    rep = _rep()
    rep["tasks"][0]["fixtureMisses"] = [{**both, "trial": 1}]
    line = next(ln for ln in markdown(rep).splitlines() if ln.startswith("  - fixture miss"))
    assert line.count("`") == 2 and '"x\'y"' in line
