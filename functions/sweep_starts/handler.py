"""Every minute (an EventBridge schedule): runs written but never started are started, or failed with a reason.

The start outbox's sweep (``shared.services.start_outbox``, decision 0150): it reads the markers older than the grace
period, never the runs table. A marker it cannot settle stays for the next invocation.
"""

from __future__ import annotations

from typing import Any

from functions._common.observability import count, logger, observed
from shared.services.start_sweep import sweep
from shared.wiring import get_ports


@observed("id")  # the scheduled event's id
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    swept = sweep(get_ports())
    count("StrandedRunsStarted", len(swept.started))
    count("StrandedRunsFailed", len(swept.failed))
    if swept.errors:
        logger().warning("start markers left for the next sweep", extra={"errors": swept.errors})
    return {"started": swept.started, "failed": swept.failed, "cleared": len(swept.cleared), "errors": swept.errors}
