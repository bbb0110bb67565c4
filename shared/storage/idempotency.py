"""The IdempotencyStore port on DynamoDB: Powertools' idempotency table, which only erasure touches directly."""

from __future__ import annotations

from typing import Any


class DynamoIdempotencyStore:
    """Powertools' idempotency table (key attribute ``id``): only erasure touches it directly."""

    def __init__(self, client: Any, table: str) -> None:
        self._c = client
        self._t = table

    def delete_record(self, record_id: str) -> None:
        self._c.delete_item(TableName=self._t, Key={"id": {"S": record_id}})
