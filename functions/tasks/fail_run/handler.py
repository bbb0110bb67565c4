"""Step Functions Catch target: the run fails with a registered code; an execution never fails silently."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count, task_handler
from shared.engine import kernel
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    out = kernel.fail_run(get_ports(), ti.text(event, "runId"), ti.mapping(event, "error", None))
    if out.get("failed"):
        count("RunsFailed")
    return out
