"""Where an accepted call's answer comes from (docs/decisions/0146-accept-without-invention.md).

The ``:accept`` body beyond ``{runId, taskIds?}``: ``reason`` (required: why), ``answers`` (a reviewer's answer to
a call the record lacks: ``{taskId, call, response, isError?}``, ``call`` the 0-based position of the call among the
task's calls in the run's first trial, as the eval report lists them) and ``dropTaskIds`` (tasks left out of the new
version). Each accepted call gets one provenance:

- ``recorded``: the run's as-executed record holds its answer (served by a fixture, or live during the eval);
- ``reviewer-supplied``: a call the record lacks (a fixture miss), answered by ``answers``;
- ``accepted-live``: a miss of a ``pure``/``read`` tool (the tier ``onMiss: "live-read-only"`` calls live), called
  live once now through the engine's dispatch (input-schema check, credential applied at egress, the egress guard,
  an idempotency key derived from the run and the call), recorded as it answered;
- any other miss has no answer: the accept is refused naming it (task, call, tool, the pointers where its args
  differ from the closest recorded entry), never given another call's answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.engine import dispatch
from shared.engine.catalog import Catalog
from shared.engine.tools import READ_ONLY_TIERS, ToolError, run_live_tool
from shared.errors import ValidationError, fault, invalid, pointer
from shared.ports import Ports
from shared.protocol import codes as c

MAX_TASK_IDS = 10_000
MAX_REASON = 2_000
MEMBERS = {"runId", "taskIds", "reason", "answers", "dropTaskIds"}
ANSWER_MEMBERS = {"taskId", "call", "response", "isError"}
RECORDED, LIVE, SUPPLIED = "recorded", "accepted-live", "reviewer-supplied"
MAX_LISTED = 100  # unanswered calls a refusal lists in details.unansweredCalls


@dataclass
class AcceptRequest:
    run_id: str
    task_ids: list[str] | None
    reason: str
    answers: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)  # (taskId, call) -> the entry part
    answer_at: dict[tuple[str, int], int] = field(default_factory=dict)  # where each answer is in the body
    drop: list[str] = field(default_factory=list)


def _ids(body: dict[str, Any], name: str) -> list[dict[str, str]]:
    ids = body.get(name)
    if ids is None:
        return []
    if not isinstance(ids, list):
        return [fault(f"/{name}", "type")]
    if not 0 < len(ids) <= MAX_TASK_IDS:
        return [fault(f"/{name}", "minItems" if not ids else "maxItems")]
    return [fault(f"/{name}/{i}", "type") for i, t in enumerate(ids) if not isinstance(t, str)]


def _answer_faults(answers: Any) -> list[dict[str, str]]:
    if not isinstance(answers, list):
        return [fault("/answers", "type")]
    if not 0 < len(answers) <= MAX_TASK_IDS:
        return [fault("/answers", "minItems" if not answers else "maxItems")]
    out: list[dict[str, str]] = []
    for i, a in enumerate(answers):
        if not isinstance(a, dict):
            out.append(fault(f"/answers/{i}", "type"))
            continue
        out.extend(fault(pointer(["answers", i, k]), "additionalProperties") for k in sorted(set(a) - ANSWER_MEMBERS))
        out.extend(fault(f"/answers/{i}/{k}", "required") for k in ("taskId", "call", "response") if k not in a)
        if "taskId" in a and not isinstance(a["taskId"], str):
            out.append(fault(f"/answers/{i}/taskId", "type"))
        call = a.get("call")
        if "call" in a and (not isinstance(call, int) or isinstance(call, bool) or call < 0):
            out.append(fault(f"/answers/{i}/call", "minimum" if isinstance(call, int) and call < 0 else "type"))
        if "isError" in a and not isinstance(a["isError"], bool):
            out.append(fault(f"/answers/{i}/isError", "type"))
    return out


def parse(body: Any) -> AcceptRequest:
    """The body, checked in full before anything is read (400 validation_error, pointers in body order)."""
    message = "The body is {runId, reason, taskIds?, answers?, dropTaskIds?}."
    if not isinstance(body, dict):
        raise invalid(message, [fault("", "type")])
    faults = [fault(pointer([k]), "additionalProperties") for k in sorted(set(body) - MEMBERS)]
    if not isinstance(body.get("runId"), str):
        faults.append(fault("/runId", "required" if "runId" not in body else "type"))
    faults += _ids(body, "taskIds")
    reason = body.get("reason")
    if not isinstance(reason, str):
        faults.append(fault("/reason", "required" if "reason" not in body else "type", "Say why (reason)."))
    elif not reason.strip() or len(reason) > MAX_REASON:
        faults.append(fault("/reason", "minLength" if not reason.strip() else "maxLength"))
    if "answers" in body:
        faults += _answer_faults(body["answers"])
    faults += _ids(body, "dropTaskIds")
    if faults:
        raise invalid(message, faults)
    ids = body.get("taskIds")
    req = AcceptRequest(
        str(body["runId"]),
        None if ids is None else list(dict.fromkeys(ids)),
        str(reason),
        drop=list(dict.fromkeys(body.get("dropTaskIds") or [])),
    )
    for i, a in enumerate(body.get("answers") or []):
        key = (str(a["taskId"]), int(a["call"]))
        if key in req.answers:
            raise invalid("Each call takes one answer.", [fault(f"/answers/{i}", "unique")])
        req.answers[key] = {"response": a["response"], **({"isError": True} if a.get("isError") else {})}
        req.answer_at[key] = i
    return req


def unanswered_error(calls: list[dict[str, Any]]) -> ValidationError:
    """The refusal of an accept whose new calls are not all answered: one fault at ``/answers`` and each call
    (up to ``MAX_LISTED``) in ``details.unansweredCalls``."""
    err = invalid(
        "A call the record lacks has no answer: answer it (answers), drop its task (dropTaskIds), or do not accept it.",
        [fault("/answers", "required", "A call of a write tool the record lacks needs the reviewer's answer.")],
    )
    assert err.details is not None
    err.details["unansweredCalls"] = calls[:MAX_LISTED]
    return err


class LiveCaller:
    """Calls a read-only tool once at accept time, the way the engine calls it live."""

    def __init__(self, ports: Ports, tenant: str, run_id: str) -> None:
        self.ports = ports
        self.tenant = tenant
        self.run_id = run_id
        self.catalog = Catalog(ports, tenant)

    def read_only(self, tool: str) -> bool:
        resolved = self.catalog.resolve(tool)
        return resolved is not None and resolved.safety_tier in READ_ONLY_TIERS

    def call(self, task_id: str, index: int, tool: str, args: Any) -> dict[str, Any]:
        """The fixture entry part ``{response, isError?}`` the tool answered (an error outcome is an ``isError``)."""
        resolved = self.catalog.resolve(tool)
        assert resolved is not None
        if resolved.transport == "native":
            try:
                return {"response": run_live_tool(self.ports, self.tenant, tool, args)}
            except ToolError as exc:
                return {"isError": True, "response": {"code": c.EXTERNAL_CALL_FAILED, "message": exc.message}}
        if self.catalog.argument_errors(resolved, args):
            message = "the arguments do not match the tool's inputSchema"
            return {"isError": True, "response": {"code": c.VALIDATION_ERROR, "message": message}}
        key = f"accept#{task_id}#{index:05d}"  # the same accept again sends the same idempotency key
        sent = dispatch.send(self.ports, resolved, self.tenant, self.run_id, key, args)
        if sent.status == "ok":
            return {"response": sent.result}
        return {"isError": True, "response": sent.error}
