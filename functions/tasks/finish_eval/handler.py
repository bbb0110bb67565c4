"""Step Functions task of the eval state machine: append the trials' events in suite order, grade, store the
EvalSummary and complete the run (idempotent); see shared.engine.evalrun.finish."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from functions._common.observability import count, task_handler
from shared.engine import evalrun
from shared.wiring import get_ports


class FinishInput(BaseModel):
    runId: str


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = FinishInput.model_validate(event)
    out = evalrun.finish(get_ports(), req.runId)
    count("RunsFinished")
    count("EvalsFinished")
    return out
