"""DynamoDB TTL expiry for the embedded AWS: moto stores TTL settings but never expires items.

``ttl_sweep(now)`` does what the TTL service would have done by ``now``: it deletes, through the API, every
item whose TTL attribute is a number ``<= now`` in every TTL-enabled table, and the resulting REMOVE stream
records carry the TTL service identity (``userIdentity {type: Service, principalId: dynamodb.amazonaws.com}``)
so stream consumers can tell expiry from user deletes. Stream handlers run asynchronously: call
``shared.local.ddb_streams.wait_for_stream_idle()`` before asserting on their effects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import boto3

from shared.local.ddb_streams import ttl_deletion


def ttl_sweep(now_epoch: int, *, tables: Iterable[str] | None = None, client: Any = None) -> int:
    """Delete every expired item (TTL attribute ``<= now_epoch``) of every TTL-enabled table, or only of
    ``tables`` (tests sharing one stack should name theirs). Returns the count."""
    ddb = client if client is not None else boto3.client("dynamodb")
    if tables is None:
        tables = [name for page in ddb.get_paginator("list_tables").paginate() for name in page["TableNames"]]
    return sum(_sweep_table(ddb, table, now_epoch) for table in tables)


def _sweep_table(ddb: Any, table: str, now_epoch: int) -> int:
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") != "ENABLED":
        return 0
    attribute = ttl["AttributeName"]
    key_names = [k["AttributeName"] for k in ddb.describe_table(TableName=table)["Table"]["KeySchema"]]
    names = {"#ttl": attribute} | {f"#k{i}": k for i, k in enumerate(key_names)}
    # attribute_type first: DynamoDB TTL ignores non-numbers, and moto 5.2.5 raises on a str <= number comparison
    expired_if = "attribute_type(#ttl, :number) AND #ttl <= :now"
    expired = {":now": {"N": str(now_epoch)}, ":number": {"S": "N"}}
    deleted = 0
    for page in ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression=expired_if,
        ProjectionExpression=", ".join(f"#k{i}" for i in range(len(key_names))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=expired,
    ):
        for item in page["Items"]:
            key = {k: item[k] for k in key_names}
            with ttl_deletion(table, key):
                try:
                    ddb.delete_item(
                        TableName=table,
                        Key=key,
                        ConditionExpression=expired_if,  # an item renewed since the scan stays
                        ExpressionAttributeNames={"#ttl": attribute},
                        ExpressionAttributeValues=expired,
                    )
                except ddb.exceptions.ConditionalCheckFailedException:
                    continue
            deleted += 1
    return deleted
