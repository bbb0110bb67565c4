"""The run state is a fold of the event log: ``apply`` is the one transition function.

The engine applies each event it emits; a fork folds its copied prefix with the
same function; the stored snapshot on the run item is only a cache of the fold.
"""

from __future__ import annotations

import copy
from typing import Any

from shared.clock import ms_from_iso
from shared.engine.workflow import Workflow
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


def _schedule(state: dict[str, Any], wf: Workflow, source: str) -> None:
    """After ``source`` reached a terminal status, activate or skip its successors."""
    src = _node(state, source)
    for e in wf.out_edges.get(source, ()):
        tgt = _node(state, e.target)
        if e.back:
            ok = src["status"] == "completed" if e.rule != "any_failed" else src["status"] == "failed"
            if ok and tgt["visits"] < wf.max_loopback and e.target not in state["ready"]:
                for n in wf.forward_reachable(e.target):
                    if n != e.target:
                        _node(state, n)["status"] = "pending"
                tgt["status"] = "pending"
                state["ready"].append(e.target)
            continue
        if tgt["status"] != "pending" or e.target in state["ready"]:
            continue
        ins = [_node(state, x.source)["status"] for x in wf.in_forward.get(e.target, ())]
        terminal = all(s in ("completed", "failed", "skipped", "cancelled") for s in ins)
        rule = e.rule
        if rule == "any_success":
            fire, skip = src["status"] == "completed", terminal and "completed" not in ins
        elif rule == "all_success":
            fire, skip = (
                terminal and all(s == "completed" for s in ins),
                terminal and any(s != "completed" for s in ins),
            )
        elif rule == "all_complete":
            fire, skip = terminal, False
        elif rule == "none_failed":
            fire, skip = terminal and "failed" not in ins, terminal and "failed" in ins
        else:  # any_failed
            fire, skip = src["status"] == "failed", terminal and "failed" not in ins
        if fire:
            state["ready"].append(e.target)
        elif skip:
            state.setdefault("skips", []).append(e.target)


def handles_failure(wf: Workflow, nid: str) -> bool:
    return any(e.rule in ("all_complete", "any_failed") for e in wf.out_edges.get(nid, ()))


def apply(state: dict[str, Any], ev: dict[str, Any], wf: Workflow | None) -> dict[str, Any]:
    """Fold one event into the state (in place) and return it."""
    t = ev["type"]
    p = ev.get("payload") or {}
    nid = ev.get("nodeId") or (p.get("nodeId") if isinstance(p, dict) else None)
    if t == c.RUN_STARTED:
        state["status"] = "running"
        state["variables"] = dict(p.get("inputs") or {})
        state["startedAtMs"] = ms_from_iso(ev["timestamp"])
        if wf is not None:
            state["ready"] = list(wf.entries)
            for node_id in wf.node_ids:
                _node(state, node_id)
    elif t == c.NODE_STARTED and nid:
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
    elif t in (c.NODE_COMPLETED, c.NODE_FAILED, c.NODE_SKIPPED) and nid:
        n = _node(state, nid)
        if t == c.NODE_COMPLETED:
            n["status"], n["outputs"] = "completed", p.get("outputs", {})
        elif t == c.NODE_FAILED:
            n["status"], n["error"] = "failed", p.get("error")
        else:
            n["status"] = "skipped"
            if nid in state["ready"]:
                state["ready"].remove(nid)
            skips = state.get("skips") or []
            if nid in skips:
                skips.remove(nid)
        if t != c.NODE_SKIPPED:
            n["terminals"] += 1
        if state["active"] and state["active"]["nodeId"] == nid:
            state["active"] = None
        if wf is not None:
            if t == c.NODE_FAILED and not handles_failure(wf, nid):
                state["failure"] = {"nodeId": nid, "error": p.get("error")}
            _schedule(state, wf, nid)
    elif t == c.NODE_CANCELLED and nid:
        _node(state, nid)["status"] = "cancelled"
        if state["active"] and state["active"]["nodeId"] == nid:
            state["active"] = None
    elif t == c.AGENT_INVOCATION_STARTED and state["active"] is not None:
        state["active"]["agent"] = {
            "invocationId": p.get("invocationId"),
            "calls": 0,
            "turns": 0,
            "decided": False,
            "history": [],
            "order": order_key(int(ev["sequence"])),
        }
    elif t == c.PROVIDER_USAGE and state["active"] is not None and state["active"].get("agent") is not None:
        ag = state["active"]["agent"]
        ag["turns"] = int(ag.get("turns", 0)) + 1
    elif t == c.AGENT_TOOL_RETURNED:
        state["toolCalls"] += 1
        if state["active"] is not None and state["active"].get("agent") is not None:
            ag = state["active"]["agent"]
            ag["calls"] += 1
            ag["history"].append(
                {"status": p.get("status", "ok"), "outcome": p.get("outcome"), "error": p.get("error")}
            )
    elif t == c.AGENT_DECIDED and state["active"] is not None and state["active"].get("agent") is not None:
        state["active"]["agent"]["decided"] = True
        state["active"]["agent"]["decision"] = p.get("decision")
    elif t == c.RUN_COMPLETED:
        state["status"] = "completed"
    elif t == c.RUN_FAILED:
        state["status"] = "failed"
    elif t == c.INTERRUPT_REQUESTED and state["active"] is not None:
        state["status"] = "waiting-approval"
        state["active"]["interrupt"] = {
            "interruptId": p.get("interruptId"),
            "kind": p.get("kind"),
            "key": p.get("key"),
            "data": p.get("data") or {},
            "resolved": None,
        }
    elif t == c.INTERRUPT_RESOLVED and state["active"] is not None and state["active"].get("interrupt"):
        state["status"] = "running"
        state["active"]["interrupt"]["resolved"] = {
            "action": p.get("action"),
            "decision": p.get("decision"),
            "resumeValue": p.get("resumeValue"),
        }
        if nid:
            n = _node(state, nid)
            n["resolutions"] = int(n.get("resolutions", 0)) + 1
    elif t in (c.RUN_PAUSED, c.RUN_RESUMED):
        state["paused"] = t == c.RUN_PAUSED
    elif t == c.RUN_CANCELLED:
        state["status"] = "cancelled"
        state["active"] = None
    elif t in (c.REPLAY_DIVERGED, c.REPLAY_DIVERGED_AT_REFUSAL_EVENT):
        state["diverged"] = True
        state["inserted"] = int(state.get("inserted", 0)) + 1
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
