"""The OpenWOP host stack: composes the constructs, tags them and registers the cdk-nag acknowledgments."""

from __future__ import annotations

from typing import Any

from aws_cdk import NestedStack, Stack, Tags
from constructs import Construct

from infra.constructs.api import RunsApi
from infra.constructs.backups import HostBackups
from infra.constructs.deployments import HostDeployments
from infra.constructs.fixtures_bucket import FixturesBucket
from infra.constructs.functions import HostFunctions, function_group
from infra.constructs.monitoring import HostMonitoring, StackAlarms
from infra.constructs.outputs import add_outputs
from infra.constructs.queues import HostQueues
from infra.constructs.schedules import HostSchedules
from infra.constructs.secrets import HostSecrets
from infra.constructs.seeding import HostSeeding, plan_from_context
from infra.constructs.state_machines import HostStateMachines
from infra.constructs.streams import StreamConsumers
from infra.constructs.tables import HostTables
from infra.packaging import AssetDirs
from shared import manifest

PROJECT_TAG = "openwop-serverless"
DEFAULT_RETENTION_DAYS = 30


NESTED_STACKS = {
    "ApiFunctions": "the API handlers",
    "Workers": "the stream, queue and scheduled consumers and the seed function",
    "Monitoring": "the alarms (but the stack-wide and canary ones) and the dashboard",
}


class HostStack(Stack):
    """Tables, fixtures bucket, secrets, functions (versioned, behind aliases CodeDeploy moves), state machines, the
    stream consumers, the queues, the HTTP API, alarms, and on request a backup plan.

    The root stack keeps what holds state or is named from outside (tables, buckets, secrets, the signing key, the
    queues, the HTTP API with its stage and routes, the alarm topic and the stack-wide alarms, the backup vault, the
    outputs and parameters) and what in-flight runs use (the run tasks, the state machines, the tasks' deployment
    groups and canary alarms); the rest lives in nested stacks by subject (``NESTED_STACKS``), so that no template
    nears a CloudFormation quota (docs/decisions/0148-nested-stacks.md). Cross-stack values are CDK references: it
    wires the parameters and outputs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        assets: AssetDirs,
        retention_days: int = DEFAULT_RETENTION_DAYS,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.stage = stage
        Tags.of(self).add("project", PROJECT_TAG)
        Tags.of(self).add("stage", stage)
        self.nested_stacks = {
            name: NestedStack(self, name, description=f"OpenWOP v2 serverless host ({stage}): {what}")
            for name, what in NESTED_STACKS.items()
        }
        api_functions, workers = self.nested_stacks["ApiFunctions"], self.nested_stacks["Workers"]

        self.tables = HostTables(self, "HostTables", stage=stage)
        self.fixtures = FixturesBucket(self, "FixturesBucket", stage=stage, retention_days=retention_days)
        self.secrets = HostSecrets(self, "HostSecrets", stage=stage)
        # the run tasks stay in the root (``HostFunctions`` itself), with the state machines that invoke them
        homes: dict[str, Construct] = {"api": api_functions, "workers": workers}
        self.functions = HostFunctions(
            self,
            "HostFunctions",
            stage=stage,
            assets=assets,
            tables=self.tables,
            fixtures=self.fixtures,
            secrets=self.secrets,
            retention_days=retention_days,
            homes={group: Construct(home, "HostFunctions") for group, home in homes.items()},
        )
        self.state_machines = HostStateMachines(
            self,
            "HostStateMachines",
            stage=stage,
            functions=self.functions,
            tables=self.tables,
            fixtures=self.fixtures,
        )
        self.functions.connect_state_machines(self.state_machines.machines)
        self.streams = StreamConsumers(self, "StreamConsumers", tables=self.tables, functions=self.functions)
        self.queues = HostQueues(self, "HostQueues", functions=self.functions)
        # the scheduled functions' rules beside them, in the workers' stack: the start outbox's sweep (decision 0150)
        self.schedules = HostSchedules(workers, "HostSchedules", functions=self.functions)
        # the routes stay in the root with the API: a route key is unique in its API, so a route moved to a nested
        # stack would be created beside the old one before that is deleted, and refused
        self.api = RunsApi(self, "RunsApi", stage=stage, functions=self.functions)
        stack_alarms = StackAlarms(
            self, "HostMonitoring", stage=stage, api=self.api, state_machines=self.state_machines
        )
        self.monitoring = HostMonitoring(
            self.nested_stacks["Monitoring"],
            "HostMonitoring",
            functions=self.functions,
            state_machines=self.state_machines,
            streams=self.streams,
            api=self.api,
            queues=self.queues,
            tables=self.tables,
            metrics_namespace=self.functions.metrics_namespace,
            stack_alarms=stack_alarms,
            keys={k.key: self.secrets.key(k.key) for k in manifest.KEYS},
        )
        # Every function behind its live alias, moved by CodeDeploy (canary outside dev), rolled back on its new
        # version's own error rate: one application and role here, the groups and their canary alarms beside the
        # aliases whose update policy names them (docs/decisions/0155-canary-rollback-on-own-errors.md).
        self.deployments = HostDeployments(self, "HostDeployments", stage=stage)
        for group, home in {"tasks": self.functions, **homes}.items():
            self.deployments.shift(
                home, {n: a for n, a in self.functions.aliases.items() if function_group(manifest.function(n)) == group}
            )
        # CDK context ``backup`` (off by default): an AWS Backup plan of the tables, beside their PITR.
        # Failed backup and copy jobs go to the alarm topic.
        self.backups = HostBackups.from_context(
            self, "HostBackups", tables=self.tables, stage=stage, topic=stack_alarms.topic
        )
        # CDK context ``seed`` (off by default, refused in prod): the conformance fixtures and/or the demo on deploy.
        seed_plan = plan_from_context(self, stage)
        self.seeding = (
            HostSeeding(workers, "HostSeeding", stage=stage, plan=seed_plan, functions=self.functions)
            if seed_plan is not None
            else None
        )
        self.outputs = add_outputs(
            self,
            stage=stage,
            tables=self.tables,
            fixtures=self.fixtures,
            secrets=self.secrets,
            state_machines=self.state_machines,
            api=self.api,
            queues=self.queues,
        )
