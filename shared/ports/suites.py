"""Eval suites: their stored versions (by owner: a tenant, or ``*`` for host-wide ones), the conformance fixtures,
the index row of each version, the suite's listing row, and the eval runs that pinned a version (``ref``:
``<suiteId>@<version>``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol


class SuiteRepository(Protocol):
    def get_version(self, owner: str, ref: str) -> dict[str, Any] | None:
        """The stored version (or a tenant's draft, ``<suiteId>@draft``) with all its tasks; None when absent or
        being deleted. A strongly consistent read."""
        ...

    def put_version(self, owner: str, ref: str, suite: dict[str, Any]) -> bool:
        """Store a new version once: False (nothing written) when one is stored under ``ref``. However many tasks
        it has (a version too large for one item is stored in parts)."""
        ...

    def delete_version(self, owner: str, ref: str) -> None: ...
    def get_latest_version(
        self, owners: Sequence[str], suite_id: str, choose: Callable[[Iterable[str]], str | None]
    ) -> tuple[str, dict[str, Any]] | None:
        """The version ``choose`` picks among the stored versions of the suite (an owner's shadow the same version
        of the owners before it), as (owner, document); None when none is stored, none is picked, or the one picked
        is being deleted. Listed by an eventually consistent read."""
        ...

    def rewrite_tasks(
        self, owner: str, ref: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> int | None:
        """Replace each task of the version (or draft) that ``change`` maps to a new one (None: kept), by
        compare-and-set of each stored part that holds one (a rewrite meanwhile is read again and retried); how
        many were replaced, 0 when the version is absent; None when a part kept changing."""
        ...

    def get_fixture(self, fixture_id: str) -> dict[str, Any] | None: ...
    def put_fixture(self, fixture_id: str, doc: dict[str, Any]) -> None: ...
    def get_index_row(self, tenant: str, ref: str) -> dict[str, Any] | None: ...
    def list_index_rows(self, tenant: str, suite_id: str, *, consistent: bool = False) -> list[dict[str, Any]]:
        """The index rows of every version of the suite (``{suiteId, version, taskCount, createdAt}``)."""
        ...

    def put_index_row(self, tenant: str, ref: str, row: dict[str, Any], *, if_absent: bool = False) -> None: ...
    def delete_index_row(self, tenant: str, ref: str) -> None: ...
    def get_listing(self, tenant: str, suite_id: str) -> dict[str, Any] | None: ...
    def put_listing(
        self, tenant: str, suite_id: str, doc: dict[str, Any], *, if_absent: bool, if_equals: dict[str, Any] | None
    ) -> bool:
        """Compare-and-set of the suite's listing row; False when it changed meanwhile (nothing written)."""
        ...

    def delete_listing(self, tenant: str, suite_id: str, *, if_equals: dict[str, Any] | None) -> bool: ...
    def list_listings(
        self, tenant: str, limit: int, *, after: str = ""
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """At most ``limit`` (suiteId, listing row) after the suiteId ``after``, in suiteId order, read by one
        Query; and whether more may remain."""
        ...

    def put_reference(self, tenant: str, ref: str, run_id: str, *, expires_at: int) -> tuple[str, str]:
        """Remember that ``run_id`` pinned the version (until ``expires_at``); the stored item's reference, which
        the run links so that its erasure deletes it."""
        ...

    def list_references(self, tenant: str, ref: str) -> list[str]:
        """The runs that pinned the version."""
        ...

    def delete_reference(self, tenant: str, ref: str, run_id: str) -> None: ...
