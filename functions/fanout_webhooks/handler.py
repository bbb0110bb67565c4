"""DynamoDB stream consumer on the events table: every stored event is fanned out to the webhook queue.

An INSERT record exists only once the events' transaction has committed, so nothing is fanned out that the log
does not hold, and nothing in the engine waits on a receiver. The event-source mapping filters for INSERT; the
handler checks again (local mode delivers everything). The stream image carries a page of events (a large event
stored out of line is read from the log). A failing batch is retried by the mapping; re-sent messages are deduplicated
by the queue (the delivery id is the FIFO deduplication id), so a retry never delivers twice.

The same records drive the sampling rules (``shared.services.sampling``): a ``run.completed`` adds its run's task
to the drafts whose rules sample it; a retried batch adds nothing twice (the draft holds each run once). Both parts
use one read of each tenant (``stream_interest``: its subscriptions and its rules' version).
"""

from __future__ import annotations

from typing import Any

from functions._common.observability import count, stream_handler
from shared.protocol.codes import RUN_COMPLETED
from shared.services import stream_interest
from shared.services.webhooks import fan_out
from shared.wiring import get_ports


@stream_handler
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = [r for r in event.get("Records", []) if r.get("eventName") == "INSERT"]
    if not records:
        return {"batchItemFailures": []}
    ports = get_ports()
    stored: list[tuple[str, int, dict[str, Any] | None]] = []
    for record in records:
        data = record.get("dynamodb") or {}
        keys = data.get("Keys") or {}
        run_id = (keys.get("runId") or {}).get("S")
        seq = (keys.get("seq") or {}).get("N")
        if not run_id or seq is None:
            continue
        image = data.get("NewImage")
        pairs = ports.events.events_from_image(image) if image else [(int(seq), None)]
        stored += [(run_id, s, ev) for s, ev in pairs]
    if stored:
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
    return {"batchItemFailures": []}
