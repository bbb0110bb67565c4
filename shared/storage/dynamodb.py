"""The one storage implementation: DynamoDB (real AWS, or moto locally) plus S3 for large items."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from shared.clock import full_jitter_sleep
from shared.errors import ConflictError, ItemTooLargeError, RunGoneError, StorageError
from shared.ports import WRITABLE, BlobStore, Clock, ListPage, RunRecord, ToolCallRecord
from shared.storage import schema

_ser = TypeSerializer()
_de = TypeDeserializer()


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def to_item(value: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in value.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    out = {k: _de.deserialize(v) for k, v in item.items()}
    return {k: (int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else v) for k, v in out.items()}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _too_large(exc: ClientError) -> bool:
    """DynamoDB's answer to an item over 400 KB (direct, or as a transaction's cancellation reason)."""
    texts = [str(exc.response.get("Error", {}).get("Message", ""))]
    texts += [str(r.get("Message", "")) for r in exc.response.get("CancellationReasons") or []]
    return any("size has exceeded" in t.lower() for t in texts)


def _partition_condition(pk: str, prefix: str) -> dict[str, Any]:
    """A Query's key condition: the whole partition, or the sort keys that start with ``prefix``."""
    if not prefix:  # begins_with(sk, "") is refused by DynamoDB
        return {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    return {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":p": {"S": pk}, ":s": {"S": prefix}}}


def _refuse_too_large(exc: ClientError) -> None:
    if _too_large(exc):
        raise ItemTooLargeError("an item over DynamoDB's 400 KB limit") from exc


def _reasons(exc: ClientError) -> list[str]:
    """Per transaction item: the cancellation reason code ("None" for an item that passed)."""
    return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons") or []]


def writable_check(runs_table: str, run_id: str) -> dict[str, Any]:
    """A transaction item that holds only while the run item exists with a writable status.

    Every effect is written in one transaction with this check, so an effect is performed only if the run is
    writable at that instant: a cancel (status ``cancelling``) or an erasure (run item deleted after its
    tombstone) that lands first makes the effect's write fail, and one that lands later sees it done.
    """
    values: dict[str, Any] = {f":w{i}": {"S": s} for i, s in enumerate(WRITABLE)}
    return {"ConditionCheck": {
        "TableName": runs_table,
        "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
        "ConditionExpression": f"attribute_exists(pk) AND #st IN ({', '.join(values)})",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": values,
    }}


def _effect_transaction(client: Any, items: list[dict[str, Any]], run_id: str) -> bool:
    """Write ``items`` (the first one carries the effect's own condition) with the run's writable check last.

    True when written; False when only the effect's own condition failed (already performed: a retried step);
    ``ConflictError`` when the run is no longer writable (cancelled, finished or erased): nothing is written.
    """
    try:
        client.transact_write_items(TransactItems=items)
        return True
    except ClientError as exc:
        if _code(exc) != "TransactionCanceledException":
            raise
        reasons = _reasons(exc)
        if len(reasons) == len(items) and reasons[-1] == "None" and reasons[0] == "ConditionalCheckFailed":
            return False
        raise ConflictError(f"run {run_id} is not writable") from exc


class DynamoRunStore:
    def __init__(self, client: Any, table: str, clock: Clock, blobs: BlobStore) -> None:
        self._c = client
        self._t = table
        self._clock = clock
        self._blobs = blobs

    def _expired(self, expires_at: int) -> bool:
        return bool(expires_at) and expires_at <= self._clock.now_ms() // 1000

    def create_run(self, record: RunRecord) -> None:
        facts = dict(record.data)
        definition = facts.pop("definition", None)
        extra: list[dict[str, Any]] = []
        if definition is not None:
            # The pinned definition is written once beside the run item (same transaction), never with it: the run
            # item is rewritten by every append, and a definition can be ~1 MB (DEFINITION_SK in shared/keys.py).
            facts["definitionPinned"] = True
            doc = _dump(definition)
            aux: dict[str, Any] = {"pk": record.run_id, "sk": schema.DEFINITION_SK, schema.TTL_ATTRIBUTE: record.expires_at}
            if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
                self._blobs.put_json(schema.run_definition_key(record.run_id), definition)
                aux["blob"] = schema.run_definition_key(record.run_id)
            else:
                aux["doc"] = doc
            extra.append({"Put": {"TableName": self._t, "Item": to_item(aux)}})
        data = _dump(facts)
        item: dict[str, Any] = {
            "pk": record.run_id,
            "sk": schema.RUN_SK,
            "tenant": record.tenant,
            "gsi1pk": record.tenant,
            "gsi1sk": f"{record.created_at}#{record.run_id}",
            "status": record.status,
            "lastSeq": record.last_seq,
            "createdAt": record.created_at,
            "workflowId": record.data.get("workflowId"),
            "data": data,
            "state": _dump(record.state) if record.state is not None else None,
            schema.TTL_ATTRIBUTE: record.expires_at,
        }
        if len(data.encode("utf-8")) > schema.MAX_INLINE_RUN_DATA_BYTES:
            # Large creation facts (inputs, metadata, a definition) live in S3, so the run item keeps room for its
            # state snapshot within DynamoDB's 400 KB; erasure reaches the object through the run's prefix.
            del item["data"]
            item["dataRef"] = schema.run_data_key(record.run_id)
            self._blobs.put_json(schema.run_data_key(record.run_id), facts)
        try:
            self._c.transact_write_items(TransactItems=[
                {"Put": {"TableName": self._t, "Item": to_item(item), "ConditionExpression": "attribute_not_exists(pk)"}},
                # an id erased before its run exists (a fork whose source is being erased) is never created
                {"ConditionCheck": {"TableName": self._t,
                                    "Key": to_item({"pk": record.run_id, "sk": schema.TOMBSTONE_SK}),
                                    "ConditionExpression": "attribute_not_exists(pk)"}},
                *extra,
            ])
        except ClientError as exc:
            _refuse_too_large(exc)
            if _code(exc) == "TransactionCanceledException":
                if _reasons(exc)[1:2] == ["ConditionalCheckFailed"]:
                    self._blobs.delete_prefix(schema.run_prefix(record.run_id))
                    raise RunGoneError(record.run_id) from exc
                raise ConflictError("run exists") from exc
            raise

    def _record(self, raw: dict[str, Any]) -> RunRecord:
        it = from_item(raw)
        if "dataRef" in it:
            data = self._blobs.get_json(it["dataRef"])
            if data is None:
                raise RunGoneError(it["pk"])
        else:
            data = json.loads(it["data"])
        return RunRecord(
            run_id=it["pk"],
            tenant=it["tenant"],
            status=it["status"],
            last_seq=int(it["lastSeq"]),
            created_at=it["createdAt"],
            data=data,
            state=json.loads(it["state"]) if it.get("state") else None,
            error=json.loads(it["error"]) if it.get("error") else None,
            started_at=it.get("startedAt"),
            completed_at=it.get("completedAt"),
            execution_arn=it.get("executionArn"),
            expires_at=int(it.get(schema.TTL_ATTRIBUTE, 0)),
            summary=json.loads(it["summary"]) if it.get("summary") else None,
            cursor=json.loads(it["cursor"]) if it.get("cursor") else None,
        )

    def get_run(self, run_id: str, *, consistent: bool = True, include_expired: bool = False) -> RunRecord | None:
        resp = self._c.get_item(
            TableName=self._t,
            Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
            ConsistentRead=consistent,
        )
        raw = resp.get("Item")
        if not raw:
            return None
        try:
            rec = self._record(raw)
        except RunGoneError:
            return None  # its creation facts are gone: being erased
        if self._expired(rec.expires_at) and not include_expired:
            return None  # TTL deletion can lag for days: an expired run reads as gone
        return rec

    def list_runs(
        self, tenant: str, limit: int, start_key: dict[str, Any] | None, filters: dict[str, str]
    ) -> ListPage:
        kwargs: dict[str, Any] = {
            "TableName": self._t,
            "IndexName": schema.TENANT_INDEX,
            "KeyConditionExpression": "gsi1pk = :t",
            "ExpressionAttributeValues": {":t": {"S": tenant}, ":now": {"N": str(self._clock.now_ms() // 1000)}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        conds = [f"{schema.TTL_ATTRIBUTE} > :now"]
        names: dict[str, str] = {}
        for i, (k, v) in enumerate(sorted(filters.items())):
            names[f"#f{i}"] = k
            kwargs["ExpressionAttributeValues"][f":f{i}"] = {"S": v}
            conds.append(f"#f{i} = :f{i}")
        kwargs["FilterExpression"] = " AND ".join(conds)
        if names:
            kwargs["ExpressionAttributeNames"] = names
        if start_key:
            kwargs["ExclusiveStartKey"] = to_item(start_key)
        runs: list[RunRecord] = []
        next_key: dict[str, Any] | None = None
        # A filter can leave a page short: keep reading until the page is full or the index ends.
        while True:
            resp = self._c.query(**kwargs)
            for raw in resp.get("Items", []):
                try:
                    runs.append(self._record(raw))
                except RunGoneError:
                    continue  # being erased
            lek = resp.get("LastEvaluatedKey")
            if not lek:
                next_key = None
                break
            if len(runs) >= limit:
                next_key = from_item(lek)
                break
            kwargs["ExclusiveStartKey"] = lek
            kwargs["Limit"] = limit - len(runs)
        if len(runs) > limit:
            runs = runs[:limit]
            last = runs[-1]
            next_key = {"pk": last.run_id, "sk": schema.RUN_SK, "gsi1pk": tenant,
                        "gsi1sk": f"{last.created_at}#{last.run_id}"}
        return ListPage(runs=runs, next_key=next_key)

    def set_execution(self, run_id: str, execution_arn: str) -> None:
        self._c.update_item(
            TableName=self._t,
            Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
            UpdateExpression="SET executionArn = :a",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":a": {"S": execution_arn}},
        )

    def update_status(self, run_id: str, status: str, *, allowed_from: Sequence[str]) -> bool:
        values: dict[str, Any] = {":s": {"S": status}}
        conds = []
        for i, s in enumerate(allowed_from):
            values[f":a{i}"] = {"S": s}
            conds.append(f":a{i}")
        try:
            self._c.update_item(
                TableName=self._t,
                Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
                UpdateExpression="SET #st = :s",
                ConditionExpression=f"attribute_exists(pk) AND #st IN ({', '.join(conds)})",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=values,
            )
            return True
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def get_definition(self, run_id: str) -> dict[str, Any] | None:
        """The definition the run pinned at create (one GetItem, an S3 read when it was too large to inline)."""
        resp = self._c.get_item(TableName=self._t, Key=to_item({"pk": run_id, "sk": schema.DEFINITION_SK}),
                                ConsistentRead=True)
        if "Item" not in resp:
            return None
        it = from_item(resp["Item"])
        if "blob" in it:
            got = self._blobs.get_json(str(it["blob"]))
            return dict(got) if isinstance(got, dict) else None
        doc: dict[str, Any] = json.loads(it["doc"])
        return doc

    def set_progress(self, run_id: str, expected_last_seq: int, new_last_seq: int, updates: dict[str, Any]) -> None:
        """Move lastSeq forward after a bulk copy (a fork's prefix), conditioned on where it was."""
        sets = ["lastSeq = :new"]
        values: dict[str, Any] = {":new": {"N": str(new_last_seq)}, ":old": {"N": str(expected_last_seq)}}
        names: dict[str, str] = {}
        for j, (k, v) in enumerate(updates.items()):
            names[f"#u{j}"] = k
            values[f":u{j}"] = _ser.serialize(_dump(v) if isinstance(v, dict | list) else v)
            sets.append(f"#u{j} = :u{j}")
        try:
            self._c.update_item(
                TableName=self._t,
                Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="attribute_exists(pk) AND lastSeq = :old",
                ExpressionAttributeValues=values,
                **({"ExpressionAttributeNames": names} if names else {}),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise ConflictError("run moved") from exc
            raise

    def put_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> None:
        """Write an auxiliary item; a late write for an erased run fails (``RunGoneError``): its tombstone blocks it."""
        try:
            self._c.transact_write_items(TransactItems=[
                {"Put": {"TableName": self._t,
                         "Item": to_item({"pk": run_id, "sk": sk, "doc": _dump(value),
                                          schema.TTL_ATTRIBUTE: expires_at})}},
                {"ConditionCheck": {"TableName": self._t,
                                    "Key": to_item({"pk": run_id, "sk": schema.TOMBSTONE_SK}),
                                    "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        except ClientError as exc:
            _refuse_too_large(exc)
            if _code(exc) == "TransactionCanceledException":
                raise RunGoneError(run_id) from exc
            raise

    def claim_effect(self, run_id: str, effect_key: str, value: dict[str, Any], expires_at: int) -> bool:
        """Record the intent of an outside effect under the run, only while the run is writable (one transaction).

        True when newly claimed, False when this effect key was claimed before (a retried step);
        ``ConflictError`` when the run is no longer writable: the caller must not perform the effect.
        """
        put = {"Put": {"TableName": self._t,
                       "Item": to_item({"pk": run_id, "sk": f"{schema.EFFECT_PREFIX}{effect_key}", "doc": _dump(value),
                                        schema.TTL_ATTRIBUTE: expires_at}),
                       "ConditionExpression": "attribute_not_exists(pk)"}}
        return _effect_transaction(self._c, [put, writable_check(self._t, run_id)], run_id)

    def get_aux(self, run_id: str, sk: str) -> dict[str, Any] | None:
        resp = self._c.get_item(TableName=self._t, Key=to_item({"pk": run_id, "sk": sk}), ConsistentRead=True)
        raw = resp.get("Item")
        if not raw:
            return None
        doc: dict[str, Any] = json.loads(from_item(raw)["doc"])
        return doc

    def query_aux(self, run_id: str, prefix: str, *, between: tuple[str, str] | None = None
                  ) -> list[tuple[str, dict[str, Any]]]:
        """The run's aux items whose sort key starts with ``prefix``, or lies ``between`` (low, high) inclusive."""
        out: list[tuple[str, dict[str, Any]]] = []
        cond = _partition_condition(run_id, prefix) if between is None else {
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":p": {"S": run_id}, ":a": {"S": between[0]}, ":b": {"S": between[1]}}}
        kwargs: dict[str, Any] = {"TableName": self._t, "ConsistentRead": True, **cond}
        while True:
            resp = self._c.query(**kwargs)
            for raw in resp.get("Items", []):
                it = from_item(raw)
                out.append((it["sk"], json.loads(it["doc"])))
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def is_tombstoned(self, run_id: str) -> bool:
        resp = self._c.get_item(
            TableName=self._t, Key=to_item({"pk": run_id, "sk": schema.TOMBSTONE_SK}), ConsistentRead=True
        )
        return "Item" in resp

    # -- erasure ---------------------------------------------------------------
    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "pk", run_id, "pk, sk")

    def delete_run_item(self, run_id: str) -> bool:
        """Delete the run item (the stream REMOVE record then drives the rest of the erasure)."""
        resp = self._c.delete_item(
            TableName=self._t, Key=to_item({"pk": run_id, "sk": schema.RUN_SK}), ReturnValues="ALL_OLD"
        )
        return "Attributes" in resp

    def delete_aux_all(self, run_id: str) -> int:
        """Every item under the run's key but its tombstone."""
        keys = [k for k in self.all_keys(run_id) if k["sk"]["S"] != schema.TOMBSTONE_SK]
        return batch_delete(self._c, self._t, keys)

    def delete_tombstone(self, run_id: str) -> None:
        self._c.delete_item(TableName=self._t, Key=to_item({"pk": run_id, "sk": schema.TOMBSTONE_SK}))

    def write_tombstone(self, run_id: str, tenant: str, at: str, expires_at: int) -> None:
        self._c.put_item(
            TableName=self._t,
            Item=to_item({"pk": run_id, "sk": schema.TOMBSTONE_SK, "tenant": tenant, "erasedAt": at,
                          schema.TTL_ATTRIBUTE: expires_at}),
        )


def query_keys(client: Any, table: str, hash_name: str, hash_value: str, projection: str) -> list[dict[str, Any]]:
    """Every key under one partition (paginated), for erasure."""
    keys: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#h = :h",
        "ExpressionAttributeNames": {"#h": hash_name},
        "ExpressionAttributeValues": {":h": {"S": hash_value}},
        "ProjectionExpression": projection,
    }
    while True:
        resp = client.query(**kwargs)
        keys.extend(resp.get("Items", []))
        if not resp.get("LastEvaluatedKey"):
            return keys
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


BATCH_WRITE_SIZE = 25
BATCH_WRITE_ATTEMPTS = 8


def batch_write(
    client: Any,
    table: str,
    requests: Sequence[dict[str, Any]],
    *,
    pause: Callable[[int], object] = full_jitter_sleep,
    max_attempts: int = BATCH_WRITE_ATTEMPTS,
) -> int:
    """Send Put/Delete requests 25 per BatchWriteItem; resend what DynamoDB leaves unprocessed.

    Each resend waits ``pause(attempt)`` first (exponential backoff with full jitter, from ``shared.clock``), and a
    chunk gets at most ``max_attempts`` requests: if items are still unprocessed then, ``StorageError`` is raised
    (the items already written stay written; every caller's writes are idempotent). Returns the request count.
    """
    for i in range(0, len(requests), BATCH_WRITE_SIZE):
        pending: dict[str, Any] = {table: list(requests[i : i + BATCH_WRITE_SIZE])}
        attempt = 1
        while True:
            resp = client.batch_write_item(RequestItems=pending)
            pending = resp.get("UnprocessedItems") or {}
            if not pending:
                break
            if attempt >= max_attempts:
                left = sum(len(v) for v in pending.values())
                raise StorageError(f"{left} items of {table} still unprocessed after {attempt} BatchWriteItem requests")
            pause(attempt)
            attempt += 1
    return len(requests)


def batch_delete(client: Any, table: str, keys: Sequence[dict[str, Any]]) -> int:
    """Delete keys (already in DynamoDB JSON) 25 per request (``batch_write``)."""
    return batch_write(client, table, [{"DeleteRequest": {"Key": k}} for k in keys])


class DynamoEventStore:
    """Run event logs: partition runId, sort seq. Appends are transactional and conditional."""

    def __init__(self, client: Any, table: str, runs_table: str, blobs: BlobStore) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table
        self._blobs = blobs

    def _event_item(self, run_id: str, ev: dict[str, Any], expires_at: int) -> dict[str, Any]:
        doc = _dump(ev)
        item: dict[str, Any] = {"runId": run_id, "seq": int(ev["sequence"]), schema.TTL_ATTRIBUTE: expires_at}
        if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
            key = schema.large_event_key(run_id, int(ev["sequence"]))
            self._blobs.put_json(key, ev)
            item["docRef"] = key
        else:
            item["doc"] = doc
        return item

    def append_events(
        self,
        run_id: str,
        expected_next_seq: int,
        events: Sequence[dict[str, Any]],
        *,
        run_updates: dict[str, Any] | None = None,
        require_status: Sequence[str] | None = None,
        expires_at: int = 0,
    ) -> int:
        """Append ``events`` (their ``sequence`` must run from ``expected_next_seq``).

        Each chunk is one TransactWriteItems: a Put per event guarded by
        ``attribute_not_exists(seq)``, plus an Update of the run item guarded by
        ``lastSeq = expected - 1`` (and optionally the run status). Two writers
        racing for the same sequence: exactly one wins, the other gets
        ``ConflictError``; no gap, no duplicate. Returns the new last sequence.
        """
        if not events and not run_updates:
            return expected_next_seq - 1
        for i, ev in enumerate(events):
            if int(ev["sequence"]) != expected_next_seq + i:
                raise ValueError("events must be contiguous from expected_next_seq")
        chunks = [events[i : i + schema.MAX_EVENTS_PER_TRANSACTION]
                  for i in range(0, len(events), schema.MAX_EVENTS_PER_TRANSACTION)] or [[]]
        nxt = expected_next_seq
        for ci, chunk in enumerate(chunks):
            last = nxt + len(chunk) - 1
            updates = dict(run_updates or {}) if ci == len(chunks) - 1 else {}
            sets = ["lastSeq = :last"]
            values: dict[str, Any] = {":last": {"N": str(last)}, ":prev": {"N": str(nxt - 1)}}
            names: dict[str, str] = {}
            for j, (k, v) in enumerate(updates.items()):
                names[f"#u{j}"] = k
                values[f":u{j}"] = _ser.serialize(_dump(v) if isinstance(v, dict | list) else v)
                sets.append(f"#u{j} = :u{j}")
            cond = "attribute_exists(pk) AND lastSeq = :prev"
            if require_status:
                names["#st"] = "status"
                alts = []
                for j, s in enumerate(require_status):
                    values[f":r{j}"] = {"S": s}
                    alts.append(f":r{j}")
                cond += f" AND #st IN ({', '.join(alts)})"
            update: dict[str, Any] = {
                "TableName": self._runs,
                "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": cond,
                "ExpressionAttributeValues": values,
            }
            if names:
                update["ExpressionAttributeNames"] = names
            items: list[dict[str, Any]] = [{"Update": update}]
            for ev in chunk:
                items.append({
                    "Put": {
                        "TableName": self._t,
                        "Item": to_item(self._event_item(run_id, ev, expires_at)),
                        "ConditionExpression": "attribute_not_exists(seq)",
                    }
                })
            try:
                self._c.transact_write_items(TransactItems=items)
            except ClientError as exc:
                _refuse_too_large(exc)
                if _code(exc) in ("TransactionCanceledException", "ConditionalCheckFailedException"):
                    reasons = exc.response.get("CancellationReasons") or []
                    if reasons and reasons[0].get("Code") == "ConditionalCheckFailed" and not self._run_exists(run_id):
                        self._blobs.delete_prefix(schema.run_prefix(run_id))  # erased: undo our S3 writes
                        raise RunGoneError(run_id) from exc
                    raise ConflictError("sequence or run state moved") from exc
                raise
            nxt = last + 1
        return nxt - 1

    def _run_exists(self, run_id: str) -> bool:
        resp = self._c.get_item(TableName=self._runs, Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
                                ProjectionExpression="pk", ConsistentRead=True)
        return "Item" in resp

    def _doc(self, raw: dict[str, Any]) -> dict[str, Any]:
        it = from_item(raw)
        if "doc" in it:
            doc: dict[str, Any] = json.loads(it["doc"])
            return doc
        got = self._blobs.get_json(it["docRef"])
        if got is None:
            raise RunGoneError(str(it.get("runId")))
        return dict(got)

    def iter_events(self, run_id: str, after_seq: int = -1, upto_seq: int | None = None, *,
                    limit: int | None = None) -> Iterator[list[dict[str, Any]]]:
        """Pages of events with ``after_seq < seq <= upto_seq``: one Query per 1 MB page; with ``limit``, at most that
        many events in all (the Query's ``Limit``, so no more is read than is used)."""
        if upto_seq is not None and upto_seq <= after_seq:
            return
        if limit is not None and limit < 1:
            return
        key_cond = "runId = :r AND seq > :a"
        values: dict[str, Any] = {":r": {"S": run_id}, ":a": {"N": str(after_seq)}}
        if upto_seq is not None:
            key_cond = "runId = :r AND seq BETWEEN :a1 AND :u"
            values = {":r": {"S": run_id}, ":a1": {"N": str(after_seq + 1)}, ":u": {"N": str(upto_seq)}}
        kwargs: dict[str, Any] = {
            "TableName": self._t,
            "KeyConditionExpression": key_cond,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        left = limit
        while True:
            if left is not None:
                kwargs["Limit"] = left
            resp = self._c.query(**kwargs)
            page = [self._doc(i) for i in resp.get("Items", [])]
            if page:
                yield page
            if left is not None:
                left -= len(page)
                if left <= 0:
                    return
            if not resp.get("LastEvaluatedKey"):
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def read_events(self, run_id: str, after_seq: int = -1, *, limit: int | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for page in self.iter_events(run_id, after_seq):
            out.extend(page)
            if limit is not None and len(out) >= limit:
                return out[:limit]
        return out

    def read_page(self, run_id: str, after_seq: int, limit: int | None = None) -> list[dict[str, Any]]:
        """At most one Query (one 1 MB page, at most ``limit`` events) of events after ``after_seq``."""
        for page in self.iter_events(run_id, after_seq, limit=limit):
            return page
        return []

    def event_from_image(self, image: dict[str, Any]) -> dict[str, Any] | None:
        it = from_item(image)
        if "doc" not in it:
            return None
        ev: dict[str, Any] = json.loads(it["doc"])
        return ev

    def copy_events(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int) -> int:
        """Bulk-write a fork's copied prefix: ceil(N/25) BatchWriteItem requests (not per event)."""
        reqs = [{"PutRequest": {"Item": to_item(self._event_item(run_id, ev, expires_at))}} for ev in events]
        return batch_write(self._c, self._t, reqs)

    def delete_all(self, run_id: str) -> int:
        return batch_delete(self._c, self._t, self.all_keys(run_id))

    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "runId", run_id, "runId, seq")


class DynamoToolCallStore:
    """The as-executed tool-call record (RFC 0252 derives fixtures from it)."""

    def __init__(self, client: Any, table: str, runs_table: str, blobs: BlobStore, host_table: str) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table
        self._blobs = blobs
        self._host = host_table

    @staticmethod
    def _to_doc(r: ToolCallRecord) -> dict[str, Any]:
        return {
            "agentId": r.agent_id, "invocationId": r.invocation_id, "delegate": r.delegate,
            "toolName": r.tool_name, "callId": r.call_id, "args": r.args, "status": r.status,
            "result": r.result, "error": r.error, "source": r.source, "startedAt": r.started_at,
            "durationMs": r.duration_ms, "extra": r.extra,
        }

    def _item(self, record: ToolCallRecord, expires_at: int) -> dict[str, Any]:
        """The record's item; a large document goes to S3 under the run (``docRef``)."""
        doc = _dump(self._to_doc(record))
        item: dict[str, Any] = {"runId": record.run_id, "callKey": record.call_key, schema.TTL_ATTRIBUTE: expires_at}
        if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
            key = schema.large_call_key(record.run_id, record.call_key)
            self._blobs.put_json(key, self._to_doc(record))
            item["docRef"] = key
        else:
            item["doc"] = doc
        return item

    def put_calls(self, run_id: str, records: list[ToolCallRecord], expires_at: int,
                  aux: tuple[str, dict[str, Any]] | None = None) -> None:
        """Write records whose outcomes are deterministic (no effect was claimed for them: a retried step rewrites
        them equal) and, last, one auxiliary item of the run, only while the run is writable: one transaction per
        98 items (usually one in all). ``ConflictError`` when the run is not writable: the last transaction, the
        one holding ``aux``, writes nothing."""
        items = [{"Put": {"TableName": self._t, "Item": to_item(self._item(r, expires_at))}} for r in records]
        if aux is not None:
            items.append({"Put": {"TableName": self._runs, "Item": to_item({
                "pk": run_id, "sk": aux[0], "doc": _dump(aux[1]), schema.TTL_ATTRIBUTE: expires_at})}})
        for at in range(0, len(items), 98):
            try:
                self._c.transact_write_items(TransactItems=[*items[at:at + 98], writable_check(self._runs, run_id)])
            except ClientError as exc:
                _refuse_too_large(exc)
                if _code(exc) == "TransactionCanceledException":
                    raise ConflictError(f"run {run_id} is not writable") from exc
                raise

    def put_counted_call(self, record: ToolCallRecord, expires_at: int, counter: tuple[str, str],
                         expected: int) -> tuple[str, int | None]:
        """A counter increment and its call's record in one transaction, only while the run is writable.

        The record (``record.result`` holds the new count) is written once per call key, so it is the increment's
        marker: the count moves from ``expected`` to ``expected + 1`` exactly when the record is written.
        Returns ``("written", expected + 1)``; ``("stale", current)`` when the count was not ``expected`` (nothing
        written: try again from ``current``); ``("recorded", None)`` when the call was recorded before (a retried
        step: its record holds its outcome). ``ConflictError`` when the run is not writable.
        """
        put = {"Put": {"TableName": self._t, "Item": to_item(self._item(record, expires_at)),
                       "ConditionExpression": "attribute_not_exists(callKey)"}}
        update = {"Update": {
            "TableName": self._host, "Key": to_item({"pk": counter[0], "sk": counter[1]}),
            "UpdateExpression": "SET #c = :new",
            "ConditionExpression": "#c = :old" if expected else "attribute_not_exists(#c) OR #c = :old",
            "ExpressionAttributeNames": {"#c": "count"},
            "ExpressionAttributeValues": {":old": {"N": str(expected)}, ":new": {"N": str(expected + 1)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }}
        try:
            self._c.transact_write_items(TransactItems=[put, update, writable_check(self._runs, record.run_id)])
            return "written", expected + 1
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
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

    def put_call(self, record: ToolCallRecord, expires_at: int) -> bool:
        """Write once. False when this call key is already recorded (a retried step)."""
        item = self._item(record, expires_at)
        try:
            self._c.transact_write_items(TransactItems=[
                {"Put": {"TableName": self._t, "Item": to_item(item),
                         "ConditionExpression": "attribute_not_exists(callKey)"}},
                # A late write for an erased run must fail: its tombstone blocks it.
                {"ConditionCheck": {"TableName": self._runs,
                                    "Key": to_item({"pk": record.run_id, "sk": schema.TOMBSTONE_SK}),
                                    "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
            return True
        except ClientError as exc:
            if _code(exc) == "TransactionCanceledException":
                reasons = exc.response.get("CancellationReasons") or []
                if len(reasons) > 1 and reasons[1].get("Code") == "ConditionalCheckFailed":
                    if "docRef" in item:
                        self._blobs.delete_prefix(item["docRef"])  # erased: undo our S3 write
                    raise RunGoneError(record.run_id) from exc
                return False
            raise

    def _from(self, raw: dict[str, Any]) -> ToolCallRecord:
        it = from_item(raw)
        doc = json.loads(it["doc"]) if "doc" in it else self._blobs.get_json(it["docRef"])
        if doc is None:
            raise RunGoneError(it["runId"])
        return ToolCallRecord(
            run_id=it["runId"], call_key=it["callKey"], agent_id=doc["agentId"], invocation_id=doc["invocationId"],
            delegate=bool(doc["delegate"]), tool_name=doc["toolName"], call_id=doc["callId"], args=doc["args"],
            status=doc["status"], result=doc.get("result"), error=doc.get("error"), source=doc.get("source", "live"),
            started_at=doc.get("startedAt", ""), duration_ms=doc.get("durationMs"), extra=doc.get("extra") or {},
        )

    def get_call(self, run_id: str, call_key: str) -> ToolCallRecord | None:
        resp = self._c.get_item(TableName=self._t, Key=to_item({"runId": run_id, "callKey": call_key}),
                                ConsistentRead=True)
        return self._from(resp["Item"]) if "Item" in resp else None

    def list_calls(self, run_id: str, *, between: tuple[str, str] | None = None) -> list[ToolCallRecord]:
        """The run's records by call key; with ``between`` = (low, high), those whose key lies in it, inclusive."""
        out: list[ToolCallRecord] = []
        kwargs: dict[str, Any] = {
            "TableName": self._t,
            "KeyConditionExpression": "runId = :r",
            "ExpressionAttributeValues": {":r": {"S": run_id}},
            "ConsistentRead": True,
        }
        if between is not None:
            kwargs["KeyConditionExpression"] = "runId = :r AND callKey BETWEEN :a AND :b"
            kwargs["ExpressionAttributeValues"].update({":a": {"S": between[0]}, ":b": {"S": between[1]}})
        while True:
            resp = self._c.query(**kwargs)
            out.extend(self._from(i) for i in resp.get("Items", []))
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def delete_all(self, run_id: str) -> int:
        return batch_delete(self._c, self._t, self.all_keys(run_id))

    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "runId", run_id, "runId, callKey")


def _host_attr(value: dict[str, Any], compress: bool) -> tuple[str, dict[str, Any]]:
    """How a host-table document is stored: JSON text in ``doc``, or zlib-compressed JSON in ``docz`` when large
    and the caller allows it (workflow definitions, read whole by the engine only)."""
    doc = _dump(value)
    raw = doc.encode("utf-8")
    if not compress or len(raw) <= schema.MAX_INLINE_BYTES:
        return "doc", {"S": doc}
    return "docz", {"B": zlib.compress(raw, 6)}


def _host_doc(it: dict[str, Any]) -> dict[str, Any]:
    if "doc" in it:
        doc: dict[str, Any] = json.loads(it["doc"])
        return doc
    if "docz" in it:
        z = it["docz"]
        out: dict[str, Any] = json.loads(zlib.decompress(bytes(getattr(z, "value", z))).decode("utf-8"))
        return out
    return it


class DynamoHostStore:
    def __init__(self, client: Any, table: str, runs_table: str) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None:
        resp = self._c.get_item(TableName=self._t, Key=to_item({"pk": pk, "sk": sk}), ConsistentRead=True)
        if "Item" not in resp:
            return None
        return _host_doc(from_item(resp["Item"]))

    def put_item(self, pk: str, sk: str, value: dict[str, Any], *, if_absent: bool = False,
                 if_equals: dict[str, Any] | None = None, expires_at: int = 0, compress: bool = False) -> bool:
        """Put; optionally only if absent, or only if the stored document still equals ``if_equals`` (CAS).
        ``expires_at`` (epoch seconds) sets the item's TTL.

        With ``compress``, a document over ``MAX_INLINE_BYTES`` (a 10,000-node workflow definition) is stored
        zlib-compressed in the binary attribute ``docz``; one that is still too large is refused
        (``ItemTooLargeError``, a 413)."""
        name, attr = _host_attr(value, compress)
        item: dict[str, Any] = {**to_item({"pk": pk, "sk": sk}), name: attr}
        if expires_at:
            item.update(to_item({schema.TTL_ATTRIBUTE: expires_at}))
        kwargs: dict[str, Any] = {"TableName": self._t, "Item": item}
        if if_absent:
            kwargs["ConditionExpression"] = "attribute_not_exists(pk)"
        elif if_equals is not None:
            old_name, old_attr = _host_attr(if_equals, compress)
            kwargs["ConditionExpression"] = f"{old_name} = :old"
            kwargs["ExpressionAttributeValues"] = {":old": old_attr}
        try:
            self._c.put_item(**kwargs)
            return True
        except ClientError as exc:
            _refuse_too_large(exc)
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def query(self, pk: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        kwargs: dict[str, Any] = {"TableName": self._t, **_partition_condition(pk, prefix)}
        while True:
            resp = self._c.query(**kwargs)
            for raw in resp.get("Items", []):
                it = from_item(raw)
                out.append((it["sk"], _host_doc(it)))
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def delete_item(self, pk: str, sk: str) -> bool:
        """Delete one item; True when it existed."""
        resp = self._c.delete_item(TableName=self._t, Key=to_item({"pk": pk, "sk": sk}), ReturnValues="ALL_OLD")
        return "Attributes" in resp

    def put_effect(self, pk: str, sk: str, value: dict[str, Any], *, run_id: str, expires_at: int) -> bool:
        """Write an effect row once, only while ``run_id`` is writable (one transaction with the run's check).

        True when written now; False when it was written before (a retried step). ``ConflictError`` when the run
        is cancelled, finished or erased: the effect is not performed.
        """
        put = {"Put": {"TableName": self._t,
                       "Item": to_item({"pk": pk, "sk": sk, "doc": _dump(value), schema.TTL_ATTRIBUTE: expires_at}),
                       "ConditionExpression": "attribute_not_exists(pk)"}}
        return _effect_transaction(self._c, [put, writable_check(self._runs, run_id)], run_id)

    def delete_prefix(self, pk: str, prefix: str) -> int:
        """Delete every item of partition ``pk`` whose sort key starts with ``prefix`` (erasure of effect rows)."""
        keys = [{"pk": {"S": pk}, "sk": {"S": sk}} for sk, _ in self.query(pk, prefix)]
        return batch_delete(self._c, self._t, keys)

    def add_counter(self, pk: str, sk: str, *, expires_at: int) -> int:
        """Add one to a plain counter (no per-call marker; quotas) and return the new count. One UpdateItem."""
        resp = self._c.update_item(
            TableName=self._t, Key=to_item({"pk": pk, "sk": sk}),
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


class DynamoIdempotencyStore:
    """Powertools' idempotency table (key attribute ``id``): only erasure touches it directly."""

    def __init__(self, client: Any, table: str) -> None:
        self._c = client
        self._t = table

    def delete_record(self, record_id: str) -> None:
        self._c.delete_item(TableName=self._t, Key={"id": {"S": record_id}})


class S3BlobStore:
    def __init__(self, client: Any, bucket: str) -> None:
        self._c = client
        self._b = bucket

    def put_json(self, key: str, value: Any) -> None:
        self.put_bytes(key, _dump(value).encode("utf-8"), "application/json")

    def get_json(self, key: str) -> Any | None:
        try:
            resp = self._c.get_object(Bucket=self._b, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        return json.loads(resp["Body"].read())

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self._c.put_object(Bucket=self._b, Key=key, Body=data, ContentType=content_type, ServerSideEncryption="AES256")

    def get_range(self, key: str, start: int, end: int) -> bytes | None:
        """One ranged GetObject: bytes ``[start, end)``, fewer at the object's end, none past it."""
        if end <= start:
            return b""
        try:
            resp = self._c.get_object(Bucket=self._b, Key=key, Range=f"bytes={start}-{end - 1}")
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            if _code(exc) == "InvalidRange":
                return b""
            raise
        data: bytes = resp["Body"].read()
        return data

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self._b, "Prefix": prefix}
        while True:
            resp = self._c.list_objects_v2(**kwargs)
            keys.extend(o["Key"] for o in resp.get("Contents", []))
            if not resp.get("IsTruncated"):
                return keys
            kwargs["ContinuationToken"] = resp["NextContinuationToken"]

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list_keys(prefix)
        for i in range(0, len(keys), 1000):
            self._c.delete_objects(Bucket=self._b, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]],
                                                           "Quiet": True})
        return len(keys)
