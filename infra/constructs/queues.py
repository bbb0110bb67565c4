"""SQS queues from ``manifest.QUEUES``: the webhook delivery queue (FIFO) and its dead-letter queue.

Both are FIFO, TLS-only (``enforce_ssl``) and encrypted with SQS-managed keys (SSE-SQS: a customer managed KMS key
would cost $1 a month with no traffic, and kms grants for every sender and consumer). The main queue's redrive
policy moves a message to the dead-letter queue after ``max_receives`` attempts; its visibility timeout is six times
the consumer's timeout (the AWS guidance for Lambda event sources), and each retry's backoff is set per message by
the consumer. Functions get the URL (``<KEY>_QUEUE_URL``) and only the grants their manifest entry declares:
``sends`` (SendMessage) or ``consumes`` (the event source mapping, batch size 1, partial batch responses).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.common import acknowledge, pascal
from infra.constructs.functions import HostFunctions
from shared import manifest

DLQ_RETENTION = Duration.days(14)


class HostQueues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, functions: HostFunctions) -> None:
        super().__init__(scope, construct_id)
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        for spec in manifest.QUEUES:
            name = pascal(spec.key)
            dlq = sqs.Queue(
                self,
                f"{name}DeadLetterQueue",
                fifo=True,
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=DLQ_RETENTION,
            )
            for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
                acknowledge(
                    dlq,
                    rule,
                    "This is the dead-letter queue of the webhook delivery queue; messages "
                    "reaching it are named by dead-letter records and redriven by an operator "
                    "(docs/operations.md), never consumed automatically.",
                )
            consumer_timeout = max((f.timeout_s for f in manifest.FUNCTIONS if f.consumes == spec.key), default=30)
            queue = sqs.Queue(
                self,
                f"{name}Queue",
                fifo=True,
                content_based_deduplication=False,
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                visibility_timeout=Duration.seconds(6 * consumer_timeout),
                retention_period=Duration.days(spec.retention_days),
                dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=spec.max_receives),
            )
            self.queues[spec.key] = queue
            self.dead_letter_queues[spec.key] = dlq
        for fspec in manifest.FUNCTIONS:
            fn = functions.function(fspec.name)
            for qkey in fspec.sends:
                q = self.queues[qkey]
                fn.add_environment(manifest.queue(qkey).env_var, q.queue_url)
                q.grant_send_messages(fn)
            if fspec.consumes is not None:
                q = self.queues[fspec.consumes]
                fn.add_environment(manifest.queue(fspec.consumes).env_var, q.queue_url)
                fn.add_environment("WEBHOOK_MAX_ATTEMPTS", str(manifest.queue(fspec.consumes).max_receives))
                alias = functions.alias(fspec.name)
                alias.add_event_source(  # the live alias, as every caller
                    event_sources.SqsEventSource(q, batch_size=1, report_batch_item_failures=True)
                )
                acknowledge(
                    alias,
                    "Serverless-LambdaEventSourceMappingDestination",
                    f"An SQS event source mapping has no on-failure destination: a message of the {qkey} "
                    "queue that keeps failing moves to its dead-letter queue by the queue's redrive policy "
                    "(alarmed: <Queue>DeadLetters).",
                )
