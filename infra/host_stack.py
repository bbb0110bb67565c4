"""The OpenWOP host stack: composes the constructs, tags them and registers the cdk-nag acknowledgments."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, Tags
from constructs import Construct

from infra.constructs.api import RunsApi
from infra.constructs.backups import HostBackups
from infra.constructs.deployments import HostDeployments
from infra.constructs.fixtures_bucket import FixturesBucket
from infra.constructs.functions import HostFunctions
from infra.constructs.monitoring import HostMonitoring
from infra.constructs.outputs import add_outputs
from infra.constructs.queues import HostQueues
from infra.constructs.secrets import HostSecrets
from infra.constructs.seeding import HostSeeding, plan_from_context
from infra.constructs.state_machines import HostStateMachines
from infra.constructs.streams import StreamConsumers
from infra.constructs.tables import HostTables
from infra.packaging import AssetDirs

PROJECT_TAG = "openwop-serverless"
DEFAULT_RETENTION_DAYS = 30


class HostStack(Stack):
    """Tables, fixtures bucket, secrets, functions (versioned, behind aliases CodeDeploy moves), state machines, the
    stream consumers, the queues, the HTTP API, alarms, and on request a backup plan."""

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

        self.tables = HostTables(self, "HostTables", stage=stage)
        self.fixtures = FixturesBucket(self, "FixturesBucket", stage=stage, retention_days=retention_days)
        self.secrets = HostSecrets(self, "HostSecrets", stage=stage)
        self.functions = HostFunctions(
            self,
            "HostFunctions",
            stage=stage,
            assets=assets,
            tables=self.tables,
            fixtures=self.fixtures,
            secrets=self.secrets,
            retention_days=retention_days,
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
        self.api = RunsApi(self, "RunsApi", stage=stage, functions=self.functions)
        self.monitoring = HostMonitoring(
            self,
            "HostMonitoring",
            stage=stage,
            functions=self.functions,
            state_machines=self.state_machines,
            streams=self.streams,
            api=self.api,
            queues=self.queues,
            tables=self.tables,
            metrics_namespace=self.functions.metrics_namespace,
        )
        # Every function behind its live alias, moved by CodeDeploy (canary outside dev), rolled back on alarms.
        self.deployments = HostDeployments(
            self,
            "HostDeployments",
            stage=stage,
            functions=self.functions,
            rollback_alarms=self.monitoring.rollback_alarms,
        )
        # CDK context ``backup`` (off by default): an AWS Backup plan of the tables, beside their PITR.
        self.backups = HostBackups.from_context(self, "HostBackups", tables=self.tables, stage=stage)
        # CDK context ``seed`` (off by default, refused in prod): the conformance fixtures and/or the demo on deploy.
        seed_plan = plan_from_context(self, stage)
        self.seeding = (
            HostSeeding(self, "HostSeeding", stage=stage, plan=seed_plan, functions=self.functions)
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
