"""Step Functions Catch target: the run fails with a registered code; an execution never fails silently.

Also the run state machine's ``EraseLateWrites`` task (``lateWrites``: true): a run erased while a task of it could
still write, once none can; its log and objects are deleted again if its tombstone is there (decision 0179)."""

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
    run_id = ti.text(event, "runId")
    if ti.flag(event, "lateWrites", False):
        from shared.services.erasure import erase_late_writes

        erased = erase_late_writes(ports, run_id)
        if erased:
            count("LateWritesErased")
        return {"runId": run_id, "erased": erased}
    out = kernel.fail_run(ports, run_id, ti.mapping(event, "error", None))
    if out.get("failed"):
        count("RunsFailed")
    # failed now or ended before: its tenant's slot back, its waiting runs started (decision 0160)
    ended = admission.run_ended(ports, run_id, holds_slot=ti.flag(event, "holdsSlot", True))
    if ended == "deferred":
        count("SlotReleaseDeferred")
    return out
