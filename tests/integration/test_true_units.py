"""The bench's independent meter (issue 38, item 1): capacity units from true item sizes, read around each request."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from bench.common import AwsMeter
from bench.trueunits import TrueUnits, item_size
from tests.helpers import unique

RAW_BYTES = 5_000  # a binary attribute: 5,000 bytes stored, 6,668 as base64 on the wire


@pytest.fixture()
def table(local_aws: Any) -> Any:
    from shared.local.stack import REGION

    raw = local_aws.client("dynamodb")
    name = unique("true-units")
    raw.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    watched = boto3.client("dynamodb", region_name=REGION, endpoint_url=local_aws.endpoint)
    try:
        yield name, raw, watched
    finally:
        raw.delete_table(TableName=name)


def test_item_sizes_follow_dynamodbs_rules():
    # Names and strings in UTF-8 bytes, binaries raw, numbers by significant digits, containers with overhead
    assert item_size({"pk": {"S": "héllo"}}) == 2 + 6
    assert item_size({"n": {"N": "-123.4500"}}) == 1 + 3 + 1
    assert item_size({"b": {"B": "AAECAwQ="}}) == 1 + 5
    assert item_size({"f": {"BOOL": True}, "z": {"NULL": True}}) == 4
    assert item_size({"m": {"M": {"k": {"S": "v"}}}, "l": {"L": [{"N": "7"}]}}) == (1 + 3 + 1 + 1 + 1) + (1 + 3 + 2 + 1)


def _metered(raw: Any, watched: Any) -> TrueUnits:
    """An independent meter of the requests ``watched`` sends, reading stored items through ``raw``."""
    true = TrueUnits(raw, AwsMeter())
    true.watch(watched)
    true.enabled = True
    return true


def test_writes_are_billed_on_the_larger_item_and_reads_on_the_whole_item(table: Any):
    name, raw, watched = table
    true = _metered(raw, watched)
    blob = bytes(range(256)) * (RAW_BYTES // 256) + bytes(RAW_BYTES % 256)
    key = {"pk": {"S": "item"}}
    # Given a put of a 5 KB item (6.7 KB of base64 on the wire)
    watched.put_item(TableName=name, Item={**key, "data": {"B": blob}})
    assert true.of("bench")["wru dynamodb:PutItem"] == 5
    # When an update removes its binary, it is billed on the item before it (5 KB), not on its small request
    watched.update_item(
        TableName=name,
        Key=key,
        UpdateExpression="REMOVE #d SET v = :v",
        ExpressionAttributeNames={"#d": "data"},
        ExpressionAttributeValues={":v": {"N": "1"}},
    )
    assert true.of("bench")["wru dynamodb:UpdateItem"] == 5
    # And a put whose condition fails is billed on the item as it was (now a few bytes: 1 unit)
    with pytest.raises(watched.exceptions.ConditionalCheckFailedException):
        watched.put_item(
            TableName=name, Item={**key, "data": {"B": blob}}, ConditionExpression="attribute_not_exists(pk)"
        )
    assert true.of("bench")["wru dynamodb:PutItem"] == 5 + 1
    # Given the blob back, a projected, eventually consistent read of the key alone is billed on the whole item:
    # 5 KB is two 4 KB units, half each
    watched.put_item(TableName=name, Item={**key, "data": {"B": blob}})
    got = watched.get_item(TableName=name, Key=key, ProjectionExpression="pk")
    assert got["Item"] == key
    assert true.of("bench")["rru dynamodb:GetItem"] == 1.0
    watched.query(
        TableName=name,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "item"}},
        ConsistentRead=True,
    )
    assert true.of("bench")["rru dynamodb:Query"] == 2.0
    # And another origin's units are its own
    assert true.of("elsewhere") == {}


def test_write_units_are_also_counted_by_kind_of_item(table: Any):
    # Given a table named like the host's (its last part says which) and a transaction of two of its items beside a
    # plain put
    from bench.trueunits import _kind

    name, raw, watched = table
    true = _metered(raw, watched)
    watched.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": name, "Item": {"pk": {"S": "SLOTS#tenant"}, "n": {"N": "1"}}}},
            {"Put": {"TableName": name, "Item": {"pk": {"S": "STARTS#07"}, "n": {"N": "1"}}}},
        ]
    )
    watched.put_item(TableName=name, Item={"pk": {"S": "SLOTS#other"}, "data": {"B": bytes(1500)}})
    # Then each item's units are counted under its kind, in a transaction or not, and add up to the whole
    short = name.rsplit("-", 1)[-1]
    assert true.by_item("bench") == {
        f"{short}:SLOTS": 2,
        f"{short}:SLOTS in a transaction": 2,
        f"{short}:STARTS in a transaction": 2,
    }
    assert sum(true.by_item("bench").values()) == true.of("bench")["wru"] == 6
    # and an item's kind names no id: a run's items by their sort key, a tombstone as one, a page as a page
    assert _kind("openwop-runs", {"pk": {"S": "t/r-1"}, "sk": {"S": "RUN#STATE"}}) == "runs:RUN#STATE"
    assert _kind("openwop-runs", {"pk": {"S": "t/r-1"}, "sk": {"S": "CHILD#t/r-2"}}) == "runs:CHILD"
    assert _kind("openwop-runs", {"pk": {"S": "ERASED#ab12"}, "sk": {"S": "TOMBSTONE"}}) == "runs:tombstone"
    assert _kind("openwop-events", {"runId": {"S": "t/r-1"}, "seq": {"N": "99"}}) == "events:page"


def test_writes_of_an_item_an_index_holds_write_the_index_too(local_aws: Any):
    from shared.local.stack import REGION

    # Given a table with a global secondary index (projection ALL) on attribute ``g``
    raw = local_aws.client("dynamodb")
    name = unique("true-units-gsi")
    raw.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "byG",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    watched = boto3.client("dynamodb", region_name=REGION, endpoint_url=local_aws.endpoint)
    true = _metered(raw, watched)
    try:
        key = {"pk": {"S": "in"}}
        # When an item the index holds is put (in a transaction), changed, moved to another index key, and deleted,
        # and an item it does not hold is put
        watched.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": {**key, "g": {"S": "a"}}}}])
        after_put = true.of("bench")["gsi"]
        watched.update_item(
            TableName=name, Key=key, UpdateExpression="SET s = :s", ExpressionAttributeValues={":s": {"S": "x" * 1500}}
        )
        after_change = true.of("bench")["gsi"]
        watched.update_item(
            TableName=name, Key=key, UpdateExpression="SET g = :g", ExpressionAttributeValues={":g": {"S": "b"}}
        )
        after_move = true.of("bench")["gsi"]
        watched.delete_item(TableName=name, Key=key)
        after_delete = true.of("bench")["gsi"]
        watched.put_item(TableName=name, Item={"pk": {"S": "out"}})
        # Then each wrote the index: 1 (a standard write in the transaction too), 2 (its 1.5 KB), 4 (the old entry
        # deleted and the new put, 2 KB each), 2; the item the index does not hold wrote none of it
        assert (after_put, after_change - after_put, after_move - after_change, after_delete - after_move) == (
            1,
            2,
            4,
            2,
        )
        assert true.of("bench")["gsi"] == after_delete
        # and the table's own write units are as before (2 for the transactional put)
        assert true.of("bench")["wru dynamodb:TransactWriteItems"] == 2
    finally:
        raw.delete_table(TableName=name)


def test_the_atomic_floor_counts_a_runs_items_in_its_create_and_end_transactions(local_aws: Any):
    """bench_units' least atomic design, from stored sizes: pages once plain; the create's transaction of every own
    item, the end's of the run, state and index items (2 per KB each); with the tenant's cap and start outbox, three
    items under 1 KB in each."""
    from bench.bench_units import _atomic_floor
    from shared.settings import get_settings
    from shared.storage.schema import RUN_FACTS_SK, RUN_INDEX_SK, RUN_SK, RUN_STATE_SK

    raw, run_id = local_aws.client("dynamodb"), unique("r-floor")
    sizes = {RUN_SK: 1_500, RUN_FACTS_SK: 2_500, RUN_STATE_SK: 100, RUN_INDEX_SK: 100}  # 2, 3, 1 and 1 KB
    for sk, n in sizes.items():
        raw.put_item(
            TableName=get_settings().runs_table,
            Item={"pk": {"S": run_id}, "sk": {"S": sk}, "pad": {"S": "x" * n}},
        )
    pages = [{"runId": {"S": run_id}, "seq": {"N": str(i)}, "data": {"B": b"p" * 1_200}} for i in (0, 99)]
    # pages 2 + 2; created 7 (every item); ended 4 (run, state, index)
    assert _atomic_floor(local_aws, run_id, pages) == (4 + 2 * 7 + 2 * 4 + 12, 4 + 2 * 7 + 2 * 4)
