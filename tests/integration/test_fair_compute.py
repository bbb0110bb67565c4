"""Fair compute (decision 0160): a tenant past its cap of runs in flight gets its runs written ``pending`` and
started in creation order as its own runs end; never a 429, never a failure; other tenants' runs go on."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from shared.local.commands import seed
from tests.helpers import eventually, setting, unique
from tests.wire import raw, wait_terminal

CAP = 2


def runs_in_flight(cap: int) -> AbstractContextManager[None]:
    """Each tenant's cap of runs in flight for the block (the local host reads settings per request and task)."""
    return setting("TENANT_MAX_RUNS_IN_FLIGHT", str(cap))


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _status(run_id: str) -> tuple[str, bool]:
    """The run's stored status and whether its execution was started."""
    from tests.helpers import execution_started

    rec = _ports().runs.get_run(run_id)
    assert rec is not None
    return rec.status, execution_started(_ports(), run_id)


def _waiting_approval(run_id: str) -> bool:
    return _status(run_id) == ("waiting-approval", True)


def _accept(host: Any, key: str, run_id: str) -> None:
    """Accept the run's approval (``conformance-approval``'s gate) and wait for it to complete."""
    answer = raw(
        host.base_url, "POST", f"/runs/{_wire(run_id)}/interrupts/gate", {"resumeValue": {"action": "accept"}}, key=key
    )
    assert answer.status == 200, answer.json
    assert wait_terminal(host.client(key), run_id, timeout=60).status == "completed"


def test_runs_past_the_tenant_cap_wait_pending_and_start_in_order_as_its_runs_end(host):
    # Given two fresh tenants and a cap of 2 runs in flight per tenant
    tenant_a, tenant_b = unique("tenant-fair-a"), unique("tenant-fair-b")
    key_a, key_b = unique("key-fair-a"), unique("key-fair-b")
    assert seed({key_a: tenant_a, key_b: tenant_b})
    client_a, client_b = host.client(key_a), host.client(key_b)
    with runs_in_flight(CAP):
        # When A creates 5 runs of a workflow that waits for an approval
        created = [
            raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key_a) for _ in range(5)
        ]
        # Then all 5 are created (201 pending, never 429), 2 run (waiting for their approval) and 3 wait unstarted
        assert [(c.status, c.json["status"]) for c in created] == [(201, "pending")] * 5
        runs = [str(c.json["runId"]) for c in created]
        for run_id in runs[:CAP]:
            eventually(lambda run_id=run_id: _waiting_approval(run_id), timeout=60)
        assert [_status(r) for r in runs[CAP:]] == [("pending", False)] * 3
        assert _ports().slots.in_flight(tenant_a) == CAP
        assert [client_a.runs_get(r).status for r in runs[CAP:]] == ["pending"] * 3
        # and B's run, meanwhile, is started at once and completes
        b_run = raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop"}, key=key_b)
        assert b_run.status == 201
        assert wait_terminal(client_b, b_run.json["runId"], timeout=60).status == "completed"
        # When A's runs end one by one (each approval accepted), its waiting runs start in creation order
        for i, run_id in enumerate(runs):
            eventually(lambda run_id=run_id: _waiting_approval(run_id), timeout=60)
            _accept(host, key_a, run_id)
            following = runs[i + 1 :]
            if len(following) >= CAP:
                # the oldest waiting run took the slot; the ones behind it still wait, unstarted
                nxt = following[CAP - 1]
                eventually(lambda nxt=nxt: _status(nxt)[1], timeout=60)
                assert [_status(r) for r in following[CAP:]] == [("pending", False)] * (len(following) - CAP)
        # Then all 5 completed, none failed, and the tenant's counter is back at 0 with nobody waiting
        assert [client_a.runs_get(r).status for r in runs] == ["completed"] * 5
        eventually(lambda: _ports().slots.in_flight(tenant_a) == 0, timeout=30)
        assert _ports().slots.read_waiting(tenant_a, 10) == []
        assert _ports().slots.holders(tenant_a) == []
        # and B held no slot after its run ended
        assert _ports().slots.in_flight(tenant_b) == 0


def test_a_create_takes_its_slot_in_the_transaction_that_writes_its_run(host):
    # Given a fresh tenant with a cap of 1 run in flight
    import json

    from tests.helpers import naming, requests_sent

    tenant, key = unique("tenant-fair-tx"), unique("key-fair-tx")
    assert seed({key: tenant})
    with runs_in_flight(1), requests_sent(_ports().runs._c, "TransactWriteItems") as sent:
        # When it creates two runs of a workflow that waits for an approval
        first, second = (
            raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key) for _ in range(2)
        )
        eventually(lambda: _waiting_approval(str(first.json["runId"])), timeout=60)
    # Then the first's slot was taken by the transaction that put its run item, with no transaction of its own
    (slot,) = [t for t in naming(sent, str(first.json["runId"])) if "SLOTS#" in json.dumps(t, default=str)]
    puts = [i["Put"]["Item"]["sk"]["S"] for i in slot["TransactItems"] if "Put" in i]
    assert "RUN" in puts and f"run#{first.json['runId']}" in puts
    # and the second, with none free, was written without one and waits, unstarted
    assert _status(str(second.json["runId"])) == ("pending", False)
    assert _ports().slots.holders(tenant) == [first.json["runId"]] and _ports().slots.in_flight(tenant) == 1
    assert [w.run_id for w in _ports().slots.read_waiting(tenant, 10)] == [second.json["runId"]]


def test_a_run_gives_its_slot_back_in_the_transaction_that_ends_it_unless_runs_wait(host):
    # Given a fresh tenant with a cap of 1 run in flight
    import json

    from tests.helpers import naming, requests_sent

    tenant, key = unique("tenant-fair-end"), unique("key-fair-end")
    assert seed({key: tenant})
    client = host.client(key)
    with runs_in_flight(1), requests_sent(_ports().runs._c, "TransactWriteItems") as sent:
        # When a run ends while none of its tenant's runs wait
        run = raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-noop"}, key=key)
        run_id = str(run.json["runId"])
        assert wait_terminal(client, run_id, timeout=60).status == "completed"
        eventually(lambda: _ports().slots.in_flight(tenant) == 0, timeout=30)
        # Then the transaction that appended its end (its run item's status, its last events) gave its slot back:
        # no transaction of its own (decision 0183)
        given = [t for t in naming(sent, run_id) if f"run#{run_id}" in json.dumps(t, default=str)]
        assert len(given) == 2  # its create's take and its end's release
        (end,) = [t for t in given if any("Delete" in i for i in t["TransactItems"])]
        assert any("Put" in i and "runId" in i["Put"]["Item"] for i in end["TransactItems"])
        assert _ports().slots.holders(tenant) == []
        # When a run ends while another waits for its slot
        first, second = (
            raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key) for _ in range(2)
        )
        eventually(lambda: _waiting_approval(str(first.json["runId"])), timeout=60)
        assert _status(str(second.json["runId"])) == ("pending", False)
        _accept(host, key, str(first.json["runId"]))
        # Then it ended without giving the slot back in that transaction, and its release started the waiting run
        eventually(lambda: _waiting_approval(str(second.json["runId"])), timeout=60)
        assert _ports().slots.holders(tenant) == [second.json["runId"]] and _ports().slots.in_flight(tenant) == 1


def test_a_cancelled_run_gives_back_its_slot_once_and_a_waiting_one_starts(host):
    # Given a tenant at its cap of 2 (both waiting for an approval) with a third run waiting for a slot
    tenant, key = unique("tenant-fair-c"), unique("key-fair-c")
    assert seed({key: tenant})
    client = host.client(key)
    with runs_in_flight(CAP):
        runs = [
            str(raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key).json["runId"])
            for _ in range(3)
        ]
        for run_id in runs[:CAP]:
            eventually(lambda run_id=run_id: _waiting_approval(run_id), timeout=60)
        assert _status(runs[2]) == ("pending", False)
        # When the first is cancelled (twice: the second is refused, and releases nothing)
        assert raw(host.base_url, "POST", f"/runs/{_wire(runs[0])}/cancel", {}, key=key).status == 200
        assert raw(host.base_url, "POST", f"/runs/{_wire(runs[0])}/cancel", {}, key=key).status == 409
        # Then the waiting run starts in its place, and the counter counts the two in flight
        eventually(lambda: _waiting_approval(runs[2]), timeout=60)
        assert _ports().slots.in_flight(tenant) == CAP
        assert sorted(_ports().slots.holders(tenant)) == sorted(runs[1:])
        # and a waiting run that is cancelled never starts and holds nothing
        extra = str(raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key).json["runId"])
        assert _status(extra) == ("pending", False)
        assert raw(host.base_url, "POST", f"/runs/{_wire(extra)}/cancel", {}, key=key).status == 200
        assert client.runs_get(extra).status == "cancelled"
        for run_id in runs[1:]:
            raw(host.base_url, "POST", f"/runs/{_wire(run_id)}/cancel", {}, key=key)
        eventually(lambda: _ports().slots.in_flight(tenant) == 0, timeout=30)
        assert _ports().slots.read_waiting(tenant, 10) == []


def held_requests(limit: int) -> AbstractContextManager[None]:
    return setting("TENANT_MAX_HELD_REQUESTS", str(limit))


def _waiting_run(host: Any, key: str) -> tuple[str, int]:
    """A run of the tenant that waits for an approval (no event comes until it is resolved): (id, last sequence)."""
    run_id = str(raw(host.base_url, "POST", "/runs", {"workflowId": "conformance-approval"}, key=key).json["runId"])
    eventually(lambda: _waiting_approval(run_id), timeout=60)
    page = raw(host.base_url, "GET", f"/runs/{_wire(run_id)}/events/poll?afterSequence=0&timeout=1", key=key)
    assert page.status == 200
    return run_id, int(page.json["lastSequence"])


def test_long_polls_past_the_tenant_limit_are_429_and_every_held_one_is_given_back(host):
    import threading

    # Given two tenants, each with a run that waits, and a limit of 2 held polls per tenant
    tenant_a, tenant_b = unique("tenant-held-a"), unique("tenant-held-b")
    key_a, key_b = unique("key-held-a"), unique("key-held-b")
    assert seed({key_a: tenant_a, key_b: tenant_b})
    with held_requests(2):
        run_a, seq_a = _waiting_run(host, key_a)
        run_b, seq_b = _waiting_run(host, key_b)
        poll_a = f"/runs/{_wire(run_a)}/events/poll?afterSequence={seq_a}&timeout=4"
        _early_in_a_minute()
        # When A holds 2 long polls (nothing new comes: each waits its 4 s)
        answers: list[Any] = []
        holders = [
            threading.Thread(target=lambda: answers.append(raw(host.base_url, "GET", poll_a, key=key_a)))
            for _ in range(2)
        ]
        for t in holders:
            t.start()
        eventually(lambda: _held(tenant_a) == 2, timeout=10)
        # Then A's third is refused with the protocol's envelope and a Retry-After
        third = raw(host.base_url, "GET", poll_a, key=key_a)
        assert third.status == 429 and third.json["error"] == "rate_limited", third.text
        assert set(third.json) <= {"error", "message", "details"}
        assert 1 <= int(third.headers["retry-after"]) <= 5
        # and B's poll is held and answered as ever
        poll_b = raw(
            host.base_url, "GET", f"/runs/{_wire(run_b)}/events/poll?afterSequence={seq_b}&timeout=1", key=key_b
        )
        assert poll_b.status == 200 and poll_b.json["events"] == []
        for t in holders:
            t.join(30)
        # and A's held polls were answered (no event: an empty page) and given back: A may hold 2 again
        assert [(a.status, a.json["events"]) for a in answers] == [(200, [])] * 2
        assert _held(tenant_a) == 0 and _held(tenant_b) == 0
        assert raw(host.base_url, "GET", poll_a.replace("timeout=4", "timeout=1"), key=key_a).status == 200
        # and a poll answered at once (events to send) holds nothing
        assert raw(host.base_url, "GET", f"/runs/{_wire(run_a)}/events/poll?afterSequence=0", key=key_a).status == 200
        assert _held(tenant_a) == 0


def test_sse_bodies_past_the_tenant_limit_are_429_and_given_back(host):
    import threading

    from shared.errors import RateLimitedError
    from shared.services import runs
    from shared.services.common import Caller

    # Given a tenant with a run that waits, and a limit of 1 held stream per tenant
    tenant, key = unique("tenant-held-s"), unique("key-held-s")
    assert seed({key: tenant})
    with held_requests(1):
        run_id, seq = _waiting_run(host, key)
        caller = Caller(tenant=tenant, subject_id="held-test")
        bodies: list[tuple[str, bool]] = []
        _early_in_a_minute()
        # When it holds one SSE body (resumed after the last event: it waits its 3 s)
        holder = threading.Thread(
            target=lambda: bodies.append(runs.sse_frames(_ports(), caller, _wire(run_id), {}, str(seq), 3.0))
        )
        holder.start()
        eventually(lambda: _held(tenant, "stream") == 1, timeout=10)
        # Then a second is refused rate_limited with a Retry-After
        refused = None
        try:
            runs.sse_frames(_ports(), caller, _wire(run_id), {}, str(seq), 3.0)
        except RateLimitedError as exc:
            refused = exc
        assert refused is not None and 1 <= refused.retry_after_s <= 5
        holder.join(30)
        # and the held one ended (a keep-alive body) and was given back
        assert bodies == [(": keep-alive\n\n", False)]
        assert _held(tenant, "stream") == 0


def _held(tenant: str, kind: str = "poll") -> int:
    """The tenant's held requests of ``kind`` counted in the current minute (read from the host table)."""
    from shared.services.held import WINDOW_S

    ports = _ports()
    window = ports.clock.now_ms() // 1000 // WINDOW_S
    key = {"pk": {"S": f"SLOTS#{tenant}"}, "sk": {"S": f"held#{kind}#{window}"}}
    item = ports.slots._c.get_item(TableName=ports.settings.host_table, Key=key, ConsistentRead=True).get("Item")
    return int((item or {}).get("count", {"N": "0"})["N"])


def _early_in_a_minute() -> None:
    """Wait for a minute's first 30 s: the held counters are per minute, and a test must not straddle two."""
    eventually(lambda: _ports().clock.now_ms() // 1000 % 60 < 30, timeout=61, interval=0.5)


def test_a_held_poll_and_stream_look_at_the_run_eventually_consistently_after_one_consistent_read(host):
    from shared.services import runs
    from shared.services.common import Caller
    from tests.helpers import own_calls

    # Given a run that waits (no event comes)
    run_id, seq = _waiting_run(host, host.key_a)
    caller = Caller(host.tenant_a, "watch")
    with own_calls(_ports().runs._c) as measure:
        # When a long poll and an SSE body each wait a second on it
        polled = measure.run(
            runs.poll_events, _ports(), caller, _wire(run_id), {"afterSequence": str(seq), "timeout": "1"}
        )
        body, ended = measure.run(runs.sse_frames, _ports(), caller, _wire(run_id), {}, str(seq), 1.0)
    assert polled["events"] == [] and not ended and body == ": keep-alive\n\n"
    # Then each read the run's items once strongly consistent (its start: a 404 for a run that is not there) and
    # every later look eventually consistent, half the read units
    reads = [
        bool(p.get("ConsistentRead"))
        for name, p in measure.calls
        if name == "dynamodb:Query" and p.get("TableName") == _ports().settings.runs_table
    ]
    assert reads[0] is True and reads.count(True) == 2 and len(reads) >= 6, reads
