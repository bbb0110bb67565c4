"""The bench meter's attribution and prices (decision 0116): stream and queue consumers' work is the run's."""

from __future__ import annotations

import json

import pytest

from bench import costs
from bench import prices as p
from bench.common import AwsMeter, _run_id_in

RUN = "bench/r-01JABCDEFGHJKMNPQRSTVWXYZ0"


def test_a_stream_record_and_an_sqs_message_name_their_run():
    # Given a DynamoDB stream batch of the events table and an SQS batch of the webhook queue
    stream = {"Records": [{"eventName": "INSERT", "dynamodb": {"Keys": {"runId": {"S": RUN}, "seq": {"N": "3"}}}}]}
    sqs = {"Records": [{"messageId": "m", "body": json.dumps({"webhookId": "bench/w", "runId": RUN})}]}
    # Then each is attributed to the run it names; an event naming none to nobody
    assert _run_id_in(stream) == RUN
    assert _run_id_in(sqs) == RUN
    assert _run_id_in({"Records": [{"body": "not json"}]}) is None


def test_a_runs_usage_includes_its_consumers_and_the_maps_children():
    meter = AwsMeter()
    # Given a fan-out invocation for the run and a Map of 10 children with 12 Trial attempts
    with meter._invocation("fanout_webhooks", {"Records": [{"dynamodb": {"Keys": {"runId": {"S": RUN}}}}]}):
        pass
    added = meter.add_map_children(RUN, 10, 12)
    # Then the run's usage holds both, and its consumer's share reads apart
    assert added == 22
    assert meter.usage(RUN).invocations == {"fanout_webhooks": 1}
    assert meter.usage(RUN).transitions == 22
    assert meter.usage(f"{RUN}|fanout_webhooks").invocations == {"fanout_webhooks": 1}
    assert meter.unattributed(RUN) == 0


class _Sent:
    """What botocore's ``before-send`` hands the meter: a prepared request's body and headers."""

    def __init__(self, body: bytes) -> None:
        self.body, self.headers = body, {}


def test_fifo_requests_are_priced_at_the_fifo_price_per_64_kb():
    meter = AwsMeter()
    fifo = "https://sqs.us-east-1.amazonaws.com/123456789012/openwop-webhooks.fifo"
    # Given a 1 KB and a 100 KB SendMessageBatch to the FIFO queue, and one SendMessage to a standard queue
    for size in (1_000, 100_000):
        body = json.dumps({"QueueUrl": fifo, "Entries": [{"Id": "1", "MessageBody": "x" * size}]}).encode()
        meter._before_send(request=_Sent(body), event_name="before-send.sqs.SendMessageBatch")
    meter._before_send(
        request=_Sent(b'{"QueueUrl": "https://sqs/erasure", "MessageBody": "x"}'),
        event_name="before-send.sqs.SendMessage",
    )
    used = meter.usage("bench")
    # Then the FIFO requests are 1 + 2 chunks of 64 KB at the FIFO price, the other one at the standard price
    assert used.units["sqs_fifo"] == 3 and used.units["sqs_fifo_requests"] == 2
    assert costs.dollars(used)["sqs"] == pytest.approx(3 * p.SQS_FIFO_PER_REQUEST + 1 * p.SQS_PER_REQUEST)
