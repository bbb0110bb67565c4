"""Host-wide items by key (the table the repositories are built on) and stored idempotent answers."""

from __future__ import annotations

from typing import Any, Protocol

from shared.ports.runs import StagedWrite


class HostStore(Protocol):
    """Host-wide items: API key hashes, eval suites, tool counters, the effect ledger."""

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None: ...
    def get_item_and_run(self, pk: str, sk: str, run_id: str) -> tuple[dict[str, Any] | None, int | None]: ...
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
    ) -> bool: ...
    def stage_put(self, pk: str, sk: str, value: dict[str, Any], *, expires_at: int = 0) -> StagedWrite:
        """``put_item``'s unconditional put, written by another store's transaction (``staged``), all or nothing."""
        ...

    def stage_delete(self, pk: str, sk: str) -> StagedWrite:
        """``delete_item``'s unconditional delete, written by another store's transaction (``staged``)."""
        ...

    def query(self, pk: str, prefix: str = "", *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]: ...
    def query_page(self, pk: str, limit: int, *, after: str = "") -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """At most ``limit`` items of the partition whose sort key is above ``after``, in sort-key order, read by
        one Query; and whether the partition may hold more past them."""
        ...

    def delete_item(
        self, pk: str, sk: str, *, if_equals: dict[str, Any] | None = None, compress: bool = False
    ) -> bool: ...
    def put_effect(self, pk: str, sk: str, value: dict[str, Any], *, run_id: str, expires_at: int) -> bool: ...
    def delete_prefix(self, pk: str, prefix: str) -> int: ...
    def counter_read(self, pk: str, sk: str) -> int: ...
    def add_counter(self, pk: str, sk: str, *, expires_at: int) -> int: ...


class IdempotencyStore(Protocol):
    """The stored answers of ``Idempotency-Key`` requests (written by Powertools); erasure removes them."""

    def delete_record(self, record_id: str) -> None: ...
