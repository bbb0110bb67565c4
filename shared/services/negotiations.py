"""MCP negotiations outside any run (registering an MCP server, the conformance seam) and their audit runs.

interop.md §The audit event: every negotiation outcome, the refused one included, emits ``negotiation.decided`` on
the host's own event log. A negotiation inside a run lands on that run's log (``shared.engine``). One with no run
lands on an **audit run**: a completed run in the caller's tenant (workflow id ``NEGOTIATION_AUDIT``, never
registered) whose log is ``run.started``, the one ``negotiation.decided``, ``run.completed``: readable like any run
(``GET /runs/{runId}/events/poll``, SSE, webhooks subscribed to the type), erased by its retention like any run;
it executed no workflow, so it cannot be forked (``400 validation_error``). The refusal of a runless negotiation
names it in ``details.runId``.
"""

from __future__ import annotations

from typing import Any

from shared.engine import negotiation
from shared.engine.negotiation import Negotiation
from shared.keys import AUDIT_KEY
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.services.common import Caller
from shared.services.run_start import expires_at, new_run_id, stamped

NEGOTIATION_AUDIT = "openwop-serverless.negotiation-audit"


def audit_run(ports: Ports, caller: Caller, decided: dict[str, Any]) -> str:
    """A completed run in the caller's tenant whose log holds ``decided`` (a ``negotiation.decided`` payload)."""
    from shared.engine import kernel
    from shared.engine import state as st
    from shared.engine.version import ENGINE_VERSION

    run_id = new_run_id(ports, caller.tenant)
    data: dict[str, Any] = {
        "kind": "workflow",
        "workflowId": NEGOTIATION_AUDIT,
        "inputs": {},
        "owner": caller.owner,
        "metadata": {"audit": "negotiation.decided"},
        AUDIT_KEY: True,
    }
    rec = RunRecord(
        run_id=run_id,
        tenant=caller.tenant,
        status="running",
        last_seq=-1,
        created_at=ports.clock.iso(),
        data=stamped(ports, data),
        state=st.new_state(),
        expires_at=expires_at(ports),
    )
    ports.runs.create_run(rec, fresh=True)
    started = {
        "workflowId": NEGOTIATION_AUDIT,
        "inputs": {},
        "transport": "rest",
        "engineVersion": ENGINE_VERSION,
        "owner": caller.owner,
        "metadata": data["metadata"],
    }
    events = [
        kernel.make_event(ports, run_id, seq, t, p, None)
        for seq, (t, p) in enumerate(
            ((c.RUN_STARTED, started), (c.NEGOTIATION_DECIDED, decided), (c.RUN_COMPLETED, {"outputs": {}}))
        )
    ]
    state = st.fold(events, None)
    updates = kernel.state_updates(ports, rec, state, len(events) - 1)
    updates.update({"status": "completed", "startedAt": events[0]["timestamp"], "completedAt": events[-1]["timestamp"]})
    ports.events.append_events(
        run_id, 0, events, run_updates=updates, require_status=("running",), expires_at=rec.expires_at
    )
    return run_id


def negotiate(
    ports: Ports,
    caller: Caller,
    url: str,
    headers: dict[str, str],
    *,
    timeout_s: float,
    requested: str = negotiation.REVISION,
) -> tuple[Negotiation, str]:
    """Negotiate with the MCP server at ``url`` outside any run; its outcome on a new audit run (its id returned).
    ``EgressRefusedError`` / ``TransportError`` when the server gave no MCP answer (nothing negotiated, no run)."""
    deal = negotiation.negotiate(ports, url, headers, timeout_s=timeout_s, requested=requested)
    return deal, audit_run(ports, caller, deal.payload)
