"""The names and attributes of the spans the engine opens through the Tracing port (``Ports.tracing``).

A run's spans form one trace: the run's span (opened where the run is created; its ``traceparent`` is stored in
the run item's creation facts under ``TRACE_KEY``), one span per Advance task under it (``openwop.task``), one per
step under that (``openwop.node`` for a step of a node's execution, ``openwop.run.step`` for the run's own events),
and the model and tool calls of a step under the step; an eval trial is one ``openwop.eval.trial`` span under its
eval run's span, with its calls under it. Model and tool calls follow OpenTelemetry's GenAI semantic
conventions (``chat <model>``, ``execute_tool <tool>``); the rest are ``openwop.*``. A replay's diverging step
carries ``openwop.replay.diverged: true`` (replay.md §7).

No attribute carries a prompt, a message, a tool's arguments or result, a credential or an address, unless the
operator opted in (``Tracing.capture_content``): then the GenAI content attributes carry the text (never a
credential, which no request attribute names).
"""

from __future__ import annotations

import json
from typing import Any

from shared.ports import AttrValue, ModelRequest, RunRecord, Span

TRACE_KEY = "traceparent"  # the run item's creation facts: the trace context every task of the run joins

RUN_ID = "openwop.run.id"
TENANT = "openwop.tenant"
DIVERGED = "openwop.replay.diverged"
DIVERGED_SEQ = "openwop.replay.diverged_seq"

RUN_SPAN = "openwop.run"
TASK_SPAN = "openwop.task"
TRIAL_SPAN = "openwop.eval.trial"  # one eval trial (a Map iteration), under the eval run's span
STEP_SPAN = "openwop.step"  # renamed once the step is known (``name_step``)
NODE_SPAN = "openwop.node"
RUN_STEP_SPAN = "openwop.run.step"
WAIT_SPAN = "openwop.wait"

# gen_ai.system (and its successor gen_ai.provider.name): the conventions' well-known values where there is one
GEN_AI_SYSTEMS = {"bedrock": "aws.bedrock", "openai": "openai", "mock": "openwop.mock"}


def run_attributes(rec: RunRecord) -> dict[str, AttrValue]:
    fork = rec.data.get("fork") or {}
    return {
        RUN_ID: rec.run_id,
        TENANT: rec.tenant,
        "openwop.run.kind": rec.kind,
        "openwop.run.mode": str(fork.get("mode", "live")),
    }


def trace_parent(rec: RunRecord) -> str | None:
    tp = rec.data.get(TRACE_KEY)
    return tp if isinstance(tp, str) else None


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def model_request(
    req: ModelRequest, run_id: str, tenant: str, invocation_id: str, turn: int, capture: bool
) -> dict[str, AttrValue]:
    """A model call's request attributes (GenAI conventions); the content ones only with ``capture``."""
    system = GEN_AI_SYSTEMS.get(req.provider, req.provider)
    out: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": system,
        "gen_ai.provider.name": system,
        "gen_ai.request.model": req.model,
        RUN_ID: run_id,
        TENANT: tenant,
        "openwop.agent.invocation_id": invocation_id,
        "openwop.model_call.turn": turn,
    }
    if req.temperature is not None:
        out["gen_ai.request.temperature"] = float(req.temperature)
    if req.max_tokens is not None:
        out["gen_ai.request.max_tokens"] = int(req.max_tokens)
    if capture:
        out["gen_ai.system_instructions"] = _json([{"type": "text", "content": req.system}])
        out["gen_ai.input.messages"] = _json(
            [
                _message(
                    m.role,
                    m.text,
                    [{"id": t.call_id, "name": t.name, "arguments": t.arguments} for t in m.tool_calls],
                    m.tool_call_id,
                )
                for m in req.messages
            ]
        )
    return out


def _message(role: str, text: str | None, calls: list[dict[str, Any]], call_id: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": call_id, "response": text})
    elif text is not None:
        parts.append({"type": "text", "content": text})
    parts += [{"type": "tool_call", **c} for c in calls]
    return {"role": role, "parts": parts}


def model_reply(span: Span, entry: dict[str, Any], capture: bool) -> None:
    """A model call's answer (from the provider or a recorded log): model, finish reason, token usage."""
    span.set("gen_ai.response.model", str(entry.get("model") or ""))
    span.set("gen_ai.response.finish_reasons", [str(entry.get("stopReason") or "")])
    span.set("gen_ai.usage.input_tokens", int(entry.get("inputTokens") or 0))
    span.set("gen_ai.usage.output_tokens", int(entry.get("outputTokens") or 0))
    span.set("openwop.model_call.source", str(entry.get("source") or "live"))
    if capture:
        span.set(
            "gen_ai.output.messages",
            _json(
                [
                    {
                        **_message("assistant", entry.get("text"), list(entry.get("toolCalls") or [])),
                        "finish_reason": entry.get("stopReason"),
                    }
                ]
            ),
        )


def tool_call(tool: str, call_id: str, run_id: str, tenant: str) -> dict[str, AttrValue]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        RUN_ID: run_id,
        TENANT: tenant,
    }


def tool_outcome(
    span: Span,
    status: str,
    source: str,
    transport: str,
    error: dict[str, Any] | None,
    args: Any,
    result: Any,
    capture: bool,
) -> None:
    span.set("openwop.tool.status", status)
    span.set("openwop.tool.source", source)
    span.set("openwop.tool.transport", transport)
    if status != "ok":
        span.fail(str((error or {}).get("code") or status))
    if capture:
        span.set("gen_ai.tool.call.arguments", _json(args))
        if status == "ok":
            span.set("gen_ai.tool.call.result", _json(result))


def name_step(
    span: Span,
    events: list[tuple[str, dict[str, Any], str | None]],
    waits: bool,
    node_types: dict[str, Any],
    active: str | None,
) -> None:
    """Name a step's span after what it did: a step of a node's execution (``openwop.node``, with the node's id and
    type from ``node_types``, the workflow's nodes; an agent's events name no node: theirs is the ``active`` one)
    or the run's own events."""
    nid = next((n for _t, _p, n in events if n), None)
    if nid is None and active and any(not t.startswith("run.") for t, _p, _n in events):
        nid = active
    if nid is not None:
        span.rename(NODE_SPAN)
        span.set("openwop.node.id", nid)
        span.set("openwop.node.type", str((node_types.get(nid) or {}).get("typeId", "")))
    elif events:
        span.rename(RUN_STEP_SPAN)
    elif waits:
        span.rename(WAIT_SPAN)
    if events:
        span.set("openwop.events", [t for t, _p, _n in events])
