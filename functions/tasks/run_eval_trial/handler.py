"""Step Functions task of the eval state machine: ``prepare`` (run.started, eval.started, the trial items), a
``trials`` batch (the Map's ItemBatcher: each trial one agent invocation of a task under its fixture plan, one after
another), or an external agent's driven trial: ``wait`` (open it for the driver, the Map item waiting on the task
token) and ``score``; see shared.engine.evalrun. ``trial`` (one item) is what executions started before batching
send."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count_tools, task_handler
from shared.engine import evalrun
from shared.engine.tools import ToolTally
from shared.services import eval_trials
from shared.wiring import get_ports


def _keyed(item: Any) -> dict[str, Any]:
    """A Map item: {r: runId, t: task index in suite order, k: trial number, 1-based}."""
    return {"r": ti.text(item, "r"), "t": ti.integer(item, "t"), "k": ti.integer(item, "k")}


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
    if phase not in ("trials", "trial", "wait", "score"):
        raise ti.TaskInputError("phase is prepare, trials, trial, wait or score")
    if phase in ("wait", "score"):  # an external agent's trial, driven from outside (decision 0143)
        token = ti.text(event, "taskToken") if phase == "wait" else ""
        return evalrun.agent_task(get_ports(), _keyed(ti.mapping(event, "item")), phase, token)
    tally = ToolTally()
    ports = get_ports()
    try:
        if phase == "trial":
            return evalrun.trial_task(
                ports, _keyed(ti.mapping(event, "item")), tally=tally, issue=eval_trials.issuer(ports)
            )
        batch = event.get("items")
        if not isinstance(batch, list):
            raise ti.TaskInputError("the task's items is a list")
        return evalrun.trials_task(
            ports,
            [_keyed(item) for item in batch],
            retry=ti.integer(event, "retry", 0),
            time_left=context.get_remaining_time_in_millis,
            tally=tally,
            issue=eval_trials.issuer(ports),
        )
    finally:
        count_tools(tally)  # the trials' tool calls, and the RFC 0252 fixture misses they were served
