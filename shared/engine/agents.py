"""Agent invocations, step by step, resumable from the calls already made.

A scripted agent reads its script (``next_action``); a model-backed agent asks its model through the
model runtime (``shared.engine.model_agent``), one model call or tool call per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.engine.canonical import args_hash
from shared.engine.model_agent import ModelCallFailed, ModelSession, binding, usage_payload
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolOutcome, ToolRuntime
from shared.protocol import codes as c

ENVELOPE_REFUSAL = "envelope_refusal"  # RFC 0032: the node fails with this code when the model refuses


@dataclass(frozen=True)
class Action:
    kind: str  # call | decide
    tool: str = ""
    args: Any = None
    decision: Any = None


def next_action(agent: AgentSpec, agent_input: Any, history: list[dict[str, Any]]) -> Action:
    script = agent.script if agent.script is not None else (agent_input if isinstance(agent_input, dict) else {})
    calls = script.get("calls") or []
    k = len(history)
    if k < len(calls):
        call = calls[k]
        return Action("call", str(call.get("tool")), call.get("args"))
    return Action("decide", decision=script.get("answer"))


def tool_events(
    agent: AgentSpec, call_id: str, tool: str, args: Any, out: ToolOutcome
) -> list[tuple[str, dict[str, Any]]]:
    called: dict[str, Any] = {
        "agentId": agent.agent_id,
        "toolName": tool,
        "callId": call_id,
        "transport": out.transport,
    }
    if agent.content_free:
        called["argsHash"] = args_hash(args)
    else:
        called["inputs"] = args
    returned: dict[str, Any] = {"agentId": agent.agent_id, "toolName": tool, "callId": call_id, "status": out.status}
    if out.status == "ok":
        if not agent.content_free:
            returned["outcome"] = out.result
    elif out.error is not None:
        returned["error"] = (
            out.error if not agent.content_free else {"code": out.error["code"], "message": "tool call failed"}
        )
    if out.duration_ms is not None:
        returned["durationMs"] = out.duration_ms
    # The negotiation of an MCP call's exchange goes right before the call's own events (interop.md §The audit event)
    head = [(c.NEGOTIATION_DECIDED, out.negotiation)] if out.negotiation is not None else []
    return [*head, (c.AGENT_TOOL_CALLED, called), (c.AGENT_TOOL_RETURNED, returned)]


@dataclass
class StepOut:
    """One step of an invocation: its events; ``finished`` after the completion event; the tool call it made
    (``call`` = (tool, args), ``outcome``); ``error`` when the invocation failed (the node fails with it)."""

    events: list[tuple[str, dict[str, Any]]]
    finished: bool = False
    outcome: ToolOutcome | None = None
    call: tuple[str, Any] | None = None
    error: dict[str, Any] | None = None


def completed_event(agent: AgentSpec, inv: str, outcome: str = "completed") -> tuple[str, dict[str, Any]]:
    return c.AGENT_INVOCATION_COMPLETED, {"invocationId": inv, "agentId": agent.agent_id, "outcome": outcome}


def _tool_step(
    agent: AgentSpec, progress: dict[str, Any], tools: ToolRuntime, total_calls: int, tool: str, args: Any
) -> StepOut:
    inv = str(progress["invocationId"])
    index = int(progress.get("calls", 0))
    out = tools.call(
        agent=agent,
        invocation_id=inv,
        order_key=str(progress["order"]),
        index=index,
        tool=tool,
        args=args,
        calls_so_far=total_calls,
    )
    return StepOut(tool_events(agent, f"{inv}#{index}", tool, args, out), outcome=out, call=(tool, args))


def invocation_step(
    agent: AgentSpec,
    agent_input: Any,
    progress: dict[str, Any],
    tools: ToolRuntime,
    total_calls: int,
    models: ModelSession | None = None,
) -> StepOut:
    """One step of an invocation in progress: a model call, a tool call, the decision, or the completion.

    ``progress`` is the folded ``{invocationId, order, calls, turns, history, decided, decision}``.
    """
    inv = str(progress["invocationId"])
    if progress.get("decided"):
        return StepOut([completed_event(agent, inv)], finished=True)
    if agent.kind == "model":
        if models is None:
            raise ValueError("a model-backed agent needs a model session")
        return _model_step(agent, agent_input, progress, tools, total_calls, models)
    action = next_action(agent, agent_input, list(progress.get("history") or []))
    if action.kind == "call":
        return _tool_step(agent, progress, tools, total_calls, action.tool, action.args)
    return StepOut([(c.AGENT_DECIDED, {"agentId": agent.agent_id, "decision": action.decision})])


def _failed(agent: AgentSpec, inv: str, code: str, message: str, outcome: str = "failed") -> StepOut:
    return StepOut([completed_event(agent, inv, outcome)], finished=True, error={"code": code, "message": message})


def _model_step(
    agent: AgentSpec,
    agent_input: Any,
    progress: dict[str, Any],
    tools: ToolRuntime,
    total_calls: int,
    models: ModelSession,
) -> StepOut:
    inv = str(progress["invocationId"])
    turns = int(progress.get("turns", 0))
    calls = int(progress.get("calls", 0))
    if turns:
        last = models.log(inv).get(turns - 1)
        if last is None:
            return _failed(agent, inv, c.NODE_EXECUTION_FAILED, "the invocation's model-call log is incomplete")
        requested = list(last.get("toolCalls") or [])
        pending = requested[calls - int(last.get("callsBefore", 0)) :]
        if pending:
            call = pending[0]
            return _tool_step(agent, progress, tools, total_calls, str(call["name"]), call.get("arguments"))
        if not requested:
            if last.get("stopReason") == "refused":
                return _failed(agent, inv, ENVELOPE_REFUSAL, "the model refused", outcome="refused")
            return StepOut([(c.AGENT_DECIDED, {"agentId": agent.agent_id, "decision": last.get("text") or ""})])
    if turns >= agent.max_turns:
        return _failed(agent, inv, c.LOOP_LIMIT_EXCEEDED, "the agent reached maxTurns without a final answer")
    try:
        entry = models.complete(
            agent, inv, str(progress["order"]), turns, agent_input, list(progress.get("history") or [])
        )
    except ModelCallFailed as exc:
        return _failed(agent, inv, exc.code, exc.message)
    return StepOut([(c.PROVIDER_USAGE, usage_payload(entry))])


def started_payload(
    agent: AgentSpec | None, agent_id: str, inv: str, source: str, overrides: dict[str, Any] | None
) -> dict[str, Any]:
    """``agent.invocation-started``: identity, and for a model-backed agent what ran (a recorded fact)."""
    p: dict[str, Any] = {"invocationId": inv, "agentId": agent_id, "source": source}
    if agent is not None and agent.kind == "model":
        b = binding(agent, overrides)
        if agent.model_class:
            p["modelClass"] = agent.model_class
        p["resolvedModel"] = str(b.get("model", ""))
        p["resolvedProvider"] = str(b.get("provider", ""))
        p["resolvedAgentVersion"] = str(agent.version)
        p["toolSurfaceCount"] = len(agent.tool_allowlist or ())
    return p
