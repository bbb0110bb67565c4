"""The run-lifecycle request bodies (shared.protocol.models): closed, strict, and the served OpenAPI document that
names them is the one generated from them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.protocol.models import (
    CreateRunRequest,
    ForkRunRequest,
    PauseRunRequest,
    RunOptionsOverlay,
    dump,
    parse,
    present,
)
from shared.services import openapi


@pytest.mark.parametrize(
    "body",
    [
        {"bogus": 1},  # closed at the top
        {"configurable": {"version": 1, "run": {"bogus": 1}}},  # and in every nested body
        {"configurable": {"run": {}}},  # version is required
        {"configurable": {"version": True}},  # true is not 1
        {"configurable": {"version": 1.0}},  # nor is 1.0
        {"configurable": {"version": 1, "run": {"recursionLimit": "3"}}},  # no number from a string
        {"configurable": {"version": 1, "run": {"recursionLimit": 2.0}}},  # an integer refuses a float
        {"configurable": {"version": 1, "run": {"recursionLimit": 0}}},  # ge=1
        {"configurable": {"version": 1, "ai": {"temperature": 2.5}}},  # le=2
        {"configurable": {"version": 1, "ai": {"temperature": False}}},
        {"workflowId": "flow\n"},  # the pattern holds to the end of the text
        {"workflowId": ""},
        {"workflowId": "x" * 129},
        {"workflowId": 7},
        {"tags": ["x" * 257]},
        {"tags": ["x"] * 101},
        {"mode": "live"},
    ],
)
def test_a_create_body_that_does_not_fit_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        parse(body, CreateRunRequest)


def test_a_fitting_body_reads_as_sent() -> None:
    req = parse(
        {
            "workflowId": "a.b:c~d-e_f",
            "configurable": {"version": 1, "ai": {"temperature": 1}, "extensions": {"x": {"k": None}}},
            "tags": ["t"] * 100,
            "fixtureRuns": {"t": "r"},
        },
        CreateRunRequest,
    )
    assert req.workflowId == "a.b:c~d-e_f" and req.tags == ["t"] * 100 and req.fixtureRuns == {"t": "r"}
    assert req.configurable is not None and req.configurable.ai is not None
    assert req.configurable.ai.temperature == 1.0 and isinstance(req.configurable.ai.temperature, float)
    # present: the fields that are set, nested bodies alike; values inside plain objects as sent
    assert present(req.configurable) == {"version": 1, "ai": {"temperature": 1.0}, "extensions": {"x": {"k": None}}}
    # dump: every field in declaration order, None included (the idempotency fingerprint)
    got = dump(parse({"reason": None}, PauseRunRequest))
    assert list(got.items()) == [("reason", None), ("drainPolicy", None)]
    assert dump(parse({}, PauseRunRequest)) == got


def test_fork_mode_is_required_and_an_empty_overlay_is_nothing() -> None:
    with pytest.raises(msgspec.ValidationError):
        parse({"fromSeq": 0}, ForkRunRequest)
    req = parse({"mode": "replay", "fromSeq": 0, "runOptionsOverlay": {"tags": None}}, ForkRunRequest)
    assert isinstance(req.runOptionsOverlay, RunOptionsOverlay) and present(req.runOptionsOverlay) == {}


def test_the_stored_openapi_document_is_the_generated_one() -> None:
    """``make openapi`` regenerates shared/services/openapi.json; this fails when it was not run after a change."""
    from importlib import resources

    stored = (resources.files("shared.services") / openapi.STORED).read_text("utf-8")
    assert stored == openapi.stored_text()
    create = openapi.document()["components"]["schemas"]["CreateRunRequest"]
    assert create["additionalProperties"] is False
    assert create["properties"]["workflowId"]["anyOf"][0]["pattern"] == "^[A-Za-z0-9._~:-]{1,128}$"
