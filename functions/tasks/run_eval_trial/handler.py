"""Step Functions task of the eval state machine: ``prepare`` (run.started, eval.started, the trial items) or
one ``trial`` (one agent invocation of a task under its fixture plan); see shared.engine.evalrun."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from functions._common.observability import count_tools, task_handler
from shared.engine import evalrun
from shared.engine.tools import ToolTally
from shared.wiring import get_ports


class TrialItem(BaseModel):
    r: str  # runId
    t: int  # task index in suite order
    k: int  # trial number, 1-based


class TrialInput(BaseModel):
    phase: Literal["prepare", "trial"]
    runId: str | None = None
    item: TrialItem | None = None


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = TrialInput.model_validate(event)
    if req.phase == "prepare":
        if req.runId is None:
            raise ValueError("prepare needs runId")
        ports = get_ports()
        # the trials Map's MaxConcurrencyPath: a setting (EVAL_MAX_CONCURRENCY), not a constant of the ASL file
        return {**evalrun.prepare(ports, req.runId), "maxConcurrency": ports.settings.eval_max_concurrency}
    if req.item is None:
        raise ValueError("trial needs item")
    tally = ToolTally()
    out = evalrun.trial_task(get_ports(), req.item.model_dump(), tally=tally)
    count_tools(tally)  # the trial's tool calls, and the RFC 0252 fixture misses it was served
    return out
