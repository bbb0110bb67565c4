"""Per-tenant limits on the host table: ``QUOTA#<tenant>`` / ``runs#<minute>`` counters (with a TTL) and
``DEDUP#<tenant>`` / ``<scopeId>`` scope claims."""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore

QUOTA_PREFIX = "QUOTA#"
DEDUP_PREFIX = "DEDUP#"


class DynamoQuotaRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def add_run_start(self, tenant: str, window: int, *, expires_at: int) -> int:
        return self._host.add_counter(f"{QUOTA_PREFIX}{tenant}", f"runs#{window}", expires_at=expires_at)


class DynamoScopeClaimRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_claim(self, tenant: str, scope_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{DEDUP_PREFIX}{tenant}", scope_id)

    def put_claim(
        self,
        tenant: str,
        scope_id: str,
        claim: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._host.put_item(f"{DEDUP_PREFIX}{tenant}", scope_id, claim, if_absent=if_absent, if_equals=if_equals)

    def delete_claim(self, tenant: str, scope_id: str, *, if_equals: dict[str, Any]) -> bool:
        return self._host.delete_item(f"{DEDUP_PREFIX}{tenant}", scope_id, if_equals=if_equals)
