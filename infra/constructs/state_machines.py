"""The Step Functions state machines of the resource manifest, defined by the ASL files in ``statemachines/``."""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import ArnFormat, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.common import acknowledge, log_retention, nag_reference, pascal, removal_policy
from infra.constructs.fixtures_bucket import FixturesBucket
from infra.constructs.functions import HostFunctions
from infra.constructs.tables import HostTables
from shared import manifest

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def asl_text(spec: manifest.StateMachine) -> str:
    return (ROOT / spec.file).read_text()


def placeholders(text: str) -> set[str]:
    """The ``${Name}`` placeholders of an ASL document (what ``DefinitionSubstitutions`` must resolve)."""
    return set(PLACEHOLDER.findall(text))


def asl_setting(scope: Construct, name: str) -> int:
    """An ASL setting (``manifest.ASL_SETTINGS``) from CDK context, checked: ``parkedTimeout`` is whole seconds,
    at least 60 and at most the run retention (a parked run must time out before its data expires)."""
    _env_var, default = manifest.ASL_SETTINGS[name]
    raw = scope.node.try_get_context(name)
    try:
        value = default if raw in (None, "") else int(str(raw))
    except ValueError:
        raise ValueError(f"context {name}={raw!r}: expected whole seconds") from None
    retention_s = int(scope.node.try_get_context("retentionDays") or 30) * 86_400
    if name == "parkedTimeout" and not 60 <= value <= retention_s:
        raise ValueError(f"context {name}={raw!r}: expected 60 to {retention_s} seconds (the run retention)")
    return value


VENDED_LOGS_PREFIX = "/aws/vendedlogs/states/"


def vended_log_group_name(scope: Construct, machine: str) -> str:
    """``/aws/vendedlogs/states/<stack name>-<Machine>-<stack GUID>``: under the prefix CloudWatch Logs reserves for
    vended logs, whose delivery needs no entry in the account's CloudWatch Logs resource policy (5,120 characters,
    shared by every log group a service delivers to: a stack per stage would outgrow it). The stack's GUID (the last
    part of its id) keeps the name unique per stack instance: a fixed name would collide with a group RETAINed from an
    earlier stack of the same name."""
    stack = Stack.of(scope)
    guid = Fn.select(2, Fn.split("/", stack.stack_id))
    return f"{VENDED_LOGS_PREFIX}{stack.stack_name}-{machine}-{guid}"


class HostStateMachines(Construct):
    """One STANDARD ``sfn.StateMachine`` per ``manifest.STATE_MACHINES`` entry.

    The ASL file is inlined byte for byte (``DefinitionBody.from_string``); ``${Name}`` placeholders resolve
    through ``definition_substitutions``: ``function:<name>`` -> the function's ``live`` alias ARN (a task never
    invokes $LATEST: a deploy moves the alias, a canary first), ``table:<key>`` -> table name, ``bucket:<key>`` ->
    bucket name, ``setting:<name>`` -> an operator setting from CDK context (``asl_setting``). The role may invoke exactly the manifest's ``invokes`` functions. Logging: ALL
    levels, without execution data (run payloads must not outlive erasure in a log group).
    Construct ids are ``<Key>StateMachine`` (``EvalStateMachine``), or ``<construct>StateMachine`` where the manifest
    names one: the hold machines keep ``RunStateMachine`` and ``ForkStateMachine``, the resources of ``run`` and ``fork``
    before decision 0191; the chained ones are ``RunChainStateMachine`` and ``ForkChainStateMachine``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        functions: HostFunctions,
        tables: HostTables,
        fixtures: FixturesBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self._functions = functions
        self._tables = tables
        self._fixtures = fixtures
        self._machines: dict[str, sfn.StateMachine] = {}
        for spec in manifest.STATE_MACHINES:
            name = spec.construct or pascal(spec.key)
            text = asl_text(spec)
            missing = placeholders(text) ^ set(spec.substitutions)
            if missing:
                raise ValueError(f"{spec.file}: placeholders and manifest substitutions differ: {sorted(missing)}")
            log_group = logs.LogGroup(
                self,
                f"{name}Logs",
                log_group_name=vended_log_group_name(self, name),
                retention=log_retention(stage),
                removal_policy=removal_policy(stage),
            )
            machine = sfn.StateMachine(
                self,
                f"{name}StateMachine",
                comment=f"OpenWOP {spec.key} ({spec.file})",
                state_machine_type=sfn.StateMachineType.STANDARD,
                definition_body=sfn.DefinitionBody.from_string(text),
                definition_substitutions={k: self._resolve(v) for k, v in spec.substitutions.items()},
                logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
                tracing_enabled=True,
            )
            machine.add_to_role_policy(  # the live aliases only: a task never runs $LATEST or an old version
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"],
                    resources=[functions.alias_arn(f) for f in spec.invokes],
                )
            )
            if '"DISTRIBUTED"' in text:
                self._grant_distributed_map(machine)
            acknowledge(
                machine.role,
                "AwsSolutions-IAM5[Resource::*]",
                "CloudWatch Logs vended-log delivery actions (logs:CreateLogDelivery, logs:DescribeResourcePolicies "
                "...) and X-Ray trace delivery (xray:PutTraceSegments ...) do not support resource-level permissions; "
                "CDK adds them for state machine logging and tracing.",
            )
            self._machines[spec.key] = machine

    def _grant_distributed_map(self, machine: sfn.StateMachine) -> None:
        """A Distributed Map reads its item list from S3 (ItemReader), writes its result there (ResultWriter) and runs
        its iterations as child executions of this very state machine (named by a policy beside the role's default one)."""
        stack = Stack.of(self)
        bucket = self._fixtures.bucket
        machine.add_to_role_policy(
            iam.PolicyStatement(  # ItemReader reads, ResultWriter writes (multipart)
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                resources=[bucket.arn_for_objects("runs/*")],
            )
        )
        machine.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
        acknowledge(
            machine.role,
            f"AwsSolutions-IAM5[Resource::{nag_reference(machine.role, bucket, 'Arn')}/runs/*]",
            "A Distributed Map reads its item list from, and writes its result to, S3 objects under runs/<runId>/, "
            "named per run at execution time.",
        )
        # Its own executions by its own ARN and name, in a policy of its own: the role's default policy cannot name
        # the machine (the machine waits on it: a cycle), this one waits on the machine. A name pattern instead
        # (``*EvalStateMachine*``) matched every stage's eval machine in the account (issue 37, defect 11).
        children = iam.Policy(
            self,
            f"{machine.node.id}ChildExecutions",
            roles=[machine.role],
            statements=[
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[machine.state_machine_arn]),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"],
                    resources=[
                        stack.format_arn(
                            service="states",
                            resource="execution",
                            resource_name=f"{machine.state_machine_name}{separator}*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                        for separator in (":", "/")  # its executions; a Map Run's child executions
                    ],
                ),
            ],
        )
        arn = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution"
        for separator in (":", "/"):
            acknowledge(
                children,
                f"AwsSolutions-IAM5[Resource::{arn}:{nag_reference(children, machine, 'Name')}{separator}*]",
                "A Distributed Map describes and stops the child executions it starts, named at execution time: "
                "every execution of this one state machine, by its own name.",
            )

    def _resolve(self, ref: str) -> str:
        kind, _, key = ref.partition(":")
        if kind == "function":
            return self._functions.alias_arn(key)
        if kind == "setting":
            return str(asl_setting(self, key))
        if kind == "table":
            return self._tables.table(key).table_name
        if kind == "bucket" and key == manifest.FIXTURES:
            return self._fixtures.bucket.bucket_name
        if kind == "machine":  # one listed before it (decision 0191: a chained machine names its hold machine)
            return self._machines[key].state_machine_arn
        raise ValueError(
            f"unknown substitution {ref!r} (expected function:<name>, table:<key>, bucket:<key> or machine:<key>)"
        )

    def machine(self, key: str) -> sfn.StateMachine:
        return self._machines[key]

    @property
    def machines(self) -> dict[str, sfn.StateMachine]:
        return dict(self._machines)
