"""The storage under a gateway call's two writes (decision 0149), on moto: an ordinal claimed at an expected value with
its effect's intent, and an append that writes a staged record and claims an ordinal with its events, all or
nothing."""

from __future__ import annotations

import pytest

from shared.errors import ConflictError, OrdinalTakenError
from shared.ports import RunRecord, ToolCallRecord
from tests.helpers import unique


@pytest.fixture()
def ports(local_aws):
    from shared.wiring import get_ports

    return get_ports()


def _run(ports) -> RunRecord:
    rec = RunRecord(
        run_id=f"tenant-c/{unique('r-claims')}",
        tenant="tenant-c",
        status="running",
        last_seq=-1,
        created_at=ports.clock.iso(),
        data={"kind": "session", "owner": {"tenant": "tenant-c"}},
        expires_at=ports.clock.now_ms() // 1000 + 3600,
    )
    ports.runs.create_run(rec)
    return rec


def _record(run_id: str, index: int) -> ToolCallRecord:
    key = f"{1:012d}#{index:05d}"
    return ToolCallRecord(run_id, key, "a", "s:0", False, "t", f"s:0#{index}", {"i": index}, "ok", result=index)


def _event(ports, run_id: str, seq: int) -> dict:
    return {
        "eventId": ports.ids.event_id(run_id, seq),
        "runId": run_id,
        "type": "agent.tool-called",
        "payload": {"seq": seq},
        "timestamp": ports.clock.iso(),
        "sequence": seq,
        "schemaVersion": 1,
    }


def test_an_ordinal_is_claimed_once_at_its_value_with_its_effects_intent(ports):
    rec = _run(ports)
    # When ordinal 0 is claimed with an effect's intent
    ports.runs.claim_ordinal(
        rec.run_id, "toolCalls", 0, require_status=("running",), effect=("call#k0", {"at": "t0"}, rec.expires_at)
    )
    # Then the run reads its next ordinal, and the ledger holds the intent
    assert ports.runs.get_run(rec.run_id).counters == {"toolCalls": 1}
    assert ports.runs.get_aux(rec.run_id, "EFFECT#call#k0") == {"at": "t0"}
    # And claiming 0 again is refused with the next ordinal, writing nothing
    with pytest.raises(OrdinalTakenError) as taken:
        ports.runs.claim_ordinal(
            rec.run_id, "toolCalls", 0, require_status=("running",), effect=("call#k0b", {"at": "t1"}, 0)
        )
    assert taken.value.current == 1
    assert ports.runs.get_aux(rec.run_id, "EFFECT#call#k0b") is None
    # And once the run has ended, no ordinal is claimed at all
    assert ports.runs.update_status(rec.run_id, "completed", allowed_from=("running",))
    with pytest.raises(ConflictError) as ended:
        ports.runs.claim_ordinal(rec.run_id, "toolCalls", 1, require_status=("running",))
    assert not isinstance(ended.value, OrdinalTakenError)
    assert ports.runs.get_run(rec.run_id).counters == {"toolCalls": 1}


def test_an_append_writes_its_staged_record_and_claims_its_ordinal_all_or_nothing(ports):
    rec = _run(ports)
    # When an append carries a staged record and claims ordinal 0
    staged = [ports.tool_calls.stage_call(_record(rec.run_id, 0), rec.expires_at)]
    ports.events.append_events(
        rec.run_id, 0, [_event(ports, rec.run_id, 0)], require_status=("running",), staged=staged, claim=("t", 0)
    )
    # Then the event, the record and the ordinal are all written
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == [0]
    assert ports.tool_calls.get_call(rec.run_id, f"{1:012d}#00000").args == {"i": 0}
    assert ports.runs.get_run(rec.run_id).counters == {"t": 1}
    # And an append claiming a taken ordinal writes nothing: no event, no record
    staged = [ports.tool_calls.stage_call(_record(rec.run_id, 1), rec.expires_at)]
    with pytest.raises(ConflictError):
        ports.events.append_events(
            rec.run_id, 1, [_event(ports, rec.run_id, 1)], require_status=("running",), staged=staged, claim=("t", 0)
        )
    assert [e["sequence"] for e in ports.events.read_events(rec.run_id)] == [0]
    assert ports.tool_calls.get_call(rec.run_id, f"{1:012d}#00001") is None
    # And a staged model-call entry rides an append the same way
    entry = ports.runs.stage_aux(rec.run_id, "MCALL#000000000001#0000", {"turn": 0}, rec.expires_at)
    ports.events.append_events(rec.run_id, 1, [_event(ports, rec.run_id, 1)], staged=[entry])
    assert ports.runs.get_aux(rec.run_id, "MCALL#000000000001#0000") == {"turn": 0}
    assert ports.runs.get_run(rec.run_id).last_seq == 1
