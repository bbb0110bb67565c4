"""Small helpers shared by the constructs: naming, stage policies, cdk-nag acknowledgments."""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Duration, Names, NestedStack, RemovalPolicy, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

DEV_STAGE = "dev"
MIN_REASON_CHARS = 10


def pascal(name: str) -> str:
    """``create_run`` -> ``CreateRun``; ``eval-run`` -> ``EvalRun``. Used for construct ids, which never change."""
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_") if part)


def removal_policy(stage: str) -> RemovalPolicy:
    """Stateful resources are destroyed with a dev stack and retained everywhere else."""
    return RemovalPolicy.DESTROY if stage == DEV_STAGE else RemovalPolicy.RETAIN


def log_retention(stage: str) -> logs.RetentionDays:
    return logs.RetentionDays.ONE_WEEK if stage == DEV_STAGE else logs.RetentionDays.ONE_MONTH


def context_flag(scope: Construct, key: str) -> bool:
    """An opt-in switch from CDK context: ``true`` (``-c key=true`` or JSON true) turns it on, absent or ``false``
    leaves it off, anything else stops synthesis (a typo must not silently leave the switch off)."""
    raw = scope.node.try_get_context(key)
    value = "false" if raw is None or raw == "" else str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"context {key}={raw!r}: expected true or false")
    return value == "true"


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge (suppress) one cdk-nag finding on ``scope`` and its children, with a real reason.

    ``rule_id`` is the finding as cdk-nag prints it: ``AwsSolutions-L1``, or ``AwsSolutions-IAM5[Resource::...]``
    for rules with one finding per wildcard (cdk-nag v3 has no prefix matching: each finding is acknowledged).
    """
    if len(reason.strip()) < MIN_REASON_CHARS:
        raise ValueError(f"acknowledgment of {rule_id} needs a reason of at least {MIN_REASON_CHARS} characters")
    # Unprefixed ids are what cdk-nag itself matches (NagPack.isAcknowledged), both during synthesis and in
    # NagPack.validate_scope (the tests); CDK stores them as "Annotation::<id>" metadata.
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def page(rule: events.Rule, topic: sns.ITopic) -> None:
    """Send the rule's events to the alarm topic as they are, retried by EventBridge for 24 hours."""
    rule.add_target(targets.SnsTopic(topic, retry_attempts=185, max_event_age=Duration.hours(24)))
    acknowledge(
        rule,
        "Serverless-EventBusDLQ",
        "The target is the alarm topic itself, retried by EventBridge for 24 hours: an event it still cannot "
        "publish there is one no alarm could page about either; a dead-letter queue would need its own alarm "
        "on that same topic.",
    )


def nag_reference(consumer: IConstruct, target: IConstruct, attribute: str) -> str:
    """How cdk-nag spells ``target``'s attribute (``Arn``, ``Name``) as seen from ``consumer``'s stack, for an
    acknowledgment: ``<Logical.Arn>`` in the same stack, otherwise the parameter CDK makes for the nested stack
    (``<referenceto<unique id><Attr>>``, through the producing nested stack's output when both are nested)."""
    element = target if isinstance(target, CfnElement) else target.node.default_child
    if not isinstance(element, CfnElement):
        raise TypeError(f"{target.node.path} has no CloudFormation resource")
    producer, stack = Stack.of(element), Stack.of(consumer)
    if producer is stack:
        return f"<{producer.get_logical_id(element)}.{attribute}>"
    name = f"{Names.unique_id(element)}{attribute}"
    if isinstance(producer, NestedStack) and producer.nested_stack_resource is not None:
        return f"<referenceto{Names.unique_id(producer.nested_stack_resource)}Outputs{name}>"
    return f"<referenceto{name}>"
