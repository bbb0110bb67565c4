"""An optional AWS Backup plan of the host tables (CDK context ``backup=true``), beside their point-in-time recovery.

PITR (always on) restores any second of the last 35 days, in the table's own region and account. The plan adds daily
backups kept ``backupRetentionDays`` (35 by default) in a vault of this stack, and with ``backupCopyVaultArn`` a copy
of each to a vault elsewhere (another region or account: what survives the loss of this one). The fixtures bucket is
not backed up: it holds derived copies and large payloads of runs whose items the tables hold. The restore steps are
in docs/operations.md ("Restore"). Cost: backup storage only ($0.10 per GB-month for DynamoDB warm backups at list
price, plus the copy's storage and transfer); nothing while the tables are empty.

``BackupJobsFailed``: an EventBridge rule on AWS Backup's job state changes, a backup job of this stack's vault or a
copy job out of it that ended ``FAILED``, ``ABORTED`` or ``EXPIRED``, whose event goes to the alarm topic as it is
(free: AWS Backup's events and rules on the default bus cost nothing; the ``AWS/Backup`` metrics would be two alarm
metrics more, $0.20 a month). A backup that silently stops turns the restore point of a lost region into the last
good one, however old.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_backup as backup
from aws_cdk import aws_events as events
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.constructs.common import DEV_STAGE, acknowledge, context_flag, page
from infra.constructs.tables import HostTables

DEFAULT_RETENTION_DAYS = 35
# The end states of a job that left no recovery point (backup) or no copy of one (copy)
FAILED_STATES = ("FAILED", "ABORTED", "EXPIRED")


class HostBackups(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, tables: HostTables, stage: str, topic: sns.ITopic
    ) -> None:
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
        self.failed_jobs = self._failed_jobs(topic)

    def _failed_jobs(self, topic: sns.ITopic) -> events.Rule:
        """``BackupJobsFailed``: AWS Backup's ``Backup Job State Change`` of this vault (``backupVaultName``) and
        ``Copy Job State Change`` out of it (``sourceBackupVaultArn``) in a failed end state, to the alarm topic."""
        rule = events.Rule(
            self,
            "BackupJobsFailed",
            description="OpenWOP backup or copy job of the host tables failed (see docs/operations.md)",
            event_pattern=events.EventPattern(
                source=["aws.backup"],
                detail_type=["Backup Job State Change", "Copy Job State Change"],
                detail={
                    "state": list(FAILED_STATES),
                    "$or": [
                        {"backupVaultName": [self.vault.backup_vault_name]},
                        {"sourceBackupVaultArn": [self.vault.backup_vault_arn]},
                    ],
                },
            ),
        )
        page(rule, topic)
        return rule

    @classmethod
    def from_context(
        cls, scope: Construct, construct_id: str, *, tables: HostTables, stage: str, topic: sns.ITopic
    ) -> HostBackups | None:
        if not context_flag(scope, "backup"):
            return None
        return cls(scope, construct_id, tables=tables, stage=stage, topic=topic)
