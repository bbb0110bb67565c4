"""A tenant's counter item counts its waiting runs (decision 0176): a release while none wait says so in its own
transaction and reads no queue; while some wait it says so and the queue is read and pumped. Moto-backed: the
slots port on the host table, and ``admission.run_ended`` through the local host's clients."""

from __future__ import annotations

from typing import Any

from shared.ports import Waiting
from tests.helpers import own_calls, unique


def _ports() -> Any:
    from shared.wiring import get_ports

    return get_ports()


def _waiting(run_id: str) -> Waiting:
    return Waiting(run_id=run_id, machine="run", at_ms=_ports().clock.now_ms())


def _counter(tenant: str) -> dict[str, Any]:
    """The tenant's counter item as stored (its ``count`` and ``waiting``)."""
    from shared.storage.ddb import from_item

    ports = _ports()
    key = {"pk": {"S": f"SLOTS#{tenant}"}, "sk": {"S": "count"}}
    raw = ports.slots._c.get_item(TableName=ports.slots._t, Key=key, ConsistentRead=True).get("Item", {})
    return {k: v for k, v in from_item(raw).items() if k in ("count", "waiting")} if raw else {}


def test_a_release_says_whether_runs_wait_and_each_entry_is_counted_once(host):
    slots = _ports().slots
    tenant = unique("tenant-slotq")
    first, second, third = (unique("r-slotq") for _ in range(3))
    # Given a tenant whose one slot is taken, and nobody waiting: the release says free
    assert slots.take(tenant, first, 1) == "taken"
    assert slots.release(tenant, first) == "free"
    assert slots.release(tenant, first) == "none"  # a retry releases nothing
    # Given the slot taken again and a second run queued twice (a sweep queues it again each minute)
    assert slots.take(tenant, first, 1) == "taken"
    queued = _waiting(second)
    slots.put_waiting(tenant, queued, expires_at=0)
    slots.put_waiting(tenant, queued, expires_at=0)
    # Then it is counted once, and the release says runs wait
    assert _counter(tenant) == {"count": 1, "waiting": 1}
    assert slots.release(tenant, first) == "waited"
    assert _counter(tenant) == {"count": 0, "waiting": 1}
    # When the waiting run takes the slot with its entry, it is counted off (once: the entry is gone)
    assert slots.take(tenant, second, 1, waiting=queued) == "taken"
    assert slots.take(tenant, second, 1, waiting=queued) == "gone"
    assert _counter(tenant) == {"count": 1, "waiting": 0}
    assert slots.read_waiting(tenant, 10) == []
    # and a third queued then dropped (twice) leaves none waiting: the next release is free
    dropped = _waiting(third)
    slots.put_waiting(tenant, dropped, expires_at=0)
    slots.drop_waiting(tenant, dropped)
    slots.drop_waiting(tenant, dropped)
    assert _counter(tenant) == {"count": 1, "waiting": 0}
    assert slots.release(tenant, second) == "free"
    assert _counter(tenant) == {"count": 0, "waiting": 0}


def test_a_run_that_ends_while_none_wait_reads_no_queue_and_one_that_ends_while_one_waits_starts_it(host):
    from shared.services.admission import run_ended

    ports = _ports()
    tenant = unique("tenant-slotq-end")
    holder, other = f"{tenant}/{unique('r-hold')}", f"{tenant}/{unique('r-other')}"
    assert ports.slots.take(tenant, holder, 1) == "taken"
    # When the run holding the tenant's only slot ends while none wait
    with own_calls(ports.slots._c) as measure:
        assert measure.run(run_ended, ports, holder) == "released"
    # Then its release was one transaction and no Query read the tenant's queue
    assert measure.counts() == {"dynamodb:TransactWriteItems": 1}, measure.calls
    # When another run holds it and one (whose run is gone: never created) waits
    assert ports.slots.take(tenant, other, 1) == "taken"
    ports.slots.put_waiting(tenant, _waiting(f"{tenant}/{unique('r-gone')}"), expires_at=0)
    with own_calls(ports.slots._c) as measure:
        assert measure.run(run_ended, ports, other) == "released"
    # Then the release read the queue and dropped the entry of the run that is gone
    names = [name for name, _ in measure.calls]
    assert names.count("dynamodb:Query") >= 1, names
    assert ports.slots.read_waiting(tenant, 10) == []
    assert _counter(tenant) == {"count": 0, "waiting": 0}
