"""Dollars from the meter's exact counts (``bench.common.Usage``) at the list prices of ``bench/prices.py``.

What is priced, per unit of work:

- DynamoDB: write and read request units, from the true sizes of each request's and response's items
  (``bench.common``, ``bench.trueunits``);
- Lambda: one request per invocation, and GB-seconds = the invocation's wall time here (handler + moto answering,
  the local stand-in for AWS's service latency) x the function's memory in ``shared.manifest`` — the one figure
  that is measured time, not a count, so it is only as good as this machine's speed;
- Step Functions: state transitions (``*StateEntered`` history events of the executions the work caused);
- S3: requests by class (PUT/COPY/POST/LIST; GET/HEAD/other; DELETE free);
- API Gateway HTTP API: one request per API call;
- Secrets Manager and SQS: API calls (secrets are cached per container); SQS per 64 KB of a request, FIFO queues
  (the webhook queue: the fan-out's SendMessageBatch) at the FIFO price.
- Step Functions: a Distributed Map's child executions too (one transition per child started and its states
  entered: ``AwsMeter.add_map_children``).

The idle cost is what the deployed stack costs per month with no traffic, from the resources it creates by default
and with the operator's opt-ins (``idle_inventory_from_manifest``; infra tests check both against synthesized
templates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench import prices as p
from bench.common import Usage

_S3_CHEAP = ("GetObject", "HeadObject", "GetObjectTagging", "HeadBucket")
_S3_FREE = ("DeleteObject", "DeleteObjects")


def dollars(usage: Usage) -> dict[str, float]:
    """The usage's cost by service, in USD."""
    s3_put = s3_get = 0
    for op, n in usage.calls.items():
        service, _, name = op.partition(":")
        if service == "s3" and name not in _S3_FREE:
            if name in _S3_CHEAP:
                s3_get += n
            else:
                s3_put += n
    secrets = sum(n for op, n in usage.calls.items() if op.startswith("secrets-manager:"))
    sqs_fifo = usage.units["sqs_fifo"]  # 64 KB chunks of requests to FIFO queues
    sqs = sum(n for op, n in usage.calls.items() if op.startswith("sqs:")) - usage.units["sqs_fifo_requests"]
    return {
        "dynamodb": usage.units["wru"] * p.DDB_PER_WRITE_REQUEST_UNIT
        + usage.units["rru"] * p.DDB_PER_READ_REQUEST_UNIT,
        "lambda": sum(usage.invocations.values()) * p.LAMBDA_PER_REQUEST
        + usage.gb_seconds * p.LAMBDA_PER_GB_SECOND_ARM64,
        "stepfunctions": usage.transitions * p.SFN_PER_STATE_TRANSITION,
        "s3": s3_put * p.S3_PER_PUT_COPY_POST_LIST + s3_get * p.S3_PER_GET_AND_OTHER,
        "apigateway": usage.units["api"] * p.HTTP_API_PER_REQUEST,
        "secretsmanager": secrets * p.SECRETS_PER_API_CALL,
        "sqs": sqs * p.SQS_PER_REQUEST + sqs_fifo * p.SQS_FIFO_PER_REQUEST,
    }


def total(usage: Usage) -> float:
    return sum(dollars(usage).values())


def breakdown(usage: Usage, scale: float = 1.0) -> str:
    """``$x (dynamodb $a, lambda $b, ...)`` for the usage times ``scale``, biggest first, zero lines left out."""
    parts = sorted(((k, v * scale) for k, v in dollars(usage).items() if v), key=lambda kv: -kv[1])
    return f"${total(usage) * scale:.4f} (" + ", ".join(f"{k} ${v:.4f}" for k, v in parts) + ")"


# -- idle ---------------------------------------------------------------------------------------------------------------

# Resource types that cost money every hour whether or not anything runs. The stack must create none of them unless an
# operator opts in; ``idle_inventory_from_template`` counts any it finds.
ALWAYS_ON_TYPES = (
    "AWS::EC2::NatGateway",
    "AWS::EC2::Instance",
    "AWS::EC2::VPCEndpoint",
    "AWS::RDS::DBInstance",
    "AWS::RDS::DBCluster",
    "AWS::ElastiCache::CacheCluster",
    "AWS::ECS::Service",
    "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "AWS::ApiGateway::RestApi",
    "AWS::OpenSearchService::Domain",
    "AWS::Redshift::Cluster",
)


def idle_inventory_from_manifest(*, detailed: bool = False, dashboard: bool = False) -> dict[str, int]:
    """The per-month billable resources the CDK stack creates, derived from ``shared.manifest`` the way ``infra/``
    builds them; ``detailed`` and ``dashboard`` are the operator's opt-ins (CDK context ``detailedAlarms`` and
    ``dashboard``). One secret per ``SECRETS`` entry. Alarms (``infra/constructs/monitoring.py``), one metric each by
    default: the API's 5xx, per state machine its failed executions, per stream consumer its failure queue, per queue
    its dead-letter queue and its oldest message's age, the webhook fan-out's iterator age, DynamoDB throttles
    (one alarm, two metrics per table it watches: read and write throttle events), per state machine its throttled
    executions and per run task its throttles; per function its canary alarm (errors and invocations of the version a
    deploy publishes: two metrics; none with ``deploymentConfig=allAtOnce``, dev's default, which this inventory of a
    ``prod`` stack does not count); ``detailed`` adds two metrics per function
    (errors + throttles) and per state machine (timed out + aborted). One customer managed KMS key per ``KEYS`` entry
    (the webhook signing key; queues use SSE-SQS, tables AWS-managed keys), no NAT gateway, provisioned capacity or always-on compute; reserved concurrency, function versions and
    aliases, and the CodeDeploy application and groups bill nothing while idle."""
    from shared import manifest

    alarm_metrics = (
        1
        + len(manifest.STATE_MACHINES)
        + len(manifest.STREAM_CONSUMERS)
        + 2 * len(manifest.QUEUES)
        + 1
        + 2 * sum(1 for t in manifest.TABLES if t.throttle_alarm)
        + len(manifest.STATE_MACHINES)  # throttled executions
        + sum(1 for f in manifest.FUNCTIONS if f.kind == "task")  # run tasks' throttles
        + 2 * len(manifest.FUNCTIONS)  # each function's canary alarm (infra/constructs/deployments.py)
    )
    if detailed:
        alarm_metrics += 2 * len(manifest.FUNCTIONS) + 2 * len(manifest.STATE_MACHINES)
    return {
        "secrets": len(manifest.SECRETS),
        "alarm_metrics": alarm_metrics,
        "dashboards": int(dashboard),
        "kms_keys": len(manifest.KEYS),
        "always_on": 0,
    }


def idle_inventory_from_template(template: Mapping[str, Any]) -> dict[str, int]:
    """The same inventory, counted in a synthesized CloudFormation template (``infra`` tests compare the two)."""
    resources = list((template.get("Resources") or {}).values())
    alarm_metrics = 0
    always_on = 0
    for r in resources:
        kind, props = r.get("Type", ""), r.get("Properties") or {}
        if kind == "AWS::CloudWatch::Alarm":
            metrics = props.get("Metrics")
            alarm_metrics += sum(1 for m in metrics if "MetricStat" in m) if metrics else 1
        if kind in ALWAYS_ON_TYPES:
            always_on += 1
        if kind == "AWS::DynamoDB::GlobalTable" and (props.get("BillingMode") or "PROVISIONED") != "PAY_PER_REQUEST":
            always_on += 1
        if kind == "AWS::DynamoDB::Table" and (props.get("BillingMode") or "PROVISIONED") != "PAY_PER_REQUEST":
            always_on += 1
        if kind == "AWS::Lambda::Alias" and props.get("ProvisionedConcurrencyConfig"):
            always_on += 1
        if kind == "AWS::Lambda::Version" and props.get("ProvisionedConcurrencyConfig"):
            always_on += 1
    return {
        "secrets": sum(1 for r in resources if r.get("Type") == "AWS::SecretsManager::Secret"),
        "alarm_metrics": alarm_metrics,
        "dashboards": sum(1 for r in resources if r.get("Type") == "AWS::CloudWatch::Dashboard"),
        "kms_keys": sum(1 for r in resources if r.get("Type") == "AWS::KMS::Key"),
        "always_on": always_on,
    }


def idle_dollars_per_month(inventory: Mapping[str, int], *, free_tier: bool = False) -> dict[str, float]:
    """The stack's cost per month with no traffic, beyond storage. Free tiers are ignored unless ``free_tier``: then
    the account is assumed to have no other alarms or dashboards, so CloudWatch's free alarm metrics and dashboards
    go to this stack (105 default alarm metrics: 95 past the free 10)."""
    alarm_metrics, dashboards = inventory["alarm_metrics"], inventory["dashboards"]
    if free_tier:
        alarm_metrics = max(0, alarm_metrics - p.CLOUDWATCH_FREE_ALARM_METRICS)
        dashboards = max(0, dashboards - p.CLOUDWATCH_FREE_DASHBOARDS)
    return {
        f"Secrets Manager: {inventory['secrets']} secrets": inventory["secrets"] * p.SECRETS_PER_SECRET_MONTH,
        f"CloudWatch: {inventory['alarm_metrics']} alarm metrics ({p.CLOUDWATCH_FREE_ALARM_METRICS} per account "
        "are free)": alarm_metrics * p.CLOUDWATCH_PER_ALARM_METRIC_MONTH,
        f"CloudWatch: {inventory['dashboards']} dashboard(s) ({p.CLOUDWATCH_FREE_DASHBOARDS} per account are free)": dashboards
        * p.CLOUDWATCH_PER_DASHBOARD_MONTH,
        f"KMS: {inventory['kms_keys']} customer managed key(s)": inventory["kms_keys"] * p.KMS_PER_CUSTOMER_KEY_MONTH,
        f"always-on compute, NAT, provisioned capacity: {inventory['always_on']}": 0.0
        if not inventory["always_on"]
        else float("nan"),
    }


STORAGE_PER_GB_MONTH = {
    "DynamoDB tables (storage + point-in-time recovery)": p.DDB_STORAGE_PER_GB_MONTH + p.DDB_PITR_PER_GB_MONTH,
    "S3 fixtures bucket and its access-log bucket": p.S3_STORAGE_PER_GB_MONTH,
    "CloudWatch Logs (functions, state machines, API access logs)": p.CLOUDWATCH_LOGS_STORAGE_PER_GB_MONTH,
}
