"""DynamoDB stream consumers from ``manifest.STREAM_CONSUMERS``: the erasure hook on the runs table (REMOVE) and the
webhook fan-out on the events table (INSERT)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.common import acknowledge, pascal
from infra.constructs.functions import HostFunctions
from infra.constructs.tables import HostTables
from shared import manifest

RETRY_ATTEMPTS = 10
MAX_RECORD_AGE = Duration.days(1)


class StreamConsumers(Construct):
    """One event source mapping per (table, function) pair, keeping only its ``manifest.STREAM_EVENT_NAMES`` records.

    Starting position LATEST, batch size 100, bisect on error, partial batch responses (``ReportBatchItemFailures``),
    and the batching window of ``manifest.STREAM_BATCHING_WINDOW_S`` (the fan-out: a few seconds, so one invocation
    takes many pages of the log, decision 0151; none for the erasure hook).
    Records that still fail after the retries go to an SQS failure queue (``<Table><Function>Failures``) instead of
    being dropped: a lost REMOVE would be an erasure that never happened, a lost INSERT a webhook never delivered.
    """

    def __init__(self, scope: Construct, construct_id: str, *, tables: HostTables, functions: HostFunctions) -> None:
        super().__init__(scope, construct_id)
        self.failure_queues: dict[tuple[str, str], sqs.Queue] = {}
        for table_key, function_name in manifest.STREAM_CONSUMERS:
            name = f"{pascal(table_key)}{pascal(function_name)}"
            queue = sqs.Queue(
                self,
                f"{name}Failures",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=Duration.days(14),
            )
            for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
                acknowledge(
                    queue,
                    rule,
                    "This queue is itself the on-failure destination of the stream event source mapping; records "
                    "reaching it are inspected and replayed by an operator, never consumed automatically.",
                )
            window = manifest.STREAM_BATCHING_WINDOW_S.get((table_key, function_name), 0)
            fn = functions.alias(function_name)  # the live alias: a canary deploy shifts stream batches too
            fn.add_event_source(
                event_sources.DynamoEventSource(
                    tables.table(table_key),
                    starting_position=lambda_.StartingPosition.LATEST,
                    batch_size=manifest.STREAM_BATCH_SIZE,
                    max_batching_window=Duration.seconds(window) if window else None,
                    bisect_batch_on_error=True,
                    retry_attempts=RETRY_ATTEMPTS,
                    max_record_age=MAX_RECORD_AGE,
                    report_batch_item_failures=True,
                    on_failure=event_sources.SqsDlq(queue),
                    filters=[
                        lambda_.FilterCriteria.filter(
                            {
                                "eventName": lambda_.FilterRule.is_equal(
                                    manifest.STREAM_EVENT_NAMES[(table_key, function_name)]
                                )
                            }
                        )
                    ],
                )
            )
            self.failure_queues[(table_key, function_name)] = queue
