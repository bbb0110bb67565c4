"""Safe deploys: every function's ``live`` alias is moved by CodeDeploy, a canary first, and rolled back on alarms.

A deploy that changes a function publishes a new version (``HostFunctions``); CloudFormation hands the alias update to
CodeDeploy (the alias's ``CodeDeployLambdaAliasUpdate`` policy), which shifts traffic by the deployment config and
rolls the alias back to the previous version when any rollback alarm goes into ALARM during the shift, or the
deployment fails or is stopped. The rollback alarms are the stack's own (``HostMonitoring``): API 5xx (an API
handler failing) and each state machine's failed executions (a task failing after its retries), so they cost
nothing more. One CodeDeploy application and one service role serve the deployment groups of one nested stack's
functions (an alias's update policy names its group: both live in the same stack).

CDK context ``deploymentConfig``: ``canary`` (10% for 5 minutes, then all; the default outside ``dev``), ``linear``
(10% more every minute), or ``allAtOnce`` (the default in ``dev``: no shift, still versioned and rollback-able).
CodeDeploy for Lambda is free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Stack
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


def deployment_config_name(scope: Construct, stage: str) -> str:
    raw = scope.node.try_get_context("deploymentConfig")
    name = str(raw).strip() if raw not in (None, "") else ("allAtOnce" if stage == DEV_STAGE else "canary")
    if name not in CONFIGS:
        raise ValueError(f"context deploymentConfig={raw!r}: expected one of {', '.join(CONFIGS)}")
    return name


class HostDeployments(Construct):
    """The CodeDeploy application and service role (here, in the root stack) and, for each nested stack of functions,
    the deployment groups of its aliases (``shift``): a group lives beside the alias whose update policy names it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        rollback_alarms: Sequence[cw.IAlarm],
    ) -> None:
        super().__init__(scope, construct_id)
        self.config_name = deployment_config_name(self, stage)
        self.rollback_alarms = list(rollback_alarms)
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

    def shift(
        self, home: Construct, aliases: Mapping[str, lambda_.Alias], alarms: Sequence[cw.IAlarm] | None = None
    ) -> None:
        """One deployment group per alias, made under ``home`` (a construct in the aliases' nested stack); the root
        stack's aliases keep theirs here. ``alarms``: the rollback alarms when not all of them."""
        scope = self if Stack.of(home) is Stack.of(self) else Construct(home, "HostDeployments")
        for name, alias in aliases.items():
            self.groups[name] = codedeploy.LambdaDeploymentGroup(
                scope,
                f"{pascal(name)}Deployment",
                application=self.application,
                alias=alias,
                role=self.role,
                deployment_config=CONFIGS[self.config_name],
                alarms=list(self.rollback_alarms if alarms is None else alarms),
                auto_rollback=codedeploy.AutoRollbackConfig(
                    failed_deployment=True, stopped_deployment=True, deployment_in_alarm=True
                ),
            )
