"""The run state is a fold of the event log: ``apply`` is the one transition function.

The engine applies each event it emits; a fork folds its copied prefix with the
same function; the stored snapshot on the run item is only a cache of the fold.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from shared.clock import ms_from_iso
from shared.engine.workflow import Edge, Workflow
from shared.protocol import codes as c


def new_state() -> dict[str, Any]:
    return {
        "v": 1,
        "status": "pending",
        "variables": {},
        "nodes": {},
        "ready": [],
        "active": None,
        "failure": None,
        "startedAtMs": None,
        "toolCalls": 0,
        "diverged": False,
        "inserted": 0,
    }


def _node(state: dict[str, Any], nid: str) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    if nid not in nodes:
        nodes[nid] = {"status": "pending", "visits": 0, "terminals": 0, "outputs": None}
    return nodes[nid]


def _back_edge(state: dict[str, Any], wf: Workflow, e: Edge, src: dict[str, Any], tgt: dict[str, Any]) -> None:
    """A loopback edge: re-open its target (and what the target reaches) while the loop budget lasts."""
    ok = src["status"] == "completed" if e.rule != "any_failed" else src["status"] == "failed"
    if ok and tgt["visits"] < wf.max_loopback and e.target not in state["ready"]:
        for n in wf.forward_reachable(e.target):
            if n != e.target:
                _node(state, n)["status"] = "pending"
        tgt["status"] = "pending"
        state["ready"].append(e.target)


def _any_success(src: str, ins: list[str], terminal: bool) -> tuple[bool, bool]:
    return src == "completed", terminal and "completed" not in ins


def _all_success(src: str, ins: list[str], terminal: bool) -> tuple[bool, bool]:
    return terminal and all(s == "completed" for s in ins), terminal and any(s != "completed" for s in ins)


def _all_complete(src: str, ins: list[str], terminal: bool) -> tuple[bool, bool]:
    return terminal, False


def _none_failed(src: str, ins: list[str], terminal: bool) -> tuple[bool, bool]:
    return terminal and "failed" not in ins, terminal and "failed" in ins


def _any_failed(src: str, ins: list[str], terminal: bool) -> tuple[bool, bool]:
    return src == "failed", terminal and "failed" not in ins


# An edge's trigger rule -> (fire, skip) of its target; an unknown rule reads as ``any_failed``.
_TRIGGER_RULES = {
    "any_success": _any_success,
    "all_success": _all_success,
    "all_complete": _all_complete,
    "none_failed": _none_failed,
    "any_failed": _any_failed,
}


def _schedule(state: dict[str, Any], wf: Workflow, source: str) -> None:
    """After ``source`` reached a terminal status, activate or skip its successors."""
    src = _node(state, source)
    for e in wf.out_edges.get(source, ()):
        tgt = _node(state, e.target)
        if e.back:
            _back_edge(state, wf, e, src, tgt)
            continue
        if tgt["status"] != "pending" or e.target in state["ready"]:
            continue
        ins = [_node(state, x.source)["status"] for x in wf.in_forward.get(e.target, ())]
        terminal = all(s in ("completed", "failed", "skipped", "cancelled") for s in ins)
        fire, skip = _TRIGGER_RULES.get(e.rule, _any_failed)(src["status"], ins, terminal)
        if fire:
            state["ready"].append(e.target)
        elif skip:
            state.setdefault("skips", []).append(e.target)


def handles_failure(wf: Workflow, nid: str) -> bool:
    return any(e.rule in ("all_complete", "any_failed") for e in wf.out_edges.get(nid, ()))


# One folder per event type: ``(state, event, payload, nodeId, workflow)``; a type without one changes nothing.
_Folder = Callable[[dict[str, Any], dict[str, Any], dict[str, Any], Any, "Workflow | None"], None]


def _run_started(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    state["status"] = "running"
    state["variables"] = dict(p.get("inputs") or {})
    state["startedAtMs"] = ms_from_iso(ev["timestamp"])
    if wf is not None:
        state["ready"] = list(wf.entries)
        for node_id in wf.node_ids:
            _node(state, node_id)


def _node_started(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    if not nid:
        return
    n = _node(state, nid)
    active = state["active"]
    if active is not None and active["nodeId"] == nid:
        # A fork restarting the node its prefix left in flight: the same execution (same ordinal) begins
        # again, so its events from here re-run those after the original node.started, shifted by this gap.
        state["inserted"] = int(state.get("inserted", 0)) + int(ev["sequence"]) - int(active.get("seq", 0))
    else:
        n["visits"] += 1
    n["status"] = "running"
    if nid in state["ready"]:
        state["ready"].remove(nid)
    state["active"] = {
        "nodeId": nid,
        "startedAtMs": ms_from_iso(ev["timestamp"]),
        "agent": None,
        "seq": int(ev["sequence"]),
    }


def _node_ended(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    """``node.completed``, ``node.failed`` or ``node.skipped``: the node's terminal status, then its successors."""
    if not nid:
        return
    t = ev["type"]
    n = _node(state, nid)
    if t == c.NODE_COMPLETED:
        n["status"], n["outputs"] = "completed", p.get("outputs", {})
    elif t == c.NODE_FAILED:
        n["status"], n["error"] = "failed", p.get("error")
    else:
        _node_skipped(state, n, nid)
    if t != c.NODE_SKIPPED:
        n["terminals"] += 1
    if state["active"] and state["active"]["nodeId"] == nid:
        state["active"] = None
    if wf is not None:
        if t == c.NODE_FAILED and not handles_failure(wf, nid):
            state["failure"] = {"nodeId": nid, "error": p.get("error")}
        _schedule(state, wf, nid)


def _node_skipped(state: dict[str, Any], n: dict[str, Any], nid: str) -> None:
    n["status"] = "skipped"
    if nid in state["ready"]:
        state["ready"].remove(nid)
    skips = state.get("skips") or []
    if nid in skips:
        skips.remove(nid)


def _node_cancelled(
    state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None
) -> None:
    if not nid:
        return
    _node(state, nid)["status"] = "cancelled"
    if state["active"] and state["active"]["nodeId"] == nid:
        state["active"] = None


def _agent_started(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    if state["active"] is not None:
        state["active"]["agent"] = {
            "invocationId": p.get("invocationId"),
            "calls": 0,
            "turns": 0,
            "decided": False,
            "history": [],
            "order": order_key(int(ev["sequence"])),
        }


def _provider_usage(
    state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None
) -> None:
    if state["active"] is not None and state["active"].get("agent") is not None:
        ag = state["active"]["agent"]
        ag["turns"] = int(ag.get("turns", 0)) + 1


def _tool_returned(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    state["toolCalls"] += 1
    if state["active"] is not None and state["active"].get("agent") is not None:
        ag = state["active"]["agent"]
        ag["calls"] += 1
        ag["history"].append({"status": p.get("status", "ok"), "outcome": p.get("outcome"), "error": p.get("error")})


def _agent_decided(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    if state["active"] is not None and state["active"].get("agent") is not None:
        state["active"]["agent"]["decided"] = True
        state["active"]["agent"]["decision"] = p.get("decision")


def _run_ended(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    """``run.completed`` or ``run.failed``."""
    state["status"] = "completed" if ev["type"] == c.RUN_COMPLETED else "failed"


def _interrupt_requested(
    state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None
) -> None:
    if state["active"] is not None:
        state["status"] = "waiting-approval"
        state["active"]["interrupt"] = {
            "interruptId": p.get("interruptId"),
            "kind": p.get("kind"),
            "key": p.get("key"),
            "data": p.get("data") or {},
            "resolved": None,
        }


def _interrupt_resolved(
    state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None
) -> None:
    if state["active"] is None or not state["active"].get("interrupt"):
        return
    state["status"] = "running"
    state["active"]["interrupt"]["resolved"] = {
        "action": p.get("action"),
        "decision": p.get("decision"),
        "resumeValue": p.get("resumeValue"),
    }
    if nid:
        n = _node(state, nid)
        n["resolutions"] = int(n.get("resolutions", 0)) + 1


def _run_paused(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    """``run.paused`` or ``run.resumed``."""
    state["paused"] = ev["type"] == c.RUN_PAUSED


def _run_cancelled(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    state["status"] = "cancelled"
    state["active"] = None


def _diverged(state: dict[str, Any], ev: dict[str, Any], p: dict[str, Any], nid: Any, wf: Workflow | None) -> None:
    state["diverged"] = True
    state["inserted"] = int(state.get("inserted", 0)) + 1


_FOLDERS: dict[str, _Folder] = {
    c.RUN_STARTED: _run_started,
    c.NODE_STARTED: _node_started,
    c.NODE_COMPLETED: _node_ended,
    c.NODE_FAILED: _node_ended,
    c.NODE_SKIPPED: _node_ended,
    c.NODE_CANCELLED: _node_cancelled,
    c.AGENT_INVOCATION_STARTED: _agent_started,
    c.PROVIDER_USAGE: _provider_usage,
    c.AGENT_TOOL_RETURNED: _tool_returned,
    c.AGENT_DECIDED: _agent_decided,
    c.RUN_COMPLETED: _run_ended,
    c.RUN_FAILED: _run_ended,
    c.INTERRUPT_REQUESTED: _interrupt_requested,
    c.INTERRUPT_RESOLVED: _interrupt_resolved,
    c.RUN_PAUSED: _run_paused,
    c.RUN_RESUMED: _run_paused,
    c.RUN_CANCELLED: _run_cancelled,
    c.REPLAY_DIVERGED: _diverged,
    c.REPLAY_DIVERGED_AT_REFUSAL_EVENT: _diverged,
}


def apply(state: dict[str, Any], ev: dict[str, Any], wf: Workflow | None) -> dict[str, Any]:
    """Fold one event into the state (in place) and return it."""
    folder = _FOLDERS.get(ev["type"])
    if folder is not None:
        p = ev.get("payload") or {}
        nid = ev.get("nodeId") or (p.get("nodeId") if isinstance(p, dict) else None)
        folder(state, ev, p, nid, wf)
    return state


def fold(events: list[dict[str, Any]], wf: Workflow | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    state = copy.deepcopy(base) if base is not None else new_state()
    for ev in events:
        apply(state, ev, wf)
    return state


def projection(state: dict[str, Any]) -> dict[str, Any]:
    """The snapshot fields a replay prefix must reproduce byte for byte."""
    node_states = {
        k: {"status": v["status"], **({"outputs": v["outputs"]} if v.get("outputs") is not None else {})}
        for k, v in sorted(state["nodes"].items())
    }
    return {"status": state["status"], "variables": state["variables"], "channels": {}, "nodeStates": node_states}


def order_key(seq: int) -> str:
    """A workflow run's invocation order key: the 12-digit sequence of its ``agent.invocation-started`` (the first
    half of its calls' record keys, ``tools.key_of_call``)."""
    return f"{seq:012d}"
