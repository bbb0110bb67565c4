"""The HostStore port on DynamoDB: host-wide items by (pk, sk): API key hashes, what tenants register (workflows,
agents, tools, MCP servers, credential references, eval suites, webhook subscriptions), counters and the effect
ledger. A large document is stored compressed where its caller allows it (``compress``: ``ddb.pack_doc``)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ItemTooLargeError
from shared.ports.runs import StagedWrite
from shared.storage import schema
from shared.storage.ddb import (
    batch_delete,
    batch_get_tables,
    dump,
    effect_transaction,
    error_code,
    from_item,
    pack_doc,
    partition_condition,
    query_all,
    refuse_too_large,
    staged,
    to_item,
    unpack_doc,
    writable_check,
)


def _item(pk: str, sk: str, value: dict[str, Any], expires_at: int, compress: bool) -> dict[str, Any]:
    """The stored item of ``value`` (``pack_doc``; ``expires_at``: its TTL); one over DynamoDB's limit is refused."""
    name, attr = pack_doc(value, compress)
    size = len(pk.encode()) + len(sk.encode()) + len(attr["B"] if "B" in attr else attr["S"].encode())
    if size > schema.MAX_ITEM_BYTES:  # refused here: DynamoDB would refuse it after it was sent
        raise ItemTooLargeError("an item over DynamoDB's 400 KB limit")
    item: dict[str, Any] = {**to_item({"pk": pk, "sk": sk}), name: attr}
    if expires_at:
        item.update(to_item({schema.TTL_ATTRIBUTE: expires_at}))
    return item


class DynamoHostStore:
    def __init__(self, client: Any, table: str, runs_table: str) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None:
        resp = self._c.get_item(TableName=self._t, Key=to_item({"pk": pk, "sk": sk}), ConsistentRead=True)
        if "Item" not in resp:
            return None
        return unpack_doc(from_item(resp["Item"]))

    def get_item_and_run(self, pk: str, sk: str, run_id: str) -> tuple[dict[str, Any] | None, int | None]:
        """The item, and the TTL (epoch seconds, 0 for none) of the run item of ``run_id``, None when there is no run
        item (erased): one strongly consistent BatchGetItem over this table and the runs table, the run's key and
        TTL only."""
        run_key = to_item({"pk": run_id, "sk": schema.RUN_SK})
        found = batch_get_tables(
            self._c,
            {
                self._t: {"Keys": [to_item({"pk": pk, "sk": sk})], "ConsistentRead": True},
                self._runs: {
                    "Keys": [run_key],
                    "ConsistentRead": True,
                    "ProjectionExpression": "pk, #ttl",
                    "ExpressionAttributeNames": {"#ttl": schema.TTL_ATTRIBUTE},
                },
            },
        )
        items = found.get(self._t, [])
        runs = [from_item(raw) for raw in found.get(self._runs, [])]
        item = unpack_doc(from_item(items[0])) if items else None
        return item, (int(runs[0].get(schema.TTL_ATTRIBUTE) or 0) if runs else None)

    def put_item(
        self,
        pk: str,
        sk: str,
        value: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
        expires_at: int = 0,
        compress: bool = False,
    ) -> bool:
        """Put; optionally only if absent, or only if the stored document still equals ``if_equals`` (CAS).
        ``expires_at`` (epoch seconds) sets the item's TTL.

        With ``compress``, a document over ``MAX_INLINE_BYTES`` (a 10,000-node workflow definition) is stored
        zlib-compressed in the binary attribute ``docz``; one that is still too large is refused
        (``ItemTooLargeError``, a 413)."""
        kwargs: dict[str, Any] = {"TableName": self._t, "Item": _item(pk, sk, value, expires_at, compress)}
        if if_absent:
            kwargs["ConditionExpression"] = "attribute_not_exists(pk)"
        elif if_equals is not None:
            old_name, old_attr = pack_doc(if_equals, compress)
            kwargs["ConditionExpression"] = f"{old_name} = :old"
            kwargs["ExpressionAttributeValues"] = {":old": old_attr}
        try:
            self._c.put_item(**kwargs)
            return True
        except ClientError as exc:
            refuse_too_large(exc)
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def stage_put(self, pk: str, sk: str, value: dict[str, Any], *, expires_at: int = 0) -> StagedWrite:
        """``put_item``'s unconditional put, for another store's transaction (``StagedWrite``)."""
        return staged({"Put": {"TableName": self._t, "Item": _item(pk, sk, value, expires_at, False)}})

    def stage_delete(self, pk: str, sk: str) -> StagedWrite:
        """``delete_item``'s unconditional delete (an absent item: a no-op), for another store's transaction."""
        return staged({"Delete": {"TableName": self._t, "Key": to_item({"pk": pk, "sk": sk})}})

    def query(self, pk: str, prefix: str = "", *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]:
        """Every item of the partition (under ``prefix``); ``consistent`` reads strongly (twice the read units)."""
        out: list[tuple[str, dict[str, Any]]] = []
        kwargs = {
            "TableName": self._t,
            **partition_condition(pk, prefix),
            **({"ConsistentRead": True} if consistent else {}),
        }
        for raw in query_all(self._c, kwargs):
            it = from_item(raw)
            out.append((it["sk"], unpack_doc(it)))
        return out

    def query_page(self, pk: str, limit: int, *, after: str = "") -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """One Query: at most ``limit`` items with a sort key above ``after`` (its ``ExclusiveStartKey``), and whether
        DynamoDB stopped before the partition's end (``LastEvaluatedKey``: the limit, or its 1 MB page)."""
        kwargs: dict[str, Any] = {"TableName": self._t, **partition_condition(pk, ""), "Limit": limit}
        if after:
            kwargs["ExclusiveStartKey"] = to_item({"pk": pk, "sk": after})
        resp = self._c.query(**kwargs)
        rows = [(it["sk"], unpack_doc(it)) for it in map(from_item, resp.get("Items", []))]
        return rows, bool(resp.get("LastEvaluatedKey"))

    def delete_item(self, pk: str, sk: str, *, if_equals: dict[str, Any] | None = None, compress: bool = False) -> bool:
        """Delete one item; True when it existed. With ``if_equals``, only while its document still equals that one
        as ``put_item`` stored it (same ``compress``); False otherwise."""
        kwargs: dict[str, Any] = {"TableName": self._t, "Key": to_item({"pk": pk, "sk": sk}), "ReturnValues": "ALL_OLD"}
        if if_equals is not None:
            name, attr = pack_doc(if_equals, compress)
            kwargs["ConditionExpression"] = f"{name} = :old"
            kwargs["ExpressionAttributeValues"] = {":old": attr}
        try:
            resp = self._c.delete_item(**kwargs)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return "Attributes" in resp

    def put_effect(self, pk: str, sk: str, value: dict[str, Any], *, run_id: str, expires_at: int) -> bool:
        """Write an effect row once, only while ``run_id`` is writable (one transaction with the run's check).

        True when written now; False when it was written before (a retried step). ``ConflictError`` when the run
        is cancelled, finished or erased: the effect is not performed.
        """
        put = {
            "Put": {
                "TableName": self._t,
                "Item": to_item({"pk": pk, "sk": sk, "doc": dump(value), schema.TTL_ATTRIBUTE: expires_at}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        return effect_transaction(self._c, [put, writable_check(self._runs, run_id)], run_id)

    def delete_prefix(self, pk: str, prefix: str) -> int:
        """Delete every item of partition ``pk`` whose sort key starts with ``prefix`` (erasure of effect rows)."""
        keys = [{"pk": {"S": pk}, "sk": {"S": sk}} for sk, _ in self.query(pk, prefix)]
        return batch_delete(self._c, self._t, keys)

    def add_counter(self, pk: str, sk: str, *, expires_at: int) -> int:
        """Add one to a plain counter (no per-call marker; quotas) and return the new count. One UpdateItem."""
        resp = self._c.update_item(
            TableName=self._t,
            Key=to_item({"pk": pk, "sk": sk}),
            UpdateExpression="ADD #c :one SET #e = if_not_exists(#e, :exp)",
            ExpressionAttributeNames={"#c": "count", "#e": schema.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":one": {"N": "1"}, ":exp": {"N": str(expires_at)}},
            ReturnValues="UPDATED_NEW",
        )
        return int(resp["Attributes"]["count"]["N"])

    def counter_read(self, pk: str, sk: str) -> int:
        resp = self._c.get_item(TableName=self._t, Key=to_item({"pk": pk, "sk": sk}), ConsistentRead=True)
        if "Item" not in resp:
            return 0
        return int(resp["Item"].get("count", {"N": "0"})["N"])
