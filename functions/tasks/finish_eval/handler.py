"""Step Functions task of the eval state machine: append the trials' events in suite order, grade, store the
EvalSummary and complete the run (idempotent); see shared.engine.evalrun.finish."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count, task_handler
from shared.engine import evalrun
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    out = evalrun.finish(get_ports(), ti.text(event, "runId"))
    count("RunsFinished")
    count("EvalsFinished")
    return out
