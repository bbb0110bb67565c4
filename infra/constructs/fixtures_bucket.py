"""The fixtures bucket: derived fixture copies and large payloads, kept no longer than the retention window."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.constructs.common import removal_policy

# Objects outlive their run by at most this many days: erasure deletes them first, the lifecycle rule is a backstop.
EXPIRY_BACKSTOP_DAYS = 7
ACCESS_LOG_DAYS = 90


class FixturesBucket(Construct):
    """SSE-S3, no public access, TLS only, unversioned, objects expire after ``retention_days`` + 7 days.

    Server access logs go to a sibling bucket (``AccessLogsBucket``, same settings) that keeps them for 90 days.
    """

    def __init__(self, scope: Construct, construct_id: str, *, stage: str, retention_days: int) -> None:
        super().__init__(scope, construct_id)
        policy = removal_policy(stage)
        self.access_logs = s3.Bucket(
            self,
            "AccessLogsBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,  # server access log delivery supports SSE-S3 only
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=False,
            lifecycle_rules=[
                s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(ACCESS_LOG_DAYS)),
                s3.LifecycleRule(id="AbortIncompleteUploads", abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            removal_policy=policy,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=False,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="fixtures/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAfterRetention",
                    expiration=Duration.days(retention_days + EXPIRY_BACKSTOP_DAYS),
                ),
                s3.LifecycleRule(id="AbortIncompleteUploads", abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            removal_policy=policy,
        )
