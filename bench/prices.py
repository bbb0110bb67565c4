"""On-demand list prices the bench turns its exact counts into dollars with: one file, one region, one date.

Read from the providers' public price pages (aws.amazon.com/<service>/pricing) as of **2026-12-03**, for
**us-east-1 (N. Virginia)**, standard/on-demand tiers, free tiers ignored (a figure is what the usage costs beyond
any free allowance; the idle month is also given within CloudWatch's free alarms and dashboards). Change a number
here and every cost the bench prints follows. The bench's unit costs are exact counts (requests, request units,
invocations, transitions) times these; Lambda duration is the only measured-time input (see ``bench/costs.py``).
"""

from __future__ import annotations

PRICES_READ_ON = "2026-12-03"
REGION = "us-east-1"

# DynamoDB, on-demand capacity mode, Standard table class
DDB_PER_WRITE_REQUEST_UNIT = 0.625 / 1_000_000  # 1 WRU = one write of up to 1 KB (transactional: 2)
DDB_PER_READ_REQUEST_UNIT = 0.125 / 1_000_000  # 1 RRU = one strongly consistent read of up to 4 KB
DDB_STORAGE_PER_GB_MONTH = 0.25  # first 25 GB/month free (ignored)
DDB_PITR_PER_GB_MONTH = 0.20  # continuous backups (point-in-time recovery), per GB of table data

# Lambda (the stack's functions are arm64)
LAMBDA_PER_GB_SECOND_ARM64 = 0.0000133334
LAMBDA_PER_GB_SECOND_X86 = 0.0000166667
LAMBDA_PER_REQUEST = 0.20 / 1_000_000

# Step Functions, Standard workflows (API calls such as StartExecution or SendTaskSuccess are not charged)
SFN_PER_STATE_TRANSITION = 0.025 / 1_000

# S3 Standard
S3_PER_PUT_COPY_POST_LIST = 0.005 / 1_000
S3_PER_GET_AND_OTHER = 0.0004 / 1_000  # GET, HEAD and all other requests; DELETE is free
S3_STORAGE_PER_GB_MONTH = 0.023

# API Gateway HTTP API (first 300 million requests/month; a request is metered per 512 KB)
HTTP_API_PER_REQUEST = 1.00 / 1_000_000

# Secrets Manager
SECRETS_PER_SECRET_MONTH = 0.40
SECRETS_PER_API_CALL = 0.05 / 10_000

# SQS (a request is metered per 64 KB chunk): standard queues, and FIFO queues (the webhook queue)
SQS_PER_REQUEST = 0.40 / 1_000_000
SQS_FIFO_PER_REQUEST = 0.50 / 1_000_000

# KMS customer managed keys: the stack creates one, the webhook signing key (tables use the AWS owned/managed key,
# S3 SSE-S3, SQS SSE-SQS) ($0.03 per 10,000
# requests: one Encrypt per registration or rotation, one Decrypt per secret and warm delivery container)
KMS_PER_CUSTOMER_KEY_MONTH = 1.00

# CloudWatch (alarms are billed per metric they evaluate: a metric-math alarm over two metrics is two alarm metrics)
CLOUDWATCH_PER_ALARM_METRIC_MONTH = 0.10  # standard resolution
CLOUDWATCH_FREE_ALARM_METRICS = 10  # per account and month (standard resolution); ignored unless asked for
CLOUDWATCH_PER_DASHBOARD_MONTH = 3.00
CLOUDWATCH_FREE_DASHBOARDS = 3  # per account; ignored unless asked for
CLOUDWATCH_LOGS_STORAGE_PER_GB_MONTH = 0.03
