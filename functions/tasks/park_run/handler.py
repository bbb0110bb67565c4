"""Step Functions ``.waitForTaskToken`` task (``Park``): a paused run's execution waits here on its token."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import task_handler
from shared.services import lifecycle
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return lifecycle.park(get_ports(), ti.text(event, "runId"), ti.text(event, "taskToken"))
