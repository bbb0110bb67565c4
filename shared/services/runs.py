"""Use cases for workflow runs: create, get, list, cancel, poll, stream."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from shared.errors import (
    ConflictError,
    NotFoundError,
    RunTerminalError,
    ServiceUnavailableError,
    UnsupportedStreamModeError,
    ValidationError,
)
from shared.ports import Ports, RunRecord
from shared.protocol import codes as c
from shared.services.common import Caller, load_own_run, page_limit, snapshot
from shared.services.cursors import mint_cursor, read_cursor
from shared.services.held import POLL, STREAM, Holding
from shared.services.run_start import Created, common_checks, start_run

if TYPE_CHECKING:
    from shared.protocol.models import CreateRunRequest

MAX_PAGE = 100


# The cancel's tries at the tail: one for each page a task in flight can still append (the kernel's
# ``TASK_EVENTS // FLUSH_AT``, 50), and a few for other writers.
CANCEL_ATTEMPTS = 55


def _kernel():  # type: ignore[no-untyped-def]
    """The engine's kernel, imported on first use: read-only handlers (get, list, poll) never pay for it."""
    from shared.engine import kernel

    return kernel


DEFAULT_PAGE = 50


def create_workflow_run(ports: Ports, caller: Caller, req: CreateRunRequest) -> Created:
    common_checks(caller, req)
    if req.evalModes is not None or req.baselineRunId is not None or req.fixtureRuns is not None:
        raise ValidationError("evalModes, baselineRunId and fixtureRuns need mode 'eval'.")
    if req.evalSuiteRef is not None or req.agentId is not None:
        raise ValidationError("evalSuiteRef and agentId need mode 'eval'.")
    if not req.workflowId:
        raise ValidationError("workflowId is required.")
    from shared.engine.registry import NODE_TYPES
    from shared.engine.workflow import DefinitionError, InputsError, bind_inputs, load_workflow

    doc = _kernel().load_definition(ports, caller.tenant, req.workflowId)
    if doc is None:
        raise NotFoundError("No such workflow.")
    try:
        load_workflow(doc, set(NODE_TYPES))
        inputs = bind_inputs(doc, req.inputs)
    except DefinitionError as exc:
        raise ValidationError(f"The workflow definition cannot run: {exc}.") from exc
    except InputsError as exc:
        raise ValidationError(str(exc)) from exc
    from shared.protocol.models import present

    configurable = present(req.configurable) if req.configurable else None
    if isinstance(doc.get("configurableSchema"), dict):
        from shared.services.workflows import check_configurable

        check_configurable(doc["configurableSchema"], configurable or {})
    from shared.services import agents as agent_svc

    pins = agent_svc.workflow_pins(ports, caller.tenant, doc)
    agent_svc.check_ai_overrides(ports, caller.tenant, configurable)
    data: dict[str, Any] = {
        "kind": "workflow",
        "agentPins": pins or None,
        "workflowId": req.workflowId,
        "workflowVersion": doc.get("version"),  # the version this run pinned (its definition is pinned below)
        "inputs": inputs,
        "owner": caller.owner,
        "definition": doc,
        "configurable": configurable,
        "tags": req.tags,
        "metadata": req.metadata,
        "scopeId": req.scopeId,
    }
    return start_run(ports, caller, data, "run")


def get_run(ports: Ports, caller: Caller, wire_run_id: str) -> RunRecord:
    return load_own_run(ports, caller, wire_run_id)


def run_snapshot(ports: Ports, rec: RunRecord) -> dict[str, Any]:
    kernel = _kernel()
    state = kernel.load_state(ports, rec) if rec.state and ("$ref" in rec.state or kernel.state_behind(rec)) else None
    return snapshot(rec, state)


# --------------------------------------------------------------------------- list

_CURSOR_KEYS = frozenset({"pk", "sk", "gsi1pk", "gsi1sk"})


def read_list_cursor(ports: Ports, tenant: str, cursor: str) -> dict[str, Any]:
    key = read_cursor(ports, tenant, cursor, _CURSOR_KEYS)
    if key["gsi1pk"] != tenant:  # minted for this tenant, so never true; kept as a second lock on the partition
        raise ValidationError("The cursor was not minted by this host.")
    return key


def list_runs(ports: Ports, caller: Caller, params: dict[str, str]) -> dict[str, Any]:
    limit = page_limit(params, DEFAULT_PAGE, MAX_PAGE)
    start = read_list_cursor(ports, caller.tenant, params["cursor"]) if params.get("cursor") else None
    filters = {k: params[k] for k in ("workflowId", "status") if params.get(k)}
    page = ports.runs.list_runs(caller.tenant, limit, start, filters)
    body: dict[str, Any] = {"runs": [run_snapshot(ports, r) for r in page.runs]}
    if page.next_key:
        body["nextCursor"] = mint_cursor(ports, caller.tenant, page.next_key)
    return body


# --------------------------------------------------------------------------- cancel


def cancel_run(ports: Ports, caller: Caller, wire_run_id: str) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    if rec.terminal:
        raise RunTerminalError()
    if rec.status != "cancelling" and not ports.runs.update_status(
        rec.run_id, "cancelling", allowed_from=("pending", "running", "paused", "waiting-approval")
    ):
        fresh = ports.runs.get_run(rec.run_id)
        if fresh is None:
            raise NotFoundError("No such run.")
        if fresh.terminal:
            raise RunTerminalError()
    if rec.execution_arn:
        ports.orchestrator.stop(rec.execution_arn)
    finish_cancel(ports, rec.run_id, stopped=rec.execution_arn or "")  # and its slot, its tenant's waiting runs
    return {"runId": rec.run_id, "status": "cancelled"}


def finish_cancel(ports: Ports, run_id: str, *, stopped: str | None = None) -> None:
    """Append node.cancelled for the node in flight and run.cancelled; then give back the run's slot of its tenant
    and start its waiting runs (decision 0160). ``stopped``: the execution the cancel stopped, as it read the run
    before its status write (None: the caller stops none)."""
    from shared.services.admission import run_ended

    _append_cancelled(ports, run_id, stopped)
    run_ended(ports, run_id)


def _append_cancelled(ports: Ports, run_id: str, stopped: str | None = None) -> None:
    """node.cancelled for the node in flight and run.cancelled; no engine write can land after it. A task in
    flight may take the tail first with its plain appends (decision 0170): the cancel reads the tail again and
    tries once more for each page such a task can still write (its execution is stopped: no other task starts).
    An execution stored after the cancel's first read and before its status write (a chained task's hold, decision
    0191) is the one this read finds: stopped too (one stored after the write is stopped by its task:
    ``chain.store_execution``)."""
    for attempt in range(CANCEL_ATTEMPTS):
        rec = ports.runs.get_run(run_id)
        if rec is None or rec.status != "cancelling":
            return
        if attempt == 0 and stopped is not None and rec.execution_arn not in (None, "", stopped):
            ports.orchestrator.stop(rec.execution_arn)
        state = _kernel().load_state(ports, rec)
        seq = rec.last_seq + 1
        evs = []
        active = state.get("active")
        if active:
            evs.append(
                _kernel().make_event(
                    ports,
                    run_id,
                    seq,
                    c.NODE_CANCELLED,
                    {"nodeId": active["nodeId"], "reason": "run-cancelled"},
                    active["nodeId"],
                )
            )
        evs.append(
            _kernel().make_event(
                ports,
                run_id,
                seq + len(evs),
                c.RUN_CANCELLED,
                {"reason": "cancelled by request", "cancelledBy": "api"},
                None,
            )
        )
        from shared.engine.state import apply

        for ev in evs:
            apply(state, ev, None)
        try:
            ports.events.append_events(
                run_id,
                seq,
                evs,
                run_updates={
                    "status": "cancelled",
                    "completedAt": evs[-1]["timestamp"],
                    **_kernel().state_updates(ports, rec, state, seq + len(evs) - 1),
                },
                require_status=("cancelling",),
                expires_at=rec.expires_at,
            )
            return
        except ConflictError:
            continue


# --------------------------------------------------------------------------- events

STREAM_MODE_RE = re.compile(r"^(values|(updates|messages|debug)(,(updates|messages|debug))*)$")


def _int_param(params: dict[str, str], name: str, lo: int, hi: int | None) -> int | None:
    if name not in params:
        return None
    try:
        v = int(params[name])
    except ValueError as exc:
        raise ValidationError(f"{name} must be an integer.") from exc
    if v < lo or (hi is not None and v > hi):
        raise ValidationError(f"{name} is out of range.")
    return v


def poll_events(ports: Ports, caller: Caller, wire_run_id: str, params: dict[str, str]) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    after = _int_param(params, "afterSequence", 0, None)
    timeout = _int_param(params, "timeout", 1, 60)
    if params.get("streamMode") and not STREAM_MODE_RE.match(params["streamMode"]):
        raise UnsupportedStreamModeError(details={"supported": ["values", "updates", "messages", "debug"]})
    after_seq = -1 if after is None else after
    wait_ms = min(30 if timeout is None else timeout, int(ports.settings.max_poll_wait_s)) * 1000
    deadline = ports.clock.now_ms() + wait_ms
    with Holding(ports, caller.tenant, POLL) as holding:
        while True:
            events = ports.events.read_page(rec.run_id, after_seq) if rec.last_seq > after_seq else []
            events = [e for e in events if int(e["sequence"]) <= rec.last_seq]
            complete = not events or int(events[-1]["sequence"]) >= rec.last_seq
            if events or rec.terminal or ports.clock.now_ms() >= deadline:
                return {
                    "runId": rec.run_id,
                    "events": events,
                    "lastSequence": rec.last_seq if complete else int(events[-1]["sequence"]),
                    "status": rec.status,
                    "isTerminal": rec.terminal and complete,
                }
            holding.before_wait()  # one of the tenant's held polls from here (429 past its limit; decision 0160)
            ports.clock.sleep(0.2)
            rec = _watched(ports, rec)


def _watched(ports: Ports, rec: RunRecord) -> RunRecord:
    """A held poll's or stream's next look at the run it read consistently at the start: eventually consistent
    (half the read units; decision 0164). A stale answer shows the new events one look later, and a record is read
    whole, so a terminal status comes with its last sequence. The record in hand never goes back: a miss (a replica
    behind the create, or the run erased meanwhile), an older ``lastSeq`` or any look after a terminal one keeps it;
    the next request, read consistently, answers 404 for an erased run."""
    fresh = ports.runs.get_run(rec.run_id, consistent=False)
    if fresh is None or fresh.last_seq < rec.last_seq or rec.terminal:
        return rec
    return fresh


def _admitted(ev: dict[str, Any], modes: set[str]) -> bool:
    if "debug" in modes:
        return True
    if "updates" in modes and str(ev["type"]).startswith(c.UPDATES_PREFIXES):
        return True
    return "messages" in modes and ev["type"] == "output.chunk"


class _Frames:
    """The frames of one SSE body: the events the stream mode admits, batched under ``bufferMs``; a values
    stream's snapshots, folded once per read of the run's head (``rec``)."""

    def __init__(self, ports: Ports, rec: RunRecord, modes: set[str], buffer_ms: int) -> None:
        self.ports, self.rec, self.modes, self.buffer_ms = ports, rec, modes, buffer_ms
        self.frames: list[str] = []
        self.batch: list[dict[str, Any]] = []
        self.first_at: int | None = None
        self._folded: tuple[RunRecord, dict[str, Any]] | None = None  # the record read last and its snapshot

    def snapshot(self) -> dict[str, Any]:
        if self._folded is None or self._folded[0] is not self.rec:
            self._folded = (self.rec, run_snapshot(self.ports, self.rec))
        return dict(self._folded[1])

    def add(self, ev: dict[str, Any]) -> None:
        seq = int(ev["sequence"])
        if "values" in self.modes:
            if str(ev["type"]).startswith(c.UPDATES_PREFIXES):
                self.frames.append(_frame(seq, "state.snapshot", self.snapshot()))
        elif _admitted(ev, self.modes):
            if self.buffer_ms:
                self.batch.append(ev)
            else:
                self.frames.append(_frame(seq, str(ev["type"]), ev))

    def flush(self) -> None:
        self.frames.append(_frame(int(self.batch[-1]["sequence"]), "batch", self.batch))
        self.batch = []

    def flush_if_due(self, ended: bool) -> None:
        """Send the batch when the run ended, the buffer time passed since its first event, or a node suspended."""
        if self.batch and self.first_at is None:
            self.first_at = self.ports.clock.now_ms()
        if bool(self.batch) and (
            ended
            or self.ports.clock.now_ms() >= (self.first_at or 0) + self.buffer_ms
            or any(e["type"] == "node.suspended" for e in self.batch)
        ):
            self.flush()


def _resume_after(last_event_id: str | None) -> int:
    """The sequence a ``Last-Event-ID`` resumes after (-1: from the start)."""
    if last_event_id is None or not last_event_id.strip():
        return -1
    try:
        return int(last_event_id.strip())
    except ValueError as exc:
        raise ValidationError("Last-Event-ID must be a sequence.") from exc


def sse_frames(
    ports: Ports, caller: Caller, wire_run_id: str, params: dict[str, str], last_event_id: str | None, wait_s: float
) -> tuple[str, bool]:
    """One finite SSE body of what exists after ``Last-Event-ID`` (waiting up to ``wait_s`` for more).

    Returns (body, ended): ``ended`` when the run's terminal event has been sent. Locally the HTTP
    front calls this repeatedly to stream; on AWS the client resumes with ``Last-Event-ID``.
    """
    rec = load_own_run(ports, caller, wire_run_id)
    mode = params.get("streamMode", "updates")
    if not STREAM_MODE_RE.match(mode):
        raise UnsupportedStreamModeError(details={"supported": ["values", "updates", "messages", "debug"]})
    buffer_ms = _int_param(params, "bufferMs", 0, 5000) or 0
    modes = set(mode.split(","))
    after = _resume_after(last_event_id)
    deadline = ports.clock.now_ms() + int(wait_s * 1000)
    out = _Frames(ports, rec, modes, buffer_ms)
    if "values" in modes and after >= 0:  # a resumed values stream starts with the current snapshot
        out.frames.append(_frame(after, "state.snapshot", out.snapshot()))
    with Holding(ports, caller.tenant, STREAM) as holding:
        while True:
            events = ports.events.read_page(rec.run_id, after) if rec.last_seq > after else []
            for ev in events:
                after = int(ev["sequence"])
                out.add(ev)
            ended = rec.terminal and after >= rec.last_seq
            out.flush_if_due(ended)
            if ended:
                return "".join(out.frames), True
            if (out.frames and not out.batch) or ports.clock.now_ms() >= deadline:
                if out.batch:
                    out.flush()
                return "".join(out.frames) or ": keep-alive\n\n", False
            holding.before_wait()  # one of the tenant's held streams from here (429 past its limit; decision 0160)
            ports.clock.sleep(0.05 if out.batch else 0.2)
            rec = out.rec = _watched(ports, rec)


def _frame(seq: int, event: str, data: Any) -> str:
    return f"id: {seq}\nevent: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def get_workflow(ports: Ports, caller: Caller, workflow_id: str) -> dict[str, Any]:
    doc = _kernel().load_definition(ports, caller.tenant, workflow_id)
    if doc is None:
        raise NotFoundError("No such workflow.")
    return doc


def claim_scope(ports: Ports, caller: Caller, scope_id: str) -> dict[str, Any]:
    """``OpenWOP-Dedup: enforce``: one active run per (tenant, scopeId). The claim is a conditional write, so
    two racing creates cannot both pass; a claim whose run has ended (or never started) is taken over."""
    claim = {"runId": None, "at": ports.clock.iso(), "by": ports.ids.ulid()}
    for _ in range(3):
        if ports.scope_claims.put_claim(caller.tenant, scope_id, claim, if_absent=True):
            return claim
        current = ports.scope_claims.get_claim(caller.tenant, scope_id)
        if current is None:
            continue
        held = current.get("runId")
        rec = ports.runs.get_run(str(held)) if held else None
        if rec is not None and not rec.terminal:
            from shared.errors import RunAlreadyActiveError

            raise RunAlreadyActiveError()
        if held is None and ports.clock.now_ms() - _ms(current.get("at")) < 60_000:
            from shared.errors import RunAlreadyActiveError

            raise RunAlreadyActiveError()  # another create for this scope is in flight
        if ports.scope_claims.put_claim(caller.tenant, scope_id, claim, if_equals=current):
            return claim
    raise ServiceUnavailableError()


def _ms(iso: object) -> int:
    from shared.clock import ms_from_iso

    try:
        return ms_from_iso(str(iso))
    except ValueError:
        return 0


def create(ports: Ports, caller: Caller, req: CreateRunRequest, *, dedup: bool = False) -> Created:
    """createRun: a workflow run, or an eval run with ``mode: "eval"``."""
    from shared.services.quotas import check_run_start

    check_run_start(ports, caller.tenant)  # per-tenant run-start quota (off unless RUN_STARTS_PER_MINUTE is set)
    if dedup and req.scopeId:
        claim = claim_scope(ports, caller, req.scopeId)
        try:
            created = _create(ports, caller, req)
        except Exception:
            # a refused create releases its claim at once (a stale claim is taken over)
            released = {**claim, "at": "1970-01-01T00:00:00.000Z"}
            ports.scope_claims.put_claim(caller.tenant, req.scopeId, released, if_equals=claim)
            raise
        held = {"runId": created.body["runId"], "at": ports.clock.iso()}
        if ports.scope_claims.put_claim(caller.tenant, req.scopeId, held, if_equals=claim):
            from shared.services.erasure import link_scope_claim

            link_scope_claim(ports, str(held["runId"]), req.scopeId, held)  # its erasure releases the scope
        return created
    return _create(ports, caller, req)


def _create(ports: Ports, caller: Caller, req: CreateRunRequest) -> Created:
    if req.mode == "eval":
        from shared.services import discovery

        if not discovery.FEATURES["evalSuite"]:
            from shared.errors import CapabilityNotProvidedError

            raise CapabilityNotProvidedError()
        from shared.services import evals

        return evals.create_eval_run(ports, caller, req)
    return create_workflow_run(ports, caller, req)
