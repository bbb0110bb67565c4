"""Fair compute (decision 0160): a tenant past its cap of runs in flight gets its runs written ``pending`` and
started in creation order as its own runs end; never a 429, never a failure; other tenants' runs go on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shared.local.commands import seed
from tests.helpers import eventually, unique
from tests.wire import raw, wait_terminal

CAP = 2


@contextmanager
def runs_in_flight(cap: int) -> Iterator[None]:
    """Each tenant's cap of runs in flight for the block (the local host reads settings per request and task)."""
    from shared.settings import get_settings

    saved = os.environ.get("TENANT_MAX_RUNS_IN_FLIGHT")
    os.environ["TENANT_MAX_RUNS_IN_FLIGHT"] = str(cap)
    get_settings.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TENANT_MAX_RUNS_IN_FLIGHT", None)
        else:
            os.environ["TENANT_MAX_RUNS_IN_FLIGHT"] = saved
        get_settings.cache_clear()


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def _status(run_id: str) -> tuple[str, bool]:
    """The run's stored status and whether its execution was started."""
    rec = _ports().runs.get_run(run_id)
    assert rec is not None
    return rec.status, bool(rec.execution_arn)


def _waiting_approval(run_id: str) -> bool:
    return _status(run_id) == ("waiting-approval", True)


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
            answer = raw(
                host.base_url,
                "POST",
                f"/runs/{_wire(run_id)}/interrupts/gate",
                {"resumeValue": {"action": "accept"}},
                key=key_a,
            )
            assert answer.status == 200, answer.json
            assert wait_terminal(client_a, run_id, timeout=60).status == "completed"
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
