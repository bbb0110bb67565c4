"""``eval accept``'s own usage rules (shared/cli/evalaccept.py): --answer TASK:CALL=FILE and --reason, checked before
anything is sent (docs/decisions/0146-accept-without-invention.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.cli.evalaccept import body_for, parse_answer
from shared.cli.evalhost import CliError


def test_an_answer_names_a_task_a_call_position_and_a_json_file(tmp_path: Path):
    file = tmp_path / "a.json"
    file.write_text(json.dumps({"ticketId": "T-290"}))
    # A task id may hold a colon: the call position is what follows the last one
    assert parse_answer(f"ns:refund:2={file}") == {"taskId": "ns:refund", "call": 2, "response": {"ticketId": "T-290"}}
    body = body_for("r1", "why", ["refund"], [f"refund:0={file}"], ["other"])
    assert body == {
        "runId": "r1",
        "reason": "why",
        "taskIds": ["refund"],
        "answers": [{"taskId": "refund", "call": 0, "response": {"ticketId": "T-290"}}],
        "dropTaskIds": ["other"],
    }
    assert body_for("r1", "why", [], [], []) == {"runId": "r1", "reason": "why"}


@pytest.mark.parametrize("value", ["refund=a.json", "refund:x=a.json", ":0=a.json", "refund:0=", "refund:-1=a.json"])
def test_a_malformed_answer_is_a_usage_error(value: str):
    with pytest.raises(CliError, match="TASK:CALL=FILE"):
        parse_answer(value)


def test_an_unreadable_answer_file_and_a_blank_reason_are_usage_errors(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CliError, match="not a readable JSON file"):
        parse_answer(f"refund:0={bad}")
    with pytest.raises(CliError, match="not a readable JSON file"):
        parse_answer(f"refund:0={tmp_path / 'missing.json'}")
    with pytest.raises(CliError, match="--reason"):
        body_for("r1", "   ", [], [], [])
