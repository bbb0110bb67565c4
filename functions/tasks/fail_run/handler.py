"""Step Functions Catch target: the run fails with a registered code; an execution never fails silently."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from functions._common.observability import count, task_handler
from shared.engine import runner
from shared.wiring import get_ports


class FailInput(BaseModel):
    runId: str
    error: dict[str, Any] | None = None


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = FailInput.model_validate(event)
    out = runner.fail_run(get_ports(), req.runId, req.error)
    if out.get("failed"):
        count("RunsFailed")
    return out
