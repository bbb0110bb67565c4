"""The run store's auxiliary items (a part of ``DynamoRunStore``, ``runs.py``, kept apart by subject): items under
the run's key beside its run, facts and state items, each written once or rewritten whole (a fork's index, a
source's outcomes, eval trial results, the pinned definition), their writes refused by the run's erasure tombstone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.clock import full_jitter_sleep
from shared.errors import ConflictError, RunGoneError
from shared.ports import AUX_PER_TRANSACTION, BlobStore
from shared.storage import schema
from shared.storage.ddb import (
    BATCH_WRITE_ATTEMPTS,
    Tombstones,
    batch_get,
    dump,
    error_code,
    from_item,
    partition_condition,
    query_all,
    reasons,
    refuse_too_large,
    to_item,
    tombstone_check,
)


class RunAux:
    """Auxiliary items and pinned definitions of runs (``RunStore``'s)."""

    _c: Any
    _t: str
    _blobs: BlobStore
    _tombstones: Tombstones

    def get_definition(self, run_id: str) -> dict[str, Any] | None:
        """The definition the run pinned at create (one GetItem, an S3 read when it was too large to inline). It is
        written once, in the create's transaction: read eventually consistently, and consistently when not shown."""
        raw = self._item(run_id, schema.DEFINITION_SK, settled=True)
        return None if raw is None else self._definition(from_item(raw))

    def _item(self, run_id: str, sk: str, *, settled: bool = False) -> dict[str, Any] | None:
        """One item of the run, strongly consistent; ``settled`` (an item written once and never changed):
        eventually consistent, and consistent when not shown (decision 0168)."""
        key = to_item({"pk": run_id, "sk": sk})
        raw = self._c.get_item(TableName=self._t, Key=key).get("Item") if settled else None
        if raw is None:
            raw = self._c.get_item(TableName=self._t, Key=key, ConsistentRead=True).get("Item")
        return raw

    def _definition(self, it: dict[str, Any]) -> dict[str, Any] | None:
        if "blob" in it:
            got = self._blobs.get_json(str(it["blob"]))
            return dict(got) if isinstance(got, dict) else None
        doc: dict[str, Any] = json.loads(it["doc"])
        return doc

    def put_aux_many(self, entries: Sequence[tuple[str, str, dict[str, Any], int]]) -> set[str]:
        """``put_aux`` for many (run, sk, value, expires_at): transactions of 50 items, each with its run's tombstone
        check (100 actions, DynamoDB's most). A transaction refused by a tombstone writes nothing and is sent again
        without the erased runs' items; one that met another transaction on the same items (two evals linking the
        same sources at once) is sent again after a backoff, ``ConflictError`` when it keeps meeting one. Returns the
        runs refused (erased, or being erased)."""
        refused: set[str] = set()
        todo = list(entries)
        for at in range(0, len(todo), AUX_PER_TRANSACTION):
            chunk = todo[at : at + AUX_PER_TRANSACTION]
            conflicts = 0
            while chunk:
                actions: list[dict[str, Any]] = [
                    self._aux_put(run_id, sk, value, expires_at) for run_id, sk, value, expires_at in chunk
                ]
                checked = list(dict.fromkeys(e[0] for e in chunk))  # one check per run (one action per item)
                actions += [tombstone_check(self._t, self._tombstones, run_id) for run_id in checked]
                try:
                    self._c.transact_write_items(TransactItems=actions)
                    break
                except ClientError as exc:
                    refuse_too_large(exc)
                    if error_code(exc) != "TransactionCanceledException":
                        raise
                    why = reasons(exc)[len(chunk) :]
                    gone = {
                        run_id for run_id, code in zip(checked, why, strict=False) if code == "ConditionalCheckFailed"
                    }
                    if not gone:
                        conflicts += 1
                        if conflicts >= BATCH_WRITE_ATTEMPTS:
                            raise ConflictError("aux items kept meeting other transactions") from exc
                        full_jitter_sleep(conflicts)
                        continue
                    refused |= gone
                    chunk = [e for e in chunk if e[0] not in gone]
        return refused

    def get_definitions(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``get_definition`` for many runs (BatchGetItem, 100 keys each); a run without one is left out."""
        keys = [to_item({"pk": r, "sk": schema.DEFINITION_SK}) for r in dict.fromkeys(run_ids)]
        out: dict[str, dict[str, Any]] = {}
        for raw in batch_get(self._c, self._t, keys):
            doc = self._definition(from_item(raw))
            if doc is not None:
                out[raw["pk"]["S"]] = doc
        return out

    def _aux_put(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> dict[str, Any]:
        """The transaction action that writes an auxiliary item (its document under ``doc``, the run's TTL)."""
        return {
            "Put": {
                "TableName": self._t,
                "Item": to_item({"pk": run_id, "sk": sk, "doc": dump(value), schema.TTL_ATTRIBUTE: expires_at}),
            }
        }

    def put_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> None:
        """Write an auxiliary item; a late write for an erased run fails (``RunGoneError``): its tombstone blocks it."""
        try:
            self._c.transact_write_items(
                TransactItems=[
                    self._aux_put(run_id, sk, value, expires_at),
                    tombstone_check(self._t, self._tombstones, run_id),
                ]
            )
        except ClientError as exc:
            refuse_too_large(exc)
            if error_code(exc) == "TransactionCanceledException":
                raise RunGoneError(run_id) from exc
            raise

    def get_aux(self, run_id: str, sk: str, *, settled: bool = False) -> dict[str, Any] | None:
        """An aux item's document; ``settled``: one written once and never changed, read as ``get_definition``."""
        raw = self._item(run_id, sk, settled=settled)
        if not raw:
            return None
        doc: dict[str, Any] = json.loads(from_item(raw)["doc"])
        return doc

    def query_aux(
        self, run_id: str, prefix: str, *, between: tuple[str, str] | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The run's aux items whose sort key starts with ``prefix``, or lies ``between`` (low, high) inclusive.
        Only their sort key and document are read (not the partition key or the TTL: bytes on the wire)."""
        out: list[tuple[str, dict[str, Any]]] = []
        cond = (
            partition_condition(run_id, prefix)
            if between is None
            else {
                "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
                "ExpressionAttributeValues": {":p": {"S": run_id}, ":a": {"S": between[0]}, ":b": {"S": between[1]}},
            }
        )
        for raw in query_all(
            self._c,
            {
                "TableName": self._t,
                "ConsistentRead": True,
                "ProjectionExpression": "sk, #d",
                "ExpressionAttributeNames": {"#d": "doc"},
                **cond,
            },
        ):
            it = from_item(raw)
            out.append((it["sk"], json.loads(it["doc"])))
        return out
