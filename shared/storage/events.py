"""The EventStore port on DynamoDB: run event logs (partition runId, sort seq), appended in transactions that move
the run item's ``lastSeq``; events over the inline limit in S3 (the BlobStore).

This is the seat of the era-2 reader (persistence.md §The seat): a row of a log in v1 vocabulary carries ``era`` = 2
(and its ``run.started`` the run's stored ``owner``), and every read of a row passes through ``_doc``, which
translates it through the codemap (a stream image of one is not decoded: ``event_from_image`` answers None). The
stored bytes are never rewritten."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ConflictError, RunGoneError
from shared.ports import BlobStore
from shared.protocol.codemap import ERA_V1, translate
from shared.storage import runitems, schema
from shared.storage.ddb import (
    add_updates,
    batch_delete,
    batch_write,
    dump,
    error_code,
    from_item,
    query_keys,
    refuse_too_large,
    to_item,
)


class DynamoEventStore:
    """Run event logs: partition runId, sort seq. Appends are transactional and conditional."""

    def __init__(self, client: Any, table: str, runs_table: str, blobs: BlobStore) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table
        self._blobs = blobs

    def _event_item(self, run_id: str, ev: dict[str, Any], expires_at: int) -> dict[str, Any]:
        doc = dump(ev)
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
        # The run updates ride the last chunk; those of its state or listed fields write the run's state or index
        # item in the same transaction (runitems), so that chunk holds as many fewer events.
        parts = runitems.split(self._runs, run_id, dict(run_updates or {}), expires_at)
        size = schema.MAX_EVENTS_PER_TRANSACTION
        chunks = [events[i : i + size] for i in range(0, len(events), size)] or [[]]
        room = size - len(parts.items)
        if len(chunks[-1]) > room:
            tail = chunks.pop()
            chunks += [tail[:room], tail[room:]]
        nxt = expected_next_seq
        for ci, chunk in enumerate(chunks):
            last = nxt + len(chunk) - 1
            final = ci == len(chunks) - 1
            sets = ["lastSeq = :last"]
            values: dict[str, Any] = {":last": {"N": str(last)}, ":prev": {"N": str(nxt - 1)}}
            names: dict[str, str] = {}
            add_updates(parts.run if final else {}, sets, values, names)
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
                "UpdateExpression": parts.run_expression(sets, names) if final else "SET " + ", ".join(sets),
                "ConditionExpression": cond,
                "ExpressionAttributeValues": values,
            }
            if names:
                update["ExpressionAttributeNames"] = names
            items: list[dict[str, Any]] = [{"Update": update}, *(parts.items if final else [])]
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
                refuse_too_large(exc)
                if error_code(exc) in ("TransactionCanceledException", "ConditionalCheckFailedException"):
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
        else:
            got = self._blobs.get_json(it["docRef"])
            if got is None:
                raise RunGoneError(str(it.get("runId")))
            doc = dict(got)
        return _read(it, doc)

    def seed_log(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int, owner: dict[str, Any]) -> int:
        """Store a log a v1 host wrote (era 2): each row verbatim, marked ``era`` = 2, its ``run.started`` with the
        run's owner; read back only through the codemap. Batched writes; the run item is the caller's."""
        reqs = []
        for ev in events:
            item = self._event_item(run_id, ev, expires_at)
            item["era"] = ERA_V1
            if ev.get("type") == "run.started":
                item["owner"] = dump(owner)
            reqs.append({"PutRequest": {"Item": to_item(item)}})
        return batch_write(self._c, self._t, reqs)

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
        if "doc" not in it or it.get("era") == ERA_V1:
            return None  # out of line, or an era-2 row: read it with read_events (which translates it)
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


def _read(item: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """A stored row as v2: an era-2 row through the codemap, any other as stored."""
    if item.get("era") != ERA_V1:
        return doc
    return translate(doc, json.loads(item["owner"]) if "owner" in item else None)
