"""Step Functions task of the eval state machine: ``prepare`` (run.started, eval.started, the trial items), one
``trial`` (one agent invocation of a task under its fixture plan), or an external agent's driven trial: ``wait``
(open it for the driver, the Map item waiting on the task token) and ``score``; see shared.engine.evalrun."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count_tools, task_handler
from shared.engine import evalrun
from shared.engine.tools import ToolTally
from shared.services import eval_trials
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    phase = ti.text(event, "phase")
    if phase == "prepare":
        ports = get_ports()
        # the trials Map's MaxConcurrencyPath: a setting (EVAL_MAX_CONCURRENCY), not a constant of the ASL file
        return {
            **evalrun.prepare(ports, ti.text(event, "runId")),
            "maxConcurrency": ports.settings.eval_max_concurrency,
        }
    if phase not in ("trial", "wait", "score"):
        raise ti.TaskInputError("phase is prepare, trial, wait or score")
    item = ti.mapping(event, "item")  # {r: runId, t: task index in suite order, k: trial number, 1-based}
    if phase != "trial":  # an external agent's trial, driven from outside (decision 0143)
        keyed = {"r": ti.text(item, "r"), "t": ti.integer(item, "t"), "k": ti.integer(item, "k")}
        token = ti.text(event, "taskToken") if phase == "wait" else ""
        return evalrun.agent_task(get_ports(), keyed, phase, token)
    tally = ToolTally()
    ports = get_ports()
    keyed = {"r": ti.text(item, "r"), "t": ti.integer(item, "t"), "k": ti.integer(item, "k")}
    out = evalrun.trial_task(ports, keyed, tally=tally, issue=eval_trials.issuer(ports))
    count_tools(tally)  # the trial's tool calls, and the RFC 0252 fixture misses it was served
    return out
