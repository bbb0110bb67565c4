"""The ToolCallStore port on DynamoDB: the as-executed tool-call records (partition runId, sort callKey), each
written only while its run is writable (or not erased); large records in S3 (the BlobStore)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ConflictError, RunGoneError
from shared.ports import BlobStore, StagedWrite, ToolCallRecord
from shared.storage import schema
from shared.storage.ddb import (
    BATCH_GET_SIZE,
    Tombstones,
    batch_delete,
    batch_get_tables,
    dump,
    error_code,
    from_item,
    query_all,
    query_keys,
    refuse_too_large,
    to_item,
    tombstone_check,
    writable_check,
)


def _transactions(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``items`` in order, cut into transactions of at most 98 items (beside a check) and
    ``MAX_TRANSACTION_BYTES``."""
    out: list[list[dict[str, Any]]] = []
    size = 0
    for item in items:
        n = len(dump(item))
        if not out or len(out[-1]) >= schema.MAX_TRANSACTION_ITEMS - 2 or size + n > schema.MAX_TRANSACTION_BYTES:
            out.append([])
            size = 0
        out[-1].append(item)
        size += n
    return out


class DynamoToolCallStore:
    """The as-executed tool-call record (RFC 0252 derives fixtures from it)."""

    def __init__(
        self, client: Any, table: str, runs_table: str, blobs: BlobStore, host_table: str, tombstones: Tombstones
    ) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table
        self._blobs = blobs
        self._host = host_table
        self._tombstones = tombstones

    @staticmethod
    def _to_doc(r: ToolCallRecord) -> dict[str, Any]:
        return {
            "agentId": r.agent_id,
            "invocationId": r.invocation_id,
            "delegate": r.delegate,
            "toolName": r.tool_name,
            "callId": r.call_id,
            "args": r.args,
            "status": r.status,
            "result": r.result,
            "error": r.error,
            "source": r.source,
            "startedAt": r.started_at,
            "durationMs": r.duration_ms,
            "extra": r.extra,
        }

    def _item(self, record: ToolCallRecord, expires_at: int) -> dict[str, Any]:
        """The record's item; a large document goes to S3 under the run (``docRef``)."""
        doc = dump(self._to_doc(record))
        item: dict[str, Any] = {"runId": record.run_id, "callKey": record.call_key, schema.TTL_ATTRIBUTE: expires_at}
        if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
            key = schema.large_call_key(record.run_id, record.call_key)
            self._blobs.put_json(key, self._to_doc(record))
            item["docRef"] = key
        else:
            item["doc"] = doc
        return item

    def put_calls(
        self,
        run_id: str,
        records: list[ToolCallRecord],
        expires_at: int,
        aux: Sequence[tuple[str, dict[str, Any]]] = (),
    ) -> None:
        """Write records whose outcomes are deterministic (no effect was claimed for them: a retried step rewrites
        them equal) and, after them, auxiliary items of the run (``aux``: (sk, document)), in order, only while the
        run is writable: transactions of up to 98 items and ``MAX_TRANSACTION_BYTES``, each with the run's check
        (usually one in all). ``ConflictError`` when the run is not writable: that transaction and those after it
        write nothing."""
        items = [{"Put": {"TableName": self._t, "Item": to_item(self._item(r, expires_at))}} for r in records]
        for sk, doc in aux:
            item = {"pk": run_id, "sk": sk, "doc": dump(doc), schema.TTL_ATTRIBUTE: expires_at}
            items.append({"Put": {"TableName": self._runs, "Item": to_item(item)}})
        for group in _transactions(items):
            try:
                self._c.transact_write_items(TransactItems=[*group, writable_check(self._runs, run_id)])
            except ClientError as exc:
                refuse_too_large(exc)
                if error_code(exc) == "TransactionCanceledException":
                    raise ConflictError(f"run {run_id} is not writable") from exc
                raise

    def put_counted_call(
        self, record: ToolCallRecord, expires_at: int, counter: tuple[str, str], expected: int
    ) -> tuple[str, int | None]:
        """A counter increment and its call's record in one transaction, only while the run is writable.

        The record (``record.result`` holds the new count) is written once per call key, so it is the increment's
        marker: the count moves from ``expected`` to ``expected + 1`` exactly when the record is written.
        Returns ``("written", expected + 1)``; ``("stale", current)`` when the count was not ``expected`` (nothing
        written: try again from ``current``); ``("recorded", None)`` when the call was recorded before (a retried
        step: its record holds its outcome). ``ConflictError`` when the run is not writable.
        """
        put = {
            "Put": {
                "TableName": self._t,
                "Item": to_item(self._item(record, expires_at)),
                "ConditionExpression": "attribute_not_exists(callKey)",
            }
        }
        update = {
            "Update": {
                "TableName": self._host,
                "Key": to_item({"pk": counter[0], "sk": counter[1]}),
                "UpdateExpression": "SET #c = :new",
                "ConditionExpression": "#c = :old" if expected else "attribute_not_exists(#c) OR #c = :old",
                "ExpressionAttributeNames": {"#c": "count"},
                "ExpressionAttributeValues": {":old": {"N": str(expected)}, ":new": {"N": str(expected + 1)}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        try:
            self._c.transact_write_items(TransactItems=[put, update, writable_check(self._runs, record.run_id)])
            return "written", expected + 1
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            codes = [str(r.get("Code", "None")) for r in reasons]
            if len(codes) != 3 or codes[2] != "None":
                raise ConflictError(f"run {record.run_id} is not writable") from exc
            if codes[0] == "ConditionalCheckFailed":
                return "recorded", None
            if codes[1] == "ConditionalCheckFailed":
                return "stale", int((reasons[1].get("Item") or {}).get("count", {}).get("N", "0"))
            raise

    def stage_call(self, record: ToolCallRecord, expires_at: int) -> StagedWrite:
        """``put_call``'s item with its once-per-key condition, for an append's transaction (the run item's writable
        condition there stands for the tombstone check: an erased run has no run item). A large record goes to S3
        now, under the run's prefix (an append refused for an erased run deletes that prefix)."""
        item = self._item(record, expires_at)
        put = {"TableName": self._t, "Item": to_item(item), "ConditionExpression": "attribute_not_exists(callKey)"}
        return StagedWrite({"Put": put}, len(dump(item)))

    def put_call(self, record: ToolCallRecord, expires_at: int) -> bool:
        """Write once. False when this call key is already recorded (a retried step)."""
        item = self._item(record, expires_at)
        try:
            self._c.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._t,
                            "Item": to_item(item),
                            "ConditionExpression": "attribute_not_exists(callKey)",
                        }
                    },
                    # A late write for an erased run must fail: its tombstone blocks it.
                    tombstone_check(self._runs, self._tombstones, record.run_id),
                ]
            )
            return True
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                reasons = exc.response.get("CancellationReasons") or []
                if len(reasons) > 1 and reasons[1].get("Code") == "ConditionalCheckFailed":
                    if "docRef" in item:
                        self._blobs.delete_prefix(item["docRef"])  # erased: undo our S3 write
                    raise RunGoneError(record.run_id) from exc
                return False
            raise

    def _from(self, raw: dict[str, Any], run_id: str) -> ToolCallRecord:
        it = from_item(raw)
        doc = json.loads(it["doc"]) if "doc" in it else self._blobs.get_json(it["docRef"])
        if doc is None:
            raise RunGoneError(run_id)
        return ToolCallRecord(
            run_id=run_id,
            call_key=it["callKey"],
            agent_id=doc["agentId"],
            invocation_id=doc["invocationId"],
            delegate=bool(doc["delegate"]),
            tool_name=doc["toolName"],
            call_id=doc["callId"],
            args=doc["args"],
            status=doc["status"],
            result=doc.get("result"),
            error=doc.get("error"),
            source=doc.get("source", "live"),
            started_at=doc.get("startedAt", ""),
            duration_ms=doc.get("durationMs"),
            extra=doc.get("extra") or {},
        )

    def get_call(self, run_id: str, call_key: str) -> ToolCallRecord | None:
        resp = self._c.get_item(
            TableName=self._t, Key=to_item({"runId": run_id, "callKey": call_key}), ConsistentRead=True
        )
        return self._from(resp["Item"], run_id) if "Item" in resp else None

    def get_calls(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], ToolCallRecord]:
        """The records of many (runId, callKey), whatever run they belong to: 100 per BatchGetItem; those absent are
        left out."""
        wanted = [to_item({"runId": run_id, "callKey": key}) for run_id, key in dict.fromkeys(keys)]
        out: dict[tuple[str, str], ToolCallRecord] = {}
        for at in range(0, len(wanted), BATCH_GET_SIZE):
            request = {
                self._t: {
                    "Keys": wanted[at : at + BATCH_GET_SIZE],
                    "ConsistentRead": True,
                    "ProjectionExpression": "runId, callKey, #d, docRef",
                    "ExpressionAttributeNames": {"#d": "doc"},
                }
            }
            for raw in batch_get_tables(self._c, request).get(self._t, []):
                rec = self._from(raw, raw["runId"]["S"])
                out[(rec.run_id, rec.call_key)] = rec
        return out

    def list_calls(
        self, run_id: str, *, between: tuple[str, str] | None = None, named: Collection[str] | None = None
    ) -> list[ToolCallRecord]:
        """The run's records by call key; with ``between`` = (low, high), those whose key lies in it, inclusive.
        Only the attributes a record is made of are read (not the partition key or the TTL: bytes on the wire).

        ``named``: the call ids the run's settled log names (a caller that read it whole). The records are read
        eventually consistently, and again strongly consistent only when one of those is not shown: a record is put
        once and never changed, so one shown is the record (decision 0180)."""
        kwargs: dict[str, Any] = {
            "TableName": self._t,
            "KeyConditionExpression": "runId = :r",
            "ExpressionAttributeValues": {":r": {"S": run_id}},
            "ProjectionExpression": "callKey, #d, docRef",
            "ExpressionAttributeNames": {"#d": "doc"},
            "ConsistentRead": True,
        }
        if between is not None:
            kwargs["KeyConditionExpression"] = "runId = :r AND callKey BETWEEN :a AND :b"
            kwargs["ExpressionAttributeValues"].update({":a": {"S": between[0]}, ":b": {"S": between[1]}})
        if named is None:
            return [self._from(i, run_id) for i in query_all(self._c, kwargs)]
        shown = {
            r.call_key: r
            for r in (self._from(i, run_id) for i in query_all(self._c, {**kwargs, "ConsistentRead": False}))
        }
        if set(named) <= {r.call_id for r in shown.values()}:
            return list(shown.values())
        return [shown.get(i["callKey"]["S"]) or self._from(i, run_id) for i in query_all(self._c, kwargs)]

    def delete_all(self, run_id: str) -> int:
        return batch_delete(self._c, self._t, self.all_keys(run_id))

    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "runId", run_id, "runId, callKey")
