"""The manifest's resources created on the embedded AWS as the CDK stack creates them on AWS: tables (with their
indexes, TTL and streams), buckets, secrets, the role, functions, state machines, stream mappings and queues.

Each function takes ``client`` (a boto3 client for a service, bound to the local endpoint) and creates what does not
exist yet, so a bootstrap over kept data is idempotent.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared import manifest
from shared.local.context import function_arn
from shared.local.environment import ACCOUNT, REGION, resource_env, state_machine_arn

Client = Callable[[str], Any]
ROLE_NAME = "openwop-local-role"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_TRUST_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)


def substitute(definition: str, sm: manifest.StateMachine) -> str:
    """Replace ``${Name}`` placeholders as CloudFormation ``DefinitionSubstitutions`` would for the local stack."""

    def value(ref: str) -> str:
        kind, _, key = ref.partition(":")
        if kind == "function":
            return function_arn(manifest.function(key).local_name, REGION, ACCOUNT)
        if kind == "table":
            return manifest.table(key).local_name
        if kind == "bucket":
            return next(b.local_name for b in manifest.BUCKETS if b.key == key)
        if kind == "setting":
            env_var, default = manifest.ASL_SETTINGS[key]
            return str(int(os.environ.get(env_var) or default))
        if kind == "machine":
            return state_machine_arn(next(m for m in manifest.STATE_MACHINES if m.key == key))
        raise ValueError(f"{sm.key}: unknown substitution kind in {ref!r}")

    values = {name: value(ref) for name, ref in sm.substitutions.items()}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"{sm.file}: placeholder ${{{name}}} has no substitution in the manifest")
        return values[name]

    return _PLACEHOLDER.sub(replace, definition)


CHECKOUT = Path(__file__).resolve().parents[2]  # the folder holding shared/ and statemachines/


def asl_path(relative: str) -> Path:
    """Find an ASL file of the manifest: relative to the repository (checkout) first, then the working dir."""
    for base in (CHECKOUT, Path.cwd()):
        candidate = base / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"state machine definition {relative} not found beside the package or in {Path.cwd()}")


def _dummy_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("README.txt", "openwop local: handlers run in-process from the checkout\n")
    return buf.getvalue()


def create_tables(client: Client) -> None:
    ddb = client("dynamodb")
    existing: set[str] = set()
    for page in ddb.get_paginator("list_tables").paginate():
        existing.update(page["TableNames"])
    for t in manifest.TABLES:
        if t.local_name not in existing:
            ddb.create_table(**table_spec(t))
        else:
            _add_indexes(ddb, t)
        ttl = ddb.describe_time_to_live(TableName=t.local_name)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") != "ENABLED":
            ddb.update_time_to_live(
                TableName=t.local_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl_attribute},
            )


def _add_indexes(ddb: Any, t: manifest.Table) -> None:
    """A kept local state made before an index was added to the manifest gets it (existing items stay out)."""
    have = {
        ix["IndexName"] for ix in ddb.describe_table(TableName=t.local_name)["Table"].get("GlobalSecondaryIndexes", [])
    }
    spec = table_spec(t)
    for ix in spec.get("GlobalSecondaryIndexes", []):
        if ix["IndexName"] not in have:
            ddb.update_table(
                TableName=t.local_name,
                AttributeDefinitions=spec["AttributeDefinitions"],
                GlobalSecondaryIndexUpdates=[{"Create": ix}],
            )


def create_buckets(client: Client) -> None:
    s3 = client("s3")
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    for b in manifest.BUCKETS:
        if b.local_name in existing:
            continue
        s3.create_bucket(Bucket=b.local_name)
        s3.put_bucket_encryption(
            Bucket=b.local_name,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        )
        s3.put_public_access_block(
            Bucket=b.local_name,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )


def create_secrets(client: Client) -> None:
    """Each manifest secret once, with a generated value (as CDK's generated secret string on AWS)."""
    sm = client("secretsmanager")
    for sec in manifest.SECRETS:
        try:
            sm.describe_secret(SecretId=sec.local_name)
        except sm.exceptions.ResourceNotFoundException:
            value = secrets.token_urlsafe(48)
            if sec.json_key:  # as CDK's SecretStringGenerator with generate_string_key
                value = json.dumps({sec.json_key: value})
            sm.create_secret(Name=sec.local_name, Description=sec.purpose, SecretString=value)


def ensure_role(client: Client) -> str:
    iam = client("iam")
    try:
        arn: str = iam.get_role(RoleName=ROLE_NAME)["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        arn = iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=_TRUST_POLICY)["Role"]["Arn"]
    return arn


def create_functions(client: Client, role_arn: str) -> None:
    lam = client("lambda")
    existing: set[str] = set()
    for page in lam.get_paginator("list_functions").paginate():
        existing.update(f["FunctionName"] for f in page["Functions"])
    env = resource_env()
    code = _dummy_zip()
    for fn in manifest.FUNCTIONS:
        if fn.local_name in existing:
            continue
        lam.create_function(
            FunctionName=fn.local_name,
            Runtime=manifest.RUNTIME,
            Role=role_arn,
            Handler=f"{fn.module}.lambda_handler",
            Code={"ZipFile": code},
            Timeout=fn.timeout_s,
            MemorySize=fn.memory_mb,
            Environment={"Variables": env},
        )


def create_state_machines(client: Client, role_arn: str) -> None:
    sfn = client("stepfunctions")
    existing = {m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]}
    for sm in manifest.STATE_MACHINES:
        definition = substitute(asl_path(sm.file).read_text(encoding="utf-8"), sm)
        arn = state_machine_arn(sm)
        if arn in existing:
            if sfn.describe_state_machine(stateMachineArn=arn)["definition"] != definition:
                sfn.update_state_machine(stateMachineArn=arn, definition=definition)
        else:
            sfn.create_state_machine(name=sm.local_name, definition=definition, roleArn=role_arn)


def create_stream_mappings(client: Client) -> None:
    ddb = client("dynamodb")
    lam = client("lambda")
    for table_key, function_name in manifest.STREAM_CONSUMERS:
        stream_arn = ddb.describe_table(TableName=manifest.table(table_key).local_name)["Table"]["LatestStreamArn"]
        fn = manifest.function(function_name)
        mappings = lam.list_event_source_mappings(FunctionName=fn.local_name)["EventSourceMappings"]
        if any(m["EventSourceArn"] == stream_arn for m in mappings):
            continue
        lam.create_event_source_mapping(
            EventSourceArn=stream_arn,
            FunctionName=fn.local_name,
            StartingPosition="LATEST",
            BatchSize=100,
            Enabled=True,
        )


def create_queues(client: Client) -> dict[str, str]:
    """Each manifest queue as on AWS: FIFO, content-free dead-letter queue behind it (redrive after the
    configured attempts). Returns their URLs as the env vars the runtime reads them from."""
    sqs = client("sqs")
    env: dict[str, str] = {}
    attempts = os.environ.get("WEBHOOK_MAX_ATTEMPTS")
    for q in manifest.QUEUES:
        dlq_url = sqs.create_queue(
            QueueName=q.dlq_local_name, Attributes={"FifoQueue": "true", "MessageRetentionPeriod": str(14 * 86400)}
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": int(attempts or q.max_receives)})
        url = sqs.create_queue(
            QueueName=q.local_name,
            Attributes={
                "FifoQueue": "true",
                "VisibilityTimeout": "30",
                "MessageRetentionPeriod": str(q.retention_days * 86400),
            },
        )["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": redrive})
        env.update({q.env_var: url, f"{q.key.upper()}_DLQ_URL": dlq_url})
    return env


def table_spec(t: manifest.Table) -> dict[str, Any]:
    attributes: dict[str, str] = {t.partition_key[0]: t.partition_key[1]}
    schema = [{"AttributeName": t.partition_key[0], "KeyType": "HASH"}]
    if t.sort_key is not None:
        attributes[t.sort_key[0]] = t.sort_key[1]
        schema.append({"AttributeName": t.sort_key[0], "KeyType": "RANGE"})
    indexes = []
    for ix in t.indexes:
        attributes[ix.partition_key[0]] = ix.partition_key[1]
        attributes[ix.sort_key[0]] = ix.sort_key[1]
        indexes.append(
            {
                "IndexName": ix.name,
                "KeySchema": [
                    {"AttributeName": ix.partition_key[0], "KeyType": "HASH"},
                    {"AttributeName": ix.sort_key[0], "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        )
    spec: dict[str, Any] = {
        "TableName": t.local_name,
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": v} for k, v in attributes.items()],
        "KeySchema": schema,
        "BillingMode": "PAY_PER_REQUEST",
    }
    if indexes:
        spec["GlobalSecondaryIndexes"] = indexes
    if t.stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return spec
