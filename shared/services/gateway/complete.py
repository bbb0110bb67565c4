"""``POST G/complete``: the agent ends its session (decision 0143).

``{"output": <JSON>}`` appends ``agent.decided {agentId, decision: output}``, ``agent.invocation-completed {outcome:
completed}`` and ``run.completed {outputs: {"output": output}}`` in one append; ``{"error": {"message"}}`` appends
``agent.invocation-completed {outcome: failed}`` and ``run.failed`` with that message. ``200 {runId, status}``. A body
with both members or neither is ``400 validation_error`` at ``""``; any other member is ``400`` at its pointer; a
second ``complete`` is ``409 run_terminal``.
"""

from __future__ import annotations

from typing import Any

from shared.errors import RunGoneError, RunTerminalError, fault, invalid
from shared.ports import Ports
from shared.protocol import codes as c
from shared.services.gateway import EVAL, GatewayRequest, GatewayResponse, GatewaySession
from shared.services.gateway.session import append
from shared.services.gateway.wire import json_object, json_response

AGENT_FAILED = "agent_failed"  # run.failed's code when the agent reports an error through complete
MAX_MESSAGE = 4096


def _outcome(body: dict[str, Any]) -> tuple[bool, Any]:
    """(True, output) or (False, message)."""
    for key in body:
        if key not in ("output", "error"):
            raise invalid("complete takes output or error.", [fault(f"/{key}", "additionalProperties")])
    if ("output" in body) == ("error" in body):
        raise invalid("complete takes exactly one of output and error.", [fault("", "oneOf")])
    if "output" in body:
        return True, body["output"]
    error = body["error"]
    if not isinstance(error, dict):
        raise invalid("error is an object with a message.", [fault("/error", "type")])
    for key in error:
        if key != "message":
            raise invalid("error takes a message only.", [fault(f"/error/{key}", "additionalProperties")])
    message = error.get("message")
    if not isinstance(message, str) or not 0 < len(message) <= MAX_MESSAGE:
        raise invalid(f"error.message is 1..{MAX_MESSAGE} characters.", [fault("/error/message", "type")])
    return False, message


def handle(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    from shared.engine.runcore import fail_obj

    ok, value = _outcome(json_object(request))
    if session.mode == EVAL:
        return _end_trial(ports, session, {"output": value} if ok else {"error": {"message": value}})
    agent_id = session.agent.agent_id
    inv = session.invocation_id
    if ok:
        append(
            ports,
            session.run_id,
            [
                (c.AGENT_DECIDED, {"agentId": agent_id, "decision": value}),
                (c.AGENT_INVOCATION_COMPLETED, {"invocationId": inv, "agentId": agent_id, "outcome": "completed"}),
                (c.RUN_COMPLETED, {"outputs": {"output": value}}),
            ],
            status="completed",
        )
        return json_response(200, {"runId": session.run_id, "status": "completed"})
    failure = fail_obj(AGENT_FAILED, value)
    append(
        ports,
        session.run_id,
        [
            (c.AGENT_INVOCATION_COMPLETED, {"invocationId": inv, "agentId": agent_id, "outcome": "failed"}),
            (c.RUN_FAILED, {"error": failure}),
        ],
        status="failed",
        updates={"error": failure},
    )
    return json_response(200, {"runId": session.run_id, "status": "failed"})


def _end_trial(ports: Ports, session: GatewaySession, outcome: dict[str, Any]) -> GatewayResponse:
    """An eval trial's driver is done: its outcome is stored on the trial, and the Map item waiting on the trial's
    task token goes on to score it (the first ``complete`` wins; a later one is ``409 run_terminal``)."""
    from shared.engine import externaltrial as xt

    if session.task_index is None or session.trial is None:
        raise RunGoneError(session.run_id)
    rec = ports.runs.get_run(session.run_id)
    doc = xt.trial_state(ports, session.run_id, session.task_index, session.trial)
    if rec is None or doc is None:
        raise RunGoneError(session.run_id)
    if rec.terminal or doc.get("status") != xt.WAITING:
        raise RunTerminalError("The trial has ended.")
    ended = xt.end_trial(ports, rec, doc, outcome)
    if ended.get("taskToken"):
        ports.orchestrator.resume(str(ended["taskToken"]))
    status = "completed" if "output" in outcome else "failed"
    return json_response(
        200, {"runId": session.run_id, "taskId": doc["taskId"], "trial": session.trial, "status": status}
    )
