"""What each node kind of a workflow run does in a step: a node's start (its ``node.started`` and, for a single-shot
node, its outcome), its continuation while active (a hold's wait, an approval's resolution, an agent's next turn) and
its restart after a fork's prefix. In a replay a side-effecting node takes its source's recorded outcome and an
approval its recorded resolution; the nodes that act outside the run are ``nodeeffects``'. The steps that need no
port (a hold, a replayed outcome, the inputs) are the pure core's (``runcore``).
"""

from __future__ import annotations

from typing import Any

from shared.engine.agents import invocation_step, started_payload
from shared.engine.kernel import EngineError
from shared.engine.nodeeffects import NodeFailure, execute_once
from shared.engine.registry import NODE_TYPES
from shared.engine.runcore import Draft, Step, fail_obj, hold_step, negotiations, node_ev, node_inputs, replayed_outcome
from shared.engine.tools import Guard
from shared.engine.workflow import UnresolvedInputError
from shared.engine.workflowcontext import RunContext, node_agent_id
from shared.ports import EffectDeniedError
from shared.protocol import codes as c


def start_node(ctx: RunContext, state: dict[str, Any], nid: str) -> Step:
    """Start node ``nid``: its ``node.started`` and, for a single-shot node, its outcome in the same step."""
    node = ctx.wf.nodes[nid]
    type_id = node["typeId"]
    nt = NODE_TYPES[type_id]
    ordinal = int(state["nodes"][nid]["visits"]) + 1
    started = node_ev(c.NODE_STARTED, nid, typeId=type_id, attempt=0)
    try:
        inputs = node_inputs(state, node)
    except UnresolvedInputError as exc:
        return Step([started, node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, str(exc)))])
    if ctx.mode == "replay" and nt.role == "side-effect":
        return replayed_outcome(state, nid, started, ctx.source_outcomes)  # the pure core's: never the effect
    if type_id == "core.conformance.hold":
        return Step([started])
    if type_id == "core.approvalGate":
        return _start_approval(ctx, state, nid, started, ordinal)
    if type_id == "core.agent":
        return _start_agent(ctx, nid, started, ordinal)
    return _execute(ctx, nid, inputs, ordinal, started)


def _start_approval(ctx: RunContext, state: dict[str, Any], nid: str, started: Draft, ordinal: int) -> Step:
    """An approval's ``interrupt.requested``; in a replay also the source's resolution of this execution."""
    events = [started, _interrupt_requested(ctx, nid, ctx.wf.nodes[nid], ordinal)]
    if ctx.mode == "replay":
        # A resolution is fixed history: the n-th execution takes the source's n-th, never asks again.
        n = int(state["nodes"][nid].get("resolutions", 0)) + 1
        recorded = ctx.source_resolutions.get(nid, [])
        if len(recorded) >= n:
            events.append(
                node_ev(c.INTERRUPT_RESOLVED, nid, **{k: v for k, v in recorded[n - 1].items() if k != "nodeId"})
            )
    return Step(events)


def _start_agent(ctx: RunContext, nid: str, started: Draft, ordinal: int) -> Step:
    """An agent node's ``agent.invocation-started``: its turns follow in later steps (``continue_node``)."""
    node = ctx.wf.nodes[nid]
    inv = f"{nid}:{ordinal}"
    payload = started_payload(
        ctx.agent(nid, node),
        node_agent_id(node),
        inv,
        "workflow-node",
        (ctx.record.data.get("configurable") or {}).get("ai"),
    )
    channel = ((ctx.record.data.get("agentPins") or {}).get(nid) or {}).get("channel")
    if channel is not None and "resolvedAgentVersion" in payload:
        payload["resolvedChannel"] = channel
    return Step([started, (c.AGENT_INVOCATION_STARTED, payload, None)])


def _execute(ctx: RunContext, nid: str, inputs: dict[str, Any], ordinal: int, started: Draft) -> Step:
    """A single-shot node: its effect through the guard, then its outcome after the negotiations it made."""
    guard = Guard(ctx.mode)
    negotiated: list[dict[str, Any]] = []  # the MCP negotiations of this execution, emitted before its outcome
    try:
        outputs = execute_once(ctx, guard, nid, ctx.wf.nodes[nid], inputs, ordinal, negotiated)
    except EffectDeniedError:
        return Step(
            [
                started,
                node_ev(
                    c.NODE_FAILED,
                    nid,
                    error=fail_obj(c.REPLAY_SOURCE_MISSING, "an effect seam refused an effect in replay"),
                ),
            ]
        )
    except NodeFailure as exc:
        return Step(
            [
                started,
                *negotiations(nid, negotiated),
                node_ev(c.NODE_FAILED, nid, error=fail_obj(exc.code, exc.message)),
            ]
        )
    return Step([started, *negotiations(nid, negotiated), node_ev(c.NODE_COMPLETED, nid, outputs=outputs)])


APPROVAL_ACTIONS = ("accept", "reject")


def _origin(ctx: RunContext) -> str:
    """The run a chain of forks started from: what a replay must reproduce is named after it."""
    return str(ctx.record.data.get("originRunId") or ctx.record.run_id)


def interrupt_id(ctx: RunContext, nid: str, ordinal: int) -> str:
    """Deterministic per (origin run, node, execution): a replay of a fork reproduces its source's ids."""
    import hashlib

    origin = _origin(ctx)
    digest = hashlib.sha256(f"{origin}\n{nid}\n{ordinal}".encode()).hexdigest()[:32]
    return f"{ctx.record.tenant}/i-{digest}"


def _interrupt_requested(
    ctx: RunContext, nid: str, node: dict[str, Any], ordinal: int
) -> tuple[str, dict[str, Any], str | None]:
    """The approval InterruptPayload (interrupt.md §Payload) plus the engine's identity fields."""
    cfg = node.get("config") or {}
    actions = [a for a in (cfg.get("actions") or APPROVAL_ACTIONS) if a in APPROVAL_ACTIONS] or list(APPROVAL_ACTIONS)
    data: dict[str, Any] = {
        "artifactId": f"{_origin(ctx)}#{nid}",
        "artifactType": "workflow-step",
        "title": str(cfg.get("title") or node.get("name") or nid),
        "actions": actions,
    }
    approvers = cfg.get("approversList")
    if isinstance(approvers, list) and approvers:
        data["approversList"] = [str(a) for a in approvers]
    return node_ev(
        c.INTERRUPT_REQUESTED,
        nid,
        interruptId=interrupt_id(ctx, nid, ordinal),
        kind="approval",
        key=f"{nid}#{ordinal}",
        data=data,
    )


def continue_node(ctx: RunContext, state: dict[str, Any], active: dict[str, Any], now: int) -> Step:
    """Step the active node: a hold waits or completes, an approval completes or fails on its resolution, an agent
    takes its next turn, and a single-shot node left active by a crash runs again."""
    nid = active["nodeId"]
    node = ctx.wf.nodes[nid]
    type_id = node["typeId"]
    try:
        inputs = node_inputs(state, node)
    except UnresolvedInputError as exc:
        return Step([node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, str(exc)))])
    if type_id == "core.conformance.hold":
        return hold_step(active, inputs, now)
    if type_id == "core.approvalGate":
        return _continue_approval(ctx, state, nid, active)
    if type_id == "core.agent":
        return _continue_agent(ctx, state, nid, active, inputs)
    # A single-shot node left active by a crash between two transactions of one step: run it again with the
    # same ordinal, without a second node.started.
    step = restart_node(ctx, state, nid)
    return Step(step.events[1:], step.wait_ms, step.done)


def _continue_approval(ctx: RunContext, state: dict[str, Any], nid: str, active: dict[str, Any]) -> Step:
    """An approval's outcome from its resolution (or its ``interrupt.requested`` when a crash lost it)."""
    pending = active.get("interrupt")
    if pending is None:  # a crash between node.started and interrupt.requested (two transactions)
        return Step([_interrupt_requested(ctx, nid, ctx.wf.nodes[nid], int(state["nodes"][nid]["visits"]))])
    resolved = pending.get("resolved")
    if resolved is None:
        raise EngineError("an unresolved interrupt in a running run")
    if resolved.get("decision") == "rejected":
        return Step(
            [
                node_ev(
                    c.NODE_FAILED,
                    nid,
                    error={"code": c.APPROVAL_REJECTED, "message": "the approval was rejected", "retryable": False},
                )
            ]
        )
    return Step(
        [node_ev(c.NODE_COMPLETED, nid, outputs={k: resolved.get(k) for k in ("action", "decision", "resumeValue")})]
    )


def _continue_agent(
    ctx: RunContext, state: dict[str, Any], nid: str, active: dict[str, Any], inputs: dict[str, Any]
) -> Step:
    """An agent node's next turn; its outcome once the invocation decided or failed."""
    node = ctx.wf.nodes[nid]
    agent = ctx.agent(nid, node)
    progress = active.get("agent")
    if agent is None or progress is None:
        return Step([node_ev(c.NODE_FAILED, nid, error=fail_obj(c.NODE_EXECUTION_FAILED, "unknown agent"))])
    agent_input = inputs.get("input", inputs)
    turn = invocation_step(
        agent,
        agent_input,
        progress,
        ctx.tools(),
        int(state["toolCalls"]),
        ctx.models() if agent.kind == "model" else None,
    )
    out: list[Draft] = [(t, p, None) for t, p in turn.events]
    if turn.error is not None:
        out.append(node_ev(c.NODE_FAILED, nid, error=turn.error))
    elif turn.finished:
        out.append(node_ev(c.NODE_COMPLETED, nid, outputs={"decision": progress.get("decision")}))
    return Step(out)


def restart_node(ctx: RunContext, state: dict[str, Any], nid: str) -> Step:
    """The active node's execution from its node.started on, with the same ordinal (its visit already counted).

    A fork whose ``fromSeq`` falls inside a node emits all of it: the event at ``fromSeq`` is a fresh
    node.started, which the fold reads as a restart of the same execution (replay.md §Endpoint: events from
    ``fromSeq`` on are re-executed).
    """
    st_ = state["nodes"][nid]
    st_["visits"] -= 1
    try:
        return start_node(ctx, state, nid)
    finally:
        st_["visits"] += 1
