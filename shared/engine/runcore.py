"""The start of a pure run core: a workflow run's next step from its folded state, and a replay of a recorded
history, with no ports and no I/O (a definition, the recorded events, an injected clock and ids and the recorded
outcomes in; the next events and any divergences out). Only the replay mode so far.

``run_step`` decides the run-level steps (the run starts, times out, fails, skips a node, completes) that
``workflowrun.next_step`` takes; ``replayed_outcome`` is a side-effecting node's outcome served from its source's
record, the step ``workflownodes.start_node`` takes in a replay, and ``hold_step`` an active hold's.
``replay(definition, events, from_seq)`` re-executes a recorded history with the node kinds that need no outside
call (``core.noop``, holds, side-effecting nodes served from the record) and reports where it diverges, as a replay
fork does on the real stack (its fold is ``state.apply``, its comparison ``comparable``), in milliseconds; a node
that would call out (a tool, HTTP, an agent, an approval) raises ``NeedsEffects``: those steps still need their
ports (the tool-call record, the model-call log), which is where the core grows next.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from shared.clock import iso_from_ms, ms_from_iso
from shared.engine import state as st
from shared.engine.canonical import same_json
from shared.engine.registry import NODE_TYPES
from shared.engine.version import ENGINE_VERSION
from shared.engine.workflow import UnresolvedInputError, Workflow, load_workflow, resolve_node_inputs
from shared.protocol import codes as c

HOLD_MAX_MS = 60_000  # a conformance hold waits at most a minute (the fixtures document 1..60000 ms)

Draft = tuple[str, dict[str, Any], str | None]  # an event to be: its type, payload and node


@dataclass
class Step:
    events: list[Draft] = field(default_factory=list)
    wait_ms: int | None = None
    done: bool = False


def fail_obj(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def node_ev(t: str, nid: str, **payload: Any) -> Draft:
    return (t, {"nodeId": nid, **payload}, nid)


def negotiations(nid: str, payloads: list[dict[str, Any]]) -> list[Draft]:
    return [(c.NEGOTIATION_DECIDED, p, nid) for p in payloads]


# --------------------------------------------------------------------------- the run-level step


def run_step(wf: Workflow, data: dict[str, Any], state: dict[str, Any], now: int) -> Step | None:
    """The run's next step when it is the run's own (started, done, timed out, failed, a skip, completed); None when
    it is a node's: its active node's, or the first ready node's start. ``data``: the run's creation facts
    (``inputs``, ``owner``, ``tags``, ``metadata``, a fork's ``fork.startedAtMs``); ``now``: the injected clock."""
    if state["status"] == "pending":
        payload: dict[str, Any] = {
            "workflowId": wf.id,
            "inputs": data.get("inputs", {}),
            "transport": "rest",
            "engineVersion": ENGINE_VERSION,
            "owner": data["owner"],
        }
        for k in ("tags", "metadata"):
            if data.get(k) is not None:
                payload[k] = data[k]
        return Step([(c.RUN_STARTED, payload, None)])
    if state["status"] in c.TERMINAL_STATUSES:
        return Step(done=True)
    active = state.get("active")
    # A fork's clock starts when the fork does: a prefix recorded long ago must not time the child out.
    began = max(int(state.get("startedAtMs") or 0), int((data.get("fork") or {}).get("startedAtMs", 0)))
    if wf.timeout_ms and began and now - began > wf.timeout_ms:
        evs = []
        if active:
            evs.append(node_ev(c.NODE_CANCELLED, active["nodeId"], reason="run-timeout"))
        evs.append((c.RUN_FAILED, {"error": fail_obj(c.RUN_TIMEOUT, "the run exceeded settings.timeout")}, None))
        return Step(evs, done=True)
    if state.get("failure"):
        f = state["failure"]
        err = f.get("error") or fail_obj(c.NODE_EXECUTION_FAILED, "a node failed")
        return Step([(c.RUN_FAILED, {"error": err, "failedNodeId": f["nodeId"]}, None)], done=True)
    if state.get("skips"):
        return Step([node_ev(c.NODE_SKIPPED, state["skips"][0], reason="trigger rule not satisfied")])
    if active or state["ready"]:
        return None
    outputs = {
        n: v["outputs"]
        for n, v in state["nodes"].items()
        if v["status"] == "completed" and not any(not e.back for e in wf.out_edges.get(n, ()))
    }
    return Step([(c.RUN_COMPLETED, {"outputs": outputs}, None)], done=True)


# --------------------------------------------------------------------------- pure node steps


def node_inputs(state: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The node's resolved inputs; a connection reads the upstream node's latest completed outputs."""
    nodes = state["nodes"]
    # Only the nodes a connection names (not every node's outputs, which made a long chain quadratic).
    named = {
        b["nodeId"]
        for b in (node.get("inputs") or {}).values()
        if isinstance(b, dict) and b.get("type") == "connection" and isinstance(b.get("nodeId"), str)
    }
    outputs = {k: nodes[k]["outputs"] for k in named if k in nodes and nodes[k].get("outputs") is not None}
    return resolve_node_inputs(node, state["variables"], outputs)


def hold_delay(inputs: dict[str, Any]) -> int:
    d = inputs.get("delayMs", 0)
    if not isinstance(d, int | float) or isinstance(d, bool) or d < 0:
        return 0
    return int(min(d, HOLD_MAX_MS))


def hold_step(active: dict[str, Any], inputs: dict[str, Any], now: int) -> Step:
    """An active hold: it completes with its inputs once its delay has passed, else waits the rest."""
    until = int(active["startedAtMs"]) + hold_delay(inputs)
    if now >= until:
        return Step([node_ev(c.NODE_COMPLETED, active["nodeId"], outputs=inputs)])
    return Step(wait_ms=until - now)


def replayed_outcome(
    state: dict[str, Any], nid: str, started: Draft, outcomes: dict[str, list[dict[str, Any]]]
) -> Step:
    """A side-effecting node in a replay: the source's recorded outcome of this execution (n = 1 + this node's
    terminal outcomes so far, inherited prefix included), its negotiations as recorded; none recorded:
    ``replay_source_missing``. Never the effect."""
    n = int(state["nodes"][nid]["terminals"]) + 1
    recorded = outcomes.get(nid, [])
    if len(recorded) >= n:
        o = recorded[n - 1]
        again = negotiations(nid, o.get("negotiations") or [])  # as recorded, `at` included
        if o["type"] == c.NODE_COMPLETED:
            return Step([started, *again, node_ev(c.NODE_COMPLETED, nid, outputs=o.get("outputs", {}))])
        return Step([started, *again, node_ev(c.NODE_FAILED, nid, error=o.get("error"))])
    missing = fail_obj(c.REPLAY_SOURCE_MISSING, "the source run has no recorded outcome for this execution")
    return Step([started, node_ev(c.NODE_FAILED, nid, error=missing)])


# --------------------------------------------------------------------------- divergence


def comparable(ev: dict[str, Any]) -> dict[str, Any]:
    """What a replay must reproduce: type, nodeId and payload (clock and duration fields excluded: a call's
    ``durationMs``, a negotiation's ``at``)."""
    p = ev.get("payload")
    if isinstance(p, dict):
        clock = ("durationMs", "at") if ev.get("type") == c.NEGOTIATION_DECIDED else ("durationMs",)
        p = {k: v for k, v in p.items() if k not in clock}
    return {"type": ev.get("type"), "nodeId": ev.get("nodeId"), "payload": p}


def divergence(source_run_id: str, ev: dict[str, Any], src: dict[str, Any] | None) -> dict[str, Any]:
    """The ``replay.diverged`` payload for ``ev``, which does not reproduce ``src`` (None: the source has no
    event there)."""
    payload: dict[str, Any] = {
        "sourceRunId": source_run_id,
        "atSequence": int(ev["sequence"]),
        "divergencePoint": ev["type"],
    }
    if src is None:
        payload["divergenceKind"] = "extra"
    else:
        payload["originalEventId"] = src["eventId"]
        payload["divergenceKind"] = "type-mismatch" if src["type"] != ev["type"] else "output"
    return payload


# --------------------------------------------------------------------------- replay


class NeedsEffects(Exception):
    """The replay reached a node whose step needs the ports (a tool call, HTTP, an agent, an approval)."""


@dataclass
class Replayed:
    events: list[dict[str, Any]]  # the replay's log: the prefix as recorded, then what current code produced
    divergences: list[dict[str, Any]]  # the ``replay.diverged`` payloads, in order (at most one: the first)


class OutcomeIndex:
    """Folds a log, event by event, into each side-effecting node's terminal outcomes in order, with the
    negotiations each execution made before its outcome (a replay emits them again with it). A replay fork's index
    (``forkindex.build``) and ``recorded_outcomes`` both read a log through it."""

    def __init__(self, side_effect_nodes: Collection[str]) -> None:
        self.side = side_effect_nodes
        self.outcomes: dict[str, list[dict[str, Any]]] = {}
        self._negotiated: dict[str, list[dict[str, Any]]] = {}  # a node's negotiations since its node.started

    def add(self, ev: dict[str, Any]) -> None:
        nid = ev.get("nodeId")
        if not nid or nid not in self.side:
            return
        nid = str(nid)
        if ev["type"] == c.NEGOTIATION_DECIDED:
            self._negotiated.setdefault(nid, []).append(dict(ev.get("payload") or {}))
        elif ev["type"] == c.NODE_STARTED:
            self._negotiated.pop(nid, None)
        elif ev["type"] in c.NODE_TERMINAL_OUTCOMES:
            p = ev.get("payload") or {}
            o: dict[str, Any] = {"type": ev["type"], "sequence": ev["sequence"]}
            if ev["type"] == c.NODE_COMPLETED:
                o["outputs"] = p.get("outputs", {})
            else:
                o["error"] = p.get("error")
            if nid in self._negotiated:
                o["negotiations"] = self._negotiated.pop(nid)
            self.outcomes.setdefault(nid, []).append(o)


def side_effect_nodes(wf: Workflow) -> set[str]:
    """The nodes of ``wf`` whose outcomes a replay takes from the record."""
    return {nid for nid, node in wf.nodes.items() if NODE_TYPES[node["typeId"]].role == "side-effect"}


def recorded_outcomes(wf: Workflow, events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each side-effecting node's terminal outcomes in order, as a replay fork's index holds them."""
    index = OutcomeIndex(side_effect_nodes(wf))
    for ev in events:
        index.add(ev)
    return index.outcomes


def _node_step(wf: Workflow, state: dict[str, Any], nid: str, now: int, outcomes: dict[str, Any], fresh: bool) -> Step:
    """The pure node kinds' steps in a replay: a start (``fresh``: with its node.started) or the active node's."""
    node = wf.nodes[nid]
    type_id = node["typeId"]
    started = node_ev(c.NODE_STARTED, nid, typeId=type_id, attempt=0)
    head = [started] if fresh else []
    try:
        inputs = node_inputs(state, node)
    except UnresolvedInputError as exc:
        return Step([*head, node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, str(exc)))])
    if type_id == "core.conformance.hold":
        return Step(head) if fresh else hold_step(state["active"], inputs, now)
    if NODE_TYPES[type_id].role == "side-effect":
        step = replayed_outcome(state, nid, started, outcomes)
        return step if fresh else Step(step.events[1:])
    if type_id == "core.noop":
        return Step([*head, node_ev(c.NODE_COMPLETED, nid, outputs={})])
    raise NeedsEffects(f"node {nid!r} ({type_id}) needs the ports to step")


def replay(
    definition: dict[str, Any],
    events: list[dict[str, Any]],
    from_seq: int = 0,
    *,
    clock: Callable[[int], int] | None = None,
    ids: Callable[[int], str] | None = None,
    source_run_id: str = "",
    max_steps: int = 10_000,
) -> Replayed:
    """Re-execute the recorded history ``events`` of a run of ``definition`` from ``from_seq`` in replay mode: the
    prefix before it is kept as recorded, a node in flight at it restarts, side-effecting nodes take the recorded
    outcomes, and each produced event is compared with the recorded one at its sequence (the first that differs is
    reported, and the replay goes on). ``clock(seq)``: the time of the event at ``seq`` (default: the recorded
    event's there, else the last recorded); ``ids(seq)``: its event id (default ``replay-<seq>``). No ports, no I/O.
    """
    wf = load_workflow(definition, set(NODE_TYPES))
    recorded = sorted(events, key=lambda e: int(e["sequence"]))
    by_seq = {int(e["sequence"]): e for e in recorded}
    last_ms = ms_from_iso(recorded[-1]["timestamp"]) if recorded else 0
    now_of = clock or (lambda seq: ms_from_iso(by_seq[seq]["timestamp"]) if seq in by_seq else last_ms)
    id_of = ids or (lambda seq: f"replay-{seq}")
    head = next((e for e in recorded if e["type"] == c.RUN_STARTED), None)
    data = dict((head or {}).get("payload") or {})
    if head is None:
        raise ValueError("the recorded history has no run.started")
    outcomes = recorded_outcomes(wf, recorded)
    out = [dict(e, eventId=id_of(int(e["sequence"]))) for e in recorded if int(e["sequence"]) < from_seq]
    state = st.fold(out, wf)
    restart = from_seq > 0 and state.get("active") is not None
    divergences: list[dict[str, Any]] = []
    seq = from_seq
    waited = 0  # the waits the replay took past the recorded clock (a hold recorded shorter than current code holds)
    for _ in range(max_steps):
        now = now_of(seq - int(state.get("inserted", 0))) + waited
        step = run_step(wf, data, state, now)
        if step is None:
            active = state.get("active")
            if active is not None and restart:
                n = state["nodes"][active["nodeId"]]
                n["visits"] -= 1  # the same execution begins again (its visit already counted)
                try:
                    step = _node_step(wf, state, active["nodeId"], now, outcomes, fresh=True)
                finally:
                    n["visits"] += 1
            elif active is not None:
                step = _node_step(wf, state, active["nodeId"], now, outcomes, fresh=False)
            else:
                step = _node_step(wf, state, state["ready"][0], now, outcomes, fresh=True)
        restart = False
        for t, payload, node_id in step.events:
            ev = _event(id_of(seq), seq, t, payload, node_id, iso_from_ms(now))
            st.apply(state, ev, wf)
            out.append(ev)
            seq += 1
            div = _diverged(state, ev, by_seq, source_run_id)
            if div is not None:
                divergences.append(div)
                dev = _event(id_of(seq), seq, c.REPLAY_DIVERGED, div, None, iso_from_ms(now))
                dev["causationId"] = ev["eventId"]
                st.apply(state, dev, wf)
                out.append(dev)
                seq += 1
        if step.done or state["status"] in c.TERMINAL_STATUSES or state["status"] in c.PARKED_STATUSES:
            break
        if step.wait_ms is not None:
            waited += step.wait_ms
    return Replayed(out, divergences)


def _event(event_id: str, seq: int, t: str, payload: dict[str, Any], node_id: str | None, ts: str) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "eventId": event_id,
        "type": t,
        "payload": payload,
        "timestamp": ts,
        "sequence": seq,
        "schemaVersion": 1,
        "engineVersion": ENGINE_VERSION,
    }
    if node_id:
        ev["nodeId"] = node_id
    return ev


def _diverged(
    state: dict[str, Any], ev: dict[str, Any], by_seq: dict[int, dict[str, Any]], source_run_id: str
) -> dict[str, Any] | None:
    """``ev`` compared with the recorded event it re-executes (its sequence less the events inserted before it); the
    first that differs is a divergence."""
    if state.get("diverged"):
        return None
    src = by_seq.get(int(ev["sequence"]) - int(state.get("inserted", 0)))
    if src is not None and same_json(comparable(src), comparable(ev)):
        return None
    return divergence(source_run_id, ev, src)
