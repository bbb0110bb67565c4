"""Run lifecycle beyond create and cancel: pause, resume, bulk cancel, and parking an execution on a task token.

A paused run's execution waits in a ``.waitForTaskToken`` task (``Park`` in the run and fork state machines):
it holds no Lambda while it waits. Waking it is a race between the parked task storing its token and the
request that ends the wait; each side writes first and reads the other's write second, so at least one of them
sees the other: the request sends the stored token, or the task finds the run no longer parked and fails with
``RunNotParked``, which the state machine catches and goes on with ``Advance`` (a second send of a spent token
is a no-op).
"""

from __future__ import annotations

from typing import Any

from shared.errors import (
    ConflictError,
    NotFoundError,
    ProtocolError,
    RunGoneError,
    RunStateConflictError,
    RunTerminalError,
    ServiceUnavailableError,
    ValidationError,
)
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.protocol.ids import project_id
from shared.services.common import Caller, load_own_run

PARK_SK = "PARK"
MAX_BULK_CANCEL = c.MAX_BULK_CANCEL_RUN_IDS
_ATTEMPTS = 10


def transition(
    ports: Ports,
    rec: RunRecord,
    event_type: str,
    payload: dict[str, Any],
    status: str,
    allowed_from: tuple[str, ...],
    node_id: str | None = None,
) -> dict[str, Any]:
    """Append one event and move the run to ``status``, conditioned on the log's end and the run's status."""
    from shared.engine import kernel, state

    st = kernel.load_state(ports, rec)
    ev = kernel.make_event(ports, rec.run_id, rec.last_seq + 1, event_type, payload, node_id)
    state.apply(st, ev, None)
    updates = kernel.state_updates(ports, rec, st, rec.last_seq + 1)
    updates["status"] = status
    ports.events.append_events(
        rec.run_id, rec.last_seq + 1, [ev], run_updates=updates, require_status=allowed_from, expires_at=rec.expires_at
    )
    return ev


def _fresh(ports: Ports, run_id: str) -> RunRecord:
    rec = ports.runs.get_run(run_id)
    if rec is None:
        raise NotFoundError("No such run.")
    return rec


def pause_run(
    ports: Ports, caller: Caller, wire_run_id: str, reason: str | None, drain_policy: str | None
) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    if drain_policy == "drain-current-node":
        raise ValidationError("This host pauses at the next event boundary only (drainPolicy 'immediate').")
    payload: dict[str, Any] = {"drainPolicy": "interrupt"}
    if reason:
        payload["reason"] = reason
    for _ in range(_ATTEMPTS):
        if rec.terminal:
            raise RunTerminalError()
        if rec.status != "running":
            raise RunStateConflictError("Only a running run can be paused.", {"runStatus": rec.status})
        try:
            ev = transition(ports, rec, c.RUN_PAUSED, payload, "paused", ("running",))
        except ConflictError:  # the engine appended first, or the status moved: read again and decide again
            rec = _fresh(ports, rec.run_id)
            continue
        return {"runId": rec.run_id, "status": "paused", "pausedAt": ev["timestamp"]}
    raise ServiceUnavailableError()


def resume_run(ports: Ports, caller: Caller, wire_run_id: str, reason: str | None) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    payload: dict[str, Any] = {"reason": reason} if reason else {}
    for _ in range(_ATTEMPTS):
        if rec.terminal:
            raise RunTerminalError()
        if rec.status != "paused":
            raise RunStateConflictError("Only a paused run can be resumed.", {"runStatus": rec.status})
        try:
            ev = transition(ports, rec, c.RUN_RESUMED, payload, "running", ("paused",))
        except ConflictError:
            rec = _fresh(ports, rec.run_id)
            continue
        wake(ports, rec.run_id)
        return {"runId": rec.run_id, "status": "running", "resumedAt": ev["timestamp"]}
    raise ServiceUnavailableError()


def wake(ports: Ports, run_id: str) -> None:
    """After the run left its parked status: send the parked task's token, if it stored one already."""
    parked = ports.runs.get_aux(run_id, PARK_SK)
    if parked and parked.get("token"):
        ports.orchestrator.resume(str(parked["token"]))


class RunNotParked(Exception):  # noqa: N818 - the name is the state machine's error name (Park's Catch)
    """The run left its parked status before its token was stored: the execution goes on at once."""


def park(ports: Ports, run_id: str, task_token: str) -> dict[str, Any]:
    """The ``Park`` task: store the token while the run is parked; if it no longer is, end the wait at once."""
    rec = ports.runs.get_run(run_id)
    if rec is not None and rec.status in c.PARKED_STATUSES:
        try:
            ports.runs.put_aux(run_id, PARK_SK, {"token": task_token}, rec.expires_at)
        except RunGoneError:
            rec = None
        else:
            rec = ports.runs.get_run(run_id)  # a resume that landed meanwhile may have missed the token
    if rec is None or rec.status not in c.PARKED_STATUSES:
        raise RunNotParked(run_id)
    return {"runId": run_id, "parked": True}


def refuse_over_cap(body: dict[str, Any]) -> None:
    """runs.md §Bulk cancel: over the cap is ``400 validation_error`` with ``details.maxRunIds``, decided on the
    count alone, before anything about the ids (their grammar, tenant or existence) is looked at."""
    run_ids = body.get("runIds")
    if isinstance(run_ids, list) and len(run_ids) > MAX_BULK_CANCEL:
        raise ValidationError(f"At most {MAX_BULK_CANCEL} runIds per request.", {"maxRunIds": MAX_BULK_CANCEL})


def bulk_cancel(ports: Ports, caller: Caller, run_ids: list[str]) -> dict[str, Any]:
    """Each id on its own: results in request order; a refusal stays inside its entry."""
    from shared.services.runs import cancel_run

    refuse_over_cap({"runIds": run_ids})
    results: list[dict[str, Any]] = []
    for run_id in run_ids:
        try:
            out = cancel_run(ports, caller, project_id(run_id))
            results.append({"runId": run_id, "ok": True, "status": out["status"]})
        except ProtocolError as err:
            entry: dict[str, Any] = {"code": err.code, "message": err.message}
            if err.details:
                entry["details"] = err.details
            results.append({"runId": run_id, "ok": False, "error": entry})
    return {"results": results}
