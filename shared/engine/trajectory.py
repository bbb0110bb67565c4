"""A trial's trajectory and where two trajectories first differ (pure).

A trajectory is the invocation's ordered steps, read from the trial's stored events and its model-call log:
``model-output`` (one model turn: its text), ``tool-call`` (tool and arguments), ``tool-answer`` (status and the
answer or error) and ``final-output`` (the decision). A model's requested tool calls are the ``tool-call`` steps
that follow its turn, so a changed argument reads as ``tool-arguments`` whatever kind of agent made it.

``first_divergence`` walks two trajectories step by step and names the first step that differs:
``{step, kind, baseline, candidate, pointers}`` with ``kind`` one of ``tool-call`` (another tool, another step
type where a tool call stands, or another tool answer), ``tool-arguments``, ``model-output``, ``final-output``,
``length`` (one trajectory ends there); ``pointers`` are the RFC 6901 pointers into the differing value (the
arguments, the answer, the output; ``""`` is the whole value). Trials pair by number (1 with 1, 2 with 2, ...);
a task's divergence is that of its lowest-numbered paired trial that differs.
"""

from __future__ import annotations

import json
from typing import Any

from shared.engine.jsondiff import differing_pointers
from shared.protocol import codes as c

KINDS = ("tool-call", "tool-arguments", "model-output", "final-output", "length")
_VALUES = ("args", "answer", "output", "text")  # withheld for content-free agents (pointers stay)


def steps(events: list[dict[str, Any]], turns: dict[int, str | None] | None = None) -> list[dict[str, Any]]:
    """The trial's steps from its event drafts; ``turns`` maps a model turn to its text (the model-call log).
    The rubric judge's model call (after the invocation completed) is not a step."""
    out: list[dict[str, Any]] = []
    turn = 0
    for ev in events:
        t = ev.get("type")
        p = ev.get("payload") or {}
        if t == c.AGENT_INVOCATION_COMPLETED:
            break
        if t == c.PROVIDER_USAGE:
            out.append({"type": "model-output", "turn": turn, "text": (turns or {}).get(turn)})
            turn += 1
        elif t == c.AGENT_TOOL_CALLED:
            step: dict[str, Any] = {"type": "tool-call", "tool": p.get("toolName")}
            if "argsHash" in p:
                step["argsHash"] = p["argsHash"]
            else:
                step["args"] = p.get("inputs")
            out.append(step)
        elif t == c.AGENT_TOOL_RETURNED:
            answer = p.get("outcome") if p.get("status") == "ok" else p.get("error")
            out.append({"type": "tool-answer", "tool": p.get("toolName"), "status": p.get("status"), "answer": answer})
        elif t == c.AGENT_DECIDED:
            out.append({"type": "final-output", "output": p.get("decision")})
    return out


def redact(step: dict[str, Any] | None) -> dict[str, Any] | None:
    """A step without argument, answer, output or text values (a content-free agent's)."""
    return None if step is None else {k: v for k, v in step.items() if k not in _VALUES}


def _mismatch_kind(a: dict[str, Any], b: dict[str, Any]) -> str:
    types = {a["type"], b["type"]}
    if types & {"tool-call", "tool-answer"}:
        return "tool-call"
    return "model-output" if "model-output" in types else "final-output"


def _compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(kind, pointers) where step ``a`` (baseline) and ``b`` (candidate) differ, else None."""
    if not differing_pointers(a, b):
        return None
    if a["type"] != b["type"]:
        return _mismatch_kind(a, b), []
    kind = a["type"]
    if kind == "tool-call":
        if a.get("tool") != b.get("tool"):
            return "tool-call", []
        if "args" in a and "args" in b:
            return "tool-arguments", differing_pointers(a["args"], b["args"])
        return "tool-arguments", []  # argument hashes differ: where is not recorded
    if kind == "tool-answer":
        return "tool-call", differing_pointers(a.get("answer"), b.get("answer")) or [""]
    if kind == "model-output":
        return "model-output", [""]
    return "final-output", differing_pointers(a.get("output"), b.get("output"))


def first_divergence(baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first step at which the trajectories differ, or None when they are the same."""
    for i in range(max(len(baseline), len(candidate))):
        a = baseline[i] if i < len(baseline) else None
        b = candidate[i] if i < len(candidate) else None
        if a is None or b is None:
            return {"step": i, "kind": "length", "baseline": a, "candidate": b, "pointers": []}
        found = _compare(a, b)
        if found is not None:
            return {"step": i, "kind": found[0], "baseline": a, "candidate": b, "pointers": found[1]}
    return None


def task_divergence(
    baseline: dict[int, list[dict[str, Any]]], candidate: dict[int, list[dict[str, Any]]], content_free: bool = False
) -> dict[str, Any] | None:
    """The task's divergence: trials paired by number, the lowest-numbered pair that differs (``trial`` names it);
    None when every paired trial has the same trajectory or no trial pairs. ``content_free``: values withheld."""
    for n in sorted(set(baseline) & set(candidate)):
        found = first_divergence(baseline[n], candidate[n])
        if found is not None:
            if content_free:
                found["baseline"], found["candidate"] = redact(found["baseline"]), redact(found["candidate"])
            return {"trial": n, **found}
    return None


def describe(div: dict[str, Any]) -> str:
    """One line for a table, a JUnit message or a comment: where, what kind, at which pointers, and the values."""
    where = ", ".join(p or "(whole value)" for p in div.get("pointers") or []) or "-"

    def side(step: dict[str, Any] | None) -> str:
        if step is None:
            return "(ends)"
        value = next((step[k] for k in _VALUES if k in step), None)
        label = step.get("type", "")
        if step.get("tool"):
            label += f" {step['tool']}"
        return label if value is None else f"{label} {short(value)}"

    return (
        f"trial {div.get('trial', 1)} step {div['step']} {div['kind']} at {where}: "
        f"baseline {side(div.get('baseline'))} / candidate {side(div.get('candidate'))}"
    )


def short(value: Any, limit: int = 120) -> str:
    """Compact JSON, cut at ``limit`` characters."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
