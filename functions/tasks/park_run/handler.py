"""Step Functions ``.waitForTaskToken`` task (``Park``): a paused run's execution waits here on its token."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from functions._common.observability import task_handler
from shared.services import lifecycle
from shared.wiring import get_ports


class ParkInput(BaseModel):
    runId: str
    taskToken: str


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = ParkInput.model_validate(event)
    return lifecycle.park(get_ports(), req.runId, req.taskToken)
