"""The conformance seams profile (``openwop-conformance-seams-v2``, api/seams-v2.yaml) at ``/conformance/seams/``.

A certification-stage surface, served only with the setting ``OPENWOP_CONFORMANCE_SEAMS`` (CDK context
``conformanceSeams``; the local host turns it on): without it every seam answers ``404 not_found`` exactly as a path
that does not exist, and discovery does not advertise the profile. Two seams:

- ``seedEra2EventLog``: persist a run as a v1 host would have written it, its rows verbatim in v1 vocabulary (era 2),
  through the storage boundary (``EventStore.seed_log``), never translated at write time; every reader sees it
  through the codemap (``shared.protocol.codemap``), and its owner is the caller's legacy Subject.
- ``fireEffectSeam``: run a workflow that drives one named manifest row once, in the caller's tenant, and answer when
  the run has settled, so its effect ledger (``GET /runs/{runId}/effects``) is the witness a replay fork is read
  against. The rows a workflow node can drive are fireable: ``http.fetch`` (a ``core.http`` node, to the request's
  ``receiverUrl`` or to the unreachable fixture destination) and ``storage.effect-ledger``; any other row is ``404``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.errors import NotFoundError, ValidationError
from shared.ports import Ports, RunRecord
from shared.protocol.codemap import ERA_V1, legacy_owner
from shared.services.common import Caller
from shared.services.run_start import Created, expires_at, new_run_id, stamped, start_run

if TYPE_CHECKING:
    from shared.protocol.seams_bodies import FireEffectSeam, SeedEventLog

FIRE_WORKFLOW_ID = "conformance-effect-seam-fire"
FIXTURE_DESTINATION = "http://127.0.0.1:1/"  # settings.SEAM_FIXTURE_TARGET: nothing listens there
# How long the fire seam waits for its run to settle (its effect is claimed long before): bounded polling.
FIRE_SETTLE_S = 20.0
FIRE_POLL_S = 0.1
_TERMINAL = ("completed", "failed", "cancelled")


def require_enabled(ports: Ports) -> None:
    """Without the setting a seam is indistinguishable from a path this host does not serve."""
    if not ports.settings.conformance_seams:
        raise NotFoundError("No such resource.")


# --------------------------------------------------------------------------- seedEra2EventLog


def seed_event_log(ports: Ports, caller: Caller, body: SeedEventLog) -> Created:
    require_enabled(ports)
    seqs = [e.sequence for e in body.events]
    if len(set(seqs)) != len(seqs):
        raise ValidationError("Two events have the same sequence.", {"field": "events"})
    now = ports.clock.iso()
    run_id = new_run_id(ports, caller.tenant)
    rows: list[dict[str, Any]] = []
    for e in sorted(body.events, key=lambda x: x.sequence):
        row: dict[str, Any] = {"eventId": ports.ids.event_id(run_id, e.sequence), "runId": run_id, "type": e.type,
                               "sequence": e.sequence, "payload": e.payload, "timestamp": e.timestamp or now}
        if e.causationId is not None:
            row["causationId"] = e.causationId
        rows.append(row)
    owner = legacy_owner(caller.tenant, caller.subject_id)
    data: dict[str, Any] = {"kind": "workflow", "owner": owner, "inputs": {}, "eventLogSchemaVersion": ERA_V1}
    started = next((r for r in rows if r["type"] == "run.started"), None)
    workflow_id = (started or {}).get("payload", {}).get("workflowId")
    if isinstance(workflow_id, str):
        from shared.protocol.ids import NAME_ID_RE

        if NAME_ID_RE.fullmatch(workflow_id):
            from shared.engine import kernel

            data["workflowId"] = workflow_id
            doc = kernel.load_definition(ports, caller.tenant, workflow_id)
            if doc is not None:
                data["definition"] = doc
    terminal = body.status in _TERMINAL
    rec = RunRecord(run_id=run_id, tenant=caller.tenant, status=body.status, last_seq=max(seqs), created_at=now,
                    data=stamped(ports, data), state=None, expires_at=expires_at(ports),
                    started_at=started["timestamp"] if started else None,
                    completed_at=rows[-1]["timestamp"] if terminal else None)
    ports.runs.create_run(rec)
    try:
        ports.events.seed_log(run_id, rows, rec.expires_at, owner)
    except Exception:
        from shared.services.erasure import erase_now

        erase_now(ports, run_id, tombstone=False)  # nothing half-written: no run without its log
        raise
    return Created(201, {"runId": run_id})


# --------------------------------------------------------------------------- fireEffectSeam


def _fire_node(seam: str, receiver_url: str | None) -> dict[str, Any] | None:
    """The node that drives ``seam`` once, or None when no workflow node of this host drives it."""
    if seam == "http.fetch":
        return {"id": "fire", "typeId": "core.http", "name": "Fire http.fetch", "position": {"x": 0, "y": 0},
                "config": {"url": receiver_url or FIXTURE_DESTINATION, "method": "POST", "timeoutSeconds": 2},
                "inputs": {}}
    if seam == "storage.effect-ledger":
        return {"id": "fire", "typeId": "core.conformance.side-effect", "name": "Fire storage.effect-ledger",
                "position": {"x": 0, "y": 0}, "config": {}, "inputs": {}}
    return None


def fire_definition(node: dict[str, Any]) -> dict[str, Any]:
    return {"id": FIRE_WORKFLOW_ID, "name": "Conformance: fire one effect seam", "version": "1.0",
            "description": "One node that drives one effect-seam manifest row once (the fire seam's run).",
            "nodes": [node], "edges": [], "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
            "variables": [], "metadata": {"tags": ["conformance"]}, "settings": {"timeout": 10000}}


def fire_effect_seam(ports: Ports, caller: Caller, body: FireEffectSeam) -> Created:
    require_enabled(ports)
    from shared.services.discovery import all_seams

    if body.seam not in {s.seam for s in all_seams()}:
        raise NotFoundError("No such effect seam in GET /host/effect-seams.")
    node = _fire_node(body.seam, body.receiverUrl)
    if node is None:
        raise NotFoundError("No workflow node of this host drives that seam inside a run.")
    if body.receiverUrl is not None and not body.receiverUrl.startswith(("http://", "https://")):
        raise ValidationError("receiverUrl is an http(s) URL.", {"field": "receiverUrl"})
    doc = fire_definition(node)
    data: dict[str, Any] = {"kind": "workflow", "workflowId": FIRE_WORKFLOW_ID, "workflowVersion": doc["version"],
                            "inputs": {}, "owner": caller.owner, "definition": doc,
                            "metadata": {"seededBy": "conformance-seams", "seam": body.seam}}
    created = start_run(ports, caller, data, "run")
    run_id = str(created.body["runId"])
    waited = 0.0
    while waited < FIRE_SETTLE_S:  # bounded: the answer names a run whose effect has been claimed (or settled)
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status in _TERMINAL:
            break
        ports.clock.sleep(FIRE_POLL_S)
        waited += FIRE_POLL_S
    return Created(201, {"runId": run_id})
