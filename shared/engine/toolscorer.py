"""A custom scorer that is a registered tool (``{"strategy": "tool", "tool": "<toolId>", "value": <expected>}``).

After the agent decided, each tool match of the task (top level or inside ``all-of``) is one call of that tool
through the trial's ToolRuntime, as the invocation ``score:<taskId>:<trial>`` (never the agent's: it consumes no
fixture, counts in no budget and no derived fixture copy) with ``{input, expected, output, trajectory}``; the tool
answers ``{score, pass, reason}`` (an MCP tool as its result's ``structuredContent`` or JSON text). The call is recorded like any tool call (write-once by call key), so a retried
trial does not send it again and a replay of the eval serves the recorded answer (0 scorer calls).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from shared.engine.registry import AgentSpec
from shared.engine.scorers import Scored, find
from shared.engine.tools import ToolRuntime

SCORER_AGENT = "openwop-serverless.scorer"
REASON_LIMIT = 1000


def _mcp_answer(result: dict[str, Any]) -> Any:
    """An MCP tool's answer inside its ``CallToolResult``: the ``structuredContent``, else the first text content
    parsed as JSON; None when neither is one."""
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    text = next((c.get("text") for c in result["content"] if isinstance(c, dict) and c.get("type") == "text"), None)
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def read_answer(status: str, result: Any, error: dict[str, Any] | None) -> Scored:
    """The tool's answer as a scorer result; anything but ``{score: 0..1, pass: bool, reason?: str}`` fails. An
    HTTP tool answers it as its body; an MCP tool in its ``CallToolResult`` (``structuredContent`` or a JSON text
    content), and an MCP result with ``isError: true`` fails."""
    if status != "ok":
        return Scored("tool", 0.0, False, f"the scorer tool failed: {(error or {}).get('code', status)}")
    if isinstance(result, dict) and isinstance(result.get("content"), list) and "score" not in result:
        if result.get("isError") is True:
            return Scored("tool", 0.0, False, "the scorer tool answered with an error (isError)")
        result = _mcp_answer(result)
    ok = isinstance(result, dict)
    s = result.get("score") if ok else None
    p = result.get("pass") if ok else None
    if not isinstance(s, int | float) or isinstance(s, bool) or not 0 <= float(s) <= 1 or not isinstance(p, bool):
        return Scored("tool", 0.0, False, "the scorer tool's answer is not {score, pass, reason}")
    reason = result.get("reason")
    return Scored("tool", float(s), p, str(reason)[:REASON_LIMIT] if isinstance(reason, str) else "")


def answers(
    tools: ToolRuntime,
    agent: AgentSpec,
    invocation_id: str,
    order: str,
    match: dict[str, Any],
    task_input: Any,
    output: Any,
    trajectory: list[dict[str, Any]],
    negotiated: list[dict[str, Any]] | None = None,
) -> dict[str, Scored]:
    """Call each tool match's tool once; the answers by pointer, for ``scorers.score``. An MCP scorer's
    ``negotiation.decided`` payloads (recorded with its calls) are appended to ``negotiated``."""
    found = find(match, "tool")
    if not found:
        return {}
    scorer = dataclasses.replace(agent, agent_id=SCORER_AGENT, tool_allowlist=None)
    plan, tools.plan = tools.plan, None  # a scorer's call is not the agent's: no fixture serves or misses it
    out: dict[str, Scored] = {}
    try:
        for index, (at, m) in enumerate(found):
            args = {"input": task_input, "expected": m.get("value"), "output": output, "trajectory": trajectory}
            got = tools.call(
                agent=scorer,
                invocation_id=invocation_id,
                order_key=order,
                index=index,
                tool=str(m["tool"]),
                args=args,
                calls_so_far=0,
            )
            if got.negotiation is not None and negotiated is not None:
                negotiated.append(got.negotiation)
            out[at] = read_answer(got.status, got.result, got.error)
    finally:
        tools.plan = plan
    return out
