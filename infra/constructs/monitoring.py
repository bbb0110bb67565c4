"""Alarms, and on request a dashboard: what an operator is paged for, and where to look (docs/operations.md).

Plain CloudWatch L2 constructs, every alarm notifying one SNS topic (``AlarmTopicArn`` output; CDK context
``alarmEmail`` subscribes an address). The default alarms watch one metric each, so together they fit CloudWatch's
free tier of 10 alarm metrics per account (``bench.costs`` counts them; an infra test keeps them within it). A
failing function still shows in them: an API handler as a 5xx, a Step Functions task as a failed execution (each
machine's catch ends in a Fail state), a stream or queue consumer as records in its failure queue.

- ``Api5xx``: the HTTP API answered 5xx (any in 5 minutes: the host maps every expected failure to a 4xx envelope).
- ``<Machine>ExecutionsFailed``: Step Functions executions failed (a run, eval or fork its machine could not finish).
- ``ErasureFailures``, ``<Function>StreamFailures``: records in a stream consumer's on-failure queue (for the
  erasure hook, an erasure that did not happen).
- ``<Queue>DeadLetters``: messages in a queue's dead-letter queue (deliveries that exhausted their retries).
- ``DynamoDbThrottles``: read or write requests DynamoDB throttled on any table (a hot partition, or on-demand
  capacity outgrown): one math alarm over ``ReadThrottleEvents`` + ``WriteThrottleEvents`` of every table (two
  metrics per table, billed per metric; a math alarm takes at most 10 metrics, so a table
  whose ``throttle_alarm`` is off is left out: the signing table, read once per webhook delivery, where a throttled
  read fails the delivery, which the queue retries and ``WebhooksDeadLetters`` reports).
- ``WebhookFanoutLag``: the webhook fan-out's stream iterator age (``IteratorAge`` of ``fanout_webhooks``) over
  ``WEBHOOK_LAG_MS``: events are being stored faster than they are queued for delivery.
- ``<Queue>QueueAge``: the oldest message of the webhook queue (``ApproximateAgeOfOldestMessage``) over
  ``QUEUE_AGE_S``: deliveries are backing up (a receiver down, or the delivery function throttled).

- ``<Machine>ExecutionsThrottled``: Step Functions throttled a machine's state transitions or executions
  (``ExecutionThrottled``): runs are slowed, then fail when a task's retries run out.
- ``<Function>Throttles``: Lambda throttled a run task (``Throttles`` of each function of kind ``task``): the
  state machines retry it, then fail the run (always on: ``detailedAlarms`` only adds the other functions).

Together these alarms watch 27 metrics. The canary alarms (two metrics per function outside ``allAtOnce``) bring the
default stack to 105: 95 more than CloudWatch's 10 free alarm metrics ($9.50 a month at list price, in
``bench.costs``).

Not an alarm but a rule on the same topic: ``<Key>KeyDisabled`` (``SigningKeyDisabled``), an EventBridge rule on the
CloudTrail events ``DisableKey`` and ``ScheduleKeyDeletion`` of each customer managed key, whose event goes to the
topic as it is (KMS publishes no metric of a key's state; docs/decisions/0153-alarms-that-mean-one-thing.md).

These alarms page; none rolls a deploy back. What rolls a deploy back is each function's own canary alarm
(``<Function>CanaryErrors``, beside its deployment group: ``infra/constructs/deployments.py``), which pages nobody
(docs/decisions/0155-canary-rollback-on-own-errors.md).

CDK context ``detailedAlarms=true`` adds, two metrics each (billed per metric):

- ``<Function>Problems``: a function's Errors + Throttles over 5 minutes (one alarm per function).
- ``<Machine>ExecutionsTimedOutOrAborted``: Step Functions executions timed out or aborted (cancels and erasures
  abort executions, so a few are expected).

CDK context ``dashboard=true`` adds the dashboard (billed beyond an account's first 3).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.api import RunsApi
from infra.constructs.common import acknowledge, context_flag, page, pascal
from infra.constructs.functions import HostFunctions
from infra.constructs.queues import HostQueues
from infra.constructs.state_machines import HostStateMachines
from infra.constructs.streams import StreamConsumers
from infra.constructs.tables import HostTables
from shared import manifest

PERIOD = Duration.minutes(5)
WEBHOOK_LAG_MS = 5 * 60 * 1000  # the fan-out's stream iterator age that pages (5 minutes behind the event log)
QUEUE_AGE_S = 15 * 60  # the webhook queue's oldest message that pages (one retry cap: a receiver down for a while)
APP_METRICS = ("RunsStarted", "RunsFinished", "RunsFailed", "Forks", "Refusals", "ServerErrors", "RunsErased")
EVAL_METRICS = ("EvalsStarted", "EvalsFinished", "FixtureMisses")


def _alarm(
    scope: Construct,
    alarms: dict[str, cw.Alarm],
    topic: sns.ITopic,
    name: str,
    metric: cw.IMetric,
    description: str,
    threshold: float = 1,
) -> None:
    a = cw.Alarm(
        scope,
        name,
        metric=metric,
        threshold=threshold,
        evaluation_periods=1,
        comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        alarm_description=description,
    )
    a.add_alarm_action(cw_actions.SnsAction(topic))
    alarms[name] = a


class StackAlarms(Construct):
    """The root stack's alarms: the SNS topic every alarm notifies (``AlarmTopicArn`` output; CDK context
    ``alarmEmail`` subscribes an address), and the stack-wide pages of a failing handler (``Api5xx``) or task
    (``<Machine>ExecutionsFailed``). They rolled deploys back until each function's canary alarm did
    (docs/decisions/0155-canary-rollback-on-own-errors.md), and stay in the root beside the state machines with the
    ids they kept across the split into nested stacks (docs/decisions/0148-nested-stacks.md)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        api: RunsApi,
        state_machines: HostStateMachines,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "AlarmTopic", display_name=f"OpenWOP host alarms ({stage})", enforce_ssl=True)
        acknowledge(
            self.topic,
            "AwsSolutions-SNS2",
            "Alarm notifications carry only alarm names and states, no run data; CloudWatch alarms cannot publish "
            "to a topic encrypted with the AWS-managed SNS key, and a customer key would be the stack's only one.",
        )
        email = self.node.try_get_context("alarmEmail")
        self.email_dead_letters: sqs.Queue | None = None
        if email:
            # Notifications SNS could not deliver to the address after its retries land here, not nowhere
            # (cdk-nag Serverless-SNSRedrivePolicy: SNS honours a subscription's redrive policy for every protocol).
            self.email_dead_letters = sqs.Queue(
                self,
                "AlarmEmailDeadLetters",
                encryption=sqs.QueueEncryption.SQS_MANAGED,  # SNS may send to SSE-SQS queues without a KMS grant
                enforce_ssl=True,
                retention_period=Duration.days(14),
            )
            for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
                acknowledge(
                    self.email_dead_letters,
                    rule,
                    "This queue is itself the dead-letter queue of the alarm e-mail subscription: it holds the "
                    "notifications SNS could not deliver, read by an operator (docs/operations.md), never consumed.",
                )
            self.topic.add_subscription(subs.EmailSubscription(str(email), dead_letter_queue=self.email_dead_letters))
        topic = self.topic
        self.alarms: dict[str, cw.Alarm] = {}
        _alarm(
            self,
            self.alarms,
            topic,
            "Api5xx",
            api.http_api.metric_server_error(period=PERIOD, statistic="Sum"),
            "The HTTP API answered 5xx: a handler failed unexpectedly (see docs/operations.md).",
        )
        for key, machine in state_machines.machines.items():
            _alarm(
                self,
                self.alarms,
                topic,
                f"{pascal(key)}ExecutionsFailed",
                machine.metric_failed(period=PERIOD, statistic="Sum"),
                f"Step Functions {key}: executions failed (see docs/operations.md).",
            )
        CfnOutput(
            Stack.of(self),
            "AlarmTopicArn",
            value=self.topic.topic_arn,
            description="SNS topic of the host's alarms (subscribe to be paged)",
        )


class HostMonitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: HostFunctions,
        state_machines: HostStateMachines,
        streams: StreamConsumers,
        api: RunsApi,
        queues: HostQueues,
        tables: HostTables,
        metrics_namespace: str,
        stack_alarms: StackAlarms,
        keys: Mapping[str, kms.IKey],
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = stack_alarms.topic
        self.alarms: dict[str, cw.Alarm] = dict(stack_alarms.alarms)
        self._failure_alarms(streams, queues)
        self._table_throttle_alarm(tables)
        fanout = functions.function("fanout_webhooks")
        self._alarm(
            "WebhookFanoutLag",
            fanout.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
            "The webhook fan-out is more than 5 minutes behind the event log (see docs/operations.md).",
            threshold=WEBHOOK_LAG_MS,
        )
        self._backlog_alarms(functions, state_machines, queues)
        self.rules: dict[str, events.Rule] = dict(self._key_disabled(key, k) for key, k in keys.items())
        if context_flag(self, "detailedAlarms"):
            self._detailed_alarms(functions, state_machines)

        self.dashboard = self._dashboard(api, metrics_namespace) if context_flag(self, "dashboard") else None

    def _alarm(self, name: str, metric: cw.IMetric, description: str, threshold: float = 1) -> None:
        _alarm(self, self.alarms, self.topic, name, metric, description, threshold)

    def _failure_alarms(self, streams: StreamConsumers, queues: HostQueues) -> None:
        """Work that failed for good: stream records a consumer could not process, deliveries out of retries."""
        for (table_key, function_name), queue in streams.failure_queues.items():
            self._alarm(
                "ErasureFailures" if function_name == "erase_run" else f"{pascal(function_name)}StreamFailures",
                queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                f"Stream records of {table_key} that {function_name} could not process: pending an "
                "operator (see docs/operations.md).",
            )
        for key, dlq in queues.dead_letter_queues.items():
            self._alarm(
                f"{pascal(key)}DeadLetters",
                dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                f"Deliveries of the {key} queue that exhausted their retries (see docs/operations.md).",
            )

    def _table_throttle_alarm(self, tables: HostTables) -> None:
        """One alarm on the throttled reads and writes of every host table that asks for it."""
        throttles = {
            f"{kind[0].lower()}{i}": cw.Metric(
                namespace="AWS/DynamoDB",
                metric_name=f"{kind}ThrottleEvents",
                dimensions_map={"TableName": table.table_name},
                period=PERIOD,
                statistic="Sum",
            )
            for i, (key, table) in enumerate(tables.tables.items())
            if manifest.table(key).throttle_alarm
            for kind in ("Read", "Write")
        }
        self._alarm(
            "DynamoDbThrottles",
            cw.MathExpression(
                expression="SUM(METRICS())",
                using_metrics=throttles,
                period=PERIOD,
                label="DynamoDB throttled requests, all tables",
            ),
            "DynamoDB throttled reads or writes on a host table: a hot partition or outgrown on-demand capacity "
            "(see docs/operations.md).",
        )

    def _backlog_alarms(self, functions: HostFunctions, state_machines: HostStateMachines, queues: HostQueues) -> None:
        """Work that waits: queues' oldest messages, throttled state machines and run tasks."""
        for key, queue in queues.queues.items():
            self._alarm(
                f"{pascal(key)}QueueAge",
                queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
                f"The oldest message of the {key} queue is over 15 minutes old: deliveries are backing up "
                "(see docs/operations.md).",
                threshold=QUEUE_AGE_S,
            )
        for key, machine in state_machines.machines.items():
            self._alarm(
                f"{pascal(key)}ExecutionsThrottled",
                machine.metric_throttled(period=PERIOD, statistic="Sum"),
                f"Step Functions {key}: state transitions or executions throttled (see docs/operations.md).",
            )
        for spec in manifest.FUNCTIONS:
            if spec.kind == "task":
                self._alarm(
                    f"{pascal(spec.name)}Throttles",
                    functions.function(spec.name).metric_throttles(period=PERIOD, statistic="Sum"),
                    f"Lambda {spec.name} (a run task): invocations throttled (see docs/operations.md).",
                )

    def _detailed_alarms(self, functions: HostFunctions, state_machines: HostStateMachines) -> None:
        """The opt-in ``detailedAlarms``: every function's errors and throttles, every state machine's timeouts."""

        def summed(a: cw.IMetric, b: cw.IMetric, label: str) -> cw.MathExpression:
            return cw.MathExpression(expression="a + b", using_metrics={"a": a, "b": b}, period=PERIOD, label=label)

        for name, fn in functions.functions.items():
            self._alarm(
                f"{pascal(name)}Problems",
                summed(
                    fn.metric_errors(period=PERIOD, statistic="Sum"),
                    fn.metric_throttles(period=PERIOD, statistic="Sum"),
                    f"{name} errors + throttles",
                ),
                f"Lambda {name}: errors or throttles (see docs/operations.md).",
            )
        for key, machine in state_machines.machines.items():
            self._alarm(
                f"{pascal(key)}ExecutionsTimedOutOrAborted",
                summed(
                    machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                    machine.metric_aborted(period=PERIOD, statistic="Sum"),
                    f"{key} timed out + aborted",
                ),
                f"Step Functions {key}: executions timed out or were aborted (see docs/operations.md).",
            )

    def _key_disabled(self, key: str, kms_key: kms.IKey) -> tuple[str, events.Rule]:
        """``<Key>KeyDisabled``: the key's ``DisableKey`` or ``ScheduleKeyDeletion`` (CloudTrail management events, as
        EventBridge receives them where a trail records management events), sent to the alarm topic as they are. KMS
        has no metric of a key's state; a disabled signing key stops every webhook delivery and secret read."""
        name = f"{pascal(key)}KeyDisabled"
        rule = events.Rule(
            self,
            name,
            description=f"OpenWOP {key} key disabled or scheduled for deletion (see docs/operations.md)",
            event_pattern=events.EventPattern(
                source=["aws.kms"],
                detail_type=["AWS API Call via CloudTrail"],
                detail={
                    "eventSource": ["kms.amazonaws.com"],
                    "eventName": ["DisableKey", "ScheduleKeyDeletion"],
                    "resources": {"ARN": [kms_key.key_arn]},
                },
            ),
        )
        page(rule, self.topic)
        return name, rule

    def _dashboard(self, api: RunsApi, metrics_namespace: str) -> cw.Dashboard:
        app = [
            cw.Metric(
                namespace=metrics_namespace,
                metric_name=m,
                dimensions_map={"service": "openwop-serverless"},
                period=PERIOD,
                statistic="Sum",
            )
            for m in APP_METRICS
        ]
        dashboard = cw.Dashboard(self, "Dashboard")
        dashboard.add_widgets(
            cw.GraphWidget(title="Runs and refusals", left=app, width=12),
            cw.GraphWidget(
                title="API answers",
                width=12,
                left=[
                    api.http_api.metric_count(period=PERIOD, statistic="Sum"),
                    api.http_api.metric_client_error(period=PERIOD, statistic="Sum"),
                    api.http_api.metric_server_error(period=PERIOD, statistic="Sum"),
                ],
                right=[api.http_api.metric_latency(period=PERIOD, statistic="p99")],
            ),
        )
        dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )
        # Evals and tools: the counters with their own dimensions (functions/_common/observability.py, count_by)
        evals = [
            cw.Metric(
                namespace=metrics_namespace,
                metric_name=m,
                dimensions_map={"service": "openwop-serverless"},
                period=PERIOD,
                statistic="Sum",
            )
            for m in EVAL_METRICS
        ]
        tool_calls = cw.MathExpression(
            expression=f"SEARCH('{{{metrics_namespace},service,transport,status,source}} MetricName=\"ToolCalls\"', "
            f"'Sum', {int(PERIOD.to_seconds())})",
            using_metrics={},
            label="ToolCalls",
            period=PERIOD,
        )
        refusals = cw.MathExpression(
            expression=f"SEARCH('{{{metrics_namespace},service,code}} MetricName=\"RefusalsByCode\"', 'Sum', "
            f"{int(PERIOD.to_seconds())})",
            using_metrics={},
            label="RefusalsByCode",
            period=PERIOD,
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Evals and fixture misses", left=evals, width=8),
            cw.GraphWidget(title="Tool calls by transport, status and source", left=[tool_calls], width=8),
            cw.GraphWidget(title="Refusals by code", left=[refusals], width=8),
        )
        return dashboard
