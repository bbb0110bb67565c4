"""POST /runs/{runId}:fork (replay | branch) and GET /runs/{runId}:diff.

A fork's child copies the source's events ``[0, fromSeq)`` (fresh eventIds, the child's runId, all
else byte-equal), folds them, and re-executes from ``fromSeq`` with the same engine as live runs under
the fork state machine. In ``replay`` mode every side-effecting node resolves the source's n-th
recorded terminal outcome (or fails closed with ``replay_source_missing``), every agent tool call is
served from the source's as-executed record (never live), and the EffectGuard denies any other
effect. The outcome index is built by the fork execution's first task (``shared.engine.forkindex``), once,
from the whole source log, so the request reads a constant amount and the child never needs the source's
effects again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.engine import forkindex, kernel
from shared.engine.canonical import same_json
from shared.engine.state import new_state
from shared.errors import (
    ForkPointInvalidError,
    NotFoundError,
    RunExpiredError,
    RunGoneError,
    ValidationError,
)
from shared.keys import AUDIT_KEY
from shared.ports import Ports, RunRecord
from shared.protocol.ids import BadIdError, decode_run_id, tenant_of
from shared.protocol.models import present
from shared.services.common import Caller, decode_path_run_id, links, own_run
from shared.services.run_start import Created, expires_at, new_run_id, run_span, stamped, traced

if TYPE_CHECKING:
    from shared.engine.evalplan import ChildPlan
    from shared.protocol.models import ForkRunRequest


def _visible_source(ports: Ports, caller: Caller, wire_run_id: str) -> RunRecord:
    """A source the caller cannot see is 404, identically whatever the reason (foreign ids are not read)."""
    hidden = NotFoundError("No such run.")
    try:
        run_id = decode_run_id(wire_run_id)
    except BadIdError as exc:
        raise hidden from exc
    if tenant_of(run_id) != caller.tenant:
        raise hidden
    rec = ports.runs.get_run(run_id, settled=True)
    if rec is None:
        raise hidden
    return rec


def _from_seq(req: ForkRunRequest) -> int:
    v = req.fromSeq
    if v is None:
        if req.mode == "branch":
            raise ValidationError("fromSeq is required for a branch fork.")
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValidationError("fromSeq must be an integer >= 0.")
    return v


def fork_run(ports: Ports, caller: Caller, wire_run_id: str, req: ForkRunRequest) -> Created:
    src = _visible_source(ports, caller, wire_run_id)
    if src.data.get(AUDIT_KEY):  # a record of a negotiation: no workflow executed
        raise ValidationError("An audit run records a negotiation; it executed no workflow to fork.")
    from_seq = _from_seq(req)
    if src.kind == "session":  # an external agent's session: a new session the agent's own code drives again
        return _fork_session(ports, caller, src, req, from_seq)
    overlay = req.runOptionsOverlay
    if req.mode == "replay" and overlay is not None and present(overlay):
        raise ValidationError("A replay fork takes no runOptionsOverlay.")
    if from_seq > src.last_seq:
        raise ForkPointInvalidError()
    _check_log_start(ports, src, from_seq)
    child_plan = _child_plan(ports, src) if src.kind == "eval" else None
    data = _child_data(ports, caller, src, req)
    data["parentRunId"] = src.run_id
    data["originRunId"] = src.data.get("originRunId") or src.run_id  # interrupt ids stay those of the origin
    data["fork"] = {
        "mode": req.mode,
        "sourceRunId": src.run_id,
        "fromSeq": from_seq,
        "sourceLastSeq": src.last_seq,  # the source as the fork is of it (decision 0180)
        "startedAtMs": ports.clock.now_ms(),
    }
    run_id = new_run_id(ports, caller.tenant)
    with run_span(ports, run_id, caller.tenant, data):
        return _create_fork(ports, caller, src, run_id, data, from_seq, req.mode, child_plan)


def _fork_session(ports: Ports, caller: Caller, src: RunRecord, req: ForkRunRequest, from_seq: int) -> Created:
    from shared.services.agent_sessions import fork_session

    if req.runOptionsOverlay is not None and present(req.runOptionsOverlay):
        raise ValidationError("A session fork takes no runOptionsOverlay.")
    forked = fork_session(ports, caller, src, req.mode, from_seq)
    return Created(201, {**forked, **links(str(forked["runId"]))})


def _check_log_start(ports: Ports, src: RunRecord, from_seq: int) -> None:
    """The request reads a constant amount: the log's first event (a history purged from its start is 410 here);
    the fork's first task reads the whole log, indexes it and fails the child run_expired on any other hole."""
    first = ports.events.read_page(src.run_id, -1, 1, settled=True)
    if not first or int(first[0]["sequence"]) != 0:
        raise RunExpiredError(
            details={
                "sourceRunId": src.run_id,
                "fromSeq": from_seq,
                "boundary": int(first[0]["sequence"]) if first else src.last_seq + 1,
            }
        )


def _child_plan(ports: Ports, src: RunRecord) -> ChildPlan:
    """An eval source's plan for its child, which re-reads the source's stored copies; it owns none (so erasing it
    never deletes them). 410 eval_recorded_fixtures_gone when they were erased (whichever layout its plan has). A
    large plan is copied within the store when the child is written, never read here (decision 0188)."""
    from shared.engine import evalplan
    from shared.services import evals

    plan = evalplan.child_plan(ports, src.run_id)
    evals.require_derived_copies(ports, plan.item)
    return plan


def _child_data(ports: Ports, caller: Caller, src: RunRecord, req: ForkRunRequest) -> dict[str, Any]:
    """The child's run data: the source's less its lineage (the child is era 3 whatever the source's era: its log
    is the translated prefix, then v2 events), a workflow's definition pinned, a branch's overlay applied."""
    data: dict[str, Any] = {
        k: v
        for k, v in src.data.items()
        if k not in ("fork", "parentRunId", "definitionPinned", "eventLogSchemaVersion")
    }
    if src.kind == "workflow":
        current = kernel.load_definition(ports, src.tenant, str(src.data.get("workflowId")))
        # replay proves *current* code reproduces the history; without a registration, the source's pinned one
        pinned = current if current is not None else kernel.pinned_definition(ports, src)
        if pinned is not None:
            data["definition"] = pinned
    overlay = req.runOptionsOverlay
    if req.mode != "branch" or overlay is None:
        return data
    if overlay.tags is not None:
        data["tags"] = overlay.tags
    if overlay.metadata is not None:
        data["metadata"] = {**(src.data.get("metadata") or {}), **overlay.metadata}
    if overlay.configurable is not None:
        data["configurable"] = present(overlay.configurable)
        from shared.services import agents as agent_svc

        agent_svc.check_ai_overrides(ports, caller.tenant, data["configurable"])
    return data


def _create_fork(
    ports: Ports,
    caller: Caller,
    src: RunRecord,
    run_id: str,
    data: dict[str, Any],
    from_seq: int,
    mode: str,
    child_plan: ChildPlan | None,
) -> Created:
    from shared.services import start_outbox as outbox

    exp = expires_at(ports)
    status = "pending" if from_seq == 0 else "running"
    now = ports.clock.iso()
    # A branch from inside the log is running from its creation, so it has started then (its index entry is
    # written once, here, rather than again by the first task that appends).
    rec = RunRecord(
        run_id=run_id,
        tenant=caller.tenant,
        status=status,
        last_seq=-1,
        created_at=now,
        data=traced(ports, stamped(ports, data)),
        state=new_state(),
        expires_at=exp,
        started_at=now if status == "running" else None,
        **outbox.first_execution(ports, "fork", run_id),  # decisions 0173, 0175
    )

    pending, marker = outbox.begin(ports, run_id, "fork", exp, ready=child_plan is None)  # decisions 0150, 0186
    try:
        # With its lineage link and its marker, in one transaction: the source's erasure reaches every fork through it.
        ports.runs.create_run(rec, parent=src.run_id, staged=[marker])
    except RunGoneError as exc:
        raise NotFoundError("No such run.") from exc  # the source is being erased
    try:
        if child_plan is not None:
            from shared.engine import evalplan

            evalplan.store_child_plan(ports, child_plan, run_id, exp)
            outbox.ready(ports, pending, exp)
        outbox.started(ports, rec, ports.orchestrator.start("fork", run_id, outbox.payload_of(ports, rec)))
    except Exception:
        from shared.services.erasure import erase_now

        erase_now(ports, run_id, tombstone=False)
        outbox.done(ports, run_id)
        raise
    outbox.after_start(ports, rec)
    return Created(
        201,
        {
            "runId": run_id,
            "sourceRunId": src.run_id,
            "fromSeq": from_seq,
            "mode": mode,
            "status": status,
            **links(run_id),
        },
    )


# --------------------------------------------------------------------------- diff


def diff(ports: Ports, caller: Caller, wire_a: str, against: str | None) -> dict[str, Any]:
    if not against:
        raise ValidationError("against is required.")
    a_id = decode_path_run_id(wire_a)
    try:
        b_id = decode_run_id(against)
    except BadIdError as exc:
        raise ValidationError("against is not a run id.") from exc
    a = own_run(ports, caller, a_id)
    b = own_run(ports, caller, b_id)
    ea = {int(e["sequence"]): e for e in ports.events.read_events(a.run_id)}
    eb = {int(e["sequence"]): e for e in ports.events.read_events(b.run_id)}
    diffs: list[dict[str, Any]] = []
    first: int | None = None
    for seq in sorted(set(ea) | set(eb)):
        x, y = ea.get(seq), eb.get(seq)
        if x is not None and y is not None:
            if same_json(forkindex.comparable(x), forkindex.comparable(y)):
                continue
            diffs.append({"seq": seq, "op": "changed", "aEvent": x, "bEvent": y})
        elif x is not None:
            diffs.append({"seq": seq, "op": "removed", "aEvent": x})
        else:
            diffs.append({"seq": seq, "op": "added", "bEvent": y})
        if first is None:
            first = seq
    sa, sb = kernel.load_state(ports, a), kernel.load_state(ports, b)
    state_diff: dict[str, Any] = {}
    for key, va, vb in (
        ("status", a.status, b.status),
        ("variables", sa.get("variables"), sb.get("variables")),
        ("channels", {}, {}),
    ):
        if not same_json(va, vb):
            state_diff[key] = {"a": va, "b": vb}
    return {
        "a": a.run_id,
        "b": b.run_id,
        "divergedAtSeq": first,
        "eventDiffs": diffs,
        "stateDiff": state_diff,
        "truncated": not (a.terminal and b.terminal),
    }
