"""Step Functions task: advance a run (workflow or fork) by many steps; see shared.engine.runner."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from functions._common.observability import count, count_tools, task_handler
from shared.engine import runner
from shared.engine.tools import ToolTally
from shared.wiring import get_ports


class AdvanceInput(BaseModel):
    runId: str


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = AdvanceInput.model_validate(event)
    tally = ToolTally()
    out = runner.advance(get_ports(), req.runId, tally=tally)
    count_tools(tally)
    if out.get("next") == "done":
        count("RunsFinished")
    return out
