"""Step Functions task of the eval state machine: append one page of the trials' events in suite order; the last
page grades, stores the EvalSummary and completes the run (idempotent); see shared.engine.evalrun.finish."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count, task_handler
from shared.engine import evalrun
from shared.services import admission
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    ports = get_ports()
    out = evalrun.finish(ports, ti.text(event, "runId"), ti.mapping(event, "cursor", None))
    if not out["more"]:
        count("RunsFinished")
        count("EvalsFinished")
        # its tenant's slot back, its waiting runs started (decision 0160)
        if admission.run_ended(ports, ti.text(event, "runId")) == "deferred":
            count("SlotReleaseDeferred")
    return out
