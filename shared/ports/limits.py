"""Per-tenant limits kept in the host table: run-start quota counters and ``OpenWOP-Dedup`` scope claims."""

from __future__ import annotations

from typing import Any, Protocol


class QuotaRepository(Protocol):
    def add_run_start(self, tenant: str, window: int, *, expires_at: int) -> int:
        """Count one run start of ``tenant`` in minute ``window``; the window's new count (one atomic update)."""
        ...


class ScopeClaimRepository(Protocol):
    """One claim per (tenant, scopeId): the run that holds the scope, or a create in flight."""

    def get_claim(self, tenant: str, scope_id: str) -> dict[str, Any] | None: ...
    def put_claim(
        self,
        tenant: str,
        scope_id: str,
        claim: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool: ...
    def delete_claim(self, tenant: str, scope_id: str, *, if_equals: dict[str, Any]) -> bool:
        """Delete the claim only while it is still ``if_equals`` (a later create may hold the scope since)."""
        ...
