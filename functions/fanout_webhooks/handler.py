"""DynamoDB stream consumer on the events table: every stored event is fanned out to the webhook queue.

An INSERT record exists only once the events' write has committed, so nothing is fanned out that the log does not
hold, and nothing in the engine waits on a receiver. The event-source mapping filters for INSERT; the handler checks
again (local mode delivers everything). The stream image carries a page of events (a large event stored out of line
is read from the log).

One invocation takes many pages (the mapping's batching window, decision 0151), of any runs and tenants: the batch
is handled at once, grouped by run and tenant, so each tenant is read once per batch (``stream_interest``: its
subscriptions and its rules' version, eventually consistent and kept a short while by the warm process). If that
fails, the batch is handled again run by run in stream order, and the first record of the first run that still
fails is reported (``batchItemFailures``): the mapping retries from it, the records before it are done. Re-sent
messages are deduplicated by the queue (the delivery id is the FIFO deduplication id), so a retry never delivers
twice.

The same records drive the sampling rules (``shared.services.sampling``): a ``run.completed`` adds its run's task
to the drafts whose rules sample it; a retried batch adds nothing twice (the draft holds each run once). Both parts
use the same read of each tenant.

A page put plainly past an open tail (a task's middle page, decision 0170) is fanned out as any other: a page of a
run erased before it landed is deleted by its task or by the erasure's late pass (decision 0179), and its messages
are dropped unsent (a delivery reads its run first).
"""

from __future__ import annotations

from typing import Any

from functions._common.observability import count, logger, stream_handler
from shared.ports import Ports
from shared.protocol.codes import RUN_COMPLETED
from shared.services import stream_interest
from shared.services.webhooks import fan_out
from shared.wiring import get_ports

Stored = list[tuple[str, int, dict[str, Any] | None]]


@stream_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = [r for r in event.get("Records", []) if r.get("eventName") == "INSERT"]
    if not records:
        return {"batchItemFailures": []}
    ports = get_ports()
    runs: dict[str, tuple[dict[str, Any], Stored]] = {}  # runId -> (its first record, its events), in stream order
    unreadable: list[dict[str, Any]] = []  # the first record whose image cannot be read: it and those after it wait
    for record in records:
        data = record.get("dynamodb") or {}
        keys = data.get("Keys") or {}
        run_id = (keys.get("runId") or {}).get("S")
        seq = (keys.get("seq") or {}).get("N")
        if not run_id or seq is None:
            continue
        image = data.get("NewImage")
        try:
            pairs = ports.events.events_from_image(image) if image else [(int(seq), None)]
        except Exception:
            logger().exception(
                "a stream record could not be read; the mapping retries from it", extra={"runId": run_id}
            )
            unreadable.append(record)
            break
        runs.setdefault(run_id, (record, []))[1].extend((run_id, s, ev) for s, ev in pairs)
    failed = _handle_batch(ports, runs)
    failed = failed if failed is not None else (unreadable[0] if unreadable else None)
    if failed is None:
        return {"batchItemFailures": []}
    return {"batchItemFailures": [{"itemIdentifier": str((failed.get("dynamodb") or {}).get("SequenceNumber", ""))}]}


def _handle_batch(ports: Ports, runs: dict[str, tuple[dict[str, Any], Stored]]) -> dict[str, Any] | None:
    """Every run's events at once; if that fails, run by run in stream order. Returns the first record of the first
    run that failed alone (None: all done)."""
    try:
        _handle(ports, [s for _, stored in runs.values() for s in stored])
        return None
    except Exception:
        logger().exception("fan-out of the batch failed; it is handled again run by run")
    for run_id, (first, stored) in runs.items():
        try:
            _handle(ports, stored)
        except Exception:
            logger().exception("fan-out failed; the mapping retries from this run's record", extra={"runId": run_id})
            return first
    return None


def _handle(ports: Ports, stored: Stored) -> None:
    if not stored:
        return
    # one read per tenant of the batch serves both parts: its subscriptions and its sampling rules' version (the
    # fan-out reads it, beside the facts of runs it sees first, and fills ``interests`` in)
    interests: dict[str, stream_interest.Interest] = {}
    queued = fan_out(ports, stored, interests)
    if queued:
        count("WebhookDeliveriesQueued", queued)
    if any(e is not None and e.get("type") == RUN_COMPLETED for _, _, e in stored):
        from shared.services.sampling import on_stored  # only a batch with a completed run loads the rules

        sampled = on_stored(ports, stored, interests)
        if sampled:
            count("SuiteTasksSampled", sampled)
