"""Per-tenant slots for runs in flight (fair compute, decision 0160): a counter per tenant, a slot per run that
holds one, and the runs that wait for a slot in creation order; and each tenant's held requests (long polls, SSE
streams) counted per window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from shared.ports.runs import StagedWrite

# ``taken``: the run holds a slot now; ``held``: it held one already (a retried start); ``full``: the tenant has
# ``cap`` runs in flight; ``gone``: the waiting entry named was already taken or dropped by another pump.
Take = Literal["taken", "held", "full", "gone"]
# ``free``: the run's slot is given back and no run of its tenant waits (nothing to start); ``waited``: given back
# while runs wait (start them); ``none``: the run held no slot (never took one, or a retry of its release).
Release = Literal["free", "waited", "none"]


@dataclass(frozen=True)
class Waiting:
    """A run written ``pending`` and not started because its tenant had no free slot: ``at_ms`` its create's time."""

    run_id: str
    machine: str
    at_ms: int


class RunSlots(Protocol):
    def take(self, tenant: str, run_id: str, cap: int, *, waiting: Waiting | None = None) -> Take:
        """Take one of the tenant's ``cap`` slots for ``run_id`` (one transaction: the counter below ``cap`` plus
        one, the run's slot written once, and ``waiting``'s entry deleted when given)."""
        ...

    def stage_take(self, tenant: str, run_id: str, cap: int) -> list[StagedWrite]:
        """``take``'s writes for the run's creating transaction (``RunStore.create_run``'s ``staged``): the slot is
        taken with the run or not at all; ``StagedRefusedError`` from the create when the tenant has none free."""
        ...

    def stage_release(self, tenant: str, run_id: str) -> list[StagedWrite]:
        """``release``'s writes for the append that ends the run (``EventStore.append_events``' ``staged``), on the
        condition that it holds its slot and none of its tenant's runs wait (``StagedRefusedError`` otherwise: the
        run ends without them, and ``release`` gives the slot back and starts the waiting runs)."""
        ...

    def release(self, tenant: str, run_id: str) -> Release:
        """Give back the run's slot (its slot deleted and the counter minus one, in one transaction), saying whether
        runs of its tenant wait (the counter item counts the waiting entries: no read of the queue when none do);
        ``none`` when it held none (never took one, or already released): a retry releases nothing."""
        ...

    def holders(self, tenant: str) -> list[str]:
        """The run ids that hold a slot of the tenant."""
        ...

    def in_flight(self, tenant: str) -> int:
        """The tenant's counter (a strongly consistent read)."""
        ...

    def put_waiting(self, tenant: str, waiting: Waiting, *, expires_at: int) -> None:
        """Queue the run and count it waiting, in one transaction (idempotent: the entry's key is its create's time
        and its id, written once)."""
        ...

    def read_waiting(self, tenant: str, limit: int) -> list[Waiting]:
        """The tenant's oldest ``limit`` waiting runs, oldest first (a strongly consistent read)."""
        ...

    def drop_waiting(self, tenant: str, waiting: Waiting) -> None:
        """Delete a waiting entry (its run was cancelled, erased or started otherwise) and count it no more."""
        ...

    def hold(self, tenant: str, kind: str, window: int, cap: int, *, expires_at: int) -> bool:
        """Count one held request of ``kind`` started in ``window``: False (nothing written) when the window already
        counts ``cap`` of them (one conditional update)."""
        ...

    def unhold(self, tenant: str, kind: str, window: int) -> None:
        """The held request of ``window`` ended: its count minus one."""
        ...
