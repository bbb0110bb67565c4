"""The run store's restore helpers (a part of ``DynamoRunStore``, ``runs.py``, kept apart by subject): the run ids a
table holds and the erasure tombstones copied in from another table, for re-applying erasures to restored tables
(``shared.services.erasure.reapply_erasures``; docs/operations.md, "Restore"). Both scan a whole table: an operator's
command after a restore, never a request's path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shared.storage import schema
from shared.storage.ddb import batch_write


def _scan(client: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item a Scan matches, one request per 1 MB page (``kwargs`` is the Scan's, updated as it pages)."""
    while True:
        resp = client.scan(**kwargs)
        yield from resp.get("Items", [])
        if not resp.get("LastEvaluatedKey"):
            return
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


class RunRestore:
    """Scans of the runs table for a restore (``RunStore.run_ids``, ``RunStore.copy_tombstones``)."""

    _c: Any
    _t: str

    def run_ids(self) -> Iterator[str]:
        """The id of every run whose run item the table holds (expired or not), page by page."""
        for item in _scan(
            self._c,
            {
                "TableName": self._t,
                "FilterExpression": "sk = :run",
                "ExpressionAttributeValues": {":run": {"S": schema.RUN_SK}},
                "ProjectionExpression": "pk",
            },
        ):
            yield item["pk"]["S"]

    def copy_tombstones(self, source_table: str) -> int:
        """Put every erasure tombstone of ``source_table`` (a runs table: this stack's before a restore, or the one
        a restore replaces) into this one, as it is (keyed hash, tenant, time, TTL); idempotent. The count copied."""
        tombstones = _scan(
            self._c,
            {
                "TableName": source_table,
                "FilterExpression": "begins_with(pk, :erased) AND sk = :tombstone",
                "ExpressionAttributeValues": {
                    ":erased": {"S": schema.TOMBSTONE_PK_PREFIX},
                    ":tombstone": {"S": schema.TOMBSTONE_SK},
                },
            },
        )
        return batch_write(self._c, self._t, [{"PutRequest": {"Item": item}} for item in tombstones])
