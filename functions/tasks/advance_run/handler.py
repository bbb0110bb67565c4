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
    phase: str = "advance"  # "index": a fork's first task builds its source index (statemachines/fork-replay)
    hops: int = 0  # Advance tasks this execution has made (continue-as-new after settings.execution_max_tasks)
    execution: str = ""  # this execution's name (its generation)


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    req = AdvanceInput.model_validate(event)
    if req.phase == "index":
        from shared.engine import forkindex

        return {**forkindex.index_fork(get_ports(), req.runId), "hops": req.hops}
    tally = ToolTally()
    out = runner.advance(get_ports(), req.runId, hops=req.hops, execution=req.execution, tally=tally)
    count_tools(tally)
    if out.get("next") == "done":
        count("RunsFinished")
    return out
