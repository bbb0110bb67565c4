"""Safe deploys: every function's ``live`` alias is moved by CodeDeploy, a canary first, and rolled back on its own errors.

A deploy that changes a function publishes a new version (``HostFunctions``); CloudFormation hands the alias update to
CodeDeploy (the alias's ``CodeDeployLambdaAliasUpdate`` policy), which shifts traffic by the deployment config and
rolls the alias back to the previous version when the group's rollback alarm goes into ALARM during the shift, or
the deployment fails or is stopped. Each group has one alarm of its own, ``<Function>CanaryErrors``: the error rate of
the function's new version as invoked through the alias (``AWS/Lambda`` ``Errors`` / ``Invocations`` with the
dimensions ``FunctionName``, ``Resource`` = ``<function>:live`` and ``ExecutedVersion`` = the version this deploy
publishes), over 1-minute periods, above ``canaryErrorRatePercent`` (default 5) in a minute with at least
``canaryMinInvocations`` (default 5) invocations of that version; missing data is not breaching. Only the new build's
own failures roll it back: not another function's, not another tenant's 5xx, not the old version's. The stack-wide
alarms (``Api5xx``, ``<Machine>ExecutionsFailed``) page and roll nothing back
(docs/decisions/0155-canary-rollback-on-own-errors.md). The alarm lives beside its group (the function's stack) and
has no action: CodeDeploy reads it.

One CodeDeploy application and one service role serve the deployment groups of every stack (an alias's update policy
names its group: both live in the same stack).

CDK context ``deploymentConfig``: ``canary`` (10% for 5 minutes, then all; the default outside ``dev``), ``linear``
(10% more every minute), or ``allAtOnce`` (the default in ``dev``: no shift, still versioned and rollback-able on a
failed or stopped deployment; no canary alarm, which a shift of no minutes would never consult in time).
CodeDeploy for Lambda is free; each canary alarm is two alarm metrics ($0.20 a month at list price).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_codedeploy as codedeploy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs.common import DEV_STAGE, acknowledge, pascal
from infra.deploy_configs import SHIFT_MINUTES

CONFIGS = {
    "canary": codedeploy.LambdaDeploymentConfig.CANARY_10_PERCENT_5_MINUTES,
    "linear": codedeploy.LambdaDeploymentConfig.LINEAR_10_PERCENT_EVERY_1_MINUTE,
    "allAtOnce": codedeploy.LambdaDeploymentConfig.ALL_AT_ONCE,
}
assert set(CONFIGS) == set(SHIFT_MINUTES)
CANARY_PERIOD = Duration.minutes(1)


def deployment_config_name(scope: Construct, stage: str) -> str:
    raw = scope.node.try_get_context("deploymentConfig")
    name = str(raw).strip() if raw not in (None, "") else ("allAtOnce" if stage == DEV_STAGE else "canary")
    if name not in CONFIGS:
        raise ValueError(f"context deploymentConfig={raw!r}: expected one of {', '.join(CONFIGS)}")
    return name


@dataclass(frozen=True)
class CanaryThresholds:
    """When a new version rolls back: its error rate in one minute above ``error_rate_percent`` of at least
    ``min_invocations`` invocations (CDK context ``canaryErrorRatePercent``, ``canaryMinInvocations``)."""

    error_rate_percent: float = 5.0
    min_invocations: int = 5

    @classmethod
    def from_context(cls, scope: Construct) -> CanaryThresholds:
        rate, least = cls.error_rate_percent, cls.min_invocations
        raw = scope.node.try_get_context("canaryErrorRatePercent")
        if raw not in (None, ""):
            try:
                rate = float(str(raw).strip())
                if not 0 < rate <= 100:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"context canaryErrorRatePercent={raw!r}: expected a percentage above 0 and at most 100"
                ) from None
        raw = scope.node.try_get_context("canaryMinInvocations")
        if raw not in (None, ""):
            try:
                least = int(str(raw).strip())
                if least < 1:
                    raise ValueError
            except ValueError:
                raise ValueError(f"context canaryMinInvocations={raw!r}: expected a positive integer") from None
        return cls(error_rate_percent=rate, min_invocations=least)


def canary_alarm(scope: Construct, name: str, alias: lambda_.Alias, thresholds: CanaryThresholds) -> cw.Alarm:
    """``<Function>CanaryErrors``: the error rate (percent) of the version ``alias`` points at as invoked through it,
    in 1-minute periods, 0 below the minimum of invocations; no data (no invocation) is not breaching."""
    fn = alias.version.lambda_
    dimensions = {
        "FunctionName": fn.function_name,
        "Resource": f"{fn.function_name}:{alias.alias_name}",  # spelled from the function: no reference to the alias
        "ExecutedVersion": alias.version.version,
    }

    def metric(metric_name: str) -> cw.Metric:
        return cw.Metric(
            namespace="AWS/Lambda",
            metric_name=metric_name,
            dimensions_map=dimensions,
            period=CANARY_PERIOD,
            statistic="Sum",
        )

    least = thresholds.min_invocations
    return cw.Alarm(
        scope,
        f"{pascal(name)}CanaryErrors",
        metric=cw.MathExpression(
            expression=f"IF(invocations >= {least}, 100 * FILL(errors, 0) / invocations, 0)",
            using_metrics={"errors": metric("Errors"), "invocations": metric("Invocations")},
            period=CANARY_PERIOD,
            label=f"{name} errors of the new version, % of its invocations",
        ),
        threshold=thresholds.error_rate_percent,
        evaluation_periods=1,
        comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        alarm_description=f"Lambda {name}: the version a deploy publishes failed more than "
        f"{thresholds.error_rate_percent:g}% of at least {least} invocations through its live alias in a minute; "
        "during a deploy CodeDeploy rolls the alias back (see docs/operations.md, Deploys and rollbacks).",
    )


class HostDeployments(Construct):
    """The CodeDeploy application and service role (here, in the root stack) and, for each nested stack of functions,
    the deployment groups of its aliases with their canary alarms (``shift``): a group lives beside the alias whose
    update policy names it."""

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
        self.config_name = deployment_config_name(self, stage)
        self.thresholds = CanaryThresholds.from_context(self)
        self.application = codedeploy.LambdaApplication(self, "Application")
        self.role = iam.Role(
            self,
            "CodeDeployRole",
            assumed_by=iam.ServicePrincipal("codedeploy.amazonaws.com"),
            description="CodeDeploy shifting the functions' live aliases",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSCodeDeployRoleForLambdaLimited")
            ],
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSCodeDeployRoleForLambdaLimited]",
            "AWS's managed policy for CodeDeploy on Lambda: read the functions and alarms, update aliases, "
            "invoke hooks; it is what CDK's LambdaDeploymentGroup attaches, shared by all groups here.",
        )
        self.groups: dict[str, codedeploy.LambdaDeploymentGroup] = {}
        self.canary_alarms: dict[str, cw.Alarm] = {}

    def shift(self, home: Construct, aliases: Mapping[str, lambda_.Alias]) -> None:
        """One deployment group per alias, with its canary alarm (none with ``allAtOnce``), made under ``home`` (a
        construct in the aliases' nested stack); the root stack's aliases keep theirs here."""
        scope = self if Stack.of(home) is Stack.of(self) else Construct(home, "HostDeployments")
        shifting = SHIFT_MINUTES[self.config_name] > 0
        for name, alias in aliases.items():
            alarms: list[cw.IAlarm] = []
            if shifting:
                self.canary_alarms[name] = canary_alarm(scope, name, alias, self.thresholds)
                alarms.append(self.canary_alarms[name])
            self.groups[name] = codedeploy.LambdaDeploymentGroup(
                scope,
                f"{pascal(name)}Deployment",
                application=self.application,
                alias=alias,
                role=self.role,
                deployment_config=CONFIGS[self.config_name],
                alarms=alarms,
                auto_rollback=codedeploy.AutoRollbackConfig(
                    failed_deployment=True, stopped_deployment=True, deployment_in_alarm=shifting
                ),
            )
