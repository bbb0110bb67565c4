"""Host items linked to a run, deleted by the ``(pk, sk)`` reference their repository returned when it wrote them."""

from __future__ import annotations

from shared.ports import HostStore


class DynamoLinkedItemStore:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def delete_linked(self, pk: str, sk: str) -> bool:
        return self._host.delete_item(pk, sk)
