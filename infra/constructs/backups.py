"""An optional AWS Backup plan of the host tables (CDK context ``backup=true``), beside their point-in-time recovery.

PITR (always on) restores any second of the last 35 days, in the table's own region and account. The plan adds daily
backups kept ``backupRetentionDays`` (35 by default) in a vault of this stack, and with ``backupCopyVaultArn`` a copy
of each to a vault elsewhere (another region or account: what survives the loss of this one). The fixtures bucket is
not backed up: it holds derived copies and large payloads of runs whose items the tables hold. The restore steps are
in docs/operations.md ("Restore"). Cost: backup storage only ($0.10 per GB-month for DynamoDB warm backups at list
price, plus the copy's storage and transfer); nothing while the tables are empty.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_backup as backup
from aws_cdk import aws_events as events
from constructs import Construct

from infra.constructs.common import DEV_STAGE, acknowledge, context_flag
from infra.constructs.tables import HostTables

DEFAULT_RETENTION_DAYS = 35


class HostBackups(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, tables: HostTables, stage: str) -> None:
        super().__init__(scope, construct_id)
        raw = self.node.try_get_context("backupRetentionDays")
        try:
            days = int(str(raw)) if raw not in (None, "") else DEFAULT_RETENTION_DAYS
            if days < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"context backupRetentionDays={raw!r}: expected a positive number of days") from None
        self.vault = backup.BackupVault(
            self, "Vault", removal_policy=RemovalPolicy.DESTROY if stage == DEV_STAGE else RemovalPolicy.RETAIN
        )
        copy_to = self.node.try_get_context("backupCopyVaultArn")
        copies = (
            [
                backup.BackupPlanCopyActionProps(
                    destination_backup_vault=backup.BackupVault.from_backup_vault_arn(self, "CopyVault", str(copy_to)),
                    move_to_cold_storage_after=None,
                    delete_after=Duration.days(days),
                )
            ]
            if copy_to
            else None
        )
        self.plan = backup.BackupPlan(
            self,
            "Plan",
            backup_vault=self.vault,
            backup_plan_rules=[
                backup.BackupPlanRule(
                    rule_name="Daily",
                    schedule_expression=events.Schedule.cron(hour="3", minute="0"),
                    delete_after=Duration.days(days),
                    copy_actions=copies,
                )
            ],
        )
        selection = self.plan.add_selection(
            "Tables", resources=[backup.BackupResource.from_dynamo_db_table(table) for table in tables.tables.values()]
        )
        acknowledge(
            selection,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSBackupServiceRolePolicyForBackup]",
            "AWS Backup's own service policy for taking backups of the selected tables (what CDK's "
            "BackupSelection attaches); the selection names this stack's tables only.",
        )
        self.retention_days = days

    @classmethod
    def from_context(cls, scope: Construct, construct_id: str, *, tables: HostTables, stage: str) -> HostBackups | None:
        return cls(scope, construct_id, tables=tables, stage=stage) if context_flag(scope, "backup") else None
