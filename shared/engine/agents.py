"""Agent invocations, step by step, resumable from the calls already made.

The model boundary is this ``next_action`` seam: a scripted agent reads its
script; a model-backed agent (a later issue) would ask a model port here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.engine.canonical import args_hash
from shared.engine.registry import AgentSpec
from shared.engine.tools import ToolOutcome, ToolRuntime
from shared.protocol import codes as c


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


def tool_events(agent: AgentSpec, call_id: str, tool: str, args: Any, out: ToolOutcome) -> list[tuple[str, dict[str, Any]]]:
    called: dict[str, Any] = {"agentId": agent.agent_id, "toolName": tool, "callId": call_id,
                              "transport": out.transport}
    if agent.content_free:
        called["argsHash"] = args_hash(args)
    else:
        called["inputs"] = args
    returned: dict[str, Any] = {"agentId": agent.agent_id, "toolName": tool, "callId": call_id, "status": out.status}
    if out.status == "ok":
        if not agent.content_free:
            returned["outcome"] = out.result
    elif out.error is not None:
        returned["error"] = out.error if not agent.content_free else {"code": out.error["code"],
                                                                      "message": "tool call failed"}
    if out.duration_ms is not None:
        returned["durationMs"] = out.duration_ms
    return [(c.AGENT_TOOL_CALLED, called), (c.AGENT_TOOL_RETURNED, returned)]


def invocation_step(
    agent: AgentSpec,
    agent_input: Any,
    progress: dict[str, Any],
    tools: ToolRuntime,
    total_calls: int,
) -> tuple[list[tuple[str, dict[str, Any]]], bool, ToolOutcome | None]:
    """One step of an invocation in progress: a tool call, the decision, or the completion.

    ``progress`` is the folded ``{invocationId, order, calls, history, decided, decision}``.
    Returns (events, finished, outcome of a tool call if one was made).
    """
    inv = str(progress["invocationId"])
    if progress.get("decided"):
        return [(c.AGENT_INVOCATION_COMPLETED, {"invocationId": inv, "agentId": agent.agent_id,
                                                "outcome": "completed"})], True, None
    action = next_action(agent, agent_input, list(progress.get("history") or []))
    if action.kind == "call":
        index = int(progress.get("calls", 0))
        out = tools.call(agent=agent, invocation_id=inv, order_key=str(progress["order"]), index=index,
                         tool=action.tool, args=action.args, calls_so_far=total_calls)
        return tool_events(agent, f"{inv}#{index}", action.tool, action.args, out), False, out
    return [(c.AGENT_DECIDED, {"agentId": agent.agent_id, "decision": action.decision})], False, None
