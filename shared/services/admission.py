"""Fair compute: each tenant has at most ``tenant_max_runs_in_flight`` runs started and not ended (decision 0160).

What counts: workflow runs and eval runs (the ``run`` and ``eval`` machines' executions a create starts); a fork
and an external agent's session do not (their creates start their own executions; a session runs no task).

A create takes a slot (``ports.slots``: a counter per tenant, a conditional add) in the transaction that writes
the run (decision 0182), before it starts the run's execution. A tenant with none free gets its run written ``pending`` all the same (a 201, never a 429 and never
a failure): the run waits, its start-outbox marker kept, in its tenant's queue in creation order. A run's slot is
released once when it ends (``run_ended``: the end of its execution's last task, a cancel, an erasure), then, if
runs of its tenant wait (the release says so: decision 0176), the oldest are started while slots are free
(``pump``). The start outbox's sweep is the backstop: it releases the slots of runs that ended without releasing
them and pumps every tenant that has runs waiting (``settle_counted``).
"""

from __future__ import annotations

from shared.ports import Ports, RunRecord, StagedWrite, Waiting
from shared.protocol.ids import tenant_of

COUNTED = ("run", "run_hold", "eval")  # the machines whose runs hold a slot (run_hold: one from before 0191)
PUMP_PAGE = 25  # waiting runs read per Query while slots are free


def cap(ports: Ports) -> int:
    return int(ports.settings.tenant_max_runs_in_flight)


def counts(rec: RunRecord, machine: str) -> bool:
    """Whether the run holds a slot while in flight (workflow and eval runs, not forks or sessions)."""
    return cap_on(machine) and rec.kind != "session" and not rec.data.get("fork")


def cap_on(machine: str) -> bool:
    return machine in COUNTED


def _start(ports: Ports, rec: RunRecord, machine: str) -> None:
    from shared.services import start_outbox as outbox

    outbox.started(ports, rec, ports.orchestrator.start(machine, rec.run_id, outbox.payload_of(ports, rec)))


def stage_take(ports: Ports, rec: RunRecord, machine: str) -> list[StagedWrite]:
    """The slot a create takes in the transaction that writes its run (decision 0182): the take's writes, or none
    when the run holds no slot (not counted, or no cap). ``RunStore.create_run`` refuses them all together
    (``StagedRefusedError``) when the tenant has none free."""
    limit = cap(ports)
    if limit <= 0 or not counts(rec, machine):
        return []
    return ports.slots.stage_take(rec.tenant, rec.run_id, limit)


def stage_release(ports: Ports, run_id: str, *, holds_slot: bool = True) -> list[StagedWrite]:
    """The slot a run gives back in the append that ends it (decision 0183): the release's writes, conditioned on
    its slot held and none of its tenant's runs waiting; none when it holds no slot (``holds_slot`` False: a fork's
    machine says so; or no cap). The run's end then needs no ``run_ended`` unless the append went without them."""
    if not holds_slot or cap(ports) <= 0:
        return []
    return ports.slots.stage_release(tenant_of(run_id), run_id)


def admit(ports: Ports, rec: RunRecord, machine: str, at_ms: int, *, taken: bool | None = None) -> bool:
    """A create's start: True when the run's execution is started; False when its tenant has no free slot and the
    run waits (queued in creation order; its marker stays for the sweep). ``taken``: whether the create's
    transaction took the run's slot (``stage_take``; False: none was free, so it waits); None: take one here."""
    limit = cap(ports)
    if taken or limit <= 0 or not counts(rec, machine):
        _start(ports, rec, machine)
        return True
    if taken is None and ports.slots.take(rec.tenant, rec.run_id, limit) in ("taken", "held"):
        _start(ports, rec, machine)
        return True
    ports.slots.put_waiting(rec.tenant, Waiting(rec.run_id, machine, at_ms), expires_at=rec.expires_at)
    return rec.run_id in pump(ports, rec.tenant)  # a slot freed since the take: the oldest waiting runs go first


def run_ended(ports: Ports, run_id: str, *, holds_slot: bool = True) -> str:
    """A run ended (completed, failed, cancelled, erased): release its slot (at most once, whatever retries) and
    start its tenant's oldest waiting runs while slots are free. ``released`` (it held a slot), ``none`` (it held
    none: not counted, or released before), or ``deferred``: the store or a start failed, and the run's end must
    not fail for it (its task would be retried into FailRun): the sweep releases and starts what is left.
    ``holds_slot`` False (a fork's machine says so: ``counts``): nothing to release and no slot freed, so nothing is
    read or written."""
    if not holds_slot:
        return "none"
    tenant = tenant_of(run_id)
    try:
        released = ports.slots.release(tenant, run_id)
        if released != "free":  # runs wait (or it held none: a retry whose first try may have stopped before)
            pump(ports, tenant)
    except Exception:  # noqa: BLE001 - the sweep's backstop (``settle_counted``) finishes it
        return "deferred"
    return "none" if released == "none" else "released"


def pump(ports: Ports, tenant: str) -> list[str]:
    """Start the tenant's oldest waiting runs while it has free slots; the runs started. A waiting run whose
    machine this process may not start (a run task on AWS holds no machine's ARN) is left to the sweep."""
    from shared.services import start_outbox as outbox

    limit = cap(ports)
    started: list[str] = []
    while True:
        page = ports.slots.read_waiting(tenant, PUMP_PAGE)
        if not page:
            return started
        for waiting in page:
            rec = ports.runs.get_run(waiting.run_id)
            if rec is None or rec.status != "pending":  # erased or cancelled (a start of it is named: idempotent)
                ports.slots.drop_waiting(tenant, waiting)
                continue
            machine = outbox.machine_for(rec, waiting.machine)  # one a build from before 0191 queued: its loop
            if not ports.orchestrator.can_start(machine):
                return started
            taken = "taken" if limit <= 0 else ports.slots.take(tenant, waiting.run_id, limit, waiting=waiting)
            if taken == "full":
                return started
            if taken == "gone":  # another pump took it
                continue
            if taken == "held" or limit <= 0:
                ports.slots.drop_waiting(tenant, waiting)
            _start(ports, rec, machine)
            outbox.after_start(ports, rec)
            started.append(rec.run_id)
        if len(page) < PUMP_PAGE:
            return started


def reconcile(ports: Ports, tenant: str) -> int:
    """The sweep's backstop: release the slots held by runs that ended (or are gone) without releasing them."""
    released = 0
    for run_id in ports.slots.holders(tenant):
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.terminal:
            released += int(ports.slots.release(tenant, run_id) != "none")
    return released


def settle_counted(ports: Ports, rec: RunRecord, machine: str, at_ms: int, reconciled: set[str]) -> bool:
    """The sweep's start of a marked run that counts: True when its execution is started, False when it waits.
    A run holding a slot already (a create cut after its take) starts; any other joins its tenant's queue, whose
    oldest runs start while slots are free (the tenant's leaked slots released first, once per sweep)."""
    if rec.run_id in ports.slots.holders(rec.tenant):
        _start(ports, rec, machine)
        return True
    ports.slots.put_waiting(rec.tenant, Waiting(rec.run_id, machine, at_ms), expires_at=rec.expires_at)
    if rec.tenant not in reconciled:
        reconcile(ports, rec.tenant)
        reconciled.add(rec.tenant)
    return rec.run_id in pump(ports, rec.tenant)
