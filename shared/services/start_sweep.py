"""The start outbox's sweep: every marker older than the grace period is settled, its run started or failed.

Run by the scheduled ``sweep_starts`` function on AWS and, with no grace, by the resume at startup locally
(``shared.local.resume``). What a marker is and how a create writes it: ``start_outbox``; decision 0150.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.ports import PendingStart, Ports
from shared.services import admission
from shared.services.start_outbox import fail_unstarted, machine_of, payload_of, plan_missing, started


@dataclass
class Swept:
    started: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)  # already started, finished or gone: only the marker was left
    queued: list[str] = field(default_factory=list)  # waiting for a slot of their tenant: the marker stays
    errors: dict[str, str] = field(default_factory=dict)  # run id -> error class: left for the next sweep

    @property
    def settled(self) -> set[str]:
        return {*self.started, *self.failed, *self.cleared}


def settle(ports: Ports, start: PendingStart, reconciled: set[str] | None = None) -> str:
    """Start or fail one marked run, then clear its marker: ``started``, ``failed`` or ``cleared``; or ``queued``
    (a run that waits for a slot of its tenant keeps its marker: decision 0160). ``reconciled``: the tenants whose
    leaked slots this sweep has released already."""
    rec = ports.runs.get_run(start.run_id)
    # the machine its run executes on now, not the marker's (a session's marker from before decision 0189 names "run")
    machine = "" if rec is None else machine_of(rec)
    outcome = "cleared"
    if rec is None or rec.terminal:
        pass  # gone (never written, erased, expired) or ended
    elif rec.status == "cancelling":
        from shared.services.runs import finish_cancel

        finish_cancel(ports, rec.run_id)  # a cancel cut before it finished: nothing ran, nothing to stop
    elif not start.ready or plan_missing(ports, rec):
        outcome = "failed" if fail_unstarted(ports, rec.run_id) else "cleared"
        admission.run_ended(ports, rec.run_id)  # a slot its cut create took
    elif admission.cap(ports) > 0 and admission.counts(rec, machine):
        if not admission.settle_counted(ports, rec, machine, start.at_ms, set() if reconciled is None else reconciled):
            return "queued"
        outcome = "started"
    else:
        started(ports, rec, ports.orchestrator.start(machine, rec.run_id, payload_of(ports, rec)))  # named
        outcome = "started"
    ports.starts.clear_start(start.run_id)
    return outcome


def sweep(ports: Ports, *, grace_s: float | None = None) -> Swept:
    """Settle every marker older than ``grace_s`` (default: the ``start_sweep_grace_s`` setting, longer than any
    create may take); one that fails stays for the next sweep."""
    grace = float(ports.settings.start_sweep_grace_s if grace_s is None else grace_s)
    out = Swept()
    reconciled: set[str] = set()
    for start in ports.starts.read_due(ports.clock.now_ms() - int(grace * 1000)):
        try:
            outcome = settle(ports, start, reconciled)
        except Exception as exc:  # noqa: BLE001 - one run that cannot be settled must not stop the others
            out.errors[start.run_id] = type(exc).__name__
            continue
        getattr(out, outcome).append(start.run_id)
    return out
