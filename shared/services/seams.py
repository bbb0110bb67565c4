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
- ``mcp/invoke`` (host-sample-test-seams.md §23): the host's MCP client, negotiating exactly as every MCP exchange of
  the host does (``shared.engine.negotiation``), once against the caller's ``serverUrl``; the outcome's
  ``negotiation.decided`` on an audit run the answer names (``runId``; a refusal's ``details.runId``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.errors import NotFoundError, ValidationError
from shared.ports import Ports, RunRecord
from shared.protocol.codemap import ERA_V1, legacy_owner
from shared.services.common import Caller
from shared.services.run_start import Created, expires_at, new_run_id, stamped, start_run

if TYPE_CHECKING:
    from shared.protocol.seams_bodies import DurabilityKill, FireEffectSeam, McpInvoke, SeedEventLog

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
        row: dict[str, Any] = {
            "eventId": ports.ids.event_id(run_id, e.sequence),
            "runId": run_id,
            "type": e.type,
            "sequence": e.sequence,
            "payload": e.payload,
            "timestamp": e.timestamp or now,
        }
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
    rec = RunRecord(
        run_id=run_id,
        tenant=caller.tenant,
        status=body.status,
        last_seq=max(seqs),
        created_at=now,
        data=stamped(ports, data),
        state=None,
        expires_at=expires_at(ports),
        started_at=started["timestamp"] if started else None,
        completed_at=rows[-1]["timestamp"] if terminal else None,
    )
    ports.runs.create_run(rec, fresh=True)
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
        return {
            "id": "fire",
            "typeId": "core.http",
            "name": "Fire http.fetch",
            "position": {"x": 0, "y": 0},
            "config": {"url": receiver_url or FIXTURE_DESTINATION, "method": "POST", "timeoutSeconds": 2},
            "inputs": {},
        }
    if seam == "storage.effect-ledger":
        return {
            "id": "fire",
            "typeId": "core.conformance.side-effect",
            "name": "Fire storage.effect-ledger",
            "position": {"x": 0, "y": 0},
            "config": {},
            "inputs": {},
        }
    return None


def fire_definition(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": FIRE_WORKFLOW_ID,
        "name": "Conformance: fire one effect seam",
        "version": "1.0",
        "description": "One node that drives one effect-seam manifest row once (the fire seam's run).",
        "nodes": [node],
        "edges": [],
        "triggers": [{"id": "manual", "type": "manual", "enabled": True}],
        "variables": [],
        "metadata": {"tags": ["conformance"]},
        "settings": {"timeout": 10000},
    }


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
    data: dict[str, Any] = {
        "kind": "workflow",
        "workflowId": FIRE_WORKFLOW_ID,
        "workflowVersion": doc["version"],
        "inputs": {},
        "owner": caller.owner,
        "definition": doc,
        "metadata": {"seededBy": "conformance-seams", "seam": body.seam},
    }
    created = start_run(ports, caller, data, "run")
    run_id = str(created.body["runId"])
    _settle(ports, run_id)
    return Created(201, {"runId": run_id})


def _settle(ports: Ports, run_id: str) -> None:
    """Wait, bounded, for the run to settle: the answer names a run whose effect has been claimed (or settled)."""
    waited = 0.0
    while waited < FIRE_SETTLE_S:
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status in _TERMINAL:
            return
        ports.clock.sleep(FIRE_POLL_S)
        waited += FIRE_POLL_S


# --------------------------------------------------------------------------- RFC 0158's durability test hook

DURABILITY_WORKFLOW_ID = "conformance-durability-effect"
DURABILITY_MODES = ("duplicate-delivery",)  # the modes this host stages; the kill modes end a process it has not


def durability_probe(ports: Ports) -> dict[str, Any]:
    """``GET /host/durability/kill``: the hook's presence, firing nothing."""
    require_enabled(ports)
    return {"modes": list(DURABILITY_MODES)}


def durability_exercise(ports: Ports, caller: Caller, body: DurabilityKill) -> Created:
    """``POST /host/durability/kill`` ``duplicate-delivery``: one run whose one node performs one outside effect (a
    ``POST`` to the caller's ``effectUrl`` by a ``core.http`` node, else a ``storage.effect-ledger`` row), accepted
    once and delivered twice: two executions of its state machine, started back to back, whose Advance tasks race
    on the same run. Nothing in the seam serialises them: what keeps the log to one terminal event and the effect
    to one firing is the host's own fence (the log's conditional appends, the effect's claim). Answers once the run
    has settled (bounded), ``201 {runId, mode, workflowId, deliveries}``."""
    require_enabled(ports)
    if body.mode not in DURABILITY_MODES:
        raise ValidationError(
            "This host stages only the duplicate-delivery exercise: no process of it can be "
            "killed and restarted by a request.",
            {"field": "mode", "modes": list(DURABILITY_MODES)},
        )
    data: dict[str, Any] = {
        "kind": "workflow",
        "workflowId": DURABILITY_WORKFLOW_ID,
        "inputs": {},
        "owner": caller.owner,
        "metadata": {"seededBy": "conformance-seams", "durabilityExercise": body.mode},
    }
    if body.effectUrl is not None:
        from urllib.parse import urlsplit

        parts = urlsplit(body.effectUrl)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError("effectUrl is an absolute http(s) URL.", {"field": "effectUrl"})
        node = _fire_node("http.fetch", body.effectUrl)
        # The caller named the destination of a certification-stage exercise: this run's core.http node may reach
        # it whatever the operator's allowlist (the egress guard still checks every address).
        data["httpAllow"] = [f"{parts.hostname.lower()}:{parts.port}" if parts.port else parts.hostname.lower()]
    else:
        node = _fire_node("storage.effect-ledger", None)
    assert node is not None
    doc = {**fire_definition(node), "id": DURABILITY_WORKFLOW_ID, "name": "Conformance: one effect, delivered twice"}
    data["definition"] = doc
    data["workflowVersion"] = doc["version"]
    created = start_run(ports, caller, data, "run")  # the first delivery: the run's own execution
    run_id = str(created.body["runId"])
    ports.orchestrator.start("run", run_id, {"runId": run_id}, redelivery=True)  # the second, racing it
    _settle(ports, run_id)
    return Created(201, {"runId": run_id, "mode": body.mode, "workflowId": DURABILITY_WORKFLOW_ID, "deliveries": 2})


# --------------------------------------------------------------------------- the MCP invoke seam (§23)

MCP_INVOKE_TIMEOUT_S = 10.0


def mcp_invoke(ports: Ports, caller: Caller, body: McpInvoke) -> Created:
    """One MCP exchange against ``serverUrl`` through the production client path: the probe at the revision asked
    for (``requestVersion``, else the host's one), the decision, its audit run, then (accepted, with ``tool``) one
    ``tools/call``. ``200 {runId, protocol, negotiatedVersion, peerDigest, discover, result?}``; a refusal is
    ``400 interop_version_unsupported`` with ``details {protocol, requested, supported, reason, runId}``. An
    unauthenticated exchange (``authenticated: false``) changes nothing: this host never lowers a revision."""
    from urllib.parse import urlsplit

    from shared.engine.negotiation import REVISION
    from shared.errors import InteropVersionUnsupportedError, fault, invalid
    from shared.ports import EgressRefusedError, TransportError
    from shared.services import negotiations

    require_enabled(ports)
    parts = urlsplit(body.serverUrl)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid("serverUrl is an absolute http(s) URL.", [fault("/serverUrl", "format")])
    try:
        deal, run_id = negotiations.negotiate(
            ports, caller, body.serverUrl, {}, timeout_s=MCP_INVOKE_TIMEOUT_S, requested=body.requestVersion or REVISION
        )
    except EgressRefusedError as exc:
        raise invalid(f"The MCP server's URL is refused: {exc.reason}.", [fault("/serverUrl", "egress")]) from exc
    except TransportError as exc:
        raise invalid(f"The MCP server gave no MCP answer: {exc.reason}.", [fault("/serverUrl", "reachable")]) from exc
    if not deal.accepted:
        raise InteropVersionUnsupportedError(deal.message, deal.refusal_details(run_id))
    assert deal.discovery is not None
    out: dict[str, Any] = {
        "runId": run_id,
        "protocol": "mcp",
        "negotiatedVersion": deal.decision.version,
        "peerDigest": deal.payload["peerDigest"],
        "discover": deal.discovery.result,
    }
    if body.tool is not None:
        try:
            out["result"] = ports.mcp.call_tool(
                body.serverUrl,
                {},
                body.tool,
                body.arguments or {},
                meta={},
                discovered=deal.discovery,
                timeout_s=MCP_INVOKE_TIMEOUT_S,
            )
        except (EgressRefusedError, TransportError) as exc:
            raise invalid(f"The tool call failed: {exc.reason}.", [fault("/tool", "reachable")]) from exc
    return Created(200, out)
