"""Step Functions Catch target: the run fails with a registered code; an execution never fails silently."""

from __future__ import annotations

from typing import Any

from functions._common import task_input as ti
from functions._common.observability import count, task_handler
from shared.engine import kernel
from shared.services import admission
from shared.wiring import get_ports


@task_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    ports = get_ports()
    out = kernel.fail_run(ports, ti.text(event, "runId"), ti.mapping(event, "error", None))
    if out.get("failed"):
        count("RunsFailed")
    # failed now or ended before: its tenant's slot back, its waiting runs started (decision 0160)
    ended = admission.run_ended(ports, ti.text(event, "runId"), holds_slot=ti.flag(event, "holdsSlot", True))
    if ended == "deferred":
        count("SlotReleaseDeferred")
    return out
