"""SQS consumer of the webhook queue (FIFO): one signed POST per message, through the egress guard.

Powertools Batch (``SqsFifoPartialProcessor``) reports partial batch failures; on a failure the rest of that
message group is not attempted (per-run order). A failed message's next attempt is pushed back by its visibility
timeout (exponential backoff); SQS counts attempts (``ApproximateReceiveCount``) and its redrive policy moves a
message to the dead-letter queue after the last one, when the service has already recorded the dead letter.
A message whose subscription is gone is acknowledged without a request.
"""

from __future__ import annotations

import json
from typing import Any

from functions._common.observability import count, logger, observed
from shared.services import webhooks
from shared.wiring import get_ports

_processor: Any = None


def _get_processor() -> Any:
    global _processor
    if _processor is None:
        from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor

        _processor = SqsFifoPartialProcessor(skip_group_on_error=True)
        # A batch whose every message failed is still a partial-failure answer (not an invocation error): the
        # visibility of each failed message is its own backoff, which a failed invocation would reset.
        _processor.raise_on_entire_batch_failure = False
    return _processor


def _record_handler(record: Any) -> None:
    ports = get_ports()
    attempt = int(record.attributes.approximate_receive_count or 1)
    message = json.loads(record.body)
    try:
        result = webhooks.deliver(ports, message, attempt)
    except webhooks.DeliveryFailedError as exc:
        count("WebhookAttemptsFailed")
        logger().warning(
            "webhook delivery attempt failed",
            extra={"deliveryId": message.get("deliveryId"), "attempt": attempt, "reason": exc.reason},
        )
        raise
    if result.status is not None:
        count("WebhookDeliveries")


@observed("Records[0].messageId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import process_partial_response

    answer: dict[str, Any] = dict(
        process_partial_response(
            event=event, record_handler=_record_handler, processor=_get_processor(), context=context
        )
    )
    failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
    if failed:
        ports = get_ports()
        later = []
        for rec in event.get("Records", []):
            if rec["messageId"] in failed:
                attempt = int((rec.get("attributes") or {}).get("ApproximateReceiveCount", "1"))
                final = attempt >= int(ports.settings.webhook_max_attempts)
                later.append((rec["receiptHandle"], 0 if final else webhooks.retry_delay_s(ports, attempt)))
        ports.queues["webhooks"].retry_later(later)
    return answer
