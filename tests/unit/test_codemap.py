"""The era-2 reader (shared/protocol/codemap.py): a v1 row read as v2 through the vendored official codemap."""

from __future__ import annotations

import pytest

from shared.errors import EventTypeUnmappedError
from shared.protocol.codemap import legacy_owner, translate, v1_to_v2

OWNER = legacy_owner("tenant-a", "key-1")


def test_the_vendored_codemap_is_the_official_bijection() -> None:
    # Given the vendored rows
    mapping = v1_to_v2()
    # Then there are the official 117, one to one, with the renamed rows as the spec decides them
    assert len(mapping) == 117 and len(set(mapping.values())) == 117
    assert mapping["agent.toolCalled"] == "agent.tool-called"
    assert mapping["run.resuming"] == "run.resume-started"
    assert mapping["core.dispatch.fanOut"] == "dispatch.fanned-out"
    assert mapping["runOrchestrator.decided"] == "orchestrator.decided"


def test_a_row_keeps_everything_but_its_type() -> None:
    row = {
        "eventId": "e" * 20,
        "runId": "t/r",
        "type": "agent.toolReturned",
        "sequence": 0,
        "causationId": "c1",
        "timestamp": "2026-01-15T10:00:02.000Z",
        "payload": {"callId": "call-0001", "status": "ok"},
        "x-v": 1,
    }
    # When it is read, then only the type changes (sequence 0 included)
    assert translate(row, OWNER) == {**row, "type": "agent.tool-returned"}


def test_run_started_without_a_subject_carries_the_legacy_subject() -> None:
    got = translate({"type": "run.started", "sequence": 0, "payload": {"workflowId": "w"}}, OWNER)
    assert got["payload"] == {
        "workflowId": "w",
        "owner": {
            "tenant": "tenant-a",
            "subject": {
                "issuer": "urn:openwop:legacy",
                "subjectId": "key-1",
                "tenant": "tenant-a",
                "lane": "api-key",
                "kind": "user",
            },
        },
    }
    # and a run.started that had a Subject keeps its own
    own = {
        "tenant": "tenant-a",
        "subject": {"issuer": "urn:idp", "subjectId": "u", "tenant": "tenant-a", "lane": "oidc", "kind": "user"},
    }
    kept = translate({"type": "run.started", "sequence": 0, "payload": {"owner": own}}, OWNER)
    assert kept["payload"]["owner"] == own


@pytest.mark.parametrize(
    "row",
    [
        {"type": "bogus.thing", "sequence": 1, "payload": {}},
        {"type": "openwop.custom", "sequence": 1, "payload": {}},  # no vendor org is registered here
        {"type": "run.started", "sequence": "0", "payload": {}},
        {"type": "run.started", "sequence": -1, "payload": {}},
        {"type": "run.started", "sequence": 0},
        ["run.started"],
    ],
)
def test_an_unmapped_or_malformed_row_fails_the_read(row) -> None:
    with pytest.raises(EventTypeUnmappedError) as exc:
        translate(row, OWNER)
    assert exc.value.code == "event_type_unmapped" and exc.value.status == 500
