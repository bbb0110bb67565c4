"""Host items linked to a run by the reference their repository handed out (a webhook dead letter, an eval run's
suite-version reference): the run's erasure deletes them by that reference, which is opaque above storage."""

from __future__ import annotations

from typing import Protocol


class LinkedItemStore(Protocol):
    def delete_linked(self, pk: str, sk: str) -> bool:
        """Delete the item a repository's reference ``(pk, sk)`` names; True when it existed."""
        ...
