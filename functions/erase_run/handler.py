"""DynamoDB stream consumer on the runs table: a run item's REMOVE (TTL or erasure) erases all it owns.

The event-source mapping filters for REMOVE records; the handler checks again (local mode and older
mappings deliver everything) and reports batch item failures so one bad record is retried alone. The record's old
image says whether the run had ended: one that had not may still have a task writing, whose late writes are erased
once none can (decision 0179).
"""

from __future__ import annotations

from typing import Any

from functions._common.observability import count, logger, stream_handler
from shared.keys import RUN_SK
from shared.services.erasure import on_run_removed
from shared.wiring import get_ports


@stream_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        if record.get("eventName") != "REMOVE":
            continue
        keys = (record.get("dynamodb") or {}).get("Keys") or {}
        if (keys.get("sk") or {}).get("S") != RUN_SK:
            continue
        run_id = (keys.get("pk") or {}).get("S")
        if not run_id:
            continue
        try:
            ports = get_ports()
            on_run_removed(ports, run_id, live=ports.runs.live_in_image((record.get("dynamodb") or {}).get("OldImage")))
            count("RunsErased")
        except Exception:
            logger().exception("erasure failed; the record is retried", extra={"runId": run_id})
            failures.append({"itemIdentifier": str((record.get("dynamodb") or {}).get("SequenceNumber", ""))})
    return {"batchItemFailures": failures}
