"""The engine's kernel: what every kind of run shares, and ``advance``, which hands a run to its kind.

A run's kind is how it executes. The kinds sit above this module, each in its own:

- ``workflowrun``: a workflow run, and its replay and branch forks, step by step from its folded state;
- ``forkindex``: a fork's first task indexes its source; its next tasks copy the prefix;
- ``evalrun``: an eval run's own tasks (Prepare, a trial, Finish pages);
- ``evalfork``: a fork of an eval run re-runs its trials after the prefix, a page of tasks at a time.

Each kind imports this module; this module imports none of them. ``advance`` (the Step Functions task) hands a run
to its kind through the map its caller passes in (``RunKinds``: ``shared.engine.runkinds.RUN_KINDS``, keyed by
``run_kind``); import-linter's contracts in pyproject.toml keep the order (kernel, forkindex, then workflowrun and
evalrun, then evalfork, then runkinds) and fail on any circle.

Here: events (``make_event``, ``ENGINE_VERSION``, ``EngineError``), what a run executes (its pinned definition, its
agent), the state store (the folded state stored with the run item: ``load_state``, ``snapshot_updates``), halting
and failing a run, and continue-as-new (``renew``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from shared.caches import LockedLRUCache
from shared.clock import ms_from_iso
from shared.engine import chain as chain_of
from shared.engine import spans
from shared.engine import state as st
from shared.engine.canonical import same_json
from shared.engine.registry import AGENTS, NODE_TYPES, AgentSpec
from shared.engine.runcore import fail_obj
from shared.engine.stamps import execution_generation, prior_stamp, task_stamp
from shared.engine.version import ENGINE_VERSION, check_engine
from shared.engine.workflow import Workflow, load_workflow
from shared.errors import ConflictError, RunGoneError
from shared.keys import EFFECT_PREFIX, run_prefix
from shared.ports import WRITABLE, Ports, RunRecord, StagedWrite
from shared.protocol import codes as c

if TYPE_CHECKING:
    from shared.engine.tools import ToolTally

FLUSH_AT = 99  # events per append transaction (with the run item's update: TransactWriteItems' 100 items)
TASK_EVENTS = 50 * FLUSH_AT  # events one Advance task appends at most (whole transactions: 4,950)
# A folded state up to this size is stored inline on the run item with every append; a larger one goes to S3 (one
# object per task, a pointer on the item), so the item each 99-event append rewrites stays small (issue 15).
INLINE_STATE_LIMIT = 32_000


class EngineError(Exception):
    pass


# An effect's claim is its claimant's for this long: the Advance task's Lambda timeout (manifest ``advance_run``; a
# test checks), past which no invocation that claimed it can still be running. A claim younger than this that is not
# ours belongs to a delivery still in flight (the same work delivered twice): we must not fire it again; an older one
# was left by a delivery that died, and is taken over (at least once, never twice at the same time).
EFFECT_LEASE_S = 300
EFFECT_RECHECK_MAX_S = 10  # a waiting delivery looks again at most this long after (it usually finds the run done)


class EffectInFlightError(Exception):
    """Another delivery of this run's work holds the effect's claim: this task ends and looks again later."""

    def __init__(self, wait_s: int) -> None:
        super().__init__(f"an effect of this run is in flight in another delivery; look again in {wait_s}s")
        self.wait_s = wait_s


def claim_once(ports: Ports, run_id: str, effect_key: str, value: dict[str, Any], expires_at: int) -> None:
    """Claim an outside effect for this delivery, taking over a claim its claimant left more than
    ``EFFECT_LEASE_S`` ago; ``EffectInFlightError`` when a live delivery holds it (``ConflictError`` when the run
    is not writable)."""
    now = ports.clock.now_ms()
    claimed = ports.runs.claim_effect(
        run_id,
        effect_key,
        {**value, "at": ports.clock.iso(now)},
        expires_at,
        stale_before=ports.clock.iso(now - EFFECT_LEASE_S * 1000),
    )
    if not claimed:
        held = ports.runs.get_aux(run_id, f"{EFFECT_PREFIX}{effect_key}") or {}
        left = EFFECT_LEASE_S
        at = held.get("at")
        if isinstance(at, str):
            age_s = (now - ms_from_iso(at)) / 1000
            left = max(1, int(EFFECT_LEASE_S - age_s) + 1)
        raise EffectInFlightError(min(left, EFFECT_RECHECK_MAX_S))


# --------------------------------------------------------------------------- events


def make_event(
    ports: Ports, run_id: str, seq: int, t: str, payload: dict[str, Any], node_id: str | None
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "eventId": ports.ids.event_id(run_id, seq),
        "runId": run_id,
        "type": t,
        "payload": payload,
        "timestamp": ports.clock.iso(),
        "sequence": seq,
        "schemaVersion": 1,
        "engineVersion": ENGINE_VERSION,
    }
    if node_id:
        ev["nodeId"] = node_id
    return ev


# --------------------------------------------------------------------------- what a run executes


def resolve_agent(ports: Ports, tenant: str, agent_id: str, version: str | None = None) -> AgentSpec | None:
    """A built-in or scripted agent by id; a model-backed agent by the exact version its run pinned."""
    if version is not None:
        from shared.engine.registry import agent_from_version

        doc = ports.agents.get_version(tenant, agent_id, version)
        return agent_from_version(doc) if doc is not None else None
    if agent_id in AGENTS:
        return AGENTS[agent_id]
    doc = ports.agents.get_scripted(tenant, agent_id)
    if doc is None:
        return None
    from shared.engine.registry import agent_from_json

    return agent_from_json(doc)


def load_definition(ports: Ports, tenant: str, workflow_id: str) -> dict[str, Any] | None:
    """The tenant's current registered definition (a deleted registration has none), else the global fixture."""
    own = ports.workflows.get_definition(tenant, workflow_id)
    return own if own is not None else ports.workflows.get_fixture(workflow_id)


def pinned(rec: RunRecord) -> bool:
    """Whether the run pinned its definition at create (in its creation facts, or as its ``DEFINITION`` item)."""
    return rec.data.get("definition") is not None or bool(rec.data.get("definitionPinned"))


def inline_definition(rec: RunRecord) -> dict[str, Any] | None:
    """A small pinned definition, kept in the run's creation facts (decision 0178); None otherwise."""
    return dict(rec.data["definition"]) if rec.data.get("definition") is not None else None


def stored_definition(ports: Ports, rec: RunRecord) -> dict[str, Any] | None:
    """The definition the run pinned at create: a small one in its creation facts, read with them (decision 0178),
    a larger one its ``DEFINITION`` item; None if it pinned none."""
    inline = inline_definition(rec)
    if inline is not None or not pinned(rec):
        return inline
    return ports.runs.get_definition(rec.run_id)


def pinned_definition(ports: Ports, rec: RunRecord) -> dict[str, Any] | None:
    """The definition the run pinned at create (``stored_definition``), else the current registration."""
    if pinned(rec):
        return stored_definition(ports, rec)
    return load_definition(ports, rec.tenant, str(rec.data.get("workflowId")))


# A run's pinned workflow (run id), immutable: a warm container keeps one.
_pinned: LockedLRUCache[str, Workflow] = LockedLRUCache(maxsize=1)


def run_workflow(ports: Ports, rec: RunRecord) -> Workflow:
    """The run's workflow, loaded. A pinned definition never changes, so a warm container reads and loads it once
    per run (a long run's tasks do not read it again)."""
    fixed = pinned(rec)
    hit = _pinned.get(rec.run_id) if fixed else None
    if hit is not None:
        return hit
    doc = pinned_definition(ports, rec)
    if doc is None:
        raise EngineError("workflow definition is gone")
    wf = load_workflow(doc, set(NODE_TYPES))
    if fixed:
        _pinned[rec.run_id] = wf
    return wf


# --------------------------------------------------------------------------- the state store

# The large state snapshot this container last wrote (S3 key), immutable: the run's next task here reads it back.
_last_state: LockedLRUCache[str, str] = LockedLRUCache(maxsize=1)


def snapshot_updates(
    ports: Ports,
    run_id: str,
    state: dict[str, Any],
    seq: int,
    inputs: dict[str, Any] | None = None,
    *,
    behind_bytes: int | None = None,
) -> dict[str, Any]:
    """The run-item updates that store the state folded up to ``seq``.

    The stored snapshot names its ``seq``. Variables equal to the run's inputs are not stored twice (the run's
    creation facts hold them). A task stores its state once, at its last append (its caller asks only then). A
    snapshot up to ``INLINE_STATE_LIMIT`` is inline; a larger one is an S3 object under the run with a pointer on
    the item, or not written at all while the log after the stored snapshot (``behind_bytes``) is smaller than the
    snapshot would be. A reader folds the events after the stored snapshot's ``seq`` (``load_state``). So the
    snapshots a run writes add up to at most its log's bytes plus one small snapshot per task, and a reader folds
    at most about a task's or one snapshot's worth of events.
    """
    stored = dict(state)
    stored["seq"] = seq
    if inputs is not None and same_json(stored.get("variables"), inputs):
        stored["variables"] = None
        stored["variablesFromInputs"] = True
    blob = json.dumps(stored, separators=(",", ":"))
    if len(blob) <= INLINE_STATE_LIMIT:
        return {"state": stored}
    if behind_bytes is not None and behind_bytes < len(blob):
        return {}
    key = f"runs/{run_id}/state/{seq:012d}.json"
    ports.blobs.put_json(key, stored)
    _last_state[key] = blob  # the next task of this run, in a warm container, reads it from here, not S3
    return {"state": {"$ref": key, "seq": seq}}


def state_updates(ports: Ports, rec: RunRecord, state: dict[str, Any], seq: int) -> dict[str, Any]:
    """The run-item updates that store a folded state (inline, or S3 when large), for writers outside the engine."""
    return snapshot_updates(ports, rec.run_id, state, seq, rec.data.get("inputs"))


def state_behind(rec: RunRecord) -> bool:
    """True when the stored snapshot is older than the log's end (a large state is stored once per task); one that
    names no ``seq`` is the state its create stored, before any event (``snapshot_seq``)."""
    return rec.state is not None and snapshot_seq(rec.state) < rec.last_seq


def snapshot_seq(state: dict[str, Any]) -> int:
    """The sequence a stored state is folded up to: the ``seq`` its snapshot names, or -1 for the state a create
    stores (``new_state``, before any event), which a run keeps until its first task's last append stores one."""
    seq = state.get("seq")
    return -1 if seq is None else int(seq)


def load_state(ports: Ports, rec: RunRecord, wf: Workflow | None = None) -> dict[str, Any]:
    """The run's folded state at ``lastSeq``: the stored snapshot, plus the events appended after it."""
    s = rec.state
    if not s:
        return st.new_state()
    if "$ref" in s:
        mine = _last_state.get(str(s["$ref"]))
        got = json.loads(mine) if mine is not None else ports.blobs.get_json(s["$ref"])
        if got is None:
            raise RunGoneError(rec.run_id)
        state = dict(got)
    else:
        state = dict(s)
    seq = snapshot_seq(state)
    state.pop("seq", None)
    if state.pop("variablesFromInputs", False):
        state["variables"] = dict(rec.data.get("inputs") or {})
    if seq < rec.last_seq:  # a task that died before its last append stored none: its events are folded here
        wf = wf if wf is not None else (run_workflow(ports, rec) if rec.kind == "workflow" else None)
        for page in ports.events.iter_events(rec.run_id, seq, rec.last_seq):
            for ev in page:
                st.apply(state, ev, wf)
    return state


# --------------------------------------------------------------------------- halting and failing


def discard_late_writes(ports: Ports, run_id: str) -> None:
    """A run erased while a task wrote what no condition on its run item held (a fork's batch-copied prefix, a task's
    plain pages): its log and objects are deleted again, as its erasure deleted them."""
    ports.events.delete_all(run_id)
    ports.blobs.delete_prefix(run_prefix(run_id))


def halt(run_id: str, rec: RunRecord | None) -> dict[str, Any]:
    """The engine may not write: a parked run waits on a task token (``Park``), anything else is done."""
    parked = rec is not None and rec.status in c.PARKED_STATUSES
    return {"runId": run_id, "next": "park" if parked else "done", "waitSeconds": 0}


# The error name a sweep of the start outbox fails a run with whose create stopped before all it needs was stored.
START_INTERRUPTED = "StartInterrupted"


def fail_run(ports: Ports, run_id: str, error: dict[str, Any] | None) -> dict[str, Any]:
    """The state machine's Catch: the run fails with a registered code, never silently."""
    rec = ports.runs.get_run(run_id)
    failable = (*WRITABLE, *sorted(c.PARKED_STATUSES))  # a parked run whose Park task failed for good fails too
    if rec is None or rec.status not in failable:
        return {"runId": run_id, "failed": False}
    name = str((error or {}).get("Error", ""))
    if name.endswith("RunGoneError"):
        return {"runId": run_id, "failed": False}
    failure = fail_obj(c.NODE_EXECUTION_FAILED, "the run's orchestration failed after retries")
    if name == "States.Timeout":  # the Park task's TimeoutSeconds: paused or waiting longer than parkedTimeout
        failure = fail_obj(c.RUN_TIMEOUT, "the run stayed paused or waiting longer than the host's parked timeout")
    if name.endswith("EvalRecordedFixturesGoneError"):
        # RFC 0252: a fixture source erased mid-run took the derived copy with it; never derived again
        failure = fail_obj(c.EVAL_RECORDED_FIXTURES_GONE, "the recorded fixtures this eval run was served are gone")
    if name == "SessionExpired":  # a session's execution waited for its expiresAt (decision 0143)
        failure = fail_obj(c.SESSION_EXPIRED, "the session was not completed before its expiresAt")
    if name == START_INTERRUPTED:  # the start outbox's sweep: a create cut before its run was whole (decision 0150)
        failure = fail_obj(c.PERSISTENCE_FAILED, "the run's creation was interrupted before it was stored whole")
    ev = make_event(ports, run_id, rec.last_seq + 1, c.RUN_FAILED, {"error": failure}, None)
    try:
        ports.events.append_events(
            run_id,
            rec.last_seq + 1,
            [ev],
            run_updates={"status": "failed", "completedAt": ev["timestamp"], "error": ev["payload"]["error"]},
            require_status=failable,
            expires_at=rec.expires_at,
        )
    except (ConflictError, RunGoneError):
        return {"runId": run_id, "failed": False}
    return {"runId": run_id, "failed": True}


# --------------------------------------------------------------------------- advancing a run

# A kind's output may name the sequence at which its task's replay first diverged (``evalfork``: its events are
# compared after the trials that made them have ended): the task's span then says so (replay.md §7).
DIVERGED_AT = "divergedAtSeq"


class RunKind(Protocol):
    """One Advance task's work on a writable run of one kind (``workflowrun.advance``, ``evalfork.advance``); its
    last write names the task by ``stamp`` (``TASK_STAMP``: ``task_stamp``), when given. ``release``: writes that
    may ride the append that ends the run (its tenant's slot given back, decision 0183); a kind that wrote them
    with its end answers ``RELEASED`` true."""

    def __call__(
        self,
        ports: Ports,
        rec: RunRecord,
        *,
        max_events: int = TASK_EVENTS,
        max_ms: int = 60_000,
        tally: ToolTally | None = None,
        stamp: str = "",
        release: Sequence[StagedWrite] = (),
    ) -> dict[str, Any]: ...


# The kinds ``advance`` hands a run to, by the key ``run_kind`` gives (``workflow``, ``eval-fork``): the caller's map
# (``shared.engine.runkinds.RUN_KINDS``), so the kernel imports none of them.
RunKinds = Mapping[str, RunKind]


def run_kind(rec: RunRecord) -> str:
    """The key in a ``RunKinds`` map of the kind that advances ``rec`` (an eval run itself is advanced by its own
    tasks, ``evalrun``'s, never by ``advance``)."""
    return "eval-fork" if rec.kind == "eval" and rec.data.get("fork") else "workflow"


def advance(
    ports: Ports,
    run_id: str,
    kinds: RunKinds,
    *,
    max_events: int = TASK_EVENTS,
    max_ms: int = 60_000,
    hops: int = 0,
    execution: str = "",
    machine_arn: str = "",
    tally: ToolTally | None = None,
    release: Sequence[StagedWrite] = (),
    chain: chain_of.Chain | None = None,
) -> dict[str, Any]:
    """Advance one run by its kind in ``kinds``; return ``{runId, next, waitSeconds, hops}`` for the state machine.

    ``hops`` counts the Advance tasks of this execution (the ASL carries it). When the run would go on (``continue``
    or a long ``wait``) after ``settings.execution_max_tasks`` of them, it continues in a new execution of the same
    state machine instead (continue-as-new: generation n+1 of ``execution``'s name, named, so a retried task
    starts it once) and this one ends: no execution nears Step Functions' 25,000 history events, however many
    holds or tasks a run takes. The new execution re-reads the run and resumes from its stored sequence.
    ``machine_arn``: the machine this execution runs on (the ASL passes ``$$.StateMachine.Id``), which the new
    execution starts on.
    ``tally`` (optional) counts the tool and model calls this step made, for the task's metrics. ``release``: the
    run's slot given back by the append that ends it, when its conditions hold (``RELEASED`` in the answer, which
    its caller pops: the state machine is not told).

    The task's last write names it (``task_stamp``): the next task of the execution reads the run eventually
    consistently and keeps that read when it carries this task's stamp (decision 0173); in the same warm container,
    after a ``continue``, it is handed the run as that write stored it and reads nothing (decision 0177).

    ``chain``: the task runs on a chained machine (decision 0191, ``shared.engine.chain``): it is stamped as the task
    ``hops`` of the run's first execution, and it starts what the run does next itself; its execution ends.
    """
    # a chained task is named as a task of the run's first execution
    named = ports.orchestrator.execution_name(chain.machine, run_id) if chain is not None else execution
    out = _advance(
        ports,
        run_id,
        kinds,
        max_events=max_events,
        max_ms=max_ms,
        tally=tally,
        stamp=task_stamp(named, hops) if named else "",
        prior=prior_stamp(named, hops),
        release=release,
    )
    out["hops"] = hops + 1
    if chain is not None:
        return chain_of.go_on(ports, run_id, out, chain, execution, machine_arn)
    if out["next"] in ("continue", "wait") and hops + 1 >= int(ports.settings.execution_max_tasks):
        return renew(ports, run_id, execution, hops + 1, machine_arn)
    return out


# The run as a task that goes on (``continue``) left it, for the next task of its execution in this warm container:
# that task takes it instead of reading the run (decision 0177). Taken once (popped), and only by the task whose
# predecessor's stamp it carries. A kind hands it in its answer under ``LEFT``.
LEFT = "_left"
# An answer's key: the append that ended the run also gave its tenant's slot back (``release``, decision 0183).
RELEASED = "_released"
_left: LockedLRUCache[str, RunRecord] = LockedLRUCache(maxsize=8)


def _handed(run_id: str, prior: str | None) -> RunRecord | None:
    rec = _left.pop(run_id, None)
    return rec if rec is not None and prior is not None and rec.task_stamp == prior else None


def keep_left(run_id: str, out: dict[str, Any]) -> None:
    left = out.pop(LEFT, None)
    if isinstance(left, RunRecord) and out.get("next") == "continue":
        _left[run_id] = left


def read_for_task(ports: Ports, run_id: str, prior: str | None) -> RunRecord | None:
    """A task's read of its run: eventually consistent when the run item names the task before this one (``prior``)
    as its last writer. That read holds at least that task's last write, and a later one (a cancel, a pause, a
    signal, an erasure) fails this task's first append's conditions as a read just before it would. A halt is
    decided on a consistent read (a stale ``paused`` would park a run its resume already let go). Decision 0173."""
    rec = ports.runs.get_run(run_id, written_by=prior)
    if prior is not None and (rec is None or rec.status not in WRITABLE):
        rec = ports.runs.get_run(run_id)
    return rec


def renew(ports: Ports, run_id: str, execution: str, hops: int, machine_arn: str = "") -> dict[str, Any]:
    """Continue the run in a new execution of its state machine; this execution ends (``done``)."""
    rec = ports.runs.get_run(run_id)
    if rec is None or rec.status not in WRITABLE:
        return {**halt(run_id, rec), "hops": hops}
    machine = "fork" if rec.data.get("fork") else "run"  # its input names no hops (0) and no index (built)
    arn = ports.orchestrator.start(
        machine, run_id, {"runId": run_id}, generation=execution_generation(execution) + 1, machine_arn=machine_arn
    )
    chain_of.store_execution(ports, run_id, arn)
    return {"runId": run_id, "next": "done", "waitSeconds": 0, "hops": hops, "renewed": True}


def _advance(
    ports: Ports,
    run_id: str,
    kinds: RunKinds,
    *,
    max_events: int = TASK_EVENTS,
    max_ms: int = 60_000,
    tally: ToolTally | None = None,
    stamp: str = "",
    prior: str | None = None,
    release: Sequence[StagedWrite] = (),
) -> dict[str, Any]:
    rec = _handed(run_id, prior) or read_for_task(ports, run_id, prior)
    # a session of an external agent (decision 0143) is advanced by its gateway and its expiry, never by a task
    if rec is None or rec.status not in WRITABLE or rec.kind == "session":
        return halt(run_id, rec)
    check_engine(rec.data)  # a build of another engine version never advances the run (shared/engine/version.py)
    kind = kinds[run_kind(rec)]
    # The task's span joins the run's trace (the context stored when the run was created), whatever execution
    # or continuation this task belongs to.
    with ports.tracing.span(spans.TASK_SPAN, spans.run_attributes(rec), parent=spans.trace_parent(rec)) as span:
        out = kind(ports, rec, max_events=max_events, max_ms=max_ms, tally=tally, stamp=stamp, release=release)
        keep_left(run_id, out)
        span.set("openwop.task.next", str(out.get("next", "")))
        if DIVERGED_AT in out:
            span.set(spans.DIVERGED, True)
            span.set(spans.DIVERGED_SEQ, int(out.pop(DIVERGED_AT)))
        return out
